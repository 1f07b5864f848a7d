package gateway

import (
	"sync/atomic"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// paddedCounter keeps each hot counter on its own cache line, so event loops on
// different cores do not fight over one line.
type paddedCounter struct {
	atomic.Uint64
	_ [56]byte
}

// Counters are memcached's item counters ("stats"), kept by the gateway so every
// front end reports the same figures.
type Counters struct {
	CmdGet, GetHits, GetMisses         paddedCounter
	CmdSet, CmdTouch, TouchHits        paddedCounter
	TouchMisses, DeleteHits            paddedCounter
	DeleteMisses, IncrHits, IncrMisses paddedCounter
	DecrHits, DecrMisses, CasHits      paddedCounter
	CasMisses, CasBadval, CmdFlush     paddedCounter
	BackendErrors, TotalItems          paddedCounter
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

func hitMiss(r *Request, hit, miss *paddedCounter) {
	switch r.Outcome {
	case OutcomeNotFound:
		miss.Add(1)
	case OutcomeError:
	default:
		hit.Add(1)
	}
}

// Reset zeroes every counter ("stats reset").
func (c *Counters) Reset() {
	for _, p := range []*paddedCounter{
		&c.CmdGet, &c.GetHits, &c.GetMisses, &c.CmdSet, &c.CmdTouch, &c.TouchHits,
		&c.TouchMisses, &c.DeleteHits, &c.DeleteMisses, &c.IncrHits, &c.IncrMisses,
		&c.DecrHits, &c.DecrMisses, &c.CasHits, &c.CasMisses, &c.CasBadval, &c.CmdFlush,
		&c.BackendErrors, &c.TotalItems,
	} {
		p.Store(0)
	}
}
