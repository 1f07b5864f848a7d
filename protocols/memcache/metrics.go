package memcache

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Outcome labels of the request counter, coarse on purpose: per-command detail
// lives in "stats".
const (
	outcomeOK = iota
	outcomeMiss
	outcomeClientError
	outcomeServerError
	numOutcomes
)

var outcomeLabels = [numOutcomes]string{"ok", "miss", "client_error", "server_error"}

// serverMetrics holds the memcache front end's metric children, resolved once at
// start-up so the hot path only increments.
type serverMetrics struct {
	requests    [NumCommandKinds][numOutcomes]prometheus.Counter
	latency     [NumCommandKinds]prometheus.Observer
	conns       prometheus.Gauge
	parseErrors prometheus.Counter
}

func newServerMetrics() *serverMetrics {
	m := &serverMetrics{
		conns:       gateway.ConnectionsCurrent.WithLabelValues("memcache"),
		parseErrors: gateway.ProtocolErrors.WithLabelValues("memcache"),
	}
	for k := 0; k < NumCommandKinds; k++ {
		name := CommandKind(k).String()
		for o := 0; o < numOutcomes; o++ {
			m.requests[k][o] = gateway.Requests.WithLabelValues("memcache", name, outcomeLabels[o])
		}
		m.latency[k] = gateway.RequestDuration.WithLabelValues("memcache", name)
	}
	return m
}

func (m *serverMetrics) observe(p *pending) {
	o := outcomeOK
	switch p.req.Outcome {
	case gateway.OutcomeNotFound, gateway.OutcomeNotStored, gateway.OutcomeExists:
		o = outcomeMiss
	case gateway.OutcomeError:
		o = outcomeServerError
		if isClientError(p.req.Err) {
			o = outcomeClientError
		}
	case gateway.OutcomeNone:
		if len(p.fixed) > 0 && (p.fixed[0] == 'C' || p.fixed[0] == 'E') { // CLIENT_ERROR, ERROR
			o = outcomeClientError
		}
	}
	m.requests[p.kind][o].Inc()
	m.latency[p.kind].Observe(time.Since(p.start).Seconds())
}

func isClientError(err error) bool {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return true
	}
	return false
}
