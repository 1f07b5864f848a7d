//go:build linux

package transport

// This file holds everything the epoll loops ask of the Go runtime beyond
// what ordinary Go code does. Nothing outside it makes a raw syscall; the
// link to the runtime's goyield and GOMAXPROCS are in internal/procs,
// which the NDB executors share.
//
// The contract. An epoll loop is a goroutine that behaves like a C event
// loop on its thread: it keeps its processor (P) while it waits, so that the
// runtime's monitor never takes the P away and hands it between threads on
// every wait. In return it promises:
//
//  1. Raw syscalls are bounded. epoll_pwait is raw (epollWait) for at most
//     rawWaitMillis; through a pause of up to holdNanos in its clients'
//     requests the loop yields (goyield) and waits raw again, keeping its
//     P; after that it waits as an ordinary syscall, which lets the
//     runtime take its P back: an idle server holds no P. A raw read or
//     write moves at most rawWriteMax bytes; larger writes are ordinary
//     syscalls, so a stop-the-world never waits behind a copy of megabytes.
//     The first loop is also the process's keeper (internal/procs): it
//     holds its P the same way while REST or gRPC requests come one at a
//     time, and until holdNanos after the last, so that those front ends,
//     which have no loops, never leave every P idle between two requests
//     and wake the runtime's monitor into 20 µs polls on each. A request
//     wakes it from its ordinary wait (procs.RequestBegan).
//     io_uring_enter is raw (uringEnter), but every operation it runs is
//     non-blocking and completes inside the call (uring_linux.go), so it
//     never waits for a socket.
//  2. Signals are answered. A stop-the-world or a preemption interrupts a
//     raw wait with a signal (EINTR); the loop then yields (goyield), so the
//     runtime gets its P at once.
//  3. The loop yields on its own. The runtime preempts a goroutine that has
//     run for 10 ms without rescheduling, and a raw wait is no reschedule; a
//     forced preemption moves the loop to the global run queue and another
//     thread. So a loop calls goyield every yieldNanos, which keeps it on
//     its own P's run queue and thread.
//  4. The loop shares its CPU. A loop whose waits have found work for
//     busyNanos straight offers its CPU to the kernel's other runnable tasks
//     (sched_yield), once, keeping its P: a client on the same cores is not
//     left waiting for the scheduler's tick.
//  5. One P is left over. Serving reserves a P per loop (internal/procs,
//     which the NDB driver also uses for its executors) and GOMAXPROCS is one
//     more than all reserved, so accepts, timers, completions and the REST
//     and gRPC servers always have a P. It is never lowered.
//  6. A busy loop polls before it sleeps. After a turn that read
//     spinTurnBytes or more (a pipelining client's load), the loop polls
//     without sleeping for up to spinNanos, offering its CPU between polls
//     (pollBriefly). On cores shared with the clients, a loop that slept
//     between heavy turns left the CPUs idle while each side waited for
//     the other's wake-up (7 % idle where memcached's left 0.5 %,
//     bench/RESULTS.md, session 25). A light turn (a request or two per
//     connection) sleeps at once: polling after those cost text at
//     pipeline 1 4-6 %.
//  7. A loop polls after a solo turn. With Options.BusyPoll
//     (memcache.busy_poll, auto: 50us, 100us with a cluster), a turn that
//     served one connection's input and nothing else, as the turn before
//     it did for the same connection, is followed by polling, as in rule
//     6: a client that sends one request at a time then finds the loop
//     awake, and no wake-up stands between its request and the read.
//     Clients taking turns on a loop make lone turns, not solo ones:
//     polling after every lone turn tripled p99 at 50 connections on 2
//     cores, the pollers holding the CPUs their clients waited for
//     (bench/HISTORY.md, session 40). The poll lasts the loop's window
//     (pollwindow), at most BusyPoll, which the waits after solo turns
//     size: a client that pauses longer than BusyPoll between requests
//     shrinks it to 0, and the loop sleeps at once, as without the poll.
//  8. The other loops stay awake for a solo client. With Options.HaltPoll
//     (memcache.halt_poll), while a loop serves a solo client whose window
//     (rule 7) is open, and for haltHoldNanos after its last solo turn, the
//     other loops poll rather than sleep, offering their CPUs between polls
//     (pollUntil), and yield their Ps every yieldNanos. On a KVM guest
//     where nobody polls before an idle vCPU halts (internal/hostidle),
//     each wake-up of a thread on a halted vCPU (the NDB executor's, a data
//     node's, the client's) waits for the hypervisor to run that vCPU
//     again; a polling loop keeps its vCPU running, and the woken thread
//     gets it at its poller's next sched_yield. Where the host polls for
//     the guest, the wake-ups are cheaper and the pollers only take CPU
//     from the threads they wait for. The first solo
//     turn after a pause wakes the other loops (their eventfds). It costs a
//     CPU per other loop while it lasts, so auto turns it on only with a
//     cluster, on such a VM, and with at most AutoHaltPollLoops loops
//     (config; bench/RESULTS.md, session 49). While the other loops only
//     poll for it (none has begun a solo turn of its own within
//     haltHoldNanos: othersServe), the solo client's answer is not polled
//     for (BeginTurn's poll, ndbclient.Batch.Poll): the loop sleeps in the
//     NDB call, and leaves its vCPU to the data nodes. Polling for it there
//     too left them no vCPU but at a poller's yield: one connection ran
//     1.12x the requests without that poll, at 0.84x the gateway CPU a
//     request, and its p99 fell under ndbmemcache's (session 50).
//
// Loops are not locked to their threads: a locked goroutine that is
// preempted hands its P to another thread and back, two wake-ups that wait
// for a CPU under load; unlocked, it simply resumes.
//
// Tests: runtime_linux_test.go checks that a collection's stop-the-world
// and a ticking goroutine are served within generous bounds while loops
// serve a flood, and that GOMAXPROCS leaves a P over.

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ndbgate/ndbgate/internal/procs"
)

