//go:build linux

package transport

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ndbgate/ndbgate/internal/pollwindow"
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Epoll serves the listeners on ndbgate's own event loops, one per
// processor: each a goroutine calling epoll, read and write directly, or
// through io_uring one call per turn for a turn's reads and one for its
// replies, when there are two or more of them. They measured faster than
// gnet (bench/HISTORY.md), whose loops hop threads; what they ask of the Go
// runtime for that is written down in runtime_linux.go.
//
// A loop's turn: one wait, then every ready connection is read and served,
// then the replies the turn made are sent together (sendHeld). Between
// turns the loop does its chores: takes on accepted connections and serves
// those woken from other goroutines (completions).
func Epoll(opts Options) Transport { return &epollServer{opts: opts} }

// EpollAvailable: Linux serves with the epoll loops by default.
const EpollAvailable = true

const (
	loopReadBuf = 64 << 10 // one per loop: input is copied out only when a command is incomplete
	loopEvents  = 128
	// heldReplyMax is the largest output a connection holds until its loop's
	// turn ends (see epollConn.Send); larger replies go at once.
	heldReplyMax = 16 << 10
	// turnKeepMax: a turn buffer this large is dropped once the turn is over.
	turnKeepMax = MaxBuffered
)

type epollServer struct {
	opts  Options
	h     Handler
	loops []*epollLoop
	lns   []net.Listener
	next  atomic.Uint32
	loopW sync.WaitGroup
	accW  sync.WaitGroup
	// started: the loops run; Shutdown does nothing before.
	started atomic.Bool
	// draining: Shutdown has begun; connections take no new commands and
	// close once their replies are out.
	draining atomic.Bool
	// force closes the connections at once.
	force atomic.Bool
	// soloUntil is the Nanos until which a loop serves a solo client with
	// its poll window open: till then, with Options.HaltPoll, the other
	// loops poll rather than sleep (rule 8).
	soloUntil atomic.Int64
}

// epollLoop owns its connections: everything but mu's fields is touched only
// on the loop's goroutine.
type epollLoop struct {
	es    *epollServer
	epfd  int
	efd   int          // eventfd: completions, yields and new connections wake the loop
	conns []*epollConn // by fd
	proto Loop

	mu       sync.Mutex
	woken    []*epollConn // connections to serve again
	adopt    []int        // accepted sockets to take on
	signaled bool         // efd has been written and not yet read
	closed   bool         // efd is closed: no more signals

	// ending: the loop is in endTurn, which serves what is woken meanwhile
	// itself; missed: a Wake saw ending and wrote no eventfd. See Wake.
	ending, missed atomic.Bool

	busy   busyTracker
	spare  []*epollConn
	events []syscall.EpollEvent
	buf    []byte
	// turn holds the replies of the turn's connections, encoded in place
	// (Output), until the turn ends; held lists those connections.
	// turnWant is what the turn buffer would have needed for a reply that
	// outgrew it: the next turn starts with that much (sendHeld).
	turn     []byte
	held     []*epollConn
	turnWant int
	// turnRead is the bytes the current turn read: a heavy turn polls
	// before its loop sleeps (pollBriefly). turnBegan is when the turn
	// began (Nanos): past turnNanos, endTurn leaves what its completions
	// woke to the next turn.
	turnRead  int
	turnBegan int64
	// loneFd is the connection whose input, and nothing else, the last
	// turn served (a lone turn), or -1. soloTurn: so did the turn before,
	// for the same connection, a client sending one request at a time with
	// no other client taking turns; with Options.BusyPoll the loop polls
	// after such a turn before it sleeps (rule 7), for as long as pollWin
	// says, which the waits after those turns size.
	loneFd   int
	soloTurn bool
	pollWin  pollwindow.Window
	// busyPolls counts the polls after solo turns, busyPollsFound those
	// that found work (for tests).
	busyPolls, busyPollsFound uint64
	// idleWaits counts the waits that gave the P back (rule 1; atomic, for
	// tests).
	idleWaits uint64
	// haltPollNanos is the time the loop spent polling for another loop's
	// solo client (rule 8; atomic, for tests).
	haltPollNanos uint64
	// lastSolo is when the loop last began a solo turn, kept with
	// Options.HaltPoll only (rule 8: othersServe).
	lastSolo atomic.Int64
	// keeper: the first loop holds its P for REST and gRPC requests too
	// (runtime_linux.go, rule 1); nil on the others.
	keeper *keeper
	// ring, if the kernel allows it, runs a turn's reads and its held
	// replies as one syscall each (see batchRing); reading holds the
	// connections whose reads are queued in it.
	ring    *batchRing
	reading []*epollConn
}

