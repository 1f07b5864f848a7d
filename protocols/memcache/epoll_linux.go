//go:build linux

package memcache

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// The epoll event loops serve the plain TCP and unix-socket listeners on
// Linux: one loop per processor, each a goroutine calling epoll, read and
// write directly. gnet (server.go), the portable fallback, yields the
// processor (runtime.Gosched) every time a poll finds nothing; that hands its
// loop between OS threads and wakes spinning ones for every few requests
// (bench/RESULTS.md, sixth and seventh passes), and gnet has no option to
// avoid it.
//
// A loop waits in epoll_wait as a raw syscall: it keeps its processor (P)
// while it sleeps, as a C event loop keeps its thread, so the runtime's
// monitor never takes the P away and hands it between threads on every wait.
// Only after rawWaitMillis with nothing to do does it wait as an ordinary
// syscall. Loops are not locked to their threads (see run). Three consequences
// are handled here:
//   - other goroutines (accepts, timers, the REST and gRPC servers) need a
//     processor of their own, so serving raises GOMAXPROCS to one more than
//     the loops of every running server (reserveProcs);
//   - a stop-the-world or a preemption interrupts the wait with a signal, and
//     the loop then yields so the runtime gets its P;
//   - the runtime preempts a goroutine it has not rescheduled for 10 ms, and a
//     raw wait is no reschedule, so a loop yields every yieldNanos itself.

// epollAvailable: Linux serves with the epoll loops by default.
const epollAvailable = true

const (
	loopReadBuf = 64 << 10 // one per loop: input is copied out only when a command is incomplete
	loopEvents  = 128
	// heldReplyMax is the largest output a connection holds until its loop's
	// turn ends (see epollConn.write); larger replies go at once rather than
	// be copied.
	heldReplyMax = 16 << 10
)

type epollServer struct {
	srv   *Server
	loops []*epollLoop
	lns   []net.Listener
	next  atomic.Uint32
	loopW sync.WaitGroup
	accW  sync.WaitGroup
	// force closes the connections at once; Server.draining alone lets each
	// send its replies first.
	force atomic.Bool
}

// epollLoop owns its connections: everything but mu's fields is touched only
// on the loop's goroutine.
type epollLoop struct {
	es    *epollServer
	epfd  int
	efd   int // eventfd: completions, yields and new connections wake the loop
	shard int
	conns []*epollConn // by fd
	// scratch is shared by the loop's connections (see loopScratch).
	scratch *loopScratch

	mu       sync.Mutex
	woken    []*epollConn // connections to serve again
	adopt    []int        // accepted sockets to take on
	signaled bool         // efd has been written and not yet read
	closed   bool         // efd is closed: no more signals

	busy   busyTracker
	spare  []*epollConn
	held   []*epollConn // connections whose replies go when the turn ends
	events []syscall.EpollEvent
	buf    []byte
	// ring, if the kernel allows it, runs a turn's reads and its held
	// replies as one syscall each (see batchRing); reading holds the
	// connections whose reads are queued in it.
	ring    *batchRing
	reading []*epollConn
}

type epollConn struct {
	loop   *epollLoop
	fd     int
	cs     *connState
	in     []byte // input not yet parsed
	out    []byte // output the socket did not take
	events uint32 // registered with epoll
	queued atomic.Bool
	failed bool // a write failed: close at the next chance
	gone   bool
	held   bool // in loop.held: has output to send when the turn ends
	// resume: serve stopped with input left while the client was not
	// reading; serve it again once the output has gone (arm).
	resume bool
}

