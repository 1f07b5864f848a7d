//go:build linux

package procs

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withKeeperTimes runs f with the keepers' hold and sleep set for a test,
// and no request on record. A standalone keeper must be started and
// stopped inside f, so that its goroutine reads them only in between.
func withKeeperTimes(hold, tick time.Duration, f func()) {
	h, tk := keepNanos, keepTickNanos
	keepNanos, keepTickNanos = int64(hold), int64(tick)
	lastAPI.Store(-int64(time.Hour))
	lastOverlap.Store(-int64(time.Hour))
	defer func() { keepNanos, keepTickNanos = h, tk }()
	f()
}

// request is a whole REST or gRPC request, as the front ends record one.
func request() {
	RequestBegan()
	RequestEnded()
}

func keeperParked() bool {
	k := current.Load()
	return k != nil && k.parked.Load()
}

// The protocol a memcache loop follows: it may park while no request came
// within the hold, a request wakes it once, and a request just before it
// parks keeps it holding.
func TestKeeperParksAndIsWoken(t *testing.T) {
	withKeeperTimes(50*time.Millisecond, time.Millisecond, func() {
		var wakes atomic.Int32
		k := RegisterKeeper(func() { wakes.Add(1) })
		require.NotNil(t, k)
		defer k.Unregister()
		assert.Nil(t, RegisterKeeper(func() {}), "one keeper at a time")

		assert.False(t, Requested())
		require.True(t, k.Park(), "no request: wait")
		request()
		assert.Equal(t, int32(1), wakes.Load(), "a request wakes the parked keeper")
		request()
		lastAPI.Store(monoNanos() - 2*touchNanos) // a later request, past touchNanos
		request()
		assert.Equal(t, int32(1), wakes.Load(), "once")
		assert.True(t, Requested())
		assert.False(t, k.Park(), "a request within the hold: hold on")
		assert.False(t, k.parked.Load())

		time.Sleep(60 * time.Millisecond)
		assert.False(t, Requested())
		require.True(t, k.Park())
		k.Unpark() // its wait ended on its own
		request()
		assert.Equal(t, int32(1), wakes.Load(), "an unparked keeper is not woken")

		// Requests at once: the keeper does not hold for them, and they
		// do not wake it.
		time.Sleep(60 * time.Millisecond)
		require.True(t, k.Park())
		RequestBegan()
		require.Equal(t, int32(2), wakes.Load(), "the first request wakes it")
		RequestBegan() // beside the first
		RequestEnded()
		RequestEnded()
		assert.False(t, Requested(), "requests at once: no hold")
		require.True(t, k.Park(), "it may wait again")
		time.Sleep(2 * time.Duration(touchNanos))
		request()
		assert.Equal(t, int32(2), wakes.Load(), "a request soon after an overlap does not wake it")
		assert.False(t, Requested())
		assert.Zero(t, inFlight.Load())
	})
	assert.Nil(t, current.Load())
}

// The standalone keeper holds its own P while requests come, parks once
// they stop (holding none), and a request wakes it again. Its P is
// reserved while it runs, and given back when it stops.
func TestStandaloneKeeper(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	withKeeperTimes(50*time.Millisecond, time.Millisecond, func() {
		before := Reserved()
		stop := StartKeeper()
		assert.Equal(t, before+1, Reserved(), "the keeper reserves its P")
		assert.GreaterOrEqual(t, runtime.GOMAXPROCS(0), Reserved()+1)
		StartKeeper()() // a second keeper is refused; its stop does nothing
		assert.Equal(t, before+1, Reserved())

		require.Eventually(t, keeperParked, 2*time.Second, time.Millisecond, "no request: the keeper parks")
		request()
		require.Eventually(t, func() bool { return !keeperParked() }, time.Second, time.Millisecond, "a request wakes it")
		for range 5 { // requests keep it holding
			time.Sleep(20 * time.Millisecond)
			request()
			assert.False(t, keeperParked(), "parked while requests come")
		}
		require.Eventually(t, keeperParked, 2*time.Second, time.Millisecond, "parks again after the hold")

		stop()
		stop()
		assert.Equal(t, before, Reserved(), "the stop gives the P back")
		assert.Nil(t, current.Load())
	})
}

// A keeper in its raw sleep answers a stop-the-world at once: the
// runtime's signal cuts the sleep short and the keeper yields its P. With a
// 3 s sleep, a collection that waited for the sleep to end would take
// seconds.
func TestKeeperLetsTheWorldStop(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	withKeeperTimes(time.Minute, 3*time.Second, func() {
		stop := StartKeeper()
		request()
		time.Sleep(20 * time.Millisecond) // into its sleep
		require.False(t, keeperParked())
		for range 3 {
			start := time.Now()
			runtime.GC()
			assert.Less(t, time.Since(start), time.Second, "a collection waited for the keeper's sleep")
		}
		stop()
	})
}