// rawWaitMillis bounds a raw wait. A loop that finds nothing for this long
// yields (goyield) and waits again, raw, until holdNanos have passed
// without an event; then it is idle and waits on as an ordinary syscall.
const rawWaitMillis = 10

// holdNanos is how long a loop keeps its P through a pause in its clients'
// requests (rule 1). An ordinary syscall's return after the runtime's
// monitor fell into its deep sleep wakes the monitor into a millisecond or
// more of 20 µs polls: a client that paused 20 ms between requests cost
// about 1 ms of CPU a request, against memcached's 0.07 ms; holding the P
// through the pause, 0.18 ms. Each 10 ms of a pause held costs the loop
// and the monitor one wake-up each.
const holdNanos = 100_000_000

// epollWait waits up to msec milliseconds (-1: no limit) for events. raw
// keeps the P meanwhile (rule 1); otherwise the runtime may lend it out. It
// calls epoll_pwait with no signal mask, which is epoll_wait on every
// architecture (arm64 and riscv64 have no epoll_wait), and which a signal
// always interrupts (rule 2).
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

// readFd reads into b, at most rawWriteMax long, from a non-blocking socket.
func readFd(fd int, b []byte) (int, syscall.Errno) {
	b = b[:min(len(b), rawWriteMax)]
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), errno
}

// uringEnter is io_uring_enter(2), raw: it submits toSubmit operations and
// waits until minComplete have completed. Every operation is non-blocking
// (rule 1), so the wait is the kernel running them.
func uringEnter(fd int, toSubmit, minComplete uintptr, flags uintptr) (uintptr, syscall.Errno) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), toSubmit, minComplete, flags, 0, 0)
	return n, errno
}

// goyield is runtime.goyield, Gosched onto the current P's local run queue
// (rules 2 and 3), through internal/procs, which the NDB executors use too.
func goyield() { procs.Yield() }