// serveEpoll listens on addrs ("tcp" or "unix" network, address) and runs
// the loops until Shutdown.
func (s *Server) serveEpoll(addrs [][2]string) error {
	es := &epollServer{srv: s}
	for _, a := range addrs {
		ln, err := net.Listen(a[0], a[1])
		if err != nil {
			es.closeListeners()
			return err
		}
		es.lns = append(es.lns, ln)
	}
	s.setSocketMode()
	loops := s.cfg.Loops
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
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "memcache event loops", slog.String("kind", "epoll"),
		slog.Int("loops", len(es.loops)), slog.Bool("io_uring", rings == len(es.loops)))
	for _, l := range es.loops {
		es.loopW.Add(1)
		go l.run()
	}
	errc := make(chan error, len(es.lns))
	for _, ln := range es.lns {
		es.accW.Add(1)
		go func() {
			defer es.accW.Done()
			if err := es.accept(ln); err != nil {
				errc <- err
				go func() { _ = es.shutdown(context.Background()) }() // Serve returns err once drained
			}
		}()
	}
	s.epoll.Store(es)
	s.once.Do(func() { close(s.started) })
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
	l := &epollLoop{es: es, epfd: epfd, efd: int(efd), shard: shard,
		scratch: es.srv.newScratch(), events: make([]syscall.EpollEvent, loopEvents), buf: make([]byte, loopReadBuf)}
	if es.srv.cfg.BatchSyscalls {
		if r, err := newBatchRing(loopEvents); err == nil {
			l.ring = r
			l.buf = make([]byte, loopEvents*ringReadChunk)
		} else {
			es.srv.log.Debug("memcache: io_uring unavailable, one syscall per read and write", slog.Any("error", err))
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
			es.srv.log.Warn("memcache accept", slog.Any("error", err))
			return true
		}
		if !es.srv.admit() {
			_, _ = syscall.Write(fd, replyTooManyConns)
			_ = syscall.Close(fd)
			return true
		}
		l := es.loops[int(es.next.Add(1))%len(es.loops)]
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed { // shutting down
			es.srv.unadmit()
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
	// Not locked to its thread: a locked goroutine that is preempted (the
	// runtime does so every 10 ms to a loop that never blocks in the
	// scheduler) hands its P to another thread and back, two wake-ups that
	// wait for a CPU under load. Unlocked, it simply resumes.
	defer l.es.loopW.Done()
	defer l.closeFds()
	lastYield := monoNanos()
	for {
		// One wait per turn, as a C loop makes: a zero-timeout poll ahead of
		// every wait made a third of the epoll_wait calls and found nothing.
		// Shutdown wakes the loop through the eventfd (signalAll); from then
		// on it polls, to see at once when its last reply has gone.
		msec := rawWaitMillis
		if l.es.srv.draining.Load() {
			msec = 0
		}
		waitStart := monoNanos()
		n, errno := epollWait(l.epfd, l.events, msec, true)
		if errno == 0 && n == 0 {
			if l.finished() {
				return
			}
			n, errno = epollWait(l.epfd, l.events, -1, false)
		}
		if errno != 0 {
			if errno == syscall.EINTR {
				// A signal: most likely the runtime asking for this P (a
				// stop-the-world or a preemption), which a raw wait cannot
				// honour. Give the P up here.
				goyield()
				lastYield = monoNanos()
				continue
			}
			l.es.srv.log.Error("memcache epoll_wait", slog.Any("error", errno))
			l.closeAll()
			return
		}
		now := monoNanos()
		if l.busy.shouldYield(waitStart, now) {
			schedYield()
			now = monoNanos()
			l.busy.restart(now)
		}
		if now-lastYield >= yieldNanos { // before the runtime forces it (see yieldNanos)
			goyield()
			now = monoNanos()
			lastYield = now
		}
		l.scratch.now = now // requests read in this turn start now
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
		l.sendHeld()
	}
}

// yieldNanos is how often a loop yields its P of its own accord. The runtime
// preempts a goroutine that has run for 10 ms without being scheduled again,
// and a raw wait does not count as a reschedule. A forced preemption queues
// the loop on the global run queue and wakes an idle P's thread, which then
// takes the loop: under load the loops hopped threads about 85 times a
// second (bench/RESULTS.md, ninth pass). goyield queues the loop on its own
// P's run queue instead, wakes nobody, and the same thread resumes it.
const yieldNanos = 2_000_000

// busyNanos is how long a loop runs without its wait ever sleeping before it
// offers its CPU to the kernel's other runnable tasks (sched_yield), once,
// and starts counting again. Where clients share the cores (a sidecar beside
// its app, or memtier on the same machine), a loop that always finds more
// work would otherwise keep the CPU until the scheduler's tick preempts it,
// up to 4 ms at HZ=250, while a client with its replies waits for that same
// CPU. With nothing else runnable the yield returns at once. 1 ms was best
// when the loops made a read and a write per request (bench/RESULTS.md,
// tenth pass); batched through io_uring they serve more per ms, and 0.5 ms
// gives a lower p99 at the same CPU per request (twelfth pass).
const busyNanos = 500_000

// sleptNanos: a wait that took this long slept, or the loop lost its CPU
// meanwhile; a wait that finds events ready takes a few microseconds.
const sleptNanos = 30_000

// busyTracker tells a loop when to yield its CPU (see busyNanos).
type busyTracker struct {
	awakeSince int64 // monoNanos of the last wait that slept
}

// shouldYield reports whether a loop whose wait began at waitStart and
// returned at now has been busy for busyNanos; the caller then yields and
// restarts the count.
func (b *busyTracker) shouldYield(waitStart, now int64) bool {
	if now-waitStart >= sleptNanos || b.awakeSince == 0 {
		b.restart(now)
		return false
	}
	return now-b.awakeSince >= busyNanos
}

// restart counts the loop as off its CPU until now.
func (b *busyTracker) restart(now int64) { b.awakeSince = now }

// schedYield is sched_yield(2): the kernel runs its other runnable tasks on
// this CPU first, if any. The thread keeps the loop's P meanwhile.
func schedYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// goyield is runtime.goyield: Gosched onto the current P's local run queue.
// The runtime keeps its signature for linkname users (go.dev/issue/67401).
//
//go:linkname goyield runtime.goyield
func goyield()

// rawWaitMillis bounds a raw wait. A loop that finds nothing for this long
// is idle and waits on as an ordinary syscall, which lets the runtime take
// its P back, so an idle server costs no wake-ups and leaves every P to the
// rest of the program.
const rawWaitMillis = 10

// epollWait waits up to msec milliseconds (-1: no limit) for events. raw
// keeps the P meanwhile (see the file comment); otherwise the runtime may
// lend it out. It calls epoll_pwait with no signal mask, which is
// epoll_wait on every architecture (arm64 and riscv64 have no epoll_wait).
func epollWait(epfd int, events []syscall.EpollEvent, msec int, raw bool) (int, syscall.Errno) {
	p := uintptr(unsafe.Pointer(&events[0]))
	var r uintptr
	var errno syscall.Errno
	if raw {
		r, _, errno = syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), p, uintptr(len(events)), uintptr(msec), 0, 0)
	} else {
		r, _, errno = syscall.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), p, uintptr(len(events)), uintptr(msec), 0, 0)
	}
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// defaultLoops is the processors the runtime had before any server raised
// GOMAXPROCS: GOMAXPROCS from the environment, else the CPUs this process may
// use (cgroup limits included).
var defaultLoops = max(1, runtime.GOMAXPROCS(0))

