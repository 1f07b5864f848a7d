package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Request metrics shared by every front end, declared once. Front ends resolve
// their label children at start-up and only increment on the hot path.
var (
	Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_requests_total",
		Help: "Requests by protocol, command and outcome (ok, miss, client_error, server_error).",
	}, []string{"protocol", "command", "outcome"})
	RequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ndbgate_request_duration_seconds",
		Help:    "Time from parsing a request to its reply being ready, by protocol and command.",
		Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1},
	}, []string{"protocol", "command"})
	ConnectionsCurrent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ndbgate_connections_current",
		Help: "Open client connections by protocol.",
	}, []string{"protocol"})
	ProtocolErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_protocol_errors_total",
		Help: "Malformed requests by protocol.",
	}, []string{"protocol"})
	MemcacheDialect = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_memcache_commands_total",
		Help: "memcache commands by dialect: text (classic), meta, binary.",
	}, []string{"dialect"})
	MemcacheAuth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ndbgate_memcache_auth_total",
		Help: "memcache SASL outcomes: ok, failure (bad credentials or mechanism), refused (a command before authenticating).",
	}, []string{"outcome"})
)

// RegisterMetrics registers the gateway's metrics.
func RegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(Requests, RequestDuration, ConnectionsCurrent, ProtocolErrors, MemcacheDialect, MemcacheAuth)
}
