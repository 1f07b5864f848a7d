package memcache

import (
	"net"
	"sync"
	"time"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// The TLS listener serves the same protocols with one goroutine per
// connection: gnet has no TLS, and TLS is not the latency path (the unix
// socket is). Each connection's loop owns its connState exactly as a gnet
// event loop does; a reader goroutine feeds it bytes, and completions wake it.

// maxStreamBuffer stops reading a connection whose unparsed input is this
// large (its replies are not keeping up): the same backpressure as gnet's.
const maxStreamBuffer = 4 << 20

type streamTransport struct {
	nc     net.Conn
	wakeup chan struct{}
}

func (t *streamTransport) write(b []byte) {
	_ = t.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, _ = t.nc.Write(b)
}

// backlog is none: write blocks until the socket takes the reply, which
// holds the connection's loop, and nobody else's, back.
func (t *streamTransport) backlog() int { return 0 }

func (t *streamTransport) wakeWhenSent() {}

func (t *streamTransport) wake() {
	select {
	case t.wakeup <- struct{}{}:
	default:
	}
}

// streamSet tracks open stream connections so Shutdown can end them.
type streamSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (ss *streamSet) add(nc net.Conn) bool {
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

func (ss *streamSet) remove(nc net.Conn) {
	ss.mu.Lock()
	delete(ss.conns, nc)
	ss.mu.Unlock()
	ss.wg.Done()
}

// serveStreams accepts until the listener closes.
func (s *Server) serveStreams(ln net.Listener) error {
	return acceptEach(ln, func(nc net.Conn) bool {
		if !s.streams.add(nc) {
			_ = nc.Close()
			return false
		}
		go s.serveStream(nc)
		return true
	})
}

// stopStreams stops accepting and makes every stream connection finish: reads
// end now, queued replies still go out.
func (s *Server) stopStreams() {
	if s.tlsLn != nil {
		_ = s.tlsLn.Close()
	}
	ss := &s.streams
	ss.mu.Lock()
	ss.closed = true
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
}

func (s *Server) serveStream(nc net.Conn) {
	defer s.streams.remove(nc)
	defer nc.Close()
	if !s.admit() {
		_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = nc.Write(replyTooManyConns)
		return
	}
	t := &streamTransport{nc: nc, wakeup: make(chan struct{}, 1)}
	cs := s.newConnState(t, shardmetrics.SharedShard, nil)
	defer s.release(cs)

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
		if eof || len(buf) > maxStreamBuffer {
			in = nil
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
		if used := cs.serve(buf); used > 0 {
			s.m.stats.Add(cs.shard, statBytesRead, uint64(used))
			buf = append(buf[:0], buf[used:]...)
		}
		cs.flush()
		if len(cs.queue) == 0 && (cs.closeAfter || eof) {
			return
		}
	}
}
