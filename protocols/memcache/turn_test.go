package memcache

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// flightRecorder records each flight's keys and Batch.Lone, and runs it on
// the engine; with later set, flights that are not lone complete on another
// goroutine, as the NDB driver's executors complete them.
type flightRecorder struct {
	ndbclient.Driver
	later   bool
	hold    chan struct{} // non-nil: a lone flight waits for a receive first
	mu      sync.Mutex
	flights [][]string
	lone    []bool
}

func (d *flightRecorder) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	var keys []string
	for _, op := range b.Ops {
		if len(op.Key) > 0 {
			keys = append(keys, string(op.Key[0].B))
		}
	}
	d.mu.Lock()
	d.flights, d.lone = append(d.flights, keys), append(d.lone, b.Lone)
	d.mu.Unlock()
	if d.hold != nil && b.Lone {
		<-d.hold
	}
	if d.later && !b.Lone {
		go func() { done(b, d.Driver.Execute(context.Background(), b)) }()
		return
	}
	d.Driver.Submit(b, done)
}

func (d *flightRecorder) take() (flights [][]string, lone []bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	flights, lone = d.flights, d.lone
	d.flights, d.lone = nil, nil
	return flights, lone
}

// startLanesServer serves the demo container through a client with lanes
// and coalescing, as on NDB, on one epoll loop.
func startLanesServer(t *testing.T, loop string, drv ndbclient.Driver) string {
	t.Helper()
	tbl, err := drv.CreateTable(gateway.DemoTable(1 << 20))
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	cl := ndbclient.NewClientWith(drv, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	svc, err := gateway.New(gateway.Options{Backend: cl, Routes: []gateway.Route{{Container: c}}})
	require.NoError(t, err)
	addr, _ := startServerService(t, Config{EventLoop: loop, Loops: 1, MaxPending: 64}, svc)
	return addr
}

// The requests an epoll loop's turn starts go to the backend together, in
// one lone flight run by the loop at the turn's end, every node's keys in
// it; a request's later stages, and commands waiting on an earlier one of
// their connection, run in the same turn. The replies are each command's,
// in order.
func TestTurnSendsItsRequestsInOneFlight(t *testing.T) {
	for _, loop := range []string{EventLoopEpoll, loopEpollRing} {
		t.Run(loop, func(t *testing.T) {
			e := embedded.New(embedded.Config{Partitions: 8, Nodes: 2})
			t.Cleanup(func() { _ = e.Close() })
			rec := &flightRecorder{Driver: e, later: true}
			addr := startLanesServer(t, loop, rec)
			send := textSender(t, addr)
			assert.Equal(t, []string{"STORED\r\n", "STORED\r\n", "STORED\r\n"},
				send("set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nset c 0 0 1\r\n3\r\n", 3))
			rec.take()

			// Three requests (a two-key get, a one-key get, an incr): one
			// flight, lone.
			got := send("get a b\r\nget c\r\nincr n 1\r\n", 7)
			assert.Equal(t, []string{"VALUE a 0 1\r\n", "1\r\n", "VALUE b 0 1\r\n", "2\r\n", "END\r\n",
				"VALUE c 0 1\r\n", "3\r\n"}, got)
			assert.Equal(t, []string{"END\r\n", "NOT_FOUND\r\n"}, send("", 2)) // the rest of the replies
			flights, lone := rec.take()
			require.Len(t, flights, 1, "one flight for the turn: %v", flights)
			assert.ElementsMatch(t, []string{"a", "b", "c", "n"}, flights[0])
			assert.Equal(t, []bool{true}, lone)

			// A get after a set of its key waits for the set (a conflict),
			// and the commands after it with it; they start in the same
			// turn once the set is done, in a second flight.
			assert.Equal(t, []string{"STORED\r\n", "VALUE d 0 2\r\n", "44\r\n", "END\r\n", "NOT_STORED\r\n"},
				send("set d 0 0 2\r\n44\r\nget d\r\nadd a 0 0 1\r\nz\r\n", 5))
			flights, lone = rec.take()
			require.Len(t, flights, 2, "the set, then the get and the add: %v", flights)
			assert.Equal(t, []string{"d"}, flights[0])
			assert.ElementsMatch(t, []string{"d", "a"}, flights[1])
			assert.Equal(t, []bool{true, true}, lone)
		})
	}
}

// A reply a turn gives at once goes out before the turn's backend round
// trip, not after it: a version is not held up by another connection's get.
func TestTurnSendsWhatItAnsweredFirst(t *testing.T) {
	e := embedded.New(embedded.Config{Partitions: 8, Nodes: 2})
	t.Cleanup(func() { _ = e.Close() })
	rec := &flightRecorder{Driver: e, hold: make(chan struct{})}
	addr := startLanesServer(t, EventLoopEpoll, rec)
	first, other, waiting := dialServer(t, addr, 10*time.Second), dialServer(t, addr, 10*time.Second), dialServer(t, addr, 10*time.Second)
	write := func(c net.Conn, s string) {
		t.Helper()
		_, err := c.Write([]byte(s))
		require.NoError(t, err)
	}
	// Released before the server shuts down, whatever fails: the loop may
	// be waiting in a held flight.
	t.Cleanup(func() { close(rec.hold) })
	// Every connection taken on by the loop first: one adopted while the
	// loop waits in a flight would be read a turn later.
	for _, c := range []net.Conn{first, other, waiting} {
		write(c, "version\r\n")
		require.Equal(t, []string{"VERSION test\r\n"}, readLines(t, bufio.NewReader(c), 1))
	}
	// The loop holds in the first get's flight; meanwhile a version and
	// a second get arrive, which its next turn reads together.
	write(first, "get a\r\n")
	require.Eventually(t, func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.flights) == 1 },
		5*time.Second, time.Millisecond, "the first flight reached the driver")
	write(waiting, "version\r\n")
	write(other, "get b\r\n")
	time.Sleep(50 * time.Millisecond) // both in the loop's socket buffers
	rec.hold <- struct{}{}            // the first flight runs; the next turn reads both
	assert.Equal(t, []string{"END\r\n"}, readLines(t, bufio.NewReader(first), 1))
	assert.Equal(t, []string{"VERSION test\r\n"}, readLines(t, bufio.NewReader(waiting), 1),
		"answered while the second get's flight is held")
	rec.hold <- struct{}{}
	assert.Equal(t, []string{"END\r\n"}, readLines(t, bufio.NewReader(other), 1))
	flights, _ := rec.take()
	assert.Equal(t, [][]string{{"a"}, {"b"}}, flights)
}
