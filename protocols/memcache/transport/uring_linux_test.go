//go:build linux

package transport

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newTestRing returns a ring, or skips where this kernel or sandbox has no
// io_uring (the loops then make one syscall per operation, tested as plain
// epoll).
func newTestRing(t *testing.T, entries uint32) *batchRing {
	t.Helper()
	r, err := newBatchRing(entries)
	if err != nil {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	t.Cleanup(r.close)
	return r
}

// socketPair returns two connected, non-blocking stream sockets, as the
// loops' accepted sockets are.
func socketPair(t *testing.T) (a, b int) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fds[0]); _ = syscall.Close(fds[1]) })
	require.NoError(t, syscall.SetNonblock(fds[0], true))
	require.NoError(t, syscall.SetNonblock(fds[1], true))
	return fds[0], fds[1]
}

// tcpPair returns the two ends of a loopback TCP connection, non-blocking,
// detached from Go's poller as the loops' sockets are.
func tcpPair(t *testing.T) (a, b int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	accepted, err := ln.Accept()
	require.NoError(t, err)
	a, err = detach(accepted)
	require.NoError(t, err)
	b, err = detach(dialed)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(a); _ = syscall.Close(b) })
	return a, b
}

type completion struct {
	tag uint64
	res int32
}

// runRing has queue put operations on r, reporting to the done it is given,
// then runs r and returns every completion, failing the test if any of it
// blocks: every operation must complete inline, also in the runs a full ring
// makes by itself.
func runRing(t *testing.T, r *batchRing, queue func(done func(tag uint64, res int32))) []completion {
	t.Helper()
	var got []completion
	record := func(tag uint64, res int32) { got = append(got, completion{tag, res}) }
	done := make(chan bool, 1)
	go func() { queue(record); done <- r.run(record) }()
	select {
	case ok := <-done:
		require.True(t, ok, "the kernel refused the batch")
	case <-time.After(5 * time.Second):
		t.Fatal("a batched operation did not complete inline: the run blocked")
	}
	return got
}

func TestBatchRingSendsAndReceivesInline(t *testing.T) {
	r := newTestRing(t, 8)
	a, b := socketPair(t)

	got := runRing(t, r, func(done func(uint64, int32)) { r.queueSend(a, []byte("get k\r\n"), 7, done) })
	require.Equal(t, []completion{{7, 7}}, got)

	buf := make([]byte, 64)
	got = runRing(t, r, func(done func(uint64, int32)) { r.queueRecv(b, buf, 9, done) })
	require.Equal(t, []completion{{9, 7}}, got)
	require.Equal(t, "get k\r\n", string(buf[:7]))
}

// A read with nothing to read, and a write to a full socket, report EAGAIN
// at once rather than waiting in the kernel, so the loop never blocks and
// no buffer is left in the kernel's hands.
func TestBatchRingWouldBlockIsEAGAIN(t *testing.T) {
	for name, pair := range map[string]func(*testing.T) (int, int){"unix": socketPair, "tcp": tcpPair} {
		t.Run(name, func(t *testing.T) {
			r := newTestRing(t, 8)
			a, b := pair(t)

			buf := make([]byte, 64)
			got := runRing(t, r, func(done func(uint64, int32)) { r.queueRecv(b, buf, 1, done) })
			require.Equal(t, []completion{{1, -int32(syscall.EAGAIN)}}, got, "empty socket")

			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for {
				if _, err := syscall.Write(a, chunk); err == syscall.EAGAIN {
					break
				} else {
					require.NoError(t, err)
				}
			}
			got = runRing(t, r, func(done func(uint64, int32)) { r.queueSend(a, chunk, 2, done) })
			require.Equal(t, []completion{{2, -int32(syscall.EAGAIN)}}, got, "full socket")
		})
	}
}

func TestBatchRingReportsEndOfInputAndAClosedPeer(t *testing.T) {
	r := newTestRing(t, 8)
	a, b := socketPair(t)
	require.NoError(t, syscall.Close(b))

	buf := make([]byte, 64)
	got := runRing(t, r, func(done func(uint64, int32)) {
		r.queueRecv(a, buf, 1, done)
		r.queueSend(a, []byte("STORED\r\n"), 2, done) // MSG_NOSIGNAL: an error, not SIGPIPE
	})
	require.ElementsMatch(t, []completion{{1, 0}, {2, -int32(syscall.EPIPE)}}, got)
}

// More operations than the ring holds go in several runs, each reported
// under its own tag; the ring runs itself whenever it fills.
func TestBatchRingManyOperations(t *testing.T) {
	const entries, pairs = 4, 10
	r := newTestRing(t, entries)
	var ends [pairs][2]int
	for i := range ends {
		ends[i][0], ends[i][1] = socketPair(t)
	}
	got := runRing(t, r, func(done func(uint64, int32)) {
		for i := range pairs {
			r.queueSend(ends[i][0], fmt.Appendf(nil, "reply %d\r\n", i), uint64(i), done)
		}
	})
	require.Len(t, got, pairs)
	bufs := make([][]byte, pairs)
	for i := range pairs {
		require.Equal(t, int32(len(fmt.Sprintf("reply %d\r\n", i))), got[i].res)
		bufs[i] = make([]byte, 32)
	}
	runRing(t, r, func(done func(uint64, int32)) {
		for i := range pairs {
			r.queueRecv(ends[i][1], bufs[i], uint64(100+i), done)
		}
	})
	for i := range pairs {
		require.Equal(t, fmt.Sprintf("reply %d\r\n", i), string(bytes.TrimRight(bufs[i], "\x00")))
	}
}

// A server configured for the ring has one on every loop (where the kernel
// allows io_uring), so the epoll+io_uring runs of the server tests really
// take the batched path; and it serves through it.
func TestEpollLoopsBatchThroughTheRing(t *testing.T) {
	newTestRing(t, 1) // skips without io_uring
	addr, _, tr := startTransport(t, Epoll, Options{BatchSyscalls: true})
	conn := dial(t, addr, 10*time.Second)
	_, err := conn.Write([]byte("set k 0 0 1\r\nversion\r\n"))
	require.NoError(t, err)
	want := "set k 0 0 1\r\nVERSION test\r\n"
	got := make([]byte, len(want))
	_, err = io.ReadFull(conn, got)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	es := tr.(*epollServer)
	require.NotEmpty(t, es.loops)
	for i, l := range es.loops {
		require.NotNil(t, l.ring, "loop %d has no ring", i)
	}
}
