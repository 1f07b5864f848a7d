//go:build linux

package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/internal/procs"
)

// A small reply waits for the loop's turn to end; a large one goes at once,
// but never ahead of the replies held before it.
func TestHeldRepliesGoBeforeALargeOne(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fds[0]); _ = syscall.Close(fds[1]) })
	require.NoError(t, syscall.SetNonblock(fds[0], true))
	l := &epollLoop{}
	c := &epollConn{loop: l, fd: fds[0]}

	c.Send([]byte("small\r\n"))
	require.Equal(t, []*epollConn{c}, l.held, "a small reply is held for the turn's end")
	require.Equal(t, "small\r\n", string(c.unsent()))
	big := bytes.Repeat([]byte("b"), heldReplyMax)
	c.Send(big)
	require.Empty(t, c.unsent(), "the large reply and what was held before it went at once")

	want := append([]byte("small\r\n"), big...)
	require.True(t, bytes.Equal(want, readBytes(t, fds[1], len(want))), "replies out of order")
}

// readBytes reads n bytes from the blocking socket fd.
func readBytes(t *testing.T, fd, n int) []byte {
	t.Helper()
	got := make([]byte, 0, n)
	buf := make([]byte, 64<<10)
	for len(got) < n {
		k, err := syscall.Read(fd, buf)
		require.NoError(t, err)
		got = append(got, buf[:k]...)
	}
	return got
}

// A reply too large for the turn buffer is encoded elsewhere, growing as it
// goes; the turn after it starts with room for it, so the same reply is
// then encoded in place. Either way it arrives whole.
func TestTurnBufferGrowsToALargeReply(t *testing.T) {
	l, conns, peers := newTestLoop(t, 1)
	c := conns[0]
	big := bytes.Repeat([]byte("v"), 4*heldReplyMax)
	for turn := range 2 {
		out := c.Output()
		inPlace := cap(out) >= len(big)
		require.Equal(t, turn == 1, inPlace, "turn %d: room in the turn buffer", turn)
		c.Send(append(out, big...))
		l.sendHeld()
		require.True(t, bytes.Equal(big, readBytes(t, peers[0], len(big))), "turn %d: the reply, whole", turn)
	}
	require.GreaterOrEqual(t, cap(l.turn), len(big))
	require.Zero(t, l.turnWant, "asked for once")
}

// A loop whose waits keep finding work yields its CPU once it has been busy
// for busyNanos, and a wait that sleeps starts the count again.
func TestBusyLoopYieldsAfterBusyNanos(t *testing.T) {
	var b busyTracker
	start := int64(1_000_000_000)
	require.False(t, b.shouldYield(start-sleptNanos, start), "a wait that slept")
	now := start
	for now-start < busyNanos-10_000 {
		now += 10_000 // a turn of 10 us, its wait returning at once
		require.False(t, b.shouldYield(now-1_000, now), "busy for %d ns only", now-start)
	}
	now += 20_000
	require.True(t, b.shouldYield(now-1_000, now), "busy past busyNanos")
	b.restart(now) // the loop yielded
	require.False(t, b.shouldYield(now+9_000, now+10_000), "the count starts again after a yield")

	now += 2 * busyNanos
	require.False(t, b.shouldYield(now-sleptNanos, now), "a wait that slept ends the busy spell")
	require.False(t, b.shouldYield(now+busyNanos-1_000, now+busyNanos-500), "busy for less than busyNanos since")
}

// Replies held to the turn's end stay where they were encoded, one span of
// the turn buffer per connection; a connection whose replies no longer end
// the buffer has them copied. Either way each connection gets its own,
// whole and in order, when the turn ends.
func TestHeldRepliesKeepTheirOrderAcrossConnections(t *testing.T) {
	for _, ring := range []bool{false, true} {
		l, conns, peers := newTestLoop(t, 2)
		if ring {
			l.ring = newTestRing(t, 8)
		}
		a, b := conns[0], conns[1]
		a.Send(append(a.Output(), "a1\r\n"...))
		a.Send(append(a.Output(), "a2\r\n"...))
		require.Empty(t, a.out, "held where it was encoded")
		require.Equal(t, "a1\r\na2\r\n", string(l.turn))
		b.Send(append(b.Output(), "b1\r\n"...))
		a.Send(append(a.Output(), "a3\r\n"...))
		require.Equal(t, "a1\r\na2\r\na3\r\n", string(a.unsent()))
		require.Equal(t, "b1\r\n", string(b.unsent()))
		require.Equal(t, 12+4, a.Backlog()+b.Backlog())
		require.Equal(t, []*epollConn{a, b}, l.held)

		l.sendHeld()
		require.Empty(t, l.turn)
		require.Empty(t, l.held)
		require.Zero(t, a.Backlog()+b.Backlog())
		for i, want := range []string{"a1\r\na2\r\na3\r\n", "b1\r\n"} {
			got := make([]byte, 64)
			n, err := syscall.Read(peers[i], got)
			require.NoError(t, err)
			require.Equal(t, want, string(got[:n]), "ring %v", ring)
		}
	}
}