type epollConn struct {
	loop   *epollLoop
	fd     int
	s      Session
	in     []byte // input not yet parsed
	out    []byte // output the socket did not take
	events uint32 // registered with epoll
	queued atomic.Bool
	failed bool // a write failed: close at the next chance
	gone   bool
	held   bool // in loop.held: has output to send when the turn ends
	// heldFrom and heldTo span the replies c holds in loop.turn. While c
	// holds some there, out is empty: they go first.
	heldFrom, heldTo int
	// resume: serve stopped with input left while the client was not
	// reading; serve it again once the output has gone (arm).
	resume bool
}

func (es *epollServer) Serve(h Handler, ready func()) error {
	es.h = h
	for _, a := range es.opts.Listen {
		ln, err := net.Listen(a.Network, a.Address)
		if err != nil {
			es.closeListeners()
			return err
		}
		es.lns = append(es.lns, ln)
	}
	loops := es.opts.Loops
	if loops <= 0 {
		loops = defaultLoops
	}
	defer reserveProcs(loops)()
	for i := range loops {
		l, err := newEpollLoop(es, shardmetrics.LoopShard(i))
		if err != nil {
			es.closeListeners()
			for _, l := range es.loops {
				l.closeFds()
			}
			return err
		}
		es.loops = append(es.loops, l)
	}
	rings := 0
	for _, l := range es.loops {
		if l.ring != nil {
			rings++
		}
	}
	es.opts.Log.LogAttrs(context.Background(), slog.LevelInfo, "memcache event loops", slog.String("kind", "epoll"),
		slog.Int("loops", len(es.loops)), slog.Bool("io_uring", rings == len(es.loops)), slog.Duration("busy_poll", es.opts.BusyPoll),
		slog.Bool("halt_poll", es.opts.HaltPoll))
	l0 := es.loops[0]
	l0.keeper = registerKeeper(func() {
		l0.mu.Lock()
		l0.signalLocked()
		l0.mu.Unlock()
	})
	for _, l := range es.loops {
		es.loopW.Add(1)
		go l.run()
	}
	errc := make(chan error, len(es.lns))
	es.accW.Add(len(es.lns))
	es.started.Store(true)
	ready()
	for _, ln := range es.lns {
		go func() {
			defer es.accW.Done()
			if err := es.accept(ln); err != nil {
				errc <- err
				go func() { _ = es.Shutdown(context.Background()) }() // Serve returns err once drained
			}
		}()
	}
	es.accW.Wait()
	es.loopW.Wait()
	close(errc)
	return <-errc // the first listener's failure, or nil
}

func newEpollLoop(es *epollServer, shard int) (*epollLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	efd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errno != 0 {
		_ = syscall.Close(epfd)
		return nil, errno
	}
	l := &epollLoop{es: es, epfd: epfd, efd: int(efd), proto: es.h.NewLoop(shard),
		events: make([]syscall.EpollEvent, loopEvents), buf: make([]byte, loopReadBuf),
		loneFd: -1, pollWin: pollwindow.New(es.opts.BusyPoll)}
	if es.opts.BatchSyscalls {
		if r, err := newBatchRing(loopEvents); err == nil {
			l.ring = r
			l.buf = make([]byte, loopEvents*ringReadChunk)
		} else {
			es.opts.Log.Debug("memcache: io_uring unavailable, one syscall per read and write", slog.Any("error", err))
		}
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(efd)}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, int(efd), &ev); err != nil {
		l.closeFds()
		return nil, err
	}
	return l, nil
}

