package transport

import (
	"bufio"
	"bytes"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A connection that always has more to do, and yields after each part of it
// (Wake, as a session does after commandsPerServe commands), leaves its loop
// to read and serve its other connections in between. gnet ran the wake
// tasks a connection queued while it ran them, before it polled its sockets
// again: the other connections of the loop were never read.
func TestYieldingConnectionLetsItsLoopServeOthers(t *testing.T) {
	for name, newT := range eventLoopTransports() {
		t.Run(name, func(t *testing.T) {
			h := &yieldHandler{}
			loops := runtime.NumCPU() // gnet's; the epoll loops take Loops
			addr, _ := startHandler(t, newT, Options{Loops: loops}, h)
			busy := dial(t, addr, 5*time.Second)
			// gnet hands connections to its loops in turn: one of the
			// others shares the busy one's loop.
			others := make([]net.Conn, loops)
			for i := range others {
				others[i] = dial(t, addr, 3*time.Second)
			}
			_, err := busy.Write([]byte("yield\r\n"))
			require.NoError(t, err)
			require.Eventually(t, func() bool { return h.yields.Load() > 100 }, 3*time.Second, time.Millisecond)
			for i, c := range others {
				_, err := c.Write([]byte("ping\r\n"))
				require.NoError(t, err)
				line, err := bufio.NewReader(c).ReadString('\n')
				require.NoError(t, err, "connection %d: no reply while another one yields", i)
				require.Equal(t, "ping\r\n", line)
			}
		})
	}
}

// eventLoopTransports are the event-loop transports this platform has.
func eventLoopTransports() map[string]func(Options) Transport {
	ts := map[string]func(Options) Transport{"gnet": Gnet}
	if EpollAvailable {
		ts["epoll"] = Epoll
		ts["epoll+io_uring"] = func(o Options) Transport { o.BatchSyscalls = true; return Epoll(o) }
	}
	return ts
}

// yieldHandler's sessions echo lines, but after "yield" serve nothing more
// and yield each time they are called, forever.
type yieldHandler struct{ yields atomic.Int64 }

func (h *yieldHandler) Admit() (bool, []byte) { return true, nil }
func (h *yieldHandler) Unadmit()              {}
func (h *yieldHandler) NewLoop(int) Loop      { return yieldLoop{h} }
func (h *yieldHandler) Unsent() uint64        { return 0 }

type yieldLoop struct{ h *yieldHandler }

func (l yieldLoop) Open(c Conn) Session       { return &yieldSession{h: l.h, c: c} }
func (yieldLoop) BeginTurn(int64, bool, bool) {}
func (yieldLoop) EndTurn() bool               { return false }

type yieldSession struct {
	h        *yieldHandler
	c        Conn
	yielding bool
	replies  []byte
}

func (s *yieldSession) Serve(in []byte) int {
	if s.yielding || bytes.HasPrefix(in, []byte("yield\r\n")) {
		s.yielding = true
		s.h.yields.Add(1)
		s.c.Wake() // more to do, after the loop's other connections
		return 0
	}
	used := bytes.LastIndexByte(in, '\n') + 1
	s.replies = append(s.replies, in[:used]...)
	return used
}

func (s *yieldSession) Flush() {
	if len(s.replies) > 0 {
		s.c.Send(append(s.c.Output(), s.replies...))
		s.replies = s.replies[:0]
	}
}

func (s *yieldSession) Owes() bool    { return false }
func (s *yieldSession) Closing() bool { return false }
func (s *yieldSession) Stop()         {}
func (s *yieldSession) Closed()       {}
