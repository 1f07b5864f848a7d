package procs

import (
	"runtime"
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