var procs struct {
	sync.Mutex
	loops int // loops of every running epoll server
}

// reserveProcs counts loops more loops as running and raises GOMAXPROCS, if
// need be, to one more than all running loops, so that each loop can hold
// its P while it waits and one P is left for everything else. It returns the
// release. GOMAXPROCS is never lowered: another part of the program may have
// raised it too. Raising it stops the runtime from following later changes
// of the cgroup CPU limit (Go 1.25+); the loop count was fixed at start-up
// anyway.
func reserveProcs(loops int) (release func()) {
	procs.Lock()
	defer procs.Unlock()
	procs.loops += loops
	if need := procs.loops + 1; runtime.GOMAXPROCS(0) < need {
		runtime.GOMAXPROCS(need)
	}
	return func() {
		procs.Lock()
		procs.loops -= loops
		procs.Unlock()
	}
}

// finished reports, once shutdown has begun, whether the loop has no
// connections left, closing those it may.
func (l *epollLoop) finished() bool {
	if !l.es.srv.draining.Load() {
		return false
	}
	left := 0
	for _, c := range l.conns {
		if c == nil {
			continue
		}
		if l.es.force.Load() || len(c.cs.queue) == 0 && len(c.out) == 0 {
			l.close(c)
			continue
		}
		c.cs.closeAfter = true // reads no more; closes after its replies
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
		l.es.srv.unadmit()
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
	c.cs = l.es.srv.newConnState(c, l.shard, l.scratch)
	ev := syscall.EpollEvent{Events: c.events, Fd: int32(fd)}
	if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.es.srv.log.Warn("memcache epoll_ctl", slog.Any("error", err))
		_ = syscall.Close(fd)
		l.es.srv.release(c.cs)
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
	var data []byte
	if events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && c.events&syscall.EPOLLIN != 0 {
		if l.ring != nil {
			l.reading = append(l.reading, c) // read and served in readQueued
			return
		}
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(&l.buf[0])), uintptr(len(l.buf)))
		switch {
		case errno == syscall.EAGAIN || errno == syscall.EINTR:
		case errno != 0 || n == 0: // error or end of input: memcached closes too
			l.close(c)
			return
		default:
			data = l.buf[:n]
		}
	}
	l.serve(c, data)
}

