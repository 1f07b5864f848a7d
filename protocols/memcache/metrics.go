package memcache

import (
	"bytes"
	"encoding/binary"
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
	statStoreNoMemory // text and meta stores refused while parsing for the memory to receive them (conn.refuse)
	statMetaDebug     // memcached's cmd_meta: me commands, the only ones memcached 1.6.18 counts there
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
	// A binary or text run has its commands listed even when it holds one;
	// a meta command has one key unless it is a run of mgs.
	if p.text.run || len(p.bin.keys) > 0 || len(p.meta.keys) > 1 {
		m.observeRun(p, now)
		return
	}
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
			m.storeTooLarge(p)
		}
	case gateway.OutcomeNone:
		o = m.fixedOutcome(p)
	}
	shard := p.cs.shard
	requestMetrics.Counts.Add(shard, int(p.kind)*numOutcomes+o, 1)
	dialectCounts.Add(shard, int(p.dialect), 1)
	m.stats.Add(shard, int(p.dialect), 1)
	if p.kind == CmdMetaDebug && r.Outcome == gateway.OutcomeValues { // memcached counts no refused me
		m.stats.Add(shard, statMetaDebug, 1)
	}
	requestMetrics.Durations.Observe(shard, int(p.kind), now-p.start)
}

// storeTooLarge counts a store refused as too large in store_too_large, as
// memcached (1.6.18) does for text and meta stores; its binary stores
// never count there.
func (m *serverMetrics) storeTooLarge(p *pending) {
	if p.dialect != dialectBinary {
		m.stats.Add(p.cs.shard, statStoreTooLarge, 1)
	}
}

// fixedOutcome is the outcome of a reply made without the gateway: a
// refusal while parsing (the client's error, a store too large too, as when
// the backend refuses it), or an answer such as version's.
func (m *serverMetrics) fixedOutcome(p *pending) int {
	f := p.fixed
	if p.dialect == dialectBinary {
		if len(f) < binHeaderLen || f[0] != binResMagic {
			return outcomeOK
		}
		switch binary.BigEndian.Uint16(f[6:]) {
		case statusOK, statusAuthContinue:
			return outcomeOK
		case statusOutOfMemory, statusInternal, statusBusy, statusTempFailure:
			return outcomeServerError
		}
		return outcomeClientError
	}
	switch {
	case bytes.Equal(f, replyTooLarge): // refused while parsing, data swallowed
		m.storeTooLarge(p)
		return outcomeClientError
	case bytes.HasPrefix(f, replyError), bytes.HasPrefix(f, []byte("CLIENT_ERROR")):
		return outcomeClientError
	case bytes.HasPrefix(f, []byte("SERVER_ERROR")):
		return outcomeServerError
	}
	return outcomeOK
}

// observeRun counts each command of a run (batchRun) as the request it
// was sent as, under its own command and outcome, with the run's duration:
// a pipeline of 16 gets is 16 get requests.
func (m *serverMetrics) observeRun(p *pending, now int64) {
	var t runTally
	if getKind, bulk := runGetKind(p); bulk && answeredWhole(p.req) && (!p.hasSets || answeredWhole(p.sets)) {
		// The common case: no command of the run failed, so each request's
		// keys are its commands, all ok.
		t.addN(getKind, outcomeOK, uint64(p.req.NumKeys()))
		if p.hasSets {
			t.addN(CmdSet, outcomeOK, uint64(p.sets.NumKeys()))
		}
	} else {
		m.tallyRun(&t, p)
	}
	shard, d := p.cs.shard, now-p.start
	var n uint64
	for _, e := range t.entries[:t.used] {
		requestMetrics.Counts.Add(shard, int(e.kind)*numOutcomes+e.outcome, e.n)
		requestMetrics.Durations.ObserveN(shard, int(e.kind), d, e.n)
		n += e.n
	}
	dialectCounts.Add(shard, int(p.dialect), n)
	m.stats.Add(shard, int(p.dialect), n)
}

