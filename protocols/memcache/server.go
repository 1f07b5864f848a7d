package memcache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Config configures the memcache listener.
type Config struct {
	Addr           string // host:port
	MaxConnections int
	// MaxPending bounds the commands of one connection awaiting their reply; past
	// it the connection is not read until replies go out (backpressure).
	MaxPending  int
	ItemSizeMax int
	Version     string
	// Evictions says the backend evicts items to make room ("stats
	// settings" evictions on), as the embedded engine does; NDB refuses.
	Evictions bool
	// Settings are extra "stats settings" lines (name -> value).
	Settings [][2]string
	// Credentials, when set, require SASL PLAIN (binary protocol only, as
	// memcached -S).
	Credentials *Credentials
	// Socket is a unix-socket path to serve as well ("" none), with SocketMode.
	Socket     string
	SocketMode os.FileMode
	// TLSAddr serves the same protocols over TLS with TLS (crypto/tls).
	TLSAddr string
	TLS     *tls.Config
	// EventLoop picks what serves Addr and Socket: "epoll" (Linux only, the
	// default there) or "gnet".
	EventLoop string
	// Loops is the number of epoll loops; 0 means one per processor the
	// runtime started with (GOMAXPROCS). gnet runs one per CPU.
	Loops int
	// BatchSyscalls lets each epoll loop run a turn's reads, and its replies,
	// as one io_uring_enter each where the kernel allows it (uring_linux.go).
	BatchSyscalls bool
	// PartialBytes bounds the bytes all connections together hold of
	// storage commands still arriving (a value is held whole until it is all
	// here). A value that would go over is refused as memcached refuses one
	// it has no memory for, and swallowed. 0 means DefaultPartialBytes.
	PartialBytes int64
}

// DefaultPartialBytes is PartialBytes when not set.
const DefaultPartialBytes = 64 << 20

// Event loop names (Config.EventLoop).
const (
	EventLoopEpoll = "epoll"
	EventLoopGnet  = "gnet"
)

// Server serves memcached's protocols on one event loop per core (ndbgate's
// epoll loops on Linux, epoll_linux.go; gnet elsewhere or when configured), no
// goroutine per request, and no event loop ever waits on the backend: requests
// complete through gateway callbacks into a per-connection ordered reply queue.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	svc     *gateway.Service
	log     *slog.Logger
	eng     gnet.Engine
	started chan struct{}
	once    sync.Once
	m       *serverMetrics

	tlsLn   net.Listener
	streams streamSet
	epoll   atomic.Pointer[epollServer]

	// handoffs counts, per event loop, requests handed to other goroutines to
	// complete and those whose replies were since flushed or dropped with
	// their connection (see unsent); gnet's Shutdown waits for the two to meet.
	handoffs *shardmetrics.Counters
	// draining: Shutdown has begun; connections take no new commands.
	draining atomic.Bool

	currConns, totalConns, rejectedConns atomic.Int64
	verbosity                            atomic.Int64
	prefix                               prefixStats // stats detail
	// partial is what connections hold of storage commands still arriving
	// (connState.partial), against cfg.PartialBytes.
	partial atomic.Int64

	// gnetLoops gives each gnet event loop its metrics shard and scratch.
	gnetLoopsMu sync.Mutex
	gnetLoops   map[gnet.EventLoop]gnetLoop
}

// NewServer builds a server; Serve starts it.
func NewServer(cfg Config, svc *gateway.Service, log *slog.Logger) *Server {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 4096
	}
	if cfg.ItemSizeMax <= 0 {
		cfg.ItemSizeMax = svc.ItemSizeMax()
	}
	if cfg.EventLoop == "" {
		cfg.EventLoop = EventLoopGnet
		if epollAvailable {
			cfg.EventLoop = EventLoopEpoll
		}
	}
	return &Server{cfg: cfg, svc: svc, log: log, started: make(chan struct{}), m: newServerMetrics(),
		handoffs: shardmetrics.NewCounters(numHandoffCounts)}
}

// Serve listens on the TCP address and the unix socket (gnet) and the TLS
// address (stream.go), and serves until Shutdown. It returns an error if it
// cannot listen.
func (s *Server) Serve() error {
	errc := make(chan error, 2)
	running := 0
	if s.cfg.TLSAddr != "" {
		ln, err := tls.Listen("tcp", s.cfg.TLSAddr, s.cfg.TLS)
		if err != nil {
			return fmt.Errorf("memcache TLS listener %s: %w", s.cfg.TLSAddr, err)
		}
		s.tlsLn = ln
		running++
		go func() { errc <- s.serveStreams(ln) }()
	}
	var addrs [][2]string // network, address
	if s.cfg.Addr != "" {
		addrs = append(addrs, [2]string{"tcp", s.cfg.Addr})
	}
	if s.cfg.Socket != "" {
		if fi, err := os.Lstat(s.cfg.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(s.cfg.Socket) // a stale socket of an earlier run, as memcached -s
		}
		addrs = append(addrs, [2]string{"unix", s.cfg.Socket})
	}
	switch {
	case len(addrs) == 0:
		s.once.Do(func() { close(s.started) })
	case s.cfg.EventLoop == EventLoopEpoll:
		running++
		go func() { errc <- s.serveEpoll(addrs) }()
	default:
		var urls []string
		for _, a := range addrs {
			urls = append(urls, a[0]+"://"+a[1])
		}
		running++
		go func() {
			errc <- gnet.Rotate(s, urls,
				gnet.WithMulticore(true),
				gnet.WithTCPNoDelay(gnet.TCPNoDelay),
				gnet.WithReuseAddr(true),
				gnet.WithLogger(gnetLogger{s.log}),
				gnet.WithLogLevel(logging.ErrorLevel),
			)
		}()
	}
	var first error
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
			_ = s.Shutdown(context.Background())
		}
	}
	return first
}

