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
	durationHelp = "Time from parsing a request to its reply being ready, by protocol and command."
)

var durationBuckets = []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1}

// ShardedRequestMetrics returns Requests and RequestDuration for a front end
// whose requests run on event loops, sharded by loop (internal/shardmetrics).
// They export into the same families: RegisterMetrics collects them with the
// vectors, as a registry takes one collector per family. commands and outcomes
// fix the children: child c*len(outcomes)+o of the counter, child c of the
// histogram (which observes nanoseconds). Call it once per front end, at
// package initialisation.
func ShardedRequestMetrics(protocol string, commands, outcomes []string) (*shardmetrics.CounterVec, *shardmetrics.HistogramVec) {
	var counted, timed [][]string
	for _, c := range commands {
		for _, o := range outcomes {
			counted = append(counted, []string{protocol, c, o})
		}
		timed = append(timed, []string{protocol, c})
	}
	rc := shardmetrics.NewCounterVec(requestsName, requestsHelp, []string{"protocol", "command", "outcome"}, nil, counted)
	rd := shardmetrics.NewHistogramVec(durationName, durationHelp, durationBuckets, 1e9, []string{"protocol", "command"}, nil, timed)
	requestParts.Lock()
	requestParts.list = append(requestParts.list, rc, rd)
	requestParts.Unlock()
	return rc, rd
}

// requestParts are the sharded parts of Requests and RequestDuration.
var requestParts struct {
	sync.Mutex
	list []prometheus.Collector
}

// requestFamilies collects Requests and RequestDuration with their sharded
// parts, under the vectors' descriptors.
type requestFamilies struct{}

func (requestFamilies) Describe(ch chan<- *prometheus.Desc) {
	Requests.Describe(ch)
	RequestDuration.Describe(ch)
}

func (requestFamilies) Collect(ch chan<- prometheus.Metric) {
	Requests.Collect(ch)
	RequestDuration.Collect(ch)
	requestParts.Lock()
	parts := requestParts.list
	requestParts.Unlock()
	for _, p := range parts {
		p.Collect(ch)
	}
}

// RegisterMetrics registers the gateway's metrics.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(requestFamilies{}, ConnectionsCurrent, ProtocolErrors, MemcacheAuth)
}
