package memcache

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/protocols/memcache/transport"
)

// Config configures the memcache listener.
type Config struct {
	Addr           string // host:port
	MaxConnections int
	// MaxPending bounds the commands of one connection awaiting their reply
	// (a run of pipelined gets counts once: it is one queued reply); past
	// it the connection is not read until replies go out (backpressure).
	MaxPending int
	// MaxPendingKeys bounds the keys those commands gave the gateway: a
	// connection holding as many is not read either.
	MaxPendingKeys int
	ItemSizeMax    int
	Version        string
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
	// EventLoop picks the transport that serves Addr and Socket: "epoll"
	// (Linux only, the default there) or "gnet".
	EventLoop string
	// Loops is the number of epoll loops; 0 means one per processor the
	// runtime started with (GOMAXPROCS). gnet runs one per CPU.
	Loops int
	// BatchSyscalls lets each epoll loop run a turn's reads, and its replies,
	// as one io_uring_enter each where the kernel allows it (uring_linux.go).
	BatchSyscalls bool
	// BusyPoll: after a solo turn an epoll loop polls up to this long
	// before it sleeps (transport.Options.BusyPoll); 0 is off.
	BusyPoll time.Duration
	// HaltPoll: the other epoll loops poll while one serves a solo client
	// (transport.Options.HaltPoll).
	HaltPoll bool
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

// Server serves memcached's protocols through its transports
// (protocols/memcache/transport): ndbgate's epoll loops on Linux, gnet
// elsewhere or when configured, and a goroutine per TLS connection. No
// event loop ever waits on the backend: requests complete through gateway
// callbacks into a per-connection ordered reply queue (conn.go).
type Server struct {
	cfg     Config
	svc     *gateway.Service
	log     *slog.Logger
	started chan struct{}
	m       *serverMetrics
	// transports serve the listeners: tls (if any) first, then loops, the
	// event loops of Addr and Socket (if any).
	transports []transport.Transport
	tls, loops transport.Transport

	// handoffs counts, per event loop, requests handed to other goroutines to
	// complete and those whose replies were since flushed or dropped with
	// their connection (see Unsent); gnet's shutdown waits for the two to meet.
	handoffs *shardmetrics.Counters

	currConns, totalConns, rejectedConns atomic.Int64
	verbosity                            atomic.Int64
	prefix                               prefixStats // stats detail
	// resetBase is the driver's counters at the last "stats reset", which
	// the stats that come from them count from (nil: since start-up).
	resetBase atomic.Pointer[ndbclient.DriverStats]
	// partial is what connections hold of storage commands still arriving
	// (connState.partial), against cfg.PartialBytes.
	partial atomic.Int64
}

// NewServer builds a server; Serve starts it.
func NewServer(cfg Config, svc *gateway.Service, log *slog.Logger) *Server {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1024
	}
	if cfg.MaxPendingKeys <= 0 {
		cfg.MaxPendingKeys = 4096
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 4096
	}
	if cfg.ItemSizeMax <= 0 {
		cfg.ItemSizeMax = svc.ItemSizeMax()
	}
	if cfg.EventLoop == "" {
		cfg.EventLoop = EventLoopGnet
		if transport.EpollAvailable {
			cfg.EventLoop = EventLoopEpoll
		}
	}
	s := &Server{cfg: cfg, svc: svc, log: log, started: make(chan struct{}), m: newServerMetrics(),
		handoffs: shardmetrics.NewCounters(numHandoffCounts)}
	if cfg.TLSAddr != "" {
		s.tls = transport.Streams(cfg.TLSAddr, cfg.TLS)
		s.transports = append(s.transports, s.tls)
	}
	opts := transport.Options{Loops: cfg.Loops, BatchSyscalls: cfg.BatchSyscalls, BusyPoll: cfg.BusyPoll, HaltPoll: cfg.HaltPoll, Log: log}
	if cfg.Addr != "" {
		opts.Listen = append(opts.Listen, transport.Addr{Network: "tcp", Address: cfg.Addr})
	}
	if cfg.Socket != "" {
		opts.Listen = append(opts.Listen, transport.Addr{Network: "unix", Address: cfg.Socket})
	}
	switch {
	case len(opts.Listen) == 0:
		return s
	case cfg.EventLoop == EventLoopEpoll:
		s.loops = transport.Epoll(opts)
	default:
		s.loops = transport.Gnet(opts)
	}
	s.transports = append(s.transports, s.loops)
	return s
}