// Started is closed once the listener accepts connections.
func (s *Server) Started() <-chan struct{} { return s.started }

// Shutdown stops accepting and closes connections after their queued replies.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopStreams()
	select {
	case <-s.started:
		if es := s.epoll.Load(); es != nil {
			return es.shutdown(ctx)
		}
		if s.eng.Validate() != nil {
			return nil // no gnet listener
		}
		s.drainGnet(ctx)
		return s.eng.Stop(ctx)
	default:
		return nil
	}
}

// drainGnet lets the replies of requests still in flight go out before gnet
// closes every connection: connections take no new commands, and those with
// nothing in flight close. It returns when no reply is unsent or ctx ends.
func (s *Server) drainGnet(ctx context.Context) {
	s.draining.Store(true)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for s.unsent() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Indexes of Server.handoffs.
const (
	handoffsStarted = iota
	handoffsSettled
	numHandoffCounts
)

// unsent is the number of replies of requests handed to other goroutines that
// have not been flushed. Settled is read first: neither count falls, and
// settled never passes started, so a zero is never seen too early.
func (s *Server) unsent() uint64 {
	settled := s.handoffs.Value(handoffsSettled)
	return s.handoffs.Value(handoffsStarted) - settled
}

// setSocketMode gives the unix socket, once listening, its configured mode.
func (s *Server) setSocketMode() {
	if s.cfg.Socket != "" && s.cfg.SocketMode != 0 {
		if err := os.Chmod(s.cfg.Socket, s.cfg.SocketMode); err != nil {
			s.log.Error("memcache socket mode", slog.String("path", s.cfg.Socket), slog.Any("error", err))
		}
	}
}

// OnBoot records the engine handle and sets the unix socket's mode.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.setSocketMode()
	s.once.Do(func() { close(s.started) })
	return gnet.None
}

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

// admit counts a new connection, or refuses it as memcached does when full.
func (s *Server) admit() bool {
	if s.currConns.Load() >= int64(s.cfg.MaxConnections) {
		s.rejectedConns.Add(1)
		return false
	}
	s.currConns.Add(1)
	s.totalConns.Add(1)
	s.m.conns.Inc()
	return true
}

// unadmit undoes admit for a connection closed before it was served.
func (s *Server) unadmit() {
	s.currConns.Add(-1)
	s.m.conns.Dec()
}

func (s *Server) release(cs *connState) {
	cs.closed.Store(true)
	cs.holdPartial(0)
	for _, p := range cs.queue {
		if p.req != nil { // nobody will read its reply: drop what is not sent yet
			p.req.Abandon()
		}
		if p.elsewhere { // its reply will never be flushed
			p.elsewhere = false
			s.handoffs.Add(cs.shard, handoffsSettled, 1)
		}
	}
	s.unadmit()
}

// OnOpen admits a connection or refuses it as memcached does when full.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		return nil, gnet.Close
	}
	if !s.admit() {
		return replyTooManyConns, gnet.Close
	}
	l := s.gnetLoop(c.EventLoop())
	cs := s.newConnState(gnetTransport{c}, l.shard, l.scratch)
	c.SetContext(cs)
	return nil, gnet.None
}

type gnetLoop struct {
	shard   int // metrics shard (see internal/shardmetrics)
	scratch *loopScratch
}

func (s *Server) gnetLoop(el gnet.EventLoop) gnetLoop {
	s.gnetLoopsMu.Lock()
	defer s.gnetLoopsMu.Unlock()
	if s.gnetLoops == nil {
		s.gnetLoops = make(map[gnet.EventLoop]gnetLoop)
	}
	l, ok := s.gnetLoops[el]
	if !ok {
		l = gnetLoop{shard: shardmetrics.LoopShard(len(s.gnetLoops)), scratch: s.newScratch()}
		s.gnetLoops[el] = l
	}
	return l
}

// newScratch makes the scratch of one event loop, or of one connection
// served on its own goroutine.
func (s *Server) newScratch() *loopScratch {
	return &loopScratch{parser: Parser{MaxItemSize: s.cfg.ItemSizeMax}}
}

// newConnState makes a connection's state. shard is its metrics shard and
// scratch its event loop's (nil: a connection served on its own goroutine).
func (s *Server) newConnState(t transport, shard int, scratch *loopScratch) *connState {
	if scratch == nil {
		scratch = s.newScratch()
	}
	return &connState{srv: s, t: t, shard: shard, scratch: scratch}
}

// OnClose forgets the connection. Requests still in flight complete into the
// dead queue and are dropped.
func (s *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	if cs, ok := c.Context().(*connState); ok {
		s.release(cs)
	}
	return gnet.None
}

// OnTraffic parses every complete command buffered, starts each one, and writes
// the replies whose turn has come.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cs := c.Context().(*connState)
	if s.draining.Load() {
		cs.closeAfter = true // no new commands; close once the queue is out
	}
	buf, _ := c.Peek(-1)
	used := cs.serve(buf)
	if used > 0 {
		_, _ = c.Discard(used)
		s.m.stats.Add(cs.shard, statBytesRead, uint64(used))
	}
	cs.flush()
	if cs.closeAfter && len(cs.queue) == 0 {
		return gnet.Close
	}
	return gnet.None
}

// gnetLogger sends gnet's own log lines to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Info(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)); os.Exit(1) }

// ListenError explains a failure to listen in words a user can act on.
func ListenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("memcache listener %s: %w (is another memcached or ndbgate running? pick another --memcache address)", addr, err)
	}
	return fmt.Errorf("memcache listener %s: %w", addr, err)
}

var processStart = time.Now()
