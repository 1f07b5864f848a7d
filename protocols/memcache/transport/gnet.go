package transport

import (
	"context"
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

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Gnet serves the listeners on gnet's event loops, one per CPU: the portable
// fallback, and the choice off Linux. gnet yields its processor
// (runtime.Gosched) every time a poll finds nothing, which hands its loop
// between OS threads and wakes spinning ones for every few requests
// (bench/HISTORY.md, sixth and seventh passes); it has no option to avoid
// that, which is why Linux has the epoll loops.
func Gnet(opts Options) Transport { return &gnetServer{opts: opts} }

type gnetServer struct {
	gnet.BuiltinEventEngine
	opts  Options
	h     Handler
	ready func()
	// eng is set once gnet has booted; Shutdown before that does nothing.
	eng atomic.Pointer[gnet.Engine]
	// draining: Shutdown has begun; connections take no new commands.
	draining atomic.Bool

	loopsMu sync.Mutex
	loops   map[gnet.EventLoop]*gnetLoop
}

// gnetLoop is what one of gnet's event loops keeps for its connections.
//
// Its connections are woken through a socket of its own, the waker, which
// the loop polls with the rest (OnTraffic then serves the woken ones), as
// the epoll loops are woken through their eventfd. gnet's own Conn.Wake
// queues a task, and a loop runs its queued tasks until none is left,
// those queued meanwhile included, before it polls its sockets again: while
// requests completing elsewhere kept waking connections, or a connection
// that yields (commandsPerServe) woke itself, the loop read no other
// connection, and a client whose request had not been read yet waited for
// as long as that went on.
type gnetLoop struct {
	proto Loop
	out   []byte // replies are encoded here (Output)

	// mu guards woken, signaled and wfd.
	mu sync.Mutex
	// woken are the connections to serve when the waker is next read.
	woken []*gnetConn
	// signaled: a byte is on its way to the waker since woken was last
	// taken.
	signaled bool
	// wfd is the waker's other end, written to wake the loop; -1 when the
	// loop has no waker (it could not be made, or gnet closed it), and its
	// connections are woken with gnet's Conn.Wake.
	wfd   int
	spare []*gnetConn // the loop's: the woken taken last time, for reuse
}

type gnetConn struct {
	c    gnet.Conn
	loop *gnetLoop
	s    Session
	// queued is what Send handed to gnet's AsyncWrite and gnet has not yet
	// taken into its outbound buffer: the replies after it follow it there.
	queued int
	// failed: a write failed; the connection closes once the session
	// returns (OnTraffic), and nothing more is written.
	failed bool
	// closed: gnet closed the connection (OnClose); a wake finds it gone.
	closed bool
	// woken: the connection is on its way to be served (Wake) and has not
	// been served since; further wakes are folded into that one.
	woken atomic.Bool
}

func (g *gnetServer) Serve(h Handler, ready func()) error {
	g.h, g.ready = h, ready
	var urls []string
	for _, a := range g.opts.Listen {
		urls = append(urls, a.Network+"://"+a.Address)
	}
	return gnet.Rotate(g, urls,
		gnet.WithMulticore(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReuseAddr(true),
		gnet.WithLogger(gnetLogger{g.opts.Log}),
		gnet.WithLogLevel(logging.ErrorLevel),
	)
}

// Shutdown lets the replies of requests still in flight go out before gnet
// closes every connection: connections take no new commands, and those
// with nothing in flight close.
func (g *gnetServer) Shutdown(ctx context.Context) error {
	eng := g.eng.Load()
	if eng == nil || eng.Validate() != nil {
		return nil // not listening
	}
	g.draining.Store(true)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for g.h.Unsent() > 0 {
		select {
		case <-ctx.Done():
			return eng.Stop(ctx)
		case <-tick.C:
		}
	}
	return eng.Stop(ctx)
}

// OnBoot records the engine handle and says the listeners are up.
func (g *gnetServer) OnBoot(eng gnet.Engine) gnet.Action {
	g.eng.Store(&eng)
	g.ready()
	return gnet.None
}

// OnOpen admits a connection or refuses it as memcached does when full.
func (g *gnetServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if _, ok := c.Context().(*gnetLoop); ok {
		return nil, gnet.None // a loop's waker (newWaker)
	}
	if g.draining.Load() {
		return nil, gnet.Close
	}
	if ok, refusal := g.h.Admit(); !ok {
		return refusal, gnet.Close
	}
	gc := &gnetConn{c: c, loop: g.loop(c.EventLoop())}
	gc.s = gc.loop.proto.Open(gc)
	c.SetContext(gc)
	return nil, gnet.None
}

// loop returns the state of gnet's loop el, made on its first connection.
func (g *gnetServer) loop(el gnet.EventLoop) *gnetLoop {
	g.loopsMu.Lock()
	defer g.loopsMu.Unlock()
	if g.loops == nil {
		g.loops = make(map[gnet.EventLoop]*gnetLoop)
	}
	l, ok := g.loops[el]
	if !ok {
		l = &gnetLoop{proto: g.h.NewLoop(shardmetrics.LoopShard(len(g.loops))), wfd: -1}
		if err := l.newWaker(el); err != nil {
			g.opts.Log.Warn("memcache gnet: no waker; connections are woken with gnet's tasks", slog.Any("error", err))
		}
		g.loops[el] = l
	}
	return l
}

// newWaker makes the loop's waker: one end of a socket pair, enrolled in
// the loop el, which is the caller's. gnet registers it with a task on el,
// later: what is written to the other end meanwhile is read once it is.
func (l *gnetLoop) newWaker(el gnet.EventLoop) error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	if err := syscall.SetNonblock(fds[1], true); err != nil {
		_ = syscall.Close(fds[0])
		_ = syscall.Close(fds[1])
		return err
	}
	f := os.NewFile(uintptr(fds[0]), "gnet-waker")
	nc, err := net.FileConn(f) // a copy of fds[0]
	_ = f.Close()
	if err != nil {
		_ = syscall.Close(fds[1])
		return err
	}
	res, err := el.Enroll(gnet.NewContext(context.Background(), l), nc) // closes nc, keeping a copy
	if err != nil {
		_ = nc.Close()
		_ = syscall.Close(fds[1])
		return err
	}
	l.wfd = fds[1]
	go func() {
		if r := <-res; r.Err != nil {
			l.wakerGone() // wake with gnet's tasks from now on
		}
	}()
	return nil
}

// wakerGone closes the waker's end: the loop's connections are woken with
// gnet's Conn.Wake from now on, those waiting to be served first.
func (l *gnetLoop) wakerGone() {
	l.mu.Lock()
	if l.wfd >= 0 {
		_ = syscall.Close(l.wfd)
		l.wfd = -1
	}
	woken := l.woken
	l.woken, l.signaled = nil, false
	l.mu.Unlock()
	for _, gc := range woken {
		if gc.c.Wake(nil) != nil {
			gc.woken.Store(false)
		}
	}
}

// serveWoken serves the connections woken since the waker was last read.
// Those woken meanwhile, by the serving too, wait for the waker's next
// read, after the loop has polled its other sockets.
func (g *gnetServer) serveWoken(w gnet.Conn, l *gnetLoop) {
	_, _ = w.Discard(-1)
	l.mu.Lock()
	woken := l.woken
	l.woken, l.signaled = l.spare[:0], false
	l.mu.Unlock()
	for i, gc := range woken {
		woken[i] = nil
		if !gc.closed && g.traffic(gc) == gnet.Close {
			// Closed from the loop's task queue, after this poll's other
			// events: one of them may be gc's.
			_ = gc.c.Close()
		}
	}
	l.spare = woken[:0]
}

// OnClose forgets the connection. Requests still in flight complete into
// its dead session and are dropped.
func (g *gnetServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch x := c.Context().(type) {
	case *gnetConn:
		x.closed = true
		x.s.Closed()
	case *gnetLoop:
		x.wakerGone() // gnet is stopping, or the waker failed
	}
	return gnet.None
}

// OnTraffic serves what the connection has buffered and sends the replies
// whose turn has come; on a loop's waker, the connections woken.
func (g *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *gnetConn:
		return g.traffic(x)
	case *gnetLoop:
		g.serveWoken(c, x)
	}
	return gnet.None
}