// Serve listens on the TLS address, then on the TCP address and the unix
// socket, and serves until Shutdown. It returns an error if it cannot
// listen.
func (s *Server) Serve() error {
	if s.cfg.Socket != "" {
		if fi, err := os.Lstat(s.cfg.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(s.cfg.Socket) // a stale socket of an earlier run, as memcached -s
		}
	}
	errc := make(chan error, len(s.transports))
	running := 0
	for _, tr := range s.transports {
		ready := make(chan struct{})
		running++
		go func() {
			errc <- tr.Serve(s, func() {
				if tr == s.loops {
					s.setSocketMode()
				}
				close(ready)
			})
		}()
		select {
		case <-ready:
		case err := <-errc: // could not listen: stop what runs already
			_ = s.shutdown(context.Background())
			for running--; running > 0; running-- {
				<-errc
			}
			return err
		}
	}
	close(s.started)
	var first error
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil {
			first = err
			_ = s.Shutdown(context.Background())
		}
	}
	return first
}

// Started is closed once every listener accepts connections.
func (s *Server) Started() <-chan struct{} { return s.started }

// Shutdown stops accepting and closes connections after their queued
// replies. Before Started it does nothing but stop TLS.
func (s *Server) Shutdown(ctx context.Context) error {
	select {
	case <-s.started:
		return s.shutdown(ctx)
	default:
		if s.tls != nil {
			return s.tls.Shutdown(ctx)
		}
		return nil
	}
}

// shutdown shuts every transport down, TLS first.
func (s *Server) shutdown(ctx context.Context) error {
	var first error
	for _, tr := range s.transports {
		if err := tr.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Indexes of Server.handoffs.
const (
	handoffsStarted = iota
	handoffsSettled
	numHandoffCounts
)

// Unsent is the number of replies of requests handed to other goroutines
// that have not been flushed. Settled is read first: neither count falls,
// and settled never passes started, so a zero is never seen too early.
func (s *Server) Unsent() uint64 {
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

// Admit counts a new connection, or refuses it as memcached does when full.
func (s *Server) Admit() (bool, []byte) {
	if s.currConns.Load() >= int64(s.cfg.MaxConnections) {
		s.rejectedConns.Add(1)
		return false, replyTooManyConns
	}
	s.currConns.Add(1)
	s.totalConns.Add(1)
	s.m.conns.Inc()
	return true, nil
}

// Unadmit undoes Admit for a connection closed before it was served.
func (s *Server) Unadmit() {
	s.currConns.Add(-1)
	s.m.conns.Dec()
}

// NewLoop makes the state of one event loop, or of one connection served
// on its own goroutine.
func (s *Server) NewLoop(shard int) transport.Loop {
	return &loopScratch{srv: s, shard: shard, parser: Parser{MaxItemSize: s.cfg.ItemSizeMax}}
}

// Open makes the state of a connection the loop serves.
func (sc *loopScratch) Open(c transport.Conn) transport.Session {
	return sc.srv.newConnState(c, sc.shard, sc)
}

// BeginTurn dates the requests the loop reads in its turn, and says whether
// the turn is one connection's alone, and whether its answer may be polled
// for.
func (sc *loopScratch) BeginTurn(now int64, lone, poll bool) {
	sc.now, sc.lone, sc.poll, sc.turns = now, lone, poll, true
}

// EndTurn runs the backend rounds the turn's requests left for it
// (ndbclient.Turn), and reports whether there were any.
func (sc *loopScratch) EndTurn() bool {
	if !sc.turn.Pending() {
		return false
	}
	sc.turn.Run()
	return true
}

// newConnState makes a connection's state. shard is its metrics shard and
// scratch its event loop's (nil: a scratch of its own).
func (s *Server) newConnState(t transport.Conn, shard int, scratch *loopScratch) *connState {
	if scratch == nil {
		scratch = s.NewLoop(shard).(*loopScratch)
	}
	cs := &connState{srv: s, t: t, shard: shard, scratch: scratch}
	cs.run.cs = cs
	return cs
}

// ListenError explains a failure to listen in words a user can act on.
func ListenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("memcache listener %s: %w (is another memcached or ndbgate running? pick another --memcache address)", addr, err)
	}
	return fmt.Errorf("memcache listener %s: %w", addr, err)
}

var processStart = time.Now()
