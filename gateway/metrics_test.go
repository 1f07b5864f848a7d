package gateway

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A front end's sharded request metrics and the ordinary vectors export one
// family each, through one registry.
func TestShardedRequestMetricsShareFamilies(t *testing.T) {
	reg := prometheus.NewRegistry()
	sharded := ShardedRequestMetrics("test_loop", []string{"get", "set"}, []string{"ok", "miss"})
	RegisterMetrics(reg, sharded)
	rc, rd := sharded.Counts, sharded.Durations
	Requests.WithLabelValues("test_plain", "get", "ok").Add(2)
	RequestDuration.WithLabelValues("test_plain", "get").Observe(0.001)
	rc.Add(0, 1*2+1, 3)     // set, miss
	rd.Observe(1, 1, 2_000) // set: 2 µs

	mfs, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	durations := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			switch mf.GetName() {
			case requestsName:
				counts[l["protocol"]+"/"+l["command"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
			case durationName:
				durations[l["protocol"]+"/"+l["command"]] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	assert.Equal(t, 2.0, counts["test_plain/get/ok"])
	assert.Equal(t, 3.0, counts["test_loop/set/miss"])
	assert.Contains(t, counts, "test_loop/get/ok", "children are exported before their first request")
	assert.Equal(t, uint64(1), durations["test_plain/get"])
	assert.Equal(t, uint64(1), durations["test_loop/set"])
	assert.Equal(t, uint64(0), durations["test_loop/get"])
}

func TestShardedRequestMetricsOncePerProtocol(t *testing.T) {
	ShardedRequestMetrics("test_once", []string{"get"}, []string{"ok"})
	assert.Panics(t, func() { ShardedRequestMetrics("test_once", []string{"get"}, []string{"ok"}) })
}
