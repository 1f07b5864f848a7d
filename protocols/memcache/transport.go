package memcache

import (
	"syscall"
	"time"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
)

// transport is how a connection's replies leave and how a completion on
// another goroutine gets the connection's loop to flush them. gnet serves the
// plain TCP and unix-socket listeners; TLS, which gnet lacks, runs a goroutine
// per connection (stream.go) over the same connState.
type transport interface {
	// write sends b; called only on the connection's loop.
	write(b []byte)
	// wake asks the loop to serve buffered input and flush; safe from any goroutine.
	wake()
	// backlog is how many bytes of replies were written but are not yet
	// sent; called only on the connection's loop.
	backlog() int
	// wakeWhenSent asks for the loop to serve the connection again once
	// its backlog has gone down: serve stopped with input left because the
	// client is not reading its replies.
	wakeWhenSent()
}

type gnetTransport struct{ c gnet.Conn }

// rawWriteMax bounds the replies written raw: a raw syscall keeps the P for
// the whole copy, which would hold up a GC stop-the-world behind megabytes.
const rawWriteMax = 64 << 10

// write sends b with a raw write(2) when nothing is queued ahead of it. The
// socket is non-blocking, so the runtime's bookkeeping for a syscall that
// might block (gnet's unix.Write) buys nothing on this per-reply path. What
// is not sent, and any error, goes through gnet, which queues the rest or
// closes the connection.
func (g gnetTransport) write(b []byte) {
	if len(b) > 0 && len(b) <= rawWriteMax && g.c.OutboundBuffered() == 0 {
		if n, errno := writeFd(g.c.Fd(), b); errno == 0 {
			if b = b[n:]; len(b) == 0 {
				return
			}
		}
	}
	_, _ = g.c.Write(b)
}

// writeFd writes b to a non-blocking socket: raw up to rawWriteMax, beyond
// it as an ordinary syscall.
func writeFd(fd int, b []byte) (int, syscall.Errno) {
	var n uintptr
	var errno syscall.Errno
	if len(b) <= rawWriteMax {
		n, _, errno = syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	} else {
		n, _, errno = syscall.Syscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

func (g gnetTransport) wake() { _ = g.c.Wake(nil) }

func (g gnetTransport) backlog() int { return g.c.OutboundBuffered() }

// wakeWhenSent polls: gnet says nothing when its outbound buffer drains,
// and input left unparsed is not served again until more arrives.
func (g gnetTransport) wakeWhenSent() { time.AfterFunc(time.Millisecond, g.wake) }