// spinTurnBytes is the least a turn reads for its loop to poll before it
// sleeps, for up to spinNanos (rule 6).
const (
	spinTurnBytes = 8 << 10
	spinNanos     = 50_000
)

// pollBriefly polls epfd until it has events or limit nanoseconds have
// passed since start, offering the CPU to the kernel's other runnable tasks
// between polls (rules 6 and 7). The polls are raw and return at once.
func pollBriefly(epfd int, events []syscall.EpollEvent, start, limit int64) (int, syscall.Errno) {
	for {
		n, errno := epollWait(epfd, events, 0, true)
		if errno != 0 || n > 0 || Nanos()-start >= limit {
			return n, errno
		}
		schedYield()
	}
}

// pollUntil polls epfd until it has events, or until the Nanos in until or
// limit, whichever comes first, offering the CPU to the kernel's other
// runnable tasks between polls (rule 8). The polls are raw and return at
// once.
func pollUntil(epfd int, events []syscall.EpollEvent, until *atomic.Int64, limit int64) (int, syscall.Errno) {
	for {
		n, errno := epollWait(epfd, events, 0, true)
		if errno != 0 || n > 0 {
			return n, errno
		}
		if now := Nanos(); now >= limit || now >= until.Load() {
			return 0, 0
		}
		schedYield()
	}
}

// haltHoldNanos is how long the other loops keep polling after a solo
// client's last turn (rule 8): long enough to span the client's round trip
// to the data nodes and back, short enough that a client gone quiet stops
// the polls within a millisecond.
const haltHoldNanos = 1_000_000

// yieldNanos is how often a loop yields its P of its own accord (rule 3).
// Forced preemptions made the loops hop threads about 85 times a second
// under load (bench/HISTORY.md, ninth pass); goyield wakes nobody, and the
// same thread resumes the loop.
const yieldNanos = 2_000_000

// schedYield is sched_yield(2): the kernel runs its other runnable tasks on
// this CPU first, if any (rule 4). The thread keeps the loop's P meanwhile.
func schedYield() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// busyNanos is how long a loop runs without its wait ever sleeping before it
// offers its CPU (rule 4). Where clients share the cores (a sidecar beside
// its app, or memtier on the same machine), a loop that always finds more
// work would otherwise keep the CPU until the scheduler's tick preempts it,
// up to 4 ms at HZ=250, while a client with its replies waits for that same
// CPU. With nothing else runnable the yield returns at once. 1 ms was best
// when the loops made a read and a write per request (bench/HISTORY.md,
// tenth pass); batched through io_uring they serve more per ms, and 0.5 ms
// gives a lower p99 at the same CPU per request (twelfth pass).
const busyNanos = 500_000

// sleptNanos: a wait that took this long slept, or the loop lost its CPU
// meanwhile; a wait that finds events ready takes a few microseconds.
const sleptNanos = 30_000

// busyTracker tells a loop when to yield its CPU (see busyNanos).
type busyTracker struct {
	awakeSince int64 // Nanos of the last wait that slept
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

// defaultLoops is the processors the runtime had before any server raised
// GOMAXPROCS: GOMAXPROCS from the environment, else the CPUs this process may
// use (cgroup limits included).
var defaultLoops = max(1, runtime.GOMAXPROCS(0))

// DefaultLoops is how many epoll loops serve when Options.Loops is 0.
func DefaultLoops() int { return defaultLoops }

// keeper is the role the first loop takes for the REST and gRPC front ends
// (rule 1, internal/procs/keeper.go).
type keeper = procs.Keeper

// registerKeeper makes the loop whose wake this is the process's keeper,
// unless one is registered already (nil then).
func registerKeeper(wake func()) *keeper { return procs.RegisterKeeper(wake) }

// reserveProcs reserves a P for each of loops loops (rule 5, internal/procs).
// It returns the release.
func reserveProcs(loops int) (release func()) { return procs.Reserve(loops) }
