package e2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDispatcherEndToEnd runs the real binary on 4 simulated data nodes with a
// simulated round trip, so the dispatcher's lanes are on: a 100-key
// multi-get costs one round trip, its epoll loop's turn flight with every
// node's keys, concurrent clients share round trips (coalescing), and every
// answer is right.
func TestDispatcherEndToEnd(t *testing.T) {
	s := startServer(t, "--nodes", "4", "--partitions", "16", "--simulated-round-trip", "200us")
	mc := newClient(t, s.memcacheAddr)
	var keys []string
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("d:%d", i)
		keys = append(keys, k)
		require.NoError(t, mc.Set(&memcache.Item{Key: k, Value: []byte("v" + k)}))
	}
	metrics := func() []sample { _, b := s.httpGet(t, "/metrics"); return parseMetrics(t, b) }
	m0 := metrics()
	before := metricSum(m0, "ndbgate_backend_round_trips_total", nil)
	onCaller := metricSum(m0, "ndbgate_backend_flights_on_caller_total", nil)
	got, err := mc.GetMulti(keys)
	require.NoError(t, err)
	require.Len(t, got, 100)
	for _, k := range keys {
		assert.Equal(t, "v"+k, string(got[k].Value))
	}
	m1 := metrics()
	trips := metricSum(m1, "ndbgate_backend_round_trips_total", nil) - before
	assert.Equal(t, 1.0, trips, "a 100-key get is one turn flight")
	nodes := 0
	for _, x := range m1 {
		if x.name == "ndbgate_backend_node_ops_total" &&
			x.value > metricSum(m0, x.name, map[string]string{"node": x.labels["node"]}) {
			nodes++
		}
	}
	assert.GreaterOrEqual(t, nodes, 2, "keys spread over several nodes, in the one flight")
	if liveCluster() != "" {
		assert.Equal(t, 1.0, metricSum(m1, "ndbgate_backend_flights_on_caller_total", nil)-onCaller,
			"run by the epoll loop")
	}

	coalesced0 := metricSum(metrics(), "ndbgate_backend_coalesced_rounds_total", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c := memcache.New(s.memcacheAddr)
			c.Timeout = ioTimeout
			defer c.Close()
			for i := 0; i < 20; i++ {
				k := keys[(g*7+i)%100]
				it, err := c.Get(k)
				if err != nil || string(it.Value) != "v"+k {
					errs <- fmt.Errorf("get %s: %v", k, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Positive(t, metricSum(metrics(), "ndbgate_backend_coalesced_rounds_total", nil)-coalesced0,
		"concurrent single-key gets share round trips")
	m := metrics()
	for _, name := range []string{"ndbgate_backend_flight_ops", "ndbgate_backend_partition_hint_ops_total",
		"ndbgate_backend_retries_total", "ndbgate_backend_inflight_ops", "ndbgate_backend_node_ops_total"} {
		assert.True(t, hasMetric(m, name), "metric %s exported", name)
	}
}
