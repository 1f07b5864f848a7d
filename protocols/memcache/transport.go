package memcache

import (
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

func (g gnetTransport) write(b []byte) { _, _ = g.c.Write(b) }
func (g gnetTransport) wake()          { _ = g.c.Wake(nil) }