// traffic serves gc: its buffered input, and the replies whose turn has
// come. It returns Close when the connection is done.
func (g *gnetServer) traffic(gc *gnetConn) gnet.Action {
	c := gc.c
	gc.woken.Store(false) // before serving: what completes from now on wakes it again
	if g.draining.Load() {
		gc.s.Stop() // no new commands; close once the replies are out
	}
	buf, _ := c.Peek(-1)
	if used := gc.s.Serve(buf); used > 0 {
		_, _ = c.Discard(used)
	}
	gc.s.Flush()
	if cap(gc.loop.out) > keepMax {
		gc.loop.out = nil // do not pin a huge buffer to an idle loop
	}
	if gc.failed || gc.s.Closing() && !gc.s.Owes() && gc.queued == 0 {
		return gnet.Close
	}
	return gnet.None
}

func (gc *gnetConn) Output() []byte { return gc.loop.out[:0] }

// Send sends b with a write(2) of its own when nothing is queued ahead of
// it. The socket is non-blocking, so the runtime's bookkeeping for a syscall
// that might block (gnet's unix.Write) buys nothing on this per-reply path.
//
// No gnet call made here may write to the socket: gnet closes a connection
// whose write fails then and there, calling OnClose, and so the session's
// Closed, from inside the session's own Serve or Flush, which would go on
// starting commands after it let go of those in flight, and parsing input
// gnet has freed. A failed write marks the connection instead, and OnTraffic
// closes it once the session returns. What the socket does not take goes
// behind gnet's outbound buffer, where gnet.Conn.Write only appends; when
// that is empty, through AsyncWrite, which writes from the loop's task queue,
// after the session returns.
func (gc *gnetConn) Send(b []byte) {
	gc.loop.out = b[:0]
	if len(b) == 0 || gc.failed {
		return
	}
	if gc.queued == 0 && gc.c.OutboundBuffered() == 0 {
		n, errno := writeFd(gc.c.Fd(), b)
		switch errno {
		case 0:
			if b = b[n:]; len(b) == 0 {
				return
			}
		case syscall.EAGAIN, syscall.EINTR:
		default:
			gc.failed = true
			return
		}
	}
	if gc.queued == 0 && gc.c.OutboundBuffered() > 0 {
		_, _ = gc.c.Write(b) // appended to the outbound buffer: no write(2)
		return
	}
	rest := append([]byte(nil), b...) // b is the loop's to reuse
	gc.queued += len(rest)
	err := gc.c.AsyncWrite(rest, func(_ gnet.Conn, err error) error {
		gc.written(len(rest), err)
		return nil
	})
	if err != nil {
		gc.queued -= len(rest)
		gc.failed = true
	}
}

