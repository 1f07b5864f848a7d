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

func observeBatch(b *Batch) {
	batchesTotal.Inc()
	batchOps.Observe(float64(len(b.Ops)))
}

// RegisterMetrics registers the backend metrics and the driver's engine gauges.
func RegisterMetrics(reg prometheus.Registerer, d Driver) {
	reg.MustRegister(batchOps, batchesTotal, &driverCollector{d: d})
}

var (
	descItems = prometheus.NewDesc("ndbgate_engine_items", "Live rows in the engine.", nil, nil)
	descBytes = prometheus.NewDesc("ndbgate_engine_bytes", "Bytes accounted against the engine memory limit.", nil, nil)
	descLimit = prometheus.NewDesc("ndbgate_engine_limit_bytes", "Engine memory limit in bytes (0 = none).", nil, nil)
	descEvict = prometheus.NewDesc("ndbgate_engine_evictions_total", "Rows evicted by LRU to make room.", nil, nil)
	descExp   = prometheus.NewDesc("ndbgate_engine_expired_total", "Expired rows reclaimed.", nil, nil)
	descOOM   = prometheus.NewDesc("ndbgate_engine_out_of_memory_total", "Writes refused because the memory limit was reached.", nil, nil)
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
}

func (c *driverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	ch <- prometheus.MustNewConstMetric(descItems, prometheus.GaugeValue, float64(s.Items))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(s.Bytes))
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(s.LimitBytes))
	ch <- prometheus.MustNewConstMetric(descEvict, prometheus.CounterValue, float64(s.Evictions))
	ch <- prometheus.MustNewConstMetric(descExp, prometheus.CounterValue, float64(s.Expired))
	ch <- prometheus.MustNewConstMetric(descOOM, prometheus.CounterValue, float64(s.OutOfMemory))
}
