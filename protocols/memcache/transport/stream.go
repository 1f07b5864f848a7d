package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Streams serves a TLS listener with one goroutine per connection: TLS needs
// a blocking net.Conn, which neither event loop has, and TLS is not the
// latency path (the unix socket is). Each connection's goroutine owns its
// session exactly as an event loop does; a reader goroutine feeds it bytes,
// and completions wake it.
func Streams(addr string, cfg *tls.Config) Transport {
	return &streams{addr: addr, cfg: cfg}
}

type streams struct {
	addr string
	cfg  *tls.Config

	mu     sync.Mutex // guards ln, conns and closed
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (ss *streams) Serve(h Handler, ready func()) error {
	ln, err := tls.Listen("tcp", ss.addr, ss.cfg)
	if err != nil {
		return fmt.Errorf("memcache TLS listener %s: %w", ss.addr, err)
	}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return ln.Close()
	}
	ss.ln = ln
	ss.mu.Unlock()
	ready()
	return acceptEach(ln, func(nc net.Conn) bool {
		if !ss.add(nc) {
			_ = nc.Close()
			return false
		}
		go ss.serve(h, nc)
		return true
	})
}

func (ss *streams) add(nc net.Conn) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	if ss.conns == nil {
		ss.conns = map[net.Conn]struct{}{}
	}
	ss.conns[nc] = struct{}{}
	ss.wg.Add(1)
	return true
}

func (ss *streams) remove(nc net.Conn) {
	ss.mu.Lock()
	delete(ss.conns, nc)
	ss.mu.Unlock()
	ss.wg.Done()
}

// Shutdown stops accepting and makes every connection finish: reads end
// now, queued replies still go out. It waits for them at most 5 seconds.
func (ss *streams) Shutdown(context.Context) error {
	ss.mu.Lock()
	ss.closed = true
	if ss.ln != nil {
		_ = ss.ln.Close()
	}
	for nc := range ss.conns {
		_ = nc.SetReadDeadline(time.Now())
	}
	ss.mu.Unlock()
	done := make(chan struct{})
	go func() { ss.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

type streamConn struct {
	nc     net.Conn
	wakeup chan struct{}
	out    []byte // replies are encoded here (Output)
}

func (t *streamConn) Output() []byte { return t.out[:0] }

// Send blocks until the socket takes b, which holds the connection's
// goroutine back, and nobody else's.
func (t *streamConn) Send(b []byte) {
	t.out = b[:0]
	_ = t.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, _ = t.nc.Write(b)
}

// Backlog is none: Send returns once the socket has taken everything.
func (t *streamConn) Backlog() int { return 0 }

func (t *streamConn) WakeWhenSent() {}

func (t *streamConn) Wake() {
	select {
	case t.wakeup <- struct{}{}:
	default:
	}
}

func (ss *streams) serve(h Handler, nc net.Conn) {
	defer ss.remove(nc)
	defer nc.Close()
	if ok, refusal := h.Admit(); !ok {
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(refusal)
		return
	}
	t := &streamConn{nc: nc, wakeup: make(chan struct{}, 1)}
	s := h.NewLoop(shardmetrics.SharedShard).Open(t)
	defer s.Closed()

	data := make(chan []byte, 4)
	done := make(chan struct{})
	defer close(done)
	go func() { // reader
		defer close(data)
		for {
			b := make([]byte, 32<<10)
			n, err := nc.Read(b)
			if n > 0 {
				select {
				case data <- b[:n]:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()

	var buf []byte
	eof := false
	for {
		in := data
		if eof || len(buf) > MaxBuffered {
			in = nil // its replies are not keeping up: stop reading
		}
		select {
		case b, ok := <-in:
			if !ok {
				eof = true
			} else {
				buf = append(buf, b...)
			}
		case <-t.wakeup:
		}
		if used := s.Serve(buf); used > 0 {
			buf = append(buf[:0], buf[used:]...)
		}
		s.Flush()
		if cap(t.out) > keepMax {
			t.out = nil
		}
		if !s.Owes() && (s.Closing() || eof) {
			return
		}
	}
}
