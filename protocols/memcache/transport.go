package memcache

import (
	"syscall"
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
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(g.c.Fd()), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == 0 {
			if b = b[n:]; len(b) == 0 {
				return
			}
		}
	}
	_, _ = g.c.Write(b)
}

func (g gnetTransport) wake() { _ = g.c.Wake(nil) }