// written runs on the loop once AsyncWrite has handed n bytes to the socket
// or to the outbound buffer, or has failed, and gnet closed the connection.
// A session that waits for its backlog to go down polls (WakeWhenSent); one
// that is to close once its replies are out is woken when they all are.
func (gc *gnetConn) written(n int, err error) {
	gc.queued -= n
	if err == nil && gc.queued == 0 && gc.s.Closing() {
		gc.Wake()
	}
}

// Wake queues gc to be served when its loop next reads its waker, and
// signals the waker unless it has been since it was last read.
func (gc *gnetConn) Wake() {
	if gc.woken.Swap(true) {
		return // on its way already
	}
	l := gc.loop
	l.mu.Lock()
	if l.wfd < 0 {
		l.mu.Unlock()
		if gc.c.Wake(nil) != nil {
			gc.woken.Store(false)
		}
		return
	}
	l.woken = append(l.woken, gc)
	if !l.signaled {
		l.signaled = true
		_, _ = writeFd(l.wfd, wakeByte[:]) // EAGAIN: the waker has bytes to read already
	}
	l.mu.Unlock()
}

var wakeByte = [1]byte{1}

func (gc *gnetConn) Backlog() int { return gc.c.OutboundBuffered() + gc.queued }

// WakeWhenSent polls: gnet says nothing when its outbound buffer drains,
// and input left unparsed is not served again until more arrives.
func (gc *gnetConn) WakeWhenSent() { time.AfterFunc(time.Millisecond, gc.Wake) }

// gnetLogger sends gnet's own log lines to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Info(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)); os.Exit(1) }
