package ndbclient

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Metrics of the backend path, declared once.
var (
	// The per-request ones are sharded by the caller's event loop
	// (Batch.Shard): see internal/shardmetrics.
	batchOps = shardmetrics.NewHistogramVec("ndbgate_backend_batch_ops",
		"Operations per batch sent to the backend driver.", opsBuckets, 1, nil, nil, [][]string{nil})
	batchesTotal = shardmetrics.NewCounterVec("ndbgate_backend_batches_total",
		"Batches sent to the backend driver.", nil, nil, [][]string{nil})
)

var opsBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// Dispatcher metrics.
var (
	dispatchRoundTrips = shardmetrics.NewCounterVec("ndbgate_backend_round_trips_total",
		"Flights: driver round trips, each of one or more rounds of one data node.", nil, nil, [][]string{nil})
	dispatchFlightOps = shardmetrics.NewHistogramVec("ndbgate_backend_flight_ops",
		"Operations per flight (driver round trip).", opsBuckets, 1, nil, nil, [][]string{nil})
	dispatchCoalesced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ndbgate_backend_coalesced_rounds_total",
		Help: "Rounds that shared a flight with an earlier queued round (coalescing).",
	})
	dispatchHintOps = shardmetrics.NewCounterVec("ndbgate_backend_partition_hint_ops_total",
		"Transactions routed by a key's partition (hint=key) or without one (hint=none: scans).",
		[]string{"hint"}, nil, [][]string{{"key"}, {"none"}})
	dispatchRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_backend_retries_total",
		Help: "Rounds sent again, by reason (temporary; unknown_result for read-only rounds; not_sent, the driver's refusals to send, tried past the retry limit for up to a second).",
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
		Help: "Operations sent to each data node (through its lane, or in a turn flight).",
	}, []string{"node"})
)

func init() {
	// Resolve the reason children so they show before the first retry.
	dispatchRetries.WithLabelValues("temporary")
	dispatchRetries.WithLabelValues("unknown_result")
	dispatchRetries.WithLabelValues("not_sent")
}

// Children of dispatchHintOps.
const (
	hintKey = iota
	hintNone
)

func observeBatch(b *Batch) {
	batchesTotal.Add(b.Shard, 0, 1)
	batchOps.Observe(b.Shard, 0, int64(len(b.Ops)))
}

func observeFlight(shard, ops int) {
	dispatchRoundTrips.Add(shard, 0, 1)
	dispatchFlightOps.Observe(shard, 0, int64(ops))
}

// RegisterMetrics registers the backend metrics and the driver's engine gauges.
func RegisterMetrics(reg prometheus.Registerer, d Driver) {
	reg.MustRegister(batchOps, batchesTotal, dispatchRoundTrips, dispatchFlightOps, dispatchCoalesced,
		dispatchHintOps, dispatchRetries, dispatchInFlight, dispatchOverloaded, dispatchNodeOps, &driverCollector{d: d})
}

