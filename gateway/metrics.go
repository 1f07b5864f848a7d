package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
)

// Request metrics shared by every front end, declared once. Front ends resolve
// their label children at start-up and only increment on the hot path.
var (
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: requestsName, Help: requestsHelp,
	}, []string{"protocol", "command", "outcome"})
	RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: durationName, Help: durationHelp, Buckets: durationBuckets,
	}, []string{"protocol", "command"})
	ConnectionsCurrent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ndbgate_connections_current",
		Help: "Open client connections by protocol.",
	}, []string{"protocol"})
	ProtocolErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_protocol_errors_total",
		Help: "Malformed requests by protocol.",
	}, []string{"protocol"})
	MemcacheAuth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_memcache_auth_total",
		Help: "memcache SASL outcomes: ok, failure (bad credentials or mechanism), refused (a command before authenticating).",
	}, []string{"outcome"})
)

const (
	requestsName = "ndbgate_requests_total"
	requestsHelp = "Requests by protocol, command and outcome (ok, miss, client_error, server_error)."
	durationName = "ndbgate_request_duration_seconds"
	durationHelp = "Time from a request being read (memcache event loops: the start of the loop turn that read it) or parsed to its reply being ready, by protocol and command."
)

var durationBuckets = []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1}

// ShardedRequests are Requests and RequestDuration for a front end whose
// requests run on event loops, sharded by loop (internal/shardmetrics). They
// export into the same families; pass them to RegisterMetrics, as a registry
// takes one collector per family.
type ShardedRequests struct {
	// Counts has child c*len(outcomes)+o for command c and outcome o.
	Counts *shardmetrics.CounterVec
	// Durations has child c for command c, and observes nanoseconds.
	Durations *shardmetrics.HistogramVec
}

var shardedProtocols sync.Map

// ShardedRequestMetrics makes a front end's ShardedRequests; commands and
// outcomes fix the children. Once per protocol: two sets of one protocol's
// children would make every scrape fail.
func ShardedRequestMetrics(protocol string, commands, outcomes []string) ShardedRequests {
	if _, dup := shardedProtocols.LoadOrStore(protocol, true); dup {
		panic("gateway: sharded request metrics for " + protocol + " made twice")
	}
	var counted, timed [][]string
	for _, c := range commands {
		for _, o := range outcomes {
			counted = append(counted, []string{protocol, c, o})
		}
		timed = append(timed, []string{protocol, c})
	}
	return ShardedRequests{
		Counts:    shardmetrics.NewCounterVec(requestsName, requestsHelp, []string{"protocol", "command", "outcome"}, nil, counted),
		Durations: shardmetrics.NewHistogramVec(durationName, durationHelp, durationBuckets, 1e9, []string{"protocol", "command"}, nil, timed),
	}
}

// requestFamilies collects Requests and RequestDuration with the sharded parts
// of the front ends that run, under the vectors' descriptors.
type requestFamilies struct{ sharded []ShardedRequests }

func (requestFamilies) Describe(ch chan<- *prometheus.Desc) {
	Requests.Describe(ch)
	RequestDuration.Describe(ch)
}

func (f requestFamilies) Collect(ch chan<- prometheus.Metric) {
	Requests.Collect(ch)
	RequestDuration.Collect(ch)
	for _, p := range f.sharded {
		p.Counts.Collect(ch)
		p.Durations.Collect(ch)
	}
}

// RegisterMetrics registers the gateway's metrics, with the sharded request
// metrics of the front ends that run.
func RegisterMetrics(reg prometheus.Registerer, sharded ...ShardedRequests) {
	reg.MustRegister(requestFamilies{sharded}, ConnectionsCurrent, ProtocolErrors, MemcacheAuth)
}
