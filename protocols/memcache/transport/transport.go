// Package transport moves a protocol's bytes between sockets and the
// protocol's connections. Three transports serve the memcache front end,
// each for a case the others cannot:
//   - Epoll (epoll_linux.go): ndbgate's own event loops, one per processor,
//     batching a turn's reads and replies through io_uring where the kernel
//     allows it. The Linux default. They lean on the Go runtime in ways
//     written down in runtime_linux.go.
//   - Gnet (gnet.go): the gnet library's loops, the portable fallback.
//   - Streams (stream.go): a goroutine per connection, for TLS, which needs
//     a blocking net.Conn.
//
// The protocol is behind Handler, Loop and Session; a transport is behind
// Transport, and each connection behind Conn. Nothing here parses.
package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"time"
)

// Transport serves listeners with a Handler.
type Transport interface {
	// Serve listens and serves h until Shutdown. It calls ready once it
	// accepts connections, and returns an error if it cannot listen.
	Serve(h Handler, ready func()) error
	// Shutdown stops accepting and lets every connection send the replies
	// it owes, closing what is left when ctx ends. Before ready it does
	// nothing.
	Shutdown(ctx context.Context) error
}

// Handler is the protocol's side of a server.
type Handler interface {
	// Admit counts a new connection. When the server is full it returns
	// false and the reply that refuses the connection.
	Admit() (ok bool, refusal []byte)
	// Unadmit undoes Admit for a connection closed before it was opened.
	Unadmit()
	// NewLoop makes the protocol's state for one event loop, or for one
	// connection served on a goroutine of its own; shard is its metrics
	// shard (internal/shardmetrics).
	NewLoop(shard int) Loop
	// Unsent counts replies owed by requests completing on other
	// goroutines; gnet's shutdown waits until it is zero.
	Unsent() uint64
}

// Loop is the protocol's state for one event loop: its connections are
// served one at a time, on the loop's goroutine.
type Loop interface {
	// Open makes the session of a connection the loop now serves.
	Open(c Conn) Session
	// BeginTurn says a turn of the loop began at now (Nanos): the requests
	// read in it start then. lone says the turn serves one connection's
	// input and nothing else, so its last request may keep the loop waiting
	// on it (ndbclient.Batch.Lone); poll, that that request's answer may be
	// polled for (ndbclient.Batch.Poll): the turn before did the same for
	// the same connection (a solo turn), and, with Options.HaltPoll,
	// another loop serves a solo client of its own (rule 8). Loops that
	// never call it leave each request to read the clock, and no request
	// lone.
	BeginTurn(now int64, lone, poll bool)
	// EndTurn runs what the turn's requests left for the loop to run at
	// its end (ndbclient.Turn), and reports whether there was any: their
	// completions may have woken connections, whose new requests may leave
	// more. A loop that calls BeginTurn calls EndTurn, until it reports
	// nothing, before it waits again.
	EndTurn() bool
}

// Session is the protocol's side of one connection. The transport calls it
// only on the connection's loop, one call at a time: never from inside
// another of its calls. A write that fails in Send, in particular, closes
// the connection only once the session has returned (Closed).
type Session interface {
	// Serve parses and starts commands from in and returns the bytes it
	// used; the rest is offered again with more input, or after a Wake.
	Serve(in []byte) int
	// Flush encodes the replies whose turn has come and sends them (Conn.Send).
	Flush()
	// Owes reports whether replies are still queued.
	Owes() bool
	// Closing reports whether the connection ends once it owes nothing.
	Closing() bool
	// Stop takes no more commands: the connection ends once it owes nothing.
	Stop()
	// Closed says the transport closed the connection: nothing more is sent.
	Closed()
}

// Conn is a transport's connection as its Session sees it. Wake is safe
// from any goroutine; the rest is called only on the connection's loop.
type Conn interface {
	// Output returns an empty buffer with room, to append replies to and
	// give to Send. The transport owns it: it is valid until Send, or until
	// the next Output.
	Output() []byte
	// Send sends b, or holds it until the loop's turn ends. What the socket
	// does not take the transport copies; b may be reused on return.
	Send(b []byte)
	// Backlog is how many bytes of replies were sent to the transport but
	// have not reached the socket.
	Backlog() int
	// Wake asks the loop to serve the connection again: its buffered input,
	// and replies completed elsewhere.
	Wake()
	// WakeWhenSent asks for a Wake once the backlog has gone down: the
	// session stopped with input left because the client is not reading.
	WakeWhenSent()
}

// Addr is a listener: network "tcp" or "unix", and its address.
type Addr struct{ Network, Address string }

// MaxBuffered bounds what a connection buffers either way: past it a
// transport stops reading a connection whose unparsed input, or unsent
// output, is this large (its replies are not keeping up), and a session
// stops starting commands while its Backlog is this large.
const MaxBuffered = 4 << 20

// keepMax: a buffer this large is dropped once empty, not pinned to an idle
// loop or connection.
const keepMax = 1 << 20

// clockBase lets requests be timed with the monotonic clock alone: time.Now
// reads the wall clock too.
var clockBase = time.Now()

// Nanos is the monotonic clock of BeginTurn, in nanoseconds.
func Nanos() int64 { return int64(time.Since(clockBase)) }

// acceptEach hands each connection ln accepts to take until take returns
// false or ln closes (nil) or fails (its error). It pauses and goes on after
// a timeout or when out of descriptors, as memcached backs off.
func acceptEach(ln net.Listener, take func(net.Conn) bool) error {
	for {
		nc, err := ln.Accept()
		if err == nil {
			if !take(nc) {
				return nil
			}
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return err
	}
}

// Options configures the event-loop transports, Epoll and Gnet.
type Options struct {
	Listen []Addr
	// Loops is the number of epoll loops; 0 means one per processor the
	// runtime started with (GOMAXPROCS). gnet runs one per CPU.
	Loops int
	// BatchSyscalls lets each epoll loop run a turn's reads, and its
	// replies, as one io_uring_enter each where the kernel allows it.
	BatchSyscalls bool
	// BusyPoll: after a solo turn (one connection's input and nothing
	// else, twice in a row) an epoll loop polls up to this long before it
	// sleeps, so that the connection's next request finds it awake, for as
	// long as its window, which the waits after solo turns size
	// (runtime_linux.go, rule 7); 0 is off. gnet ignores it.
	BusyPoll time.Duration
	// HaltPoll: while a loop serves a solo client whose poll window is
	// open, the other epoll loops poll instead of sleeping, so that their
	// CPUs never halt (runtime_linux.go, rule 8). gnet ignores it.
	HaltPoll bool
	Log      *slog.Logger
}
