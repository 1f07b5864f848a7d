package shardmetrics

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gather(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func TestCounterVecCollects(t *testing.T) {
	reg := prometheus.NewRegistry()
	v := NewCounterVec("x_requests_total", "h", []string{"command"}, prometheus.Labels{"protocol": "mc"},
		[][]string{{"get"}, {"set"}})
	reg.MustRegister(v)
	v.Add(0, 0, 3)
	v.Add(1, 0, 4)
	v.Add(shards+1, 1, 5) // shard numbers wrap
	v.Add(-3, 1, 0)       // and negative ones are safe

	got := map[string]float64{}
	for _, m := range gather(t, reg, "x_requests_total") {
		l := labels(m)
		got[l["protocol"]+"/"+l["command"]] = m.GetCounter().GetValue()
	}
	assert.Equal(t, map[string]float64{"mc/get": 7, "mc/set": 5}, got)
}

func TestHistogramBucketsAndSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewHistogramVec("x_seconds", "h", []float64{1e-6, 1e-3}, 1e9, []string{"command"}, nil,
		[][]string{{"get"}, {"set"}})
	reg.MustRegister(h)
	h.Observe(0, 0, 500)     // 0.5 µs: first bucket
	h.Observe(1, 0, 1000)    // exactly 1 µs: first bucket (upper bounds are inclusive)
	h.Observe(2, 0, 2000)    // second bucket
	h.Observe(0, 0, 5e9)     // +Inf
	h.Observe(0, 1, 1000000) // set: 1 ms, second bucket
	h.ObserveN(1, 1, 2e9, 3) // set: three of 2 s, +Inf

	for _, m := range gather(t, reg, "x_seconds") {
		hist := m.GetHistogram()
		switch labels(m)["command"] {
		case "get":
			assert.Equal(t, uint64(4), hist.GetSampleCount())
			assert.InDelta(t, 5.0000035, hist.GetSampleSum(), 1e-9)
			require.Len(t, hist.GetBucket(), 2)
			assert.Equal(t, uint64(2), hist.GetBucket()[0].GetCumulativeCount())
			assert.Equal(t, uint64(3), hist.GetBucket()[1].GetCumulativeCount())
		case "set":
			assert.Equal(t, uint64(4), hist.GetSampleCount())
			assert.InDelta(t, 6.001, hist.GetSampleSum(), 1e-9)
			assert.Equal(t, uint64(0), hist.GetBucket()[0].GetCumulativeCount())
			assert.Equal(t, uint64(1), hist.GetBucket()[1].GetCumulativeCount())
		default:
			t.Fatalf("unexpected child %v", labels(m))
		}
	}
}

// Run with -race: every shard written from its own goroutine while a scrape
// reads, and no count is lost.
func TestConcurrentShards(t *testing.T) {
	c := NewCounters(3)
	v := NewCounterVec("x_total", "h", nil, nil, [][]string{nil})
	reg := prometheus.NewRegistry()
	reg.MustRegister(v)
	const per = 10000
	var wg sync.WaitGroup
	for s := 0; s < shards+2; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				c.Add(s, i%3, 1)
				v.Add(s, 0, 1)
			}
		}()
	}
	_, err := reg.Gather()
	require.NoError(t, err)
	wg.Wait()
	assert.Equal(t, uint64((shards+2)*per), c.Value(0)+c.Value(1)+c.Value(2))
	assert.Equal(t, float64((shards+2)*per), gather(t, reg, "x_total")[0].GetCounter().GetValue())
	c.Reset()
	assert.Zero(t, c.Value(0)+c.Value(1)+c.Value(2))
}

// Shards must not share cache lines: each shard's cells start on a line of
// their own, and they stay inside the slice.
func TestShardsOnSeparateLines(t *testing.T) {
	for _, width := range []int{1, 3, 8, 120} {
		c := newCells(width)
		assert.Equal(t, 0, c.stride%(cacheLine/8))
		assert.GreaterOrEqual(t, c.stride, width)
		for s := 0; s < shards; s++ {
			assert.Zero(t, uintptr(unsafe.Pointer(c.at(s, 0)))%cacheLine, "width %d shard %d", width, s)
			_ = c.at(s, width-1) // in range, or this panics
		}
	}
	assert.Equal(t, SharedShard, 0)
	assert.NotEqual(t, SharedShard, LoopShard(0))
	assert.Equal(t, LoopShard(0), LoopShard(shards-1), "loops beyond the shards wrap onto the loop shards, never the shared one")
}
