package procs

import (
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReserveKeepsOnePOver(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	before, cpus := Reserved(), runtime.GOMAXPROCS(0)
	loops := Reserve(cpus)
	assert.Equal(t, before+cpus, Reserved())
	assert.GreaterOrEqual(t, runtime.GOMAXPROCS(0), Reserved()+1, "a P over the loops")
	executors := Reserve(3)
	assert.GreaterOrEqual(t, runtime.GOMAXPROCS(0), Reserved()+1, "a P over the loops and executors")
	raised := runtime.GOMAXPROCS(0)
	executors()
	executors() // a second release changes nothing
	loops()
	assert.Equal(t, before, Reserved())
	assert.Equal(t, raised, runtime.GOMAXPROCS(0), "never lowered")
}

// Yield lets another goroutine of the same P run: with one P, a goroutine
// that yields in a loop sees another one's write within a few yields. A
// loop that did not reschedule would spin until the runtime preempted it,
// about 10 ms and millions of iterations later.
func TestYieldRunsTheNextGoroutine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var ran atomic.Bool
	go ran.Store(true)
	yields := 0
	for !ran.Load() {
		Yield()
		yields++
		if yields > 1000 {
			t.Fatal("1000 yields and the other goroutine never ran")
		}
	}
}
