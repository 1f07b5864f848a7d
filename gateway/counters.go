package gateway

import (
	"sync/atomic"

	"github.com/ndbgate/ndbgate/internal/shardmetrics"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Counters are memcached's item counters ("stats"), kept by the gateway so every
// front end reports the same figures. The Service keeps one Counters per
// metrics shard (event loop), so loops on different cores do not fight over
// cache lines; Service.Counters adds them up.
type Counters struct {
	CmdGet, GetHits, GetMisses         atomic.Uint64
	CmdSet, CmdTouch, TouchHits        atomic.Uint64
	TouchMisses, DeleteHits            atomic.Uint64
	DeleteMisses, IncrHits, IncrMisses atomic.Uint64
	DecrHits, DecrMisses, CasHits      atomic.Uint64
	CasMisses, CasBadval, CmdFlush     atomic.Uint64
	BackendErrors, TotalItems          atomic.Uint64
}

// counterShard is one shard's Counters, padded so that neighbours never share
// a cache line.
type counterShard struct {
	_ [64]byte
	Counters
}

func newCounterShards() []counterShard { return make([]counterShard, shardmetrics.NumShards()) }

// shardCounters is the Counters a request on shard updates.
func (s *Service) shardCounters(shard int) *Counters {
	return &s.counters[uint(shard)%uint(len(s.counters))].Counters
}

// Counters adds up every shard's counters.
func (s *Service) Counters() *Counters {
	total := &Counters{}
	sum := total.fields()
	for i := range s.counters {
		for j, f := range s.counters[i].fields() {
			sum[j].Add(f.Load())
		}
	}
	return total
}

// ResetCounters zeroes every counter ("stats reset").
func (s *Service) ResetCounters() {
	for i := range s.counters {
		for _, f := range s.counters[i].fields() {
			f.Store(0)
		}
	}
}

func (c *Counters) fields() []*atomic.Uint64 {
	return []*atomic.Uint64{
		&c.CmdGet, &c.GetHits, &c.GetMisses, &c.CmdSet, &c.CmdTouch, &c.TouchHits,
		&c.TouchMisses, &c.DeleteHits, &c.DeleteMisses, &c.IncrHits, &c.IncrMisses,
		&c.DecrHits, &c.DecrMisses, &c.CasHits, &c.CasMisses, &c.CasBadval, &c.CmdFlush,
		&c.BackendErrors, &c.TotalItems,
	}
}

func (c *Counters) count(r *Request) {
	switch r.Verb {
	case VerbGet, VerbGat:
		var hits uint64
		for i := range r.Items {
			if r.Items[i].Hit {
				hits++
			}
		}
		c.CmdGet.Add(uint64(len(r.Items)))
		c.GetHits.Add(hits)
		c.GetMisses.Add(uint64(len(r.Items)) - hits)
		if r.Verb == VerbGat {
			c.CmdTouch.Add(uint64(len(r.Items)))
			c.TouchHits.Add(hits)
			c.TouchMisses.Add(uint64(len(r.Items)) - hits)
		}
	case VerbSet, VerbAdd, VerbReplace, VerbAppend, VerbPrepend:
		c.CmdSet.Add(1)
		if r.Outcome == OutcomeStored {
			c.TotalItems.Add(1)
		}
	case VerbCas:
		c.CmdSet.Add(1)
		switch r.Outcome {
		case OutcomeStored:
			c.CasHits.Add(1)
			c.TotalItems.Add(1)
		case OutcomeExists:
			c.CasBadval.Add(1)
		case OutcomeNotFound:
			c.CasMisses.Add(1)
		}
	case VerbTouch:
		c.CmdTouch.Add(1)
		hitMiss(r, &c.TouchHits, &c.TouchMisses)
	case VerbDelete:
		hitMiss(r, &c.DeleteHits, &c.DeleteMisses)
	case VerbIncr:
		hitMiss(r, &c.IncrHits, &c.IncrMisses)
	case VerbDecr:
		hitMiss(r, &c.DecrHits, &c.DecrMisses)
	}
	if r.Outcome == OutcomeError && ndbclient.CodeOf(r.Err) != ndbclient.CodeInvalidArgument {
		c.BackendErrors.Add(1)
	}
}

func hitMiss(r *Request, hit, miss *atomic.Uint64) {
	switch r.Outcome {
	case OutcomeNotFound:
		miss.Add(1)
	case OutcomeError:
	default:
		hit.Add(1)
	}
}