var (
	descItems = prometheus.NewDesc("ndbgate_engine_items", "Live rows in the engine.", nil, nil)
	descBytes = prometheus.NewDesc("ndbgate_engine_bytes", "Bytes accounted against the engine memory limit.", nil, nil)
	descLimit = prometheus.NewDesc("ndbgate_engine_limit_bytes", "Engine memory limit in bytes (0 = none).", nil, nil)
	descEvict = prometheus.NewDesc("ndbgate_engine_evictions_total", "Rows evicted by LRU to make room.", nil, nil)
	descExp   = prometheus.NewDesc("ndbgate_engine_expired_total", "Expired rows: found by a command, reaped or evicted.", nil, nil)
	descOOM   = prometheus.NewDesc("ndbgate_engine_out_of_memory_total", "Writes refused because the memory limit was reached.", nil, nil)
	descNodes = prometheus.NewDesc("ndbgate_backend_data_nodes", "Data nodes of the backend.", nil, nil)
	descLive  = prometheus.NewDesc("ndbgate_backend_live_data_nodes", "Data nodes the driver can reach now; below ndbgate_backend_data_nodes during a node failure.", nil, nil)
	descConn  = prometheus.NewDesc("ndbgate_backend_connects_total", "Attachments to the cluster: the first, and one per recovery after every data node was lost.", nil, nil)
	descHint  = prometheus.NewDesc("ndbgate_backend_hinted_transactions_total", "Transactions started with their key as the TC hint (NDB).", nil, nil)
	descParts = prometheus.NewDesc("ndbgate_backend_partitions", "Partitions of the tables in use, summed (NDB: fragments; they change when a table is reorganised).", nil, nil)
	descRemad = prometheus.NewDesc("ndbgate_backend_connections_remade_total", "Pooled NDB connections made again to learn data nodes added to the cluster.", nil, nil)
	descRedes = prometheus.NewDesc("ndbgate_backend_tables_redescribed_total", "Tables described again after NDB reported them altered or reorganised.", nil, nil)
	descLone  = prometheus.NewDesc("ndbgate_backend_flights_on_caller_total", "Flights the driver ran on the goroutine of a lone request (the only work of its event loop) instead of handing them to another thread (NDB).", nil, nil)
	descPoll  = prometheus.NewDesc("ndbgate_backend_flights_polled_total", "Round trips of lone flights that polled the cluster's sockets for their answer before sleeping (ndb.busy_poll; NDB).", nil, nil)
	descOwed  = prometheus.NewDesc("ndbgate_backend_batches_owed_total", "Batches a round trip returned without because their data node had not answered within ndb.flight_wait; each completes when the node answers (NDB).", nil, nil)
	descOnPri = prometheus.NewDesc("ndbgate_backend_transactions_on_primary_total", "Hinted transactions whose TC ran on the data node holding the key's primary replica (NDB).", nil, nil)
	descLogB  = prometheus.NewDesc("ndbgate_engine_log_bytes", "Bytes of the embedded engine's log since its last snapshot (0 without a data dir).", nil, nil)
	descSnaps = prometheus.NewDesc("ndbgate_engine_snapshots_total", "Snapshots the embedded engine wrote to its data dir.", nil, nil)
	descLogE  = prometheus.NewDesc("ndbgate_engine_log_write_errors_total", "Failed writes or fsyncs of the embedded engine's log; writes are refused while it fails.", nil, nil)
	descLost  = prometheus.NewDesc("ndbgate_engine_rows_lost_total", "Rows a rollback could not put back because the OS refused memory for them (embedded engine).", nil, nil)
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
	ch <- descHint
	ch <- descOnPri
	ch <- descParts
	ch <- descRemad
	ch <- descRedes
	ch <- descLone
	ch <- descPoll
	ch <- descOwed
	ch <- descLogB
	ch <- descSnaps
	ch <- descLogE
	ch <- descLost
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
	ch <- prometheus.MustNewConstMetric(descHint, prometheus.CounterValue, float64(s.HintedTransactions))
	ch <- prometheus.MustNewConstMetric(descOnPri, prometheus.CounterValue, float64(s.TransactionsOnPrimary))
	ch <- prometheus.MustNewConstMetric(descParts, prometheus.GaugeValue, float64(s.Partitions))
	ch <- prometheus.MustNewConstMetric(descRemad, prometheus.CounterValue, float64(s.ConnectionsRemade))
	ch <- prometheus.MustNewConstMetric(descRedes, prometheus.CounterValue, float64(s.TablesRedescribed))
	ch <- prometheus.MustNewConstMetric(descLone, prometheus.CounterValue, float64(s.FlightsOnCaller))
	ch <- prometheus.MustNewConstMetric(descPoll, prometheus.CounterValue, float64(s.FlightsPolled))
	ch <- prometheus.MustNewConstMetric(descOwed, prometheus.CounterValue, float64(s.BatchesOwed))
	ch <- prometheus.MustNewConstMetric(descLogB, prometheus.GaugeValue, float64(s.LogBytes))
	ch <- prometheus.MustNewConstMetric(descSnaps, prometheus.CounterValue, float64(s.Snapshots))
	ch <- prometheus.MustNewConstMetric(descLogE, prometheus.CounterValue, float64(s.LogWriteErrors))
	ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(s.RowsLost))
}