func (l *epollLoop) closeFds() {
	if l.ring != nil {
		l.ring.close()
	}
	l.mu.Lock()
	l.closed = true
	_ = syscall.Close(l.efd)
	l.mu.Unlock()
	_ = syscall.Close(l.epfd)
}

func (es *epollServer) closeListeners() {
	for _, ln := range es.lns {
		_ = ln.Close()
	}
}

// accept takes connections until its listener closes and deals them to the
// loops in turn.
func (es *epollServer) accept(ln net.Listener) error {
	return acceptEach(ln, func(nc net.Conn) bool {
		fd, err := detach(nc)
		if err != nil {
			es.opts.Log.Warn("memcache accept", slog.Any("error", err))
			return true
		}
		if ok, refusal := es.h.Admit(); !ok {
			_, _ = syscall.Write(fd, refusal)
			_ = syscall.Close(fd)
			return true
		}
		l := es.loops[int(es.next.Add(1))%len(es.loops)]
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed { // shutting down
			es.h.Unadmit()
			_ = syscall.Close(fd)
			return true
		}
		l.adopt = append(l.adopt, fd)
		l.signalLocked()
		return true
	})
}

// detach takes the socket away from Go's poller: a duplicate descriptor in
// non-blocking mode, the original closed.
func detach(nc net.Conn) (int, error) {
	defer nc.Close()
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("connection has no descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if errno != 0 {
			derr = errno
			return
		}
		fd = int(r)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// signalLocked wakes the loop; l.mu is held.
func (l *epollLoop) signalLocked() {
	if l.signaled || l.closed {
		return
	}
	l.signaled = true
	one := uint64(1)
	_, _ = syscall.Write(l.efd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

func (l *epollLoop) run() {
	defer l.es.loopW.Done()
	defer l.closeFds()
	if l.keeper != nil {
		defer l.keeper.Unregister()
	}
	lastYield := Nanos()
	lastEvent := lastYield
	for {
		// One wait per turn, as a C loop makes: a zero-timeout poll ahead of
		// every wait made a third of the epoll_wait calls and found nothing.
		// Shutdown wakes the loop through the eventfd (signalAll); from then
		// on it polls, to see at once when its last reply has gone.
		msec := rawWaitMillis
		if l.es.draining.Load() {
			msec = 0
		}
		waitStart := Nanos()
		n, errno := 0, syscall.Errno(0)
		afterSolo, haltPolled := false, false
		switch {
		case l.turnRead >= spinTurnBytes: // rule 6
			n, errno = pollBriefly(l.epfd, l.events, waitStart, spinNanos)
		case l.soloTurn && l.es.opts.BusyPoll > 0: // rule 7
			afterSolo = true
			if win := l.pollWin.Nanos(); win > 0 {
				n, errno = pollBriefly(l.epfd, l.events, waitStart, win)
				l.busyPolls++
				if n > 0 {
					l.busyPollsFound++
				}
			}
		case l.es.opts.HaltPoll && msec > 0 && waitStart < l.es.soloUntil.Load(): // rule 8
			haltPolled = true
			n, errno = pollUntil(l.epfd, l.events, &l.es.soloUntil, waitStart+yieldNanos)
			atomic.AddUint64(&l.haltPollNanos, uint64(Nanos()-waitStart))
		}
		l.turnRead, l.soloTurn = 0, false
		if haltPolled && errno == 0 && n == 0 {
			// Polled until the solo client's turns stopped, or for
			// yieldNanos: yield (rule 3), then wait as before.
			goyield()
			lastYield = Nanos()
			continue
		}
		if errno == 0 && n == 0 {
			n, errno = epollWait(l.epfd, l.events, msec, true)
		}
		if errno == 0 && n == 0 && msec > 0 && Nanos()-lastEvent < holdNanos { // rule 1
			// A pause, not yet idleness: keep the P, and let the runtime
			// see the loop reschedule, so that its monitor does not
			// preempt it.
			if afterSolo {
				l.pollWin.Observe(Nanos() - waitStart)
			}
			goyield()
			lastYield = Nanos()
			continue
		}
		if errno == 0 && n == 0 {
			if l.finished() {
				return
			}
			if l.keeper != nil && msec > 0 && !l.keeper.Park() {
				// The keeper's hold: REST or gRPC requests come one at a
				// time (rule 1). Not while draining: the shutdown wakes it.
				goyield()
				lastYield = Nanos()
				continue
			}
			atomic.AddUint64(&l.idleWaits, 1)
			n, errno = epollWait(l.epfd, l.events, -1, false)
			if l.keeper != nil {
				l.keeper.Unpark()
			}
		}
		if errno != 0 {
			if errno == syscall.EINTR {
				// A signal: most likely the runtime asking for this P (a
				// stop-the-world or a preemption), which a raw wait cannot
				// honour. Give the P up here (runtime_linux.go, rule 2).
				goyield()
				lastYield = Nanos()
				continue
			}
			l.es.opts.Log.Error("memcache epoll_wait", slog.Any("error", errno))
			l.closeAll()
			return
		}
		now := Nanos()
		lastEvent = now
		if afterSolo {
			l.pollWin.Observe(now - waitStart)
		}
		if l.busy.shouldYield(waitStart, now) { // rule 4
			schedYield()
			now = Nanos()
			l.busy.restart(now)
		}
		if now-lastYield >= yieldNanos { // rule 3
			goyield()
			now = Nanos()
			lastYield = now
		}
		// Requests read in this turn start now. One event that is not the
		// eventfd is one connection's input and nothing else.
		lone := n == 1 && int(l.events[0].Fd) != l.efd
		lastLone := l.loneFd
		l.loneFd = -1
		if lone {
			l.loneFd = int(l.events[0].Fd)
			l.soloTurn = l.loneFd == lastLone
			if l.soloTurn && l.es.opts.HaltPoll && l.pollWin.Nanos() > 0 { // rule 8
				l.es.keepLoopsAwake(l, now)
			}
		}
		l.turnBegan = now
		poll := l.soloTurn
		if poll && l.es.opts.HaltPoll { // rule 8
			l.lastSolo.Store(now)
			poll = l.es.othersServe(l, now)
		}
		l.proto.BeginTurn(now, lone, poll)
		for i := range n {
			ev := &l.events[i]
			fd := int(ev.Fd)
			if fd == l.efd {
				l.chores()
				continue
			}
			if fd < len(l.conns) {
				if c := l.conns[fd]; c != nil {
					l.handle(c, ev.Events)
				}
			}
		}
		l.readQueued()
		// What the turn answered at once goes before its backend round
		// trip, then what that answered; a refused ring's reads, served
		// in sendHeld, may leave the turn more to run.
		l.sendHeld()
		for l.endTurn() {
			l.sendHeld()
		}
	}
}

// endTurn runs what the turn's requests left for its end (Loop.EndTurn),
// and serves the connections that their completions woke, until nothing is
// left or the turn has lasted turnNanos; it reports whether it ran or
// served anything. A Wake meanwhile writes no eventfd: the loop serves what
// it woke here, or, past turnNanos, signals itself to serve it next turn.
func (l *epollLoop) endTurn() (ran bool) {
	for {
		l.ending.Store(true)
		more := l.proto.EndTurn()
		l.ending.Store(false)
		if !more && !l.missed.Load() {
			return ran
		}
		ran = true // ran, or serves what a Wake missed: replies to send
		l.mu.Lock()
		l.missed.Store(false)
		if Nanos()-l.turnBegan >= turnNanos {
			if len(l.woken) > 0 {
				l.signalLocked()
			}
			l.mu.Unlock()
			return ran
		}
		woken := l.woken
		l.woken = l.spare[:0]
		l.mu.Unlock()
		l.serveWoken(woken)
	}
}

// turnNanos bounds how long a turn goes on serving the connections its
// backend rounds woke. A client pipelining thousands of requests yields
// after commandsPerServe of them (protocols/memcache), and its round's
// completion wakes it; served again within the turn, it kept its loop
// from ever waiting again while it had input, and on NDB, a round trip a
// pass, another client on the loop waited hundreds of milliseconds
// (tests/e2e TestGarbageDoesNotDisturbOthers). Past turnNanos the loop
// waits again, and the eventfd brings it back to them beside the other
// connections' input.
const turnNanos = 1_000_000

// finished reports, once shutdown has begun, whether the loop has no
// connections left, closing those it may.
func (l *epollLoop) finished() bool {
	if !l.es.draining.Load() {
		return false
	}
	left := 0
	for _, c := range l.conns {
		if c == nil {
			continue
		}
		if l.es.force.Load() || !c.s.Owes() && len(c.out) == 0 {
			l.close(c)
			continue
		}
		c.s.Stop() // reads no more; closes after its replies
		left++
	}
	if left > 0 {
		return false
	}
	l.mu.Lock()
	adopt := l.adopt
	l.adopt = nil
	l.closed = true // later accepts and wakes find the loop gone
	l.mu.Unlock()
	for _, fd := range adopt {
		l.es.h.Unadmit()
		_ = syscall.Close(fd)
	}
	return true
}

// chores takes on new connections and serves those woken from elsewhere.
func (l *epollLoop) chores() {
	var b [8]byte
	_, _ = syscall.Read(l.efd, b[:])
	l.mu.Lock()
	l.signaled = false
	woken := l.woken
	l.woken = l.spare[:0]
	adopt := l.adopt
	l.adopt = nil
	l.mu.Unlock()
	for _, fd := range adopt {
		l.take(fd)
	}
	l.serveWoken(woken)
}

// serveWoken serves the connections taken from l.woken, whose slice then
// becomes the spare.
func (l *epollLoop) serveWoken(woken []*epollConn) {
	for i, c := range woken {
		woken[i] = nil
		c.queued.Store(false) // before serving: a yield queues it again
		if !c.gone {
			l.serve(c, nil)
		}
	}
	l.spare = woken[:0]
}

func (l *epollLoop) take(fd int) {
	c := &epollConn{loop: l, fd: fd, events: syscall.EPOLLIN}
	c.s = l.proto.Open(c)
	ev := syscall.EpollEvent{Events: c.events, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.es.opts.Log.Warn("memcache epoll_ctl", slog.Any("error", err))
		_ = syscall.Close(fd)
		c.s.Closed()
		return
	}
	for fd >= len(l.conns) {
		l.conns = append(l.conns, nil)
	}
	l.conns[fd] = c
}

// handle serves one readiness event of c.
func (l *epollLoop) handle(c *epollConn, events uint32) {
	if events&syscall.EPOLLOUT != 0 && len(c.out) > 0 {
		c.drain()
		if c.failed {
			l.close(c)
			return
		}
	}
	if events&(syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && c.events&syscall.EPOLLIN == 0 {
		l.close(c) // hung up while not being read: nothing can reach it now
		return
	}
	if events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && c.events&syscall.EPOLLIN != 0 {
		if l.ring != nil {
			l.reading = append(l.reading, c) // read and served in readQueued
			return
		}
		l.readNow(c)
		return
	}
	l.serve(c, nil)
}

// readNow reads c with one syscall and serves what came.
func (l *epollLoop) readNow(c *epollConn) {
	n, errno := readFd(c.fd, l.buf)
	switch {
	case errno == syscall.EAGAIN || errno == syscall.EINTR:
		l.serve(c, nil)
	case errno != 0 || n == 0: // error or end of input: memcached closes too
		l.close(c)
	default:
		l.serve(c, l.buf[:n])
	}
}

// serve has c's session serve its input, with data just read, and send the
// replies whose turn has come, then sets which events c waits for.
func (l *epollLoop) serve(c *epollConn, data []byte) {
	c.resume = false
	l.turnRead += len(data)
	buf := data
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		buf = c.in
	}
	if len(buf) > 0 || c.s.Owes() {
		used := c.s.Serve(buf)
		rest := buf[used:]
		switch {
		case len(c.in) > 0:
			c.in = c.in[:copy(c.in, rest)]
		case len(rest) > 0:
			c.in = append(c.in[:0], rest...)
		}
		if len(c.in) == 0 && cap(c.in) > keepMax {
			c.in = nil // do not pin a huge value's buffer to an idle connection
		}
		c.s.Flush()
	}
	if !c.held {
		l.arm(c)
	}
}

// ringReadChunk is the least buffer a queued read gets: the loop's buffer
// is shared out among the turn's reads, loopEvents of them at most.
const ringReadChunk = 4 << 10

// readQueued runs the reads handle queued in the ring, as one syscall, and
// serves each connection with what it read.
func (l *epollLoop) readQueued() {
	switch len(l.reading) {
	case 0:
		return
	case 1:
		// One read is a plain syscall: an io_uring_enter costs more than
		// a read when it carries only one (bench/HISTORY.md, session 30).
		c := l.reading[0]
		l.reading[0] = nil
		l.reading = l.reading[:0]
		if !c.gone {
			l.readNow(c)
		}
		return
	}
	for i, c := range l.reading {
		// A connection closed since handle queued it (chores may close one)
		// is skipped here, where nothing can close another before the
		// enter: its fd number may already belong to a new socket.
		if !c.gone {
			l.ring.queueRecv(c.fd, l.readSlot(i), uint64(i), l.readDone)
		}
	}
	if !l.ring.run(l.readDone) {
		l.ringFailed()
	}
	for i := range l.reading {
		l.reading[i] = nil
	}
	l.reading = l.reading[:0]
}

// readSlot is the part of the loop's buffer that the turn's i-th queued
// read fills: the buffer shared out evenly among the turn's reads.
func (l *epollLoop) readSlot(i int) []byte {
	chunk := len(l.buf) / len(l.reading)
	return l.buf[i*chunk : (i+1)*chunk]
}

func (l *epollLoop) readDone(tag uint64, res int32) {
	c := l.reading[tag]
	if c.gone {
		return
	}
	switch {
	case res == -int32(syscall.EAGAIN) || res == -int32(syscall.EINTR):
		l.serve(c, nil)
	case res <= 0: // error or end of input: memcached closes too
		l.close(c)
	default:
		l.serve(c, l.readSlot(int(tag))[:res])
	}
}

// ringFailed gives the ring up: the kernel refused part of a batch, so the
// loop goes back to one syscall per operation. What ran has been reported;
// the queued reads are made again directly (a read that ran already finds
// nothing more, or the next bytes), and held replies drain directly.
func (l *epollLoop) ringFailed() {
	l.es.opts.Log.Warn("memcache: io_uring batch refused; one syscall per read and write from now on")
	ring := l.ring
	l.ring = nil
	l.buf = l.buf[:loopReadBuf]
	for _, c := range l.reading {
		if !c.gone {
			l.handle(c, syscall.EPOLLIN)
		}
	}
	ring.close()
}

// sendHeld sends the replies held back during the turn (see epollConn.Send),
// through the ring when there is one, and empties the turn's buffer.
func (l *epollLoop) sendHeld() {
	batched := l.ring != nil && len(l.held) > 1 // one send is a plain syscall, as one read is
	if batched {
		for i, c := range l.held {
			if b := c.unsent(); !c.gone && !c.failed && len(b) > 0 {
				l.ring.queueSend(c.fd, b, uint64(i), l.sendDone)
			}
		}
		if !l.ring.run(l.sendDone) {
			l.ringFailed()
			batched = false // what ran is reported; the rest drains directly
		}
	}
	for i, c := range l.held {
		l.held[i] = nil
		c.held = false
		if c.gone {
			continue
		}
		if !batched {
			c.drain()
		} else {
			c.unhold(false) // what the ring did not send
		}
		l.arm(c)
	}
	l.held = l.held[:0]
	l.turn = l.turn[:0]
	if cap(l.turn) > turnKeepMax {
		l.turn = nil
	}
	if want := min(l.turnWant, turnKeepMax); want > cap(l.turn) {
		// A reply outgrew the buffer: its encoder allocated and copied as
		// it grew, every time. Room for it from the next turn on.
		l.turn = make([]byte, 0, want)
	}
	l.turnWant = 0
}

func (l *epollLoop) sendDone(tag uint64, res int32) {
	c := l.held[tag]
	switch {
	case res >= 0:
		c.sent(int(res))
	case res == -int32(syscall.EAGAIN) || res == -int32(syscall.EINTR):
		// the rest goes when the socket has room (arm asks for EPOLLOUT)
	default:
		c.failed = true
	}
}

// arm closes c if it is done or failed, else sets the events it waits for.
func (l *epollLoop) arm(c *epollConn) {
	if c.failed || c.s.Closing() && !c.s.Owes() && len(c.out) == 0 {
		l.close(c)
		return
	}
	want := uint32(0)
	if !c.s.Closing() && len(c.in) <= MaxBuffered && len(c.out) <= MaxBuffered {
		want |= syscall.EPOLLIN // else its replies are not keeping up: stop reading
	}
	if len(c.out) > 0 {
		want |= syscall.EPOLLOUT
	} else if c.resume {
		c.resume = false
		c.Wake()
	}
	if want != c.events {
		c.events = want
		ev := syscall.EpollEvent{Events: want, Fd: int32(c.fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
			l.close(c)
		}
	}
}

// close ends c after a last try to send what it has.
func (l *epollLoop) close(c *epollConn) {
	if c.gone {
		return
	}
	c.drain()
	c.gone = true
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	_ = syscall.Close(c.fd)
	l.conns[c.fd] = nil
	c.in, c.out = nil, nil
	c.heldFrom, c.heldTo = 0, 0
	c.s.Closed()
}

func (l *epollLoop) closeAll() {
	for _, c := range l.conns {
		if c != nil {
			l.close(c)
		}
	}
}

// Output returns the free end of the loop's turn buffer: replies encoded
// there and held (Send) are sent from it when the turn ends, without a copy.
func (c *epollConn) Output() []byte {
	t := c.loop.turn
	return t[len(t):]
}

// Send holds b until the loop's turn ends (sendHeld), after every ready
// connection has been read and served. Replies sent as each request was
// served woke the client once per reply, often while the loop still had
// requests to serve; held to the turn's end they reach it together, and
// both sides spend less CPU per request (bench/HISTORY.md, tenth pass).
// What is held stays where Output put it, in the turn buffer; only output
// queued behind a slow reader's, or held by a connection whose replies no
// longer end the buffer, is copied to c.out. A send of heldReplyMax or more
// goes at once instead, once what is held or queued ahead of it has gone.
func (c *epollConn) Send(b []byte) {
	if c.failed || c.gone || len(b) == 0 {
		return
	}
	l := c.loop
	if len(b) >= heldReplyMax {
		if !l.inPlace(b) {
			l.turnWant = max(l.turnWant, len(l.turn)+len(b))
		}
		c.drain() // what is held or queued goes first
		if len(c.out) == 0 && !c.failed {
			n, ok := sendSome(c.fd, b)
			c.failed = !ok
			b = b[n:]
		}
		if c.failed {
			return
		}
		c.out = append(c.out, b...) // what the socket did not take
	} else {
		if c.heldTo > c.heldFrom && c.heldTo != len(l.turn) {
			c.unhold(false) // another connection's replies follow c's in the buffer
		}
		if len(c.out) > 0 {
			c.out = append(c.out, b...) // behind output an earlier turn left
		} else {
			if c.heldTo == c.heldFrom {
				c.heldFrom = len(l.turn)
			}
			if l.inPlace(b) {
				l.turn = l.turn[:len(l.turn)+len(b)]
			} else {
				l.turn = append(l.turn, b...)
			}
			c.heldTo = len(l.turn)
		}
	}
	if !c.held {
		c.held = true
		l.held = append(l.held, c)
	}
}

// inPlace reports whether b was appended to the free end of the turn
// buffer (Output), where it stays.
func (l *epollLoop) inPlace(b []byte) bool {
	t := l.turn
	return len(t) < cap(t) && len(b) <= cap(t)-len(t) && unsafe.SliceData(b) == &t[:len(t)+1][len(t)]
}

// unsent is what c has to send: its held replies, or its queued output.
func (c *epollConn) unsent() []byte {
	if c.heldTo > c.heldFrom {
		return c.loop.turn[c.heldFrom:c.heldTo]
	}
	return c.out
}

// unhold moves c's held replies out of the turn buffer: with send, what the
// socket takes now is sent; the rest is copied to c.out.
func (c *epollConn) unhold(send bool) {
	if c.heldTo == c.heldFrom {
		return
	}
	b := c.loop.turn[c.heldFrom:c.heldTo]
	c.heldFrom, c.heldTo = 0, 0
	if send && !c.failed {
		n, ok := sendSome(c.fd, b)
		c.failed = !ok
		b = b[n:]
	}
	if !c.failed && len(b) > 0 {
		c.out = append(c.out, b...)
	}
}

// drain sends what c has, until the socket is full.
func (c *epollConn) drain() {
	if c.failed {
		return
	}
	if c.heldTo > c.heldFrom {
		c.unhold(true)
		return
	}
	if len(c.out) == 0 {
		return
	}
	sent, ok := sendSome(c.fd, c.out)
	if !ok {
		c.failed = true
		return
	}
	c.sent(sent)
}

// sent drops the n bytes of unsent output the socket took.
func (c *epollConn) sent(n int) {
	if c.heldTo > c.heldFrom {
		c.heldFrom += n
		return
	}
	c.out = c.out[:copy(c.out, c.out[n:])]
	if len(c.out) == 0 && cap(c.out) > keepMax {
		c.out = nil
	}
}

// sendSome writes b until it is all sent or the socket is full, and returns
// the bytes sent; ok is false if the socket failed.
func sendSome(fd int, b []byte) (sent int, ok bool) {
	for sent < len(b) {
		n, errno := writeFd(fd, b[sent:])
		switch errno {
		case 0:
			sent += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			return sent, true
		default:
			return sent, false
		}
	}
	return sent, true
}

func (c *epollConn) Backlog() int { return len(c.out) + c.heldTo - c.heldFrom }

// WakeWhenSent: while output is queued, arm waits for EPOLLOUT, and that
// event serves what input is left; output all sent by then (at the turn's
// end) gets no event, so arm wakes the connection itself.
func (c *epollConn) WakeWhenSent() { c.resume = true }

// Wake asks the loop to serve c again; safe from any goroutine.
func (c *epollConn) Wake() {
	if c.queued.Swap(true) {
		return
	}
	l := c.loop
	l.mu.Lock()
	if !l.closed {
		l.woken = append(l.woken, c)
		// In endTurn the loop serves c itself, unless it has already
		// looked (missed, then ending, each read after the other's
		// write): then the eventfd.
		if !l.ending.Load() {
			l.signalLocked()
		} else if l.missed.Store(true); !l.ending.Load() {
			l.signalLocked()
		}
	}
	l.mu.Unlock()
}

// Shutdown stops accepting and lets every connection finish its queued
// replies, closing what is left when ctx ends.
func (es *epollServer) Shutdown(ctx context.Context) error {
	if !es.started.Load() {
		return nil
	}
	es.closeListeners()
	es.accW.Wait()
	es.draining.Store(true)
	es.signalAll()
	done := make(chan struct{})
	go func() { es.loopW.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		es.force.Store(true)
		es.signalAll()
		<-done
		return ctx.Err()
	}
}

// keepLoopsAwake has the loops other than solo poll until haltHoldNanos
// from now (rule 8), waking them if they might be asleep.
func (es *epollServer) keepLoopsAwake(solo *epollLoop, now int64) {
	if es.soloUntil.Swap(now+haltHoldNanos) > now {
		return
	}
	for _, l := range es.loops {
		if l != solo {
			l.mu.Lock()
			l.signalLocked()
			l.mu.Unlock()
		}
	}
}

// othersServe reports whether a loop other than l began a solo turn
// within haltHoldNanos of now: then it is serving its own client, not
// polling for l's (rule 8).
func (es *epollServer) othersServe(l *epollLoop, now int64) bool {
	for _, o := range es.loops {
		if o != l && now-o.lastSolo.Load() < haltHoldNanos {
			return true
		}
	}
	return false
}

func (es *epollServer) signalAll() {
	for _, l := range es.loops {
		l.mu.Lock()
		l.signalLocked()
		l.mu.Unlock()
	}
}