// serve parses and starts what c's input holds, with data just read, flushes
// the replies whose turn has come and sets which events c waits for.
func (l *epollLoop) serve(c *epollConn, data []byte) {
	c.resume = false
	buf := data
	if len(c.in) > 0 {
		c.in = append(c.in, data...)
		buf = c.in
	}
	if len(buf) > 0 || len(c.cs.queue) > 0 {
		used := c.cs.serve(buf)
		if used > 0 {
			l.es.srv.m.stats.Add(l.shard, statBytesRead, uint64(used))
		}
		rest := buf[used:]
		switch {
		case len(c.in) > 0:
			c.in = c.in[:copy(c.in, rest)]
		case len(rest) > 0:
			c.in = append(c.in[:0], rest...)
		}
		if len(c.in) == 0 && cap(c.in) > 1<<20 {
			c.in = nil // do not pin a huge value's buffer to an idle connection
		}
		c.cs.flush()
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
	if len(l.reading) == 0 {
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
	l.es.srv.log.Warn("memcache: io_uring batch refused; one syscall per read and write from now on")
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

// sendHeld sends the replies held back during the turn (see epollConn.write),
// through the ring when there is one.
func (l *epollLoop) sendHeld() {
	if l.ring != nil {
		for i, c := range l.held {
			if !c.gone && !c.failed && len(c.out) > 0 {
				l.ring.queueSend(c.fd, c.out, uint64(i), l.sendDone)
			}
		}
		if !l.ring.run(l.sendDone) {
			l.ringFailed()
		}
	}
	for i, c := range l.held {
		l.held[i] = nil
		c.held = false
		if !c.gone {
			if l.ring == nil {
				c.drain()
			}
			l.arm(c)
		}
	}
	l.held = l.held[:0]
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
	if c.failed || c.cs.closeAfter && len(c.cs.queue) == 0 && len(c.out) == 0 {
		l.close(c)
		return
	}
	want := uint32(0)
	if !c.cs.closeAfter && len(c.in) <= maxStreamBuffer && len(c.out) <= maxStreamBuffer {
		want |= syscall.EPOLLIN // else its replies are not keeping up: stop reading
	}
	if len(c.out) > 0 {
		want |= syscall.EPOLLOUT
	} else if c.resume {
		c.resume = false
		c.wake()
	}
	if want != c.events {
		c.events = want
		ev := syscall.EpollEvent{Events: want, Fd: int32(c.fd)}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
			l.close(c)
		}
	}
}

// close ends c after a last try to send what it has queued.
func (l *epollLoop) close(c *epollConn) {
	if c.gone {
		return
	}
	if len(c.out) > 0 && !c.failed {
		c.drain()
	}
	c.gone = true
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	_ = syscall.Close(c.fd)
	l.conns[c.fd] = nil
	c.in, c.out = nil, nil
	l.es.srv.release(c.cs)
}

func (l *epollLoop) closeAll() {
	for _, c := range l.conns {
		if c != nil {
			l.close(c)
		}
	}
}

// write queues b to be sent when the loop's turn ends (sendHeld), after
// every ready connection has been read and served. Replies written as each
// request was served woke the client once per reply, often while the loop
// still had requests to serve; held to the turn's end they reach it
// together, and both sides spend less CPU per request (bench/RESULTS.md,
// tenth pass). A reply of heldReplyMax or more goes at once instead, once
// what is queued ahead of it has gone. Called only on the loop.
func (c *epollConn) write(b []byte) {
	if c.failed || c.gone || len(b) == 0 {
		return
	}
	if len(b) >= heldReplyMax {
		c.drain() // what is queued goes first
		if len(c.out) == 0 && !c.failed {
			n, ok := sendSome(c.fd, b)
			c.failed = !ok
			b = b[n:]
		}
		if c.failed {
			return
		}
	}
	c.out = append(c.out, b...)
	if !c.held {
		c.held = true
		c.loop.held = append(c.loop.held, c)
	}
}

// drain sends queued output until the socket is full.
func (c *epollConn) drain() {
	sent, ok := sendSome(c.fd, c.out)
	if !ok {
		c.failed = true
		return
	}
	c.sent(sent)
}

// sent drops the n bytes of queued output the socket took.
func (c *epollConn) sent(n int) {
	c.out = c.out[:copy(c.out, c.out[n:])]
	if len(c.out) == 0 && cap(c.out) > 1<<20 {
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

func (c *epollConn) backlog() int { return len(c.out) }

// wakeWhenSent: while output is queued, arm waits for EPOLLOUT, and that
// event serves what input is left; output all sent by then (at the turn's
// end) gets no event, so arm wakes the connection itself.
func (c *epollConn) wakeWhenSent() { c.resume = true }

// wake asks the loop to serve c again; safe from any goroutine.
func (c *epollConn) wake() {
	if c.queued.Swap(true) {
		return
	}
	l := c.loop
	l.mu.Lock()
	if !l.closed {
		l.woken = append(l.woken, c)
		l.signalLocked()
	}
	l.mu.Unlock()
}

// shutdown stops accepting and lets every connection finish its queued
// replies, closing what is left when ctx ends.
func (es *epollServer) shutdown(ctx context.Context) error {
	es.closeListeners()
	es.accW.Wait()
	es.srv.draining.Store(true)
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

func (es *epollServer) signalAll() {
	for _, l := range es.loops {
		l.mu.Lock()
		l.signalLocked()
		l.mu.Unlock()
	}
}
