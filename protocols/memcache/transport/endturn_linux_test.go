//go:build linux

package transport

import (
	"bufio"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// turnHandler is lineHandler's protocol with replies a turn's end gives:
// "later X" is answered X by EndTurn, as a backend round trip run at the
// turn's end completes; "away X" too, but woken from another goroutine
// while EndTurn runs. Each wakes its connection and nothing else serves it:
// the loop must.
type turnHandler struct{ lineHandler }

func (h *turnHandler) NewLoop(int) Loop { return &turnLoop{h: h} }

type turnLoop struct {
	h     *turnHandler
	later []*turnSession // answers for EndTurn to give, in order
}

func (l *turnLoop) Open(c Conn) Session {
	return &turnSession{lineSession: lineSession{h: &l.h.lineHandler, c: c}, loop: l}
}

func (l *turnLoop) BeginTurn(int64, bool, bool) {}

func (l *turnLoop) EndTurn() bool {
	if len(l.later) == 0 {
		return false
	}
	later := l.later
	l.later = nil
	var wg sync.WaitGroup
	ran := false
	for _, s := range later {
		s.replies = append(s.replies, s.owed[0]...)
		s.owed = s.owed[1:]
		if s.away[0] {
			wg.Add(1)
			go func(c Conn) { defer wg.Done(); c.Wake() }(s.c)
		} else {
			s.c.Wake()
			ran = true
		}
		s.away = s.away[1:]
	}
	wg.Wait()
	// An away answer is not the turn's: as a completion of a flight an
	// executor ran, which may come while the turn ends with nothing of
	// its own to run.
	return ran
}

type turnSession struct {
	lineSession
	loop *turnLoop
	owed [][]byte
	away []bool
}

func (s *turnSession) Serve(in []byte) int {
	used := 0
	for {
		i := strings.IndexByte(string(in[used:]), '\n')
		if i < 0 {
			return used
		}
		line := string(in[used : used+i+1])
		used += i + 1
		word, rest, _ := strings.Cut(line, " ")
		if word != "later" && word != "away" {
			s.replies = append(s.replies, line...)
			continue
		}
		s.owed = append(s.owed, []byte(rest))
		s.away = append(s.away, word == "away")
		s.loop.later = append(s.loop.later, s)
	}
}

func (s *turnSession) Owes() bool { return len(s.replies) > 0 || len(s.owed) > 0 }

// What a turn leaves for its end is run before the loop waits again, and
// the connections it wakes are served then, in the same turn: the replies
// come with no other event to wake the loop, whether the Wake came from the
// loop or from another goroutine meanwhile.
func TestTurnsEndBeforeTheLoopWaits(t *testing.T) {
	h := &turnHandler{}
	addr, _ := startHandler(t, Epoll, Options{Loops: 1}, h)
	c := dial(t, addr, 5*time.Second)
	r := bufio.NewReader(c)
	for _, tc := range []struct{ send, want string }{
		{"later one\r\n", "one\r\n"},
		{"away two\r\n", "two\r\n"},
		{"first\r\nlater three\r\naway four\r\n", "first\r\nthree\r\nfour\r\n"},
	} {
		_, err := c.Write([]byte(tc.send))
		require.NoError(t, err)
		var got strings.Builder
		for got.Len() < len(tc.want) {
			line, err := r.ReadString('\n')
			require.NoError(t, err, "got %q of %q", got.String(), tc.want)
			got.WriteString(line)
		}
		require.Equal(t, tc.want, got.String())
	}
}

// hogHandler is turnHandler's protocol served a few lines at a time, as
// memcache serves commandsPerServe commands: a session that stops with
// input left yields (Wake) to be served again, and each turn's end takes a
// round trip's time when it has answers to give.
type hogHandler struct {
	turnHandler
	perServe  int
	roundTrip time.Duration
}

func (h *hogHandler) NewLoop(int) Loop { return &hogLoop{turnLoop{h: &h.turnHandler}, h} }

type hogLoop struct {
	turnLoop
	h *hogHandler
}

func (l *hogLoop) Open(c Conn) Session {
	return &hogSession{turnSession{lineSession: lineSession{h: &l.h.lineHandler, c: c}, loop: &l.turnLoop}, l.h.perServe}
}

func (l *hogLoop) EndTurn() bool {
	if len(l.later) > 0 {
		time.Sleep(l.h.roundTrip)
	}
	return l.turnLoop.EndTurn()
}

type hogSession struct {
	turnSession
	perServe int
}

func (s *hogSession) Serve(in []byte) int {
	used := 0
	for range s.perServe {
		i := strings.IndexByte(string(in[used:]), '\n')
		if i < 0 {
			return used
		}
		used += s.turnSession.Serve(in[used : used+i+1])
	}
	if used < len(in) {
		s.c.Wake() // served again after the loop's other connections
	}
	return used
}

// A connection pipelining thousands of requests, each of whose turns ends
// in a round trip, does not hold its loop from another connection: the
// turn stops serving what its completions woke after turnNanos, and the
// loop's next wait sees the other connection's request. Before, the hog's
// whole pipeline ran in one turn, 250 round trips, while a request beside
// it waited for all of them.
func TestAPipelineDoesNotHoldItsLoopThroughItsRoundTrips(t *testing.T) {
	h := &hogHandler{perServe: 4, roundTrip: 200 * time.Microsecond}
	addr, _ := startHandler(t, Epoll, Options{Loops: 1}, h)
	hog, good := dial(t, addr, 10*time.Second), dial(t, addr, 10*time.Second)
	const hogLines = 1000
	_, err := hog.Write([]byte(strings.Repeat("later x\r\n", hogLines)))
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // the hog is being served
	r := bufio.NewReader(good)
	var slowest time.Duration
	for range 10 {
		start := time.Now()
		_, err := good.Write([]byte("ping\r\n"))
		require.NoError(t, err)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ping\r\n", line)
		slowest = max(slowest, time.Since(start))
	}
	t.Logf("slowest of 10 requests beside the pipeline: %v", slowest)
	// The hog's pipeline takes hogLines/perServe round trips, a quarter
	// of a second here; a request served between its turns waits a turn
	// or two (262 ms with the pipeline run in one turn).
	require.Less(t, slowest, 20*time.Millisecond, "a request waited behind another connection's pipeline")
	hogReplies := bufio.NewReader(hog)
	for i := range hogLines {
		line, err := hogReplies.ReadString('\n')
		require.NoError(t, err, "the hog's reply %d", i)
		require.Equal(t, "x\r\n", line)
	}
}