// runGetKind is the command of a run's gets, and whether they can be counted
// in bulk: not when binary touches are among them, whose misses count as
// misses.
func runGetKind(p *pending) (CommandKind, bool) {
	switch {
	case p.text.run:
		return p.text.getKind, true
	case len(p.bin.keys) > 0:
		for _, bk := range p.bin.keys {
			if bk.opcode == opTouch {
				return CmdNone, false
			}
		}
		return binGetKind(p), true
	}
	return CmdMetaGet, true
}

// binGetKind is the command of a binary run's gets: its request's verb.
func binGetKind(p *pending) CommandKind {
	if p.req.Verb == gateway.VerbGat {
		return CmdGat
	}
	return CmdGet
}

// answeredWhole reports whether every key of r was answered without an
// error (a get's miss is an answer), or r has none.
func answeredWhole(r *gateway.Request) bool {
	if r.NumKeys() == 0 {
		return true
	}
	if r.Outcome != gateway.OutcomeValues || len(r.Items) != r.NumKeys() {
		return false
	}
	for i := range r.Items {
		if r.Items[i].Err != nil {
			return false
		}
	}
	return true
}

// tallyRun adds up each command of a run with its own outcome.
func (m *serverMetrics) tallyRun(t *runTally, p *pending) {
	g, s := 0, 0 // the next item of the run's get and set requests
	switch {
	case p.text.run:
		for _, c := range p.text.cmds {
			if c.set {
				t.add(CmdSet, m.runOutcome(p, p.sets, s, true))
				s++
			} else {
				t.add(p.text.getKind, m.runOutcome(p, p.req, g, false))
				g++
			}
		}
	case len(p.bin.keys) > 0:
		getKind := binGetKind(p)
		for _, bk := range p.bin.keys {
			switch {
			case bk.set:
				t.add(CmdSet, m.runOutcome(p, p.sets, s, true))
				s++
			case bk.opcode == opTouch:
				o := m.runOutcome(p, p.req, g, false)
				if o == outcomeOK && g < len(p.req.Items) && !p.req.Items[g].Hit {
					o = outcomeMiss // as a lone touch of a missing key (NotFound)
				}
				t.add(CmdTouch, o)
				g++
			default:
				t.add(getKind, m.runOutcome(p, p.req, g, false))
				g++
			}
		}
	default: // meta gets
		for range p.meta.keys {
			t.add(CmdMetaGet, m.runOutcome(p, p.req, g, false))
			g++
		}
	}
}

// runOutcome is the outcome of the run's command answered by item i of r
// (its get or its set request): the request's error when it failed whole,
// else the item's. A set refused as too large counts in store_too_large.
func (m *serverMetrics) runOutcome(p *pending, r *gateway.Request, i int, set bool) int {
	err := r.Err
	if r.Outcome == gateway.OutcomeValues {
		err = nil
		if i < len(r.Items) {
			err = r.Items[i].Err
		}
	}
	if err == nil {
		return outcomeOK
	}
	if set && ndbclient.CodeOf(err) == ndbclient.CodeTooLarge {
		m.storeTooLarge(p)
	}
	if isClientError(err) {
		return outcomeClientError
	}
	return outcomeServerError
}

// runTally adds up a run's commands by command and outcome: a run holds at
// most three command kinds (gets of one verb, touches among binary GATs, and
// sets), and a run of like commands costs one add.
type runTally struct {
	entries [3 * numOutcomes]struct {
		kind    CommandKind
		outcome int
		n       uint64
	}
	used int
}

func (t *runTally) add(kind CommandKind, outcome int) { t.addN(kind, outcome, 1) }

func (t *runTally) addN(kind CommandKind, outcome int, n uint64) {
	if n == 0 {
		return
	}
	for i := range t.entries[:t.used] {
		if e := &t.entries[i]; e.kind == kind && e.outcome == outcome {
			e.n += n
			return
		}
	}
	if t.used == len(t.entries) { // cannot happen (3 kinds × numOutcomes entries); never panic
		t.entries[t.used-1].n += n
		return
	}
	t.entries[t.used].kind, t.entries[t.used].outcome, t.entries[t.used].n = kind, outcome, n
	t.used++
}

func isClientError(err error) bool {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return true
	}
	return false
}
