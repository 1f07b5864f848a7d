package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics parses the Prometheus text exposition format (enough of it for
// these tests: no escaped quotes or commas inside label values are needed).
func parseMetrics(t testing.TB, body string) []sample {
	t.Helper()
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var s sample
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			require.Greater(t, j, i, "bad metric line %q", line)
			s.name = line[:i]
			s.labels = map[string]string{}
			for _, kv := range strings.Split(line[i+1:j], ",") {
				if kv == "" {
					continue
				}
				k, v, ok := strings.Cut(kv, "=")
				require.True(t, ok, "bad label %q in %q", kv, line)
				s.labels[k] = strings.Trim(v, `"`)
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			require.GreaterOrEqual(t, len(f), 2, "bad metric line %q", line)
			s.name = f[0]
			rest = strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		require.NotEmpty(t, f, "no value in %q", line)
		v, err := strconv.ParseFloat(f[0], 64)
		require.NoError(t, err, "value in %q", line)
		s.value = v
		out = append(out, s)
	}
	return out
}

// metricSum adds the values of every sample called name whose labels include want.
func metricSum(samples []sample, name string, want map[string]string) float64 {
	sum := 0.0
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
			}
		}
		if match {
			sum += s.value
		}
	}
	return sum
}

func hasMetric(samples []sample, prefix string) bool {
	for _, s := range samples {
		if strings.HasPrefix(s.name, prefix) {
			return true
		}
	}
	return false
}

// TestHTTPEndpoints checks /healthz, /readyz and that /metrics reflects memcache
// traffic: request counts, engine items, connections and backend batches.
func TestHTTPEndpoints(t *testing.T) {
	s := startServer(t)

	code, _ := s.httpGet(t, "/healthz")
	assert.Equal(t, 200, code, "/healthz")
	code, body := s.httpGet(t, "/readyz")
	assert.Equal(t, 200, code, "/readyz")
	var ready struct {
		Status     string `json:"status"`
		DataNodes  int    `json:"data_nodes"`
		LiveNodes  int    `json:"live_data_nodes"`
		Partitions int    `json:"partitions"`
		Connects   int    `json:"connects"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&ready), body)
	assert.Equal(t, "ready", ready.Status, body)
	assert.Equal(t, ready.DataNodes, ready.LiveNodes, body)
	assert.Equal(t, 1, ready.Connects, body)
	// The tables in use (the default container's at least) have partitions.
	assert.GreaterOrEqual(t, ready.Partitions, 1, body)
	if liveCluster() == "" {
		assert.Equal(t, 1, ready.DataNodes, body)
	} else {
		assert.GreaterOrEqual(t, ready.DataNodes, 1, body)
	}
	code, _ = s.httpGet(t, "/no-such-page")
	assert.Equal(t, 404, code, "unknown path")

	metrics := func() []sample {
		code, body := s.httpGet(t, "/metrics")
		require.Equal(t, 200, code, "/metrics")
		return parseMetrics(t, body)
	}
	before := metrics()
	conns0 := metricSum(before, "ndbgate_connections_current", map[string]string{"protocol": "memcache"})
	req0 := metricSum(before, "ndbgate_requests_total", map[string]string{"protocol": "memcache"})

	c := dialRaw(t, s.memcacheAddr)
	const items = 25
	for i := 0; i < items; i++ {
		c.roundTrip(fmt.Sprintf("set http:%d 0 0 1\r\nx\r\n", i), "STORED\r\n")
	}
	var get strings.Builder
	var want strings.Builder
	get.WriteString("get")
	for i := 0; i < items; i++ {
		fmt.Fprintf(&get, " http:%d", i)
		fmt.Fprintf(&want, "VALUE http:%d 0 1\r\nx\r\n", i)
	}
	c.roundTrip(get.String()+"\r\n", want.String()+"END\r\n")
	c.roundTrip("get http:missing\r\n", "END\r\n")

	// Two more connections, each proven accepted by a reply.
	c2 := dialRaw(t, s.memcacheAddr)
	c2.expectSentinel()
	c3 := dialRaw(t, s.memcacheAddr)
	c3.expectSentinel()

	after := metrics()
	for _, name := range []string{
		"ndbgate_requests_total", "ndbgate_engine_items", "ndbgate_connections_current", "ndbgate_backend_batch_ops",
	} {
		assert.True(t, hasMetric(after, name), "/metrics has no %s", name)
	}
	req1 := metricSum(after, "ndbgate_requests_total", map[string]string{"protocol": "memcache"})
	assert.GreaterOrEqual(t, req1-req0, float64(items+2), "ndbgate_requests_total{protocol=\"memcache\"} grew by %v after %d commands", req1-req0, items+4)
	assert.GreaterOrEqual(t, metricSum(after, "ndbgate_engine_items", nil), float64(items), "ndbgate_engine_items")
	assert.Equal(t, conns0+3, metricSum(after, "ndbgate_connections_current", map[string]string{"protocol": "memcache"}),
		"ndbgate_connections_current{protocol=\"memcache\"} with 3 open connections")
	// A histogram has _count; otherwise the plain series must have moved.
	batchName := "ndbgate_backend_batch_ops"
	if hasMetric(after, batchName+"_count") {
		batchName += "_count"
	}
	assert.GreaterOrEqual(t, metricSum(after, batchName, nil), 1.0, "%s after traffic", batchName)

	// Closed connections are no longer counted.
	c.close()
	c2.close()
	c3.close()
	ok := waitFor(5*time.Second, func() bool {
		return metricSum(metrics(), "ndbgate_connections_current", map[string]string{"protocol": "memcache"}) == conns0
	})
	assert.True(t, ok, "ndbgate_connections_current did not return to %v after the connections closed", conns0)
}
