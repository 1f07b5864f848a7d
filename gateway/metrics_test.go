package gateway

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricRuns names each run's protocols apart: the metrics are the
// process's, and -count or -cpu runs a test again in the same process.
var metricRuns atomic.Int32

// A front end's sharded request metrics and the ordinary vectors export one
// family each, through one registry.
func TestShardedRequestMetricsShareFamilies(t *testing.T) {
	run := metricRuns.Add(1)
	loop, plain := fmt.Sprintf("test_loop%d", run), fmt.Sprintf("test_plain%d", run)
	reg := prometheus.NewRegistry()
	sharded := ShardedRequestMetrics(loop, []string{"get", "set"}, []string{"ok", "miss"})
	RegisterMetrics(reg, sharded)
	rc, rd := sharded.Counts, sharded.Durations
	Requests.WithLabelValues(plain, "get", "ok").Add(2)
	RequestDuration.WithLabelValues(plain, "get").Observe(0.001)
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
	assert.Equal(t, 2.0, counts[plain+"/get/ok"])
	assert.Equal(t, 3.0, counts[loop+"/set/miss"])
	assert.Contains(t, counts, loop+"/get/ok", "children are exported before their first request")
	assert.Equal(t, uint64(1), durations[plain+"/get"])
	assert.Equal(t, uint64(1), durations[loop+"/set"])
	assert.Equal(t, uint64(0), durations[loop+"/get"])
}

func TestShardedRequestMetricsOncePerProtocol(t *testing.T) {
	name := fmt.Sprintf("test_once%d", metricRuns.Add(1))
	ShardedRequestMetrics(name, []string{"get"}, []string{"ok"})
	assert.Panics(t, func() { ShardedRequestMetrics(name, []string{"get"}, []string{"ok"}) })
}
