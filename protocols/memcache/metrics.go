package memcache

import (
	"sync/atomic"
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
	dialect     [numDialects]prometheus.Counter
	auth        [numAuthOutcomes]prometheus.Counter
	// The same counts for "stats" (which "stats reset" clears).
	dialectN [numDialects]atomic.Uint64
	authN    [numAuthOutcomes]atomic.Uint64
}

func (m *serverMetrics) countAuth(o int) {
	m.auth[o].Inc()
	m.authN[o].Add(1)
}

// Dialects and auth outcomes, for ndbgate_memcache_commands_total and
// ndbgate_memcache_auth_total.
const (
	dialectText = iota
	dialectMeta
	dialectBinary
	numDialects
)

const (
	authOK = iota
	authFailure
	authRefused
	numAuthOutcomes
)

var (
	dialectLabels = [numDialects]string{"text", "meta", "binary"}
	authLabels    = [numAuthOutcomes]string{"ok", "failure", "refused"}
)

func newServerMetrics() *serverMetrics {
	m := &serverMetrics{
		conns:       gateway.ConnectionsCurrent.WithLabelValues("memcache"),
		parseErrors: gateway.ProtocolErrors.WithLabelValues("memcache"),
	}
	for i := range m.dialect {
		m.dialect[i] = gateway.MemcacheDialect.WithLabelValues(dialectLabels[i])
	}
	for i := range m.auth {
		m.auth[i] = gateway.MemcacheAuth.WithLabelValues(authLabels[i])
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
	d, n := dialectText, 1
	switch {
	case p.bin:
		d, n = dialectBinary, max(1, len(p.binKeys))
	case p.kind.IsMeta():
		d, n = dialectMeta, max(1, len(p.meta))
	}
	m.dialect[d].Add(float64(n))
	m.dialectN[d].Add(uint64(n))
	m.latency[p.kind].Observe(time.Since(p.start).Seconds())
}

func isClientError(err error) bool {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return true
	}
	return false
}