// newTestLoop is a loop with n connections on socket pairs, registered
// with its epoll instance, and the peers' ends.
func newTestLoop(t *testing.T, n int) (*epollLoop, []*epollConn, []int) {
	t.Helper()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(epfd) })
	h := &lineHandler{}
	l := &epollLoop{es: &epollServer{opts: Options{Log: discardLog}}, epfd: epfd, proto: h.NewLoop(1)}
	var conns []*epollConn
	var peers []int
	for range n {
		a, b := socketPair(t)
		c := &epollConn{loop: l, fd: a, events: syscall.EPOLLIN}
		c.s = l.proto.Open(c)
		ev := syscall.EpollEvent{Events: c.events, Fd: int32(a)}
		require.NoError(t, syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, a, &ev))
		for a >= len(l.conns) {
			l.conns = append(l.conns, nil)
		}
		l.conns[a] = c
		conns, peers = append(conns, c), append(peers, b)
	}
	return l, conns, peers
}

// A turn's reads, and its replies, go through the ring only when there are
// two or more of them: a ring of one costs more CPU than the plain read or
// write, and is what a connection served one request at a time would make.
func TestTurnsOfOneSkipTheRing(t *testing.T) {
	for _, ready := range []int{1, 2} {
		l, conns, peers := newTestLoop(t, 2)
		l.ring = newTestRing(t, 8)
		l.buf = make([]byte, loopEvents*ringReadChunk)
		for i := range ready {
			_, err := syscall.Write(peers[i], []byte(fmt.Sprintf("line %d\r\n", i)))
			require.NoError(t, err)
		}
		for i := range ready {
			l.handle(conns[i], syscall.EPOLLIN)
		}
		l.readQueued()
		l.sendHeld()
		want := uint64(0)
		if ready > 1 {
			want = uint64(2 * ready) // the reads, then the replies
		}
		require.Equal(t, want, l.ring.ran, "%d ready connections", ready)
		for i := range ready {
			got := make([]byte, 64)
			n, err := syscall.Read(peers[i], got)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("line %d\r\n", i), string(got[:n]), "%d ready connections", ready)
		}
	}
}

// With BusyPoll a loop polls after each solo turn (the second lone turn in
// a row of one connection), and a client that sends its next request at
// once finds the loop awake; without, it never polls.
func TestBusyPollAfterSoloTurns(t *testing.T) {
	for _, poll := range []time.Duration{0, time.Millisecond} {
		addr, _, tr := startTransport(t, Epoll, Options{BusyPoll: poll})
		conn := dial(t, addr, 10*time.Second)
		for i := range 50 {
			echoLine(t, conn, i)
		}
		polls, found := settledPolls(t, tr)
		if poll == 0 {
			require.Zero(t, polls, "polled with BusyPoll off")
			continue
		}
		require.GreaterOrEqual(t, polls, uint64(40), "lone turns not followed by a poll")
		require.Positive(t, found, "no poll found the next request within %v", poll)
	}
}

// Two clients taking turns on one loop, each sending one request at a
// time, make lone turns but no solo ones: the loop never polls, for while it
// polled for one the other would wait for a CPU (bench/RESULTS.md, session
// 40: polling after every lone turn tripled p99 at 50 connections).
func TestBusyPollSkipsClientsTakingTurns(t *testing.T) {
	addr, _, tr := startTransport(t, Epoll, Options{Loops: 1, BusyPoll: time.Millisecond})
	a, b := dial(t, addr, 10*time.Second), dial(t, addr, 10*time.Second)
	for i := range 50 {
		echoLine(t, a, i)
		echoLine(t, b, i)
	}
	polls, _ := settledPolls(t, tr)
	require.Zero(t, polls, "polled after lone turns of clients taking turns")
}

