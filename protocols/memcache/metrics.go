package memcache

import (
	"bytes"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/protocols/memcache/transport"
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

// The front end's per-request families, sharded by event loop
// (internal/shardmetrics) and declared once. requestMetrics.Counts' child for
// kind k and outcome o is k*numOutcomes+o.
var (
	requestMetrics = gateway.ShardedRequestMetrics("memcache", commandNames[:], outcomeLabels[:])
	dialectCounts  = shardmetrics.NewCounterVec("ndbgate_memcache_commands_total",
		"memcache commands by dialect: text (classic), meta, binary.", []string{"dialect"}, nil,
		[][]string{{dialectLabels[dialectText]}, {dialectLabels[dialectMeta]}, {dialectLabels[dialectBinary]}})
)

// RegisterMetrics registers the memcache front end's own metrics, and returns
// its request metrics for gateway.RegisterMetrics.
func RegisterMetrics(reg prometheus.Registerer) gateway.ShardedRequests {
	reg.MustRegister(dialectCounts)
	return requestMetrics
}

// serverMetrics holds one server's metric children, resolved once at start-up
// so the hot path only increments, and its "stats" counts.
type serverMetrics struct {
	conns       prometheus.Gauge
	parseErrors prometheus.Counter
	auth        [numAuthOutcomes]prometheus.Counter
	// For "stats" (which "stats reset" clears): per shard, the commands by
	// dialect (statText..statBinary) and the bytes read and written.
	stats *shardmetrics.Counters
	authN [numAuthOutcomes]atomic.Uint64
}

// Indexes into serverMetrics.stats; the first three are the dialects.
const (
	statBytesRead = int(numDialects) + iota
	statBytesWritten
	statStoreTooLarge // memcached's store_too_large: stores refused as too large
	numStats
)

func (m *serverMetrics) countAuth(o int) {
	m.auth[o].Inc()
	m.authN[o].Add(1)
}

// Auth outcomes, for ndbgate_memcache_auth_total.
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
		stats:       shardmetrics.NewCounters(numStats),
	}
	for i := range m.auth {
		m.auth[i] = gateway.MemcacheAuth.WithLabelValues(authLabels[i])
	}
	return m
}

// monoNanos is the clock requests are timed by: the transports' monotonic
// clock, which dates an epoll loop's turn (loopScratch.now).
func monoNanos() int64 { return transport.Nanos() }

// observe counts p, done at now (monoNanos).
func (m *serverMetrics) observe(p *pending, now int64) {
	o := outcomeOK
	r := p.result()
	switch r.Outcome {
	case gateway.OutcomeNotFound, gateway.OutcomeNotStored, gateway.OutcomeExists:
		o = outcomeMiss
	case gateway.OutcomeValues: // a get answers each key: one that failed is an error
		for i := range r.Items {
			if err := r.Items[i].Err; err != nil {
				o = outcomeServerError
				if isClientError(err) {
					o = outcomeClientError
				}
				break
			}
		}
	case gateway.OutcomeError:
		o = outcomeServerError
		if isClientError(r.Err) {
			o = outcomeClientError
		}
		if ndbclient.CodeOf(r.Err) == ndbclient.CodeTooLarge {
			m.stats.Add(p.cs.shard, statStoreTooLarge, 1)
		}
	case gateway.OutcomeNone:
		if len(p.fixed) > 0 && (p.fixed[0] == 'C' || p.fixed[0] == 'E') { // CLIENT_ERROR, ERROR
			o = outcomeClientError
		} else if bytes.Equal(p.fixed, replyTooLarge) { // refused while parsing, data swallowed
			m.stats.Add(p.cs.shard, statStoreTooLarge, 1)
		}
	}
	shard := p.cs.shard
	requestMetrics.Counts.Add(shard, int(p.kind)*numOutcomes+o, 1)
	n := 1
	switch p.dialect {
	case dialectBinary:
		n = max(1, len(p.bin.keys))
	case dialectMeta:
		n = max(1, len(p.meta.keys))
	case dialectText:
		if p.text.run {
			n = max(1, len(p.text.cmds))
		}
	}
	dialectCounts.Add(shard, int(p.dialect), uint64(n))
	m.stats.Add(shard, int(p.dialect), uint64(n))
	requestMetrics.Durations.Observe(shard, int(p.kind), now-p.start)
}

func isClientError(err error) bool {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return true
	}
	return false
}
