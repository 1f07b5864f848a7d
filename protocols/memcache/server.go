package memcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/logging"

	"github.com/ndbgate/ndbgate/gateway"
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
	// Settings are extra "stats settings" lines (name -> value).
	Settings [][2]string
}

// Server serves memcached's text protocol on gnet: one event loop per core, no
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

	currConns, totalConns, rejectedConns atomic.Int64
	bytesRead, bytesWritten              atomic.Uint64
	verbosity                            atomic.Int64
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
	return &Server{cfg: cfg, svc: svc, log: log, started: make(chan struct{}), m: newServerMetrics()}
}

// Serve listens and serves until Shutdown. It returns an error if it cannot listen.
func (s *Server) Serve() error {
	return gnet.Run(s, "tcp://"+s.cfg.Addr,
		gnet.WithMulticore(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReuseAddr(true),
		gnet.WithLogger(gnetLogger{s.log}),
		gnet.WithLogLevel(logging.ErrorLevel),
	)
}

// Started is closed once the listener accepts connections.
func (s *Server) Started() <-chan struct{} { return s.started }

// Shutdown stops accepting and closes connections after their queued replies.
func (s *Server) Shutdown(ctx context.Context) error {
	select {
	case <-s.started:
		return s.eng.Stop(ctx)
	default:
		return nil
	}
}

// OnBoot records the engine handle.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.once.Do(func() { close(s.started) })
	return gnet.None
}

// OnOpen admits a connection or refuses it as memcached does when full.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.currConns.Load() >= int64(s.cfg.MaxConnections) {
		s.rejectedConns.Add(1)
		return replyTooManyConns, gnet.Close
	}
	s.currConns.Add(1)
	s.totalConns.Add(1)
	s.m.conns.Inc()
	cs := &connState{srv: s, c: c}
	cs.parser.MaxItemSize = s.cfg.ItemSizeMax
	c.SetContext(cs)
	return nil, gnet.None
}

// OnClose forgets the connection. Requests still in flight complete into the
// dead queue and are dropped.
func (s *Server) OnClose(c gnet.Conn, _ error) gnet.Action {
	if cs, ok := c.Context().(*connState); ok {
		cs.closed.Store(true)
		s.currConns.Add(-1)
		s.m.conns.Dec()
	}
	return gnet.None
}

// OnTraffic parses every complete command buffered, starts each one, and writes
// the replies whose turn has come.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cs := c.Context().(*connState)
	buf, _ := c.Peek(-1)
	used := cs.serve(buf)
	if used > 0 {
		_, _ = c.Discard(used)
		s.bytesRead.Add(uint64(used))
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
	var op *net.OpError
	if errors.As(err, &op) || strings.Contains(err.Error(), "address already in use") {
		return fmt.Errorf("memcache listener %s: %w (is another memcached or ndbgate running? pick another --memcache address)", addr, err)
	}
	return fmt.Errorf("memcache listener %s: %w", addr, err)
}

var processStart = time.Now()