// settledPolls shuts tr down, so that its loops have ended and their counts
// are settled, and returns their busy polls and the polls that found work.
func settledPolls(t *testing.T, tr Transport) (polls, found uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, tr.Shutdown(ctx))
	for _, l := range tr.(*epollServer).loops {
		polls, found = polls+l.busyPolls, found+l.busyPollsFound
	}
	return polls, found
}

// echoLine sends request i to the echoing transport and waits for its echo.
func echoLine(t *testing.T, conn net.Conn, i int) {
	t.Helper()
	line := fmt.Sprintf("req %02d\r\n", i)
	_, err := conn.Write([]byte(line))
	require.NoError(t, err)
	got := make([]byte, len(line))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	require.Equal(t, line, string(got))
}

// A loop keeps its P through a client's pauses of up to holdNanos, and
// gives it back (an ordinary wait) after a longer one (rule 1).
func TestLoopHoldsItsProcessorThroughPauses(t *testing.T) {
	addr, _, tr := startTransport(t, Epoll, Options{Loops: 1})
	conn := dial(t, addr, 10*time.Second)
	ask := func(i int) { echoLine(t, conn, i) }
	loop := tr.(*epollServer).loops[0]
	ask(0)
	idle := func() uint64 { // read between requests: the loop is waiting
		time.Sleep(time.Millisecond)
		return atomic.LoadUint64(&loop.idleWaits)
	}
	before := idle()
	for i := range 10 {
		time.Sleep(25 * time.Millisecond)
		ask(i + 1)
	}
	require.Equal(t, before, idle(), "a 25 ms pause gave the P back")
	time.Sleep(time.Duration(holdNanos) + 100*time.Millisecond)
	ask(99)
	require.Greater(t, idle(), before, "a pause longer than holdNanos kept the P")
}

// The first loop is the keeper: a REST or gRPC request (procs.RequestBegan) wakes
// it from its ordinary wait, it holds its P while such requests come, and
// gives it back holdNanos after the last. The other loops are not woken.
func TestFirstLoopKeepsItsProcessorForAPIRequests(t *testing.T) {
	_, _, tr := startTransport(t, Epoll, Options{Loops: 2})
	first, second := tr.(*epollServer).loops[0], tr.(*epollServer).loops[1]
	require.NotNil(t, first.keeper)
	require.Nil(t, second.keeper)
	waits := func(l *epollLoop) uint64 { return atomic.LoadUint64(&l.idleWaits) }
	idle := func() bool { return waits(first) > 0 && waits(second) > 0 }
	require.Eventually(t, idle, 5*time.Second, 5*time.Millisecond, "the loops never went idle")
	before1, before2 := waits(first), waits(second)

	for range 10 {
		procs.RequestBegan()
		procs.RequestEnded()
		time.Sleep(25 * time.Millisecond)
	}
	require.False(t, first.keeper.Parked(), "the requests did not wake the keeper")
	require.Equal(t, before1, waits(first), "the keeper gave its P back while requests came")
	require.Equal(t, before2, waits(second), "a loop that is not the keeper woke")
	require.Eventually(t, func() bool { return waits(first) > before1 }, 5*time.Second, 5*time.Millisecond,
		"the keeper kept its P after the requests stopped")
}

// A client that pauses between requests longer than BusyPoll leaves the
// loop sleeping at once: the window shrinks to 0 after a few long waits,
// where a fixed poll would spend BusyPoll after every request.
func TestBusyPollStopsForAPausingClient(t *testing.T) {
	addr, _, tr := startTransport(t, Epoll, Options{BusyPoll: time.Millisecond})
	conn := dial(t, addr, 10*time.Second)
	const quick, paused = 20, 30
	for i := range quick + paused {
		if i >= quick {
			time.Sleep(20 * time.Millisecond)
		}
		echoLine(t, conn, i)
	}
	polls, _ := settledPolls(t, tr)
	// Halving from 1 ms to under 10 µs takes 7 long waits.
	require.GreaterOrEqual(t, polls, uint64(quick/2), "the quick requests were not followed by polls")
	require.LessOrEqual(t, polls, uint64(quick+8), "polled after each of a pausing client's requests")
}

