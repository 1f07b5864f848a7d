//go:build linux

package memcache

import (
	"bufio"
	"bytes"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Epoll loops keep their P while they wait, so serving raises GOMAXPROCS to
// leave one for everything else, and a garbage collection, which must stop
// every P, still completes while the loops wait and while they serve.
func TestEpollLoopsLeaveAProcessorAndLetGCRun(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	addr, _ := startServerConfig(t, Config{EventLoop: EventLoopEpoll, Loops: before + 1}, newEngine(t))
	require.Greater(t, runtime.GOMAXPROCS(0), before+1, "no P left over for the rest of the program")

	conn := dialServer(t, addr, 20*time.Second)
	r := bufio.NewReader(conn)
	gc := func() {
		done := make(chan struct{})
		go func() { runtime.GC(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("garbage collection blocked by the event loops")
		}
	}
	for i := range 50 {
		_, err := conn.Write([]byte("version\r\n"))
		require.NoError(t, err)
		if i%2 == 0 {
			gc() // while the request is being served, or the loop is in its raw wait
		}
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "VERSION test\r\n", line)
	}
	time.Sleep(3 * rawWaitMillis * time.Millisecond) // past the raw wait: idle loops
	gc()
}

// A small reply waits for the loop's turn to end; a large one goes at once,
// but never ahead of the replies held before it.
func TestHeldRepliesGoBeforeALargeOne(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fds[0]); _ = syscall.Close(fds[1]) })
	require.NoError(t, syscall.SetNonblock(fds[0], true))
	l := &epollLoop{}
	c := &epollConn{loop: l, fd: fds[0]}

	c.write([]byte("small\r\n"))
	require.Equal(t, []*epollConn{c}, l.held, "a small reply is held for the turn's end")
	require.Equal(t, "small\r\n", string(c.out))
	big := bytes.Repeat([]byte("b"), heldReplyMax)
	c.write(big)
	require.Empty(t, c.out, "the large reply and what was held before it went at once")

	want := append([]byte("small\r\n"), big...)
	got := make([]byte, 0, len(want))
	buf := make([]byte, 64<<10)
	for len(got) < len(want) {
		n, err := syscall.Read(fds[1], buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	require.True(t, bytes.Equal(want, got), "replies out of order")
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
