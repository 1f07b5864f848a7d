package memcache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// "stats reset" zeroes the counters that come from the driver, as
// memcached zeroes its own: evictions, reclaimed and get_expired count from
// the reset, as get_hits does. As in memcached, an item a command finds
// expired counts in get_expired, and one freed in the background in
// reclaimed.
func TestStatsResetZeroesDriverCounters(t *testing.T) {
	e := embedded.New(embedded.Config{Partitions: 2, Nodes: 1, MemoryLimit: 4 << 20, ReapInterval: 10 * time.Millisecond})
	t.Cleanup(func() { _ = e.Close() })
	addr, _ := startServerConfig(t, Config{}, e)
	s := newTextSession(t, addr)
	value := strings.Repeat("v", 10_000)
	fill := func(from, n int) {
		t.Helper()
		var req strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&req, "set k%d 0 0 %d noreply\r\n%s\r\n", i, len(value), value)
		}
		req.WriteString("mn\r\n")
		require.Equal(t, "MN\r\n", s.send(req.String(), 1))
	}
	// expire stores an item already expired and gets it in the same write.
	// The reaper may free it between the two; then the get misses and the
	// item counts in reclaimed instead, so expire tries again.
	expire := func() {
		t.Helper()
		for try := 0; ; try++ {
			expired, reclaimed := s.stat("get_expired"), s.stat("reclaimed")
			require.Equal(t, "STORED\r\nEND\r\n", s.send("set gone 0 -1 1\r\nx\r\nget gone\r\n", 2))
			if s.stat("get_expired") == expired+1 {
				return
			}
			require.Eventually(t, func() bool { return s.stat("reclaimed") > reclaimed }, 5*time.Second, time.Millisecond,
				"the get did not find the item expired, so the reaper freed it")
			require.Less(t, try, 20, "the reaper beat the get every time")
		}
	}
	reap := func() { // stored already expired and left to the reaper
		t.Helper()
		before := s.stat("reclaimed")
		require.Equal(t, "STORED\r\n", s.send("set old 0 -1 1\r\nx\r\n", 1))
		require.Eventually(t, func() bool { return s.stat("reclaimed") == before+1 }, 5*time.Second, 10*time.Millisecond)
	}
	fill(0, 1000) // 10 MB into 4 MiB
	expire()
	require.Positive(t, s.stat("evictions"))
	require.Equal(t, uint64(1), s.stat("get_expired"))
	reap()

	require.Equal(t, "RESET\r\n", s.send("stats reset\r\n", 1))
	assert.Zero(t, s.stat("evictions"))
	assert.Zero(t, s.stat("reclaimed"))
	assert.Zero(t, s.stat("store_no_memory"))
	assert.Zero(t, s.stat("get_expired"))

	fill(1000, 200)
	expire()
	assert.Positive(t, s.stat("evictions"), "counting again after the reset")
	assert.Equal(t, uint64(1), s.stat("get_expired"))
	reap()
}