// A ring the kernel refuses while replies are held gives way to direct
// sends: every held reply still reaches its connection, and the loop goes
// on without a ring.
func TestHeldRepliesDrainWhenTheRingIsRefused(t *testing.T) {
	l, conns, peers := newTestLoop(t, 2)
	l.ring, _ = newBatchRing(8)
	if l.ring == nil {
		t.Skip("io_uring unavailable here")
	}
	l.buf = make([]byte, loopEvents*ringReadChunk)
	for i, c := range conns {
		c.Send(append(c.Output(), fmt.Sprintf("reply %d\r\n", i)...))
	}
	l.ring.broken = true // as after a refused enter
	l.sendHeld()
	require.Nil(t, l.ring, "the loop gave the ring up")
	for i := range conns {
		got := make([]byte, 64)
		n, err := syscall.Read(peers[i], got)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("reply %d\r\n", i), string(got[:n]))
	}
}

// With HaltPoll, the loops other than a solo client's poll while it is
// served (rule 8), and stop within haltHoldNanos of its poll window closing:
// a client that pauses 20 ms between requests keeps them polling for its
// first few requests only. Without HaltPoll they never poll for it.
func TestHaltPollKeepsTheOtherLoopsAwakeForASoloClient(t *testing.T) {
	haltPolled := func(tr Transport) (ns int64) {
		for _, l := range tr.(*epollServer).loops {
			ns += int64(atomic.LoadUint64(&l.haltPollNanos))
		}
		return ns
	}
	for _, on := range []bool{false, true} {
		addr, _, tr := startTransport(t, Epoll, Options{Loops: 2, BusyPoll: time.Millisecond, HaltPoll: on})
		conn := dial(t, addr, 10*time.Second)
		for i := range 200 {
			echoLine(t, conn, i)
		}
		// A poll is counted when it ends, within haltHoldNanos of the
		// last solo turn: on a fast host 200 requests fit in one.
		time.Sleep(5 * time.Millisecond)
		quick := haltPolled(tr)
		const paused = 30
		for i := range paused {
			time.Sleep(20 * time.Millisecond)
			echoLine(t, conn, i)
		}
		time.Sleep(10 * time.Millisecond)
		slow := haltPolled(tr) - quick
		settledPolls(t, tr)
		t.Logf("halt_poll %v: polled %v for 200 quick requests, %v for %d paused ones", on, time.Duration(quick), time.Duration(slow), paused)
		if !on {
			require.Zero(t, quick+slow, "a loop polled for another's client with HaltPoll off")
			continue
		}
		require.Positive(t, quick, "no other loop polled while a solo client was served")
		// Until its window shrinks to 0 (7 long waits), each paused
		// request keeps the others polling for haltHoldNanos and a poll's
		// yield; polling through every pause would be paused*20 ms.
		require.Less(t, slow, int64(paused*20*time.Millisecond)/4, "the other loops polled through a paused client's pauses")
	}
}

// With HaltPoll, a solo client's answer is polled for (BeginTurn's poll,
// ndbclient.Batch.Poll) only while another loop serves a solo client of
// its own: when the other loops only poll for it, a loop that also polled
// for the data nodes' answer held the vCPU they needed (bench/RESULTS.md,
// session 50). Without HaltPoll every solo turn may poll.
func TestHaltPollAnswersArePolledForOnlyBesideAnotherClient(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr, h, _ := startTransport(t, Epoll, Options{Loops: 2, BusyPoll: time.Millisecond, HaltPoll: on})
		conn := dial(t, addr, 10*time.Second)
		for i := range 200 {
			echoLine(t, conn, i)
		}
		alone := h.polled.Load()
		// Two clients at once, on the two loops.
		other := dial(t, addr, 10*time.Second)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 300 {
				echoLine(t, other, i)
			}
		}()
		for i := range 300 {
			echoLine(t, conn, i)
		}
		<-done
		together := h.polled.Load() - alone
		t.Logf("halt_poll %v: %d solo turns polled alone, %d beside another client", on, alone, together)
		if on {
			require.Zero(t, alone, "polled for a lone client's answer while the other loop polled for it")
		} else {
			require.Positive(t, alone, "no solo turn polled without halt_poll")
		}
		require.Positive(t, together, "no solo turn polled beside another client")
	}
}
