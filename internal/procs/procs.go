// Package procs reserves the runtime's processors (Ps, GOMAXPROCS) for
// goroutines that keep one without running Go code: the memcache epoll loops,
// which wait in raw epoll_wait holding theirs, the NDB driver's
// executors, which spend their lives in cgo calls (waiting for work, waiting
// for the data nodes), and the keeper (keeper.go), which sleeps holding one
// while the REST and gRPC servers serve. A P held there is lost to the rest of the program, and
// when no P is idle the runtime's monitor (sysmon) takes a cgo caller's P
// back: it then polls every 20 µs and wakes threads to hand Ps round.
//
// GOMAXPROCS is kept at one more than all reserved, so that a P stays free
// for accepts, timers, completions and the REST and gRPC servers. It is
// never lowered: another part of the program may have raised it too. Raising
// it stops the runtime from following later changes of the cgroup CPU limit
// (Go 1.25+); loop and pool sizes are fixed at start-up anyway.
package procs

import (
	"runtime"
	"sync"
	_ "unsafe" // go:linkname
)

var reserved struct {
	sync.Mutex
	n int
}

// Reserve counts n more Ps as held and raises GOMAXPROCS, if need be, to one
// more than all held. It returns the release.
func Reserve(n int) (release func()) {
	reserved.Lock()
	defer reserved.Unlock()
	reserved.n += n
	if need := reserved.n + 1; runtime.GOMAXPROCS(0) < need {
		runtime.GOMAXPROCS(need)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			reserved.Lock()
			reserved.n -= n
			reserved.Unlock()
		})
	}
}

// Reserved is the number of Ps held now.
func Reserved() int {
	reserved.Lock()
	defer reserved.Unlock()
	return reserved.n
}

// Yield reschedules the calling goroutine onto its own P's local run queue,
// waking no other thread (runtime.goyield). A goroutine that holds a
// reserved P calls it every few milliseconds: it never blocks in Go, so
// otherwise the runtime's monitor sees it run on one scheduling tick for
// 10 ms and takes its P during its next wait, which resets the monitor to
// polling every 20 µs. runtime.Gosched does the same but wakes another
// thread to look for work each time. The runtime keeps goyield's signature
// for linkname users (go.dev/issue/67401).
//
//go:linkname Yield runtime.goyield
func Yield()
