package procs

import (
	"sync"
	"sync/atomic"
	"time"
)

// A keeper holds a P while the REST and gRPC front ends serve, so that the
// runtime's monitor (sysmon) stays out of its deep sleep.
//
// Why. Those front ends have no event loops: between two requests every P
// may go idle, and sysmon then sleeps until a thread enters a syscall,
// which wakes it to poll every 20 µs for a millisecond (it bets that a
// program that woke it will block in syscalls again). A client sending one
// request at a time woke it on every request: on the embedded engine a
// REST KV get cost about 90 µs of CPU and 7 context switches
// (bench/HISTORY.md, session 43). The memcache loops never see this for
// their own clients: they hold their Ps through their clients' pauses
// (transport/runtime_linux.go, rule 1).
//
// Who. The first memcache epoll loop, when there is one (RegisterKeeper):
// the P it holds is reserved for it anyway. Without one, StartKeeper runs a
// goroutine that reserves a P of its own and holds it in raw sleeps of
// keepTickNanos, yielding after each, as a loop does.
//
// When. While requests come one at a time (Requested), and for keepNanos
// after the last; then the keeper parks (Park), holding nothing, and the
// next request wakes it (RequestBegan): an idle gateway wakes no more
// often than without one.
type Keeper struct {
	parked atomic.Bool
	wake   func()
}

// keepNanos is how long a keeper holds its P after a request: as long as
// the memcache loops hold theirs through a pause (holdNanos there).
var keepNanos = int64(100 * time.Millisecond)

// keepTickNanos bounds the standalone keeper's raw sleep. Under the
// runtime's 10 ms preemption mark, so that its yields keep it on its own P.
var keepTickNanos = int64(5 * time.Millisecond)

// touchNanos: RequestBegan stores a time only when what is stored is older,
// so that concurrent requests seldom write the same cache line.
const touchNanos = int64(time.Millisecond)

var (
	clockBase   = time.Now()
	lastAPI     atomic.Int64 // monoNanos of the latest request that stored it
	lastOverlap atomic.Int64 // of the latest request begun beside another that stored it
	inFlight    atomic.Int64 // requests begun and not ended
	current     atomic.Pointer[Keeper]
)

func monoNanos() int64 { return int64(time.Since(clockBase)) }

// RequestBegan records the start of a request of a front end without
// event loops of its own (REST, gRPC); RequestEnded its end. A keeper holds
// its P while such requests come one at a time; one that begins while
// another is in flight marks an overlap, and a keeper lets its P go for
// keepNanos after one: with several requests at once the Ps seldom all go
// idle, and a held P was one fewer for them (REST and gRPC at 16 clients
// on NDB lost 4-6 %, bench/HISTORY.md, session 43). It costs a clock read
// and an atomic add, and now and then a store, and after a keeper parked a
// wake.
func RequestBegan() {
	n := inFlight.Add(1)
	now := monoNanos()
	if n > 1 {
		if now-lastOverlap.Load() >= touchNanos {
			lastOverlap.Store(now)
		}
		return
	}
	if now-lastAPI.Load() < touchNanos {
		return
	}
	lastAPI.Store(now)
	if now-lastOverlap.Load() < keepNanos {
		return // the keeper would not hold for it
	}
	// After the store: a keeper that parked before it is woken here; one
	// that parks after it sees the time (Park checks it once parked).
	if k := current.Load(); k != nil && k.parked.Load() && k.parked.CompareAndSwap(true, false) {
		k.wake()
	}
}

// RequestEnded records the end of a request that RequestBegan recorded.
func RequestEnded() { inFlight.Add(-1) }

// Requested reports whether requests came within keepNanos, one at a
// time: a keeper holds its P meanwhile.
func Requested() bool {
	now := monoNanos()
	return now-lastAPI.Load() < keepNanos && now-lastOverlap.Load() >= keepNanos
}

// RegisterKeeper makes the caller the keeper, if there is none; wake must
// make a parked keeper look at Requested again soon, from any goroutine.
// It returns nil when a keeper is registered already.
func RegisterKeeper(wake func()) *Keeper {
	k := &Keeper{wake: wake}
	if !current.CompareAndSwap(nil, k) {
		return nil
	}
	return k
}

// Unregister ends k's turn as the keeper.
func (k *Keeper) Unregister() { current.CompareAndSwap(k, nil) }

// Park is called before the keeper waits holding no P. It reports whether
// to wait: false while requests come one at a time (Requested: hold on
// instead). After a true, a request calls wake, once.
func (k *Keeper) Park() bool {
	k.parked.Store(true)
	if Requested() {
		// A request before the store may not have seen it: do not wait.
		// If one did see it, its wake comes anyway, and costs one turn.
		k.parked.Store(false)
		return false
	}
	return true
}

// Parked reports whether k waits holding no P (for tests).
func (k *Keeper) Parked() bool { return k.parked.Load() }

// Unpark is called when the keeper's wait ended, woken or not.
func (k *Keeper) Unpark() { k.parked.Store(false) }

// StartKeeper starts a keeper goroutine with a reserved P of its own, if
// none is registered (an epoll loop registers first) and the platform has
// the raw sleep (keeper_linux.go). It returns the stop, which waits for the
// goroutine to end.
func StartKeeper() (stop func()) {
	if !keeperSupported {
		return func() {}
	}
	wake := make(chan struct{}, 1)
	k := RegisterKeeper(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if k == nil {
		return func() {}
	}
	release := Reserve(1)
	done, exited := make(chan struct{}), make(chan struct{})
	go k.run(wake, done, exited)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-exited
			k.Unregister()
			release()
		})
	}
}

func (k *Keeper) run(wake, done, exited chan struct{}) {
	defer close(exited)
	for {
		select {
		case <-done:
			return
		default:
		}
		if Requested() || !k.Park() {
			rawSleep(keepTickNanos)
			Yield()
			continue
		}
		select {
		case <-wake:
		case <-done:
			return
		}
		k.Unpark()
	}
}
