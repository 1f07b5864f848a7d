package ndbclient

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the backend path, declared once.
var (
	batchOps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ndbgate_backend_batch_ops",
		Help:    "Operations per batch sent to the backend driver.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
	})
	batchesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ndbgate_backend_batches_total",
		Help: "Batches sent to the backend driver.",
	})
)

// Dispatcher metrics.
var (
	dispatchRoundTrips = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ndbgate_backend_round_trips_total",
		Help: "Driver round trips (rounds sent to the driver, coalesced ones counted once).",
	})
	dispatchRoundOps = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ndbgate_backend_round_ops",
		Help:    "Operations per driver round trip.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
	})
	dispatchCoalesced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ndbgate_backend_coalesced_requests_total",
		Help: "Requests that shared a round trip with an earlier queued request.",
	})
	dispatchHintOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_backend_partition_hint_ops_total",
		Help: "Transactions routed by a key's partition (hint=key) or without one (hint=none: scans).",
	}, []string{"hint"})
	dispatchHinted   = dispatchHintOps.WithLabelValues("key")
	dispatchUnhinted = dispatchHintOps.WithLabelValues("none")
	dispatchRetries  = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_backend_retries_total",
		Help: "Rounds sent again, by reason (temporary, unknown_result for read-only rounds).",
	}, []string{"reason"})
	dispatchInFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ndbgate_backend_inflight_ops",
		Help: "Operations admitted and not yet complete.",
	}, sumInFlight)
	dispatchOverloaded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ndbgate_backend_overloaded_total",
		Help: "Batches refused with Overloaded because too many operations were in flight.",
	})
	dispatchNodeOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_backend_node_ops_total",
		Help: "Operations sent to each data node (dispatcher lanes).",
	}, []string{"node"})
)

func init() {
	// Resolve the reason children so they show before the first retry.
	dispatchRetries.WithLabelValues("temporary")
	dispatchRetries.WithLabelValues("unknown_result")
}

func observeBatch(b *Batch) {
	batchesTotal.Inc()
	batchOps.Observe(float64(len(b.Ops)))
}

// RegisterMetrics registers the backend metrics and the driver's engine gauges.
func RegisterMetrics(reg prometheus.Registerer, d Driver) {
	reg.MustRegister(batchOps, batchesTotal, dispatchRoundTrips, dispatchRoundOps, dispatchCoalesced,
		dispatchHintOps, dispatchRetries, dispatchInFlight, dispatchOverloaded, dispatchNodeOps, &driverCollector{d: d})
}

var (
	descItems = prometheus.NewDesc("ndbgate_engine_items", "Live rows in the engine.", nil, nil)
	descBytes = prometheus.NewDesc("ndbgate_engine_bytes", "Bytes accounted against the engine memory limit.", nil, nil)
	descLimit = prometheus.NewDesc("ndbgate_engine_limit_bytes", "Engine memory limit in bytes (0 = none).", nil, nil)
	descEvict = prometheus.NewDesc("ndbgate_engine_evictions_total", "Rows evicted by LRU to make room.", nil, nil)
	descExp   = prometheus.NewDesc("ndbgate_engine_expired_total", "Expired rows reclaimed.", nil, nil)
	descOOM   = prometheus.NewDesc("ndbgate_engine_out_of_memory_total", "Writes refused because the memory limit was reached.", nil, nil)
	descNodes = prometheus.NewDesc("ndbgate_backend_data_nodes", "Data nodes of the backend.", nil, nil)
	descLive  = prometheus.NewDesc("ndbgate_backend_live_data_nodes", "Data nodes the driver can reach now; below ndbgate_backend_data_nodes during a node failure.", nil, nil)
	descConn  = prometheus.NewDesc("ndbgate_backend_connects_total", "Connections made to the cluster, including reconnects after a loss.", nil, nil)
)

// driverCollector reads DriverStats at scrape time, so the hot path pays nothing.
type driverCollector struct{ d Driver }

func (c *driverCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descItems
	ch <- descBytes
	ch <- descLimit
	ch <- descEvict
	ch <- descExp
	ch <- descOOM
	ch <- descNodes
	ch <- descLive
	ch <- descConn
}

func (c *driverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	ch <- prometheus.MustNewConstMetric(descItems, prometheus.GaugeValue, float64(s.Items))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(s.LimitBytes))
	ch <- prometheus.MustNewConstMetric(descEvict, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(descExp, prometheus.CounterValue, float64(s.Expired))
	ch <- prometheus.MustNewConstMetric(descOOM, prometheus.CounterValue, float64(s.OutOfMemory))
	ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(s.Nodes))
	ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(s.LiveNodes))
	ch <- prometheus.MustNewConstMetric(descConn, prometheus.CounterValue, float64(s.Connects))
}
