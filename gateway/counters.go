package gateway

import (
	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Stat names one of memcached's item counters ("stats"), kept by the gateway so
// every front end reports the same figures. The Service keeps them sharded by
// event loop (internal/shardmetrics), so loops on different cores do not fight
// over cache lines.
type Stat int

// The counters, as memcached names them (cmd_get, get_hits, ...).
const (
	StatCmdGet Stat = iota
	StatGetHits
	StatGetMisses
	StatCmdSet
	StatCmdTouch
	StatTouchHits
	StatTouchMisses
	StatDeleteHits
	StatDeleteMisses
	StatIncrHits
	StatIncrMisses
	StatDecrHits
	StatDecrMisses
	StatCasHits
	StatCasMisses
	StatCasBadval
	StatCmdFlush
	StatBackendErrors
	StatTotalItems
	numStats
)

// Stat is counter c's total over every shard.
func (s *Service) Stat(c Stat) uint64 { return s.stats.Value(int(c)) }

// ResetStats zeroes every counter ("stats reset").
func (s *Service) ResetStats() { s.stats.Reset() }

// statShard adds to the counters of one shard.
type statShard struct {
	stats *shardmetrics.Counters
	shard int
}

func (a statShard) add(c Stat, n uint64) { a.stats.Add(a.shard, int(c), n) }

// count updates the counters for a finished request, on its shard.
func (s *Service) count(r *Request) {
	add := statShard{s.stats, r.Shard}.add
	switch r.Verb {
	case VerbGet:
		if r.Meta.Uncounted {
			break
		}
		hits := hitItems(r.Items)
		add(StatCmdGet, uint64(len(r.Items)))
		add(StatGetHits, hits)
		add(StatGetMisses, uint64(len(r.Items))-hits)
	case VerbGat: // memcached (1.6.18) counts a gat's keys as touches only
		hits := hitItems(r.Items)
		misses := uint64(len(r.Items)) - hits
		add(StatCmdTouch, hits)
		add(StatTouchHits, hits)
		if r.Meta.GatMissIsGet { // and an mg T's misses as get misses
			add(StatCmdGet, misses)
			add(StatGetMisses, misses)
			break
		}
		add(StatCmdTouch, misses)
		add(StatTouchMisses, misses)
	case VerbSet, VerbAdd, VerbReplace, VerbAppend, VerbPrepend:
		if len(r.sets) > 0 { // a set of several keys: Hit is stored
			add(StatCmdSet, uint64(len(r.sets)))
			add(StatTotalItems, hitItems(r.Items))
			break
		}
		add(StatCmdSet, 1)
		if r.Outcome == OutcomeStored {
			add(StatTotalItems, 1)
		}
	case VerbCas:
		add(StatCmdSet, 1)
		switch r.Outcome {
		case OutcomeStored:
			add(StatCasHits, 1)
			add(StatTotalItems, 1)
		case OutcomeExists:
			add(StatCasBadval, 1)
		case OutcomeNotFound:
			add(StatCasMisses, 1)
		}
	case VerbTouch:
		add(StatCmdTouch, 1)
		add(hitMiss(r, StatTouchHits, StatTouchMisses))
	case VerbDelete:
		// memcached counts no hit for a delete that marks its item stale
		// (md I), nor for one whose cas did not match but as md's miss.
		switch {
		case r.Outcome == OutcomeExists:
			if r.Meta.CasFailIsMiss {
				add(StatDeleteMisses, 1)
			}
		case r.Outcome != OutcomeNotFound && r.Meta.Invalidate:
		default:
			add(hitMiss(r, StatDeleteHits, StatDeleteMisses))
		}
	case VerbIncr, VerbDecr:
		// memcached counts an incr that created its item, or whose cas did
		// not match, nowhere.
		if r.Created || r.Outcome == OutcomeExists {
			break
		}
		if r.Verb == VerbIncr {
			add(hitMiss(r, StatIncrHits, StatIncrMisses))
		} else {
			add(hitMiss(r, StatDecrHits, StatDecrMisses))
		}
	}
	if r.Outcome == OutcomeError && ndbclient.CodeOf(r.Err) != ndbclient.CodeInvalidArgument {
		add(StatBackendErrors, 1)
	}
}

// hitItems counts the items with Hit set.
func hitItems(items []Item) uint64 {
	var n uint64
	for i := range items {
		if items[i].Hit {
			n++
		}
	}
	return n
}

// hitMiss picks the counter a keyed command's outcome adds to: none (n = 0)
// for a backend error.
func hitMiss(r *Request, hit, miss Stat) (Stat, uint64) {
	switch r.Outcome {
	case OutcomeNotFound:
		return miss, 1
	case OutcomeError:
		return hit, 0
	default:
		return hit, 1
	}
}
