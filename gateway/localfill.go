package gateway

import (
	"cmp"
	"context"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// fillGuard orders a caching route's fills of the local cache against the
// drops that its writes make. A get that misses the local copy reads the
// backend and then fills the copy; a write through the same gateway drops
// the copy once it has applied. Without an order, a get that read the old
// value before the write could fill it after the drop, and the gateway would
// serve the old value after its own write until the copy went (tests/lin's
// caching model caught this). So keys hash to stripes, each with a lock and
// a generation that every drop advances: a fill lands only if its stripe's
// generation is still the one from before its backend read.
type fillGuard struct {
	seed    maphash.Seed
	stripes [fillStripes]fillStripe
}

const fillStripes = 256

type fillStripe struct {
	mu  sync.Mutex
	gen atomic.Uint64
	_   [48]byte // one stripe a cache line
}

func (g *fillGuard) stripeOf(key []byte) int { return int(maphash.Bytes(g.seed, key) % fillStripes) }

func (g *fillGuard) stripe(key []byte) *fillStripe { return &g.stripes[g.stripeOf(key)] }

// generation is the key's stripe and its generation, taken before the
// backend read whose result may fill the local copy.
func (g *fillGuard) generation(key []byte) (stripe int, gen uint64) {
	i := g.stripeOf(key)
	return i, g.stripes[i].gen.Load()
}

// pendingFill is a write of a local copy, with the stripe generation from
// before the backend read it copies.
type pendingFill struct {
	stripe int
	gen    uint64
	op     *ndbclient.Op
}

// fill runs, as one batch, the fills whose stripe no drop has advanced
// since their read. It holds their stripes, taken in ascending order (a
// drop holds one), so no drop slips between the check and the write.
func (g *fillGuard) fill(local *ndbclient.Client, fills []pendingFill, shard int) {
	slices.SortFunc(fills, func(a, b pendingFill) int { return cmp.Compare(a.stripe, b.stripe) })
	b := ndbclient.Batch{Shard: shard}
	for i, f := range fills {
		if i == 0 || fills[i-1].stripe != f.stripe {
			g.stripes[f.stripe].mu.Lock()
		}
		if g.stripes[f.stripe].gen.Load() == f.gen {
			b.Ops = append(b.Ops, f.op)
		}
	}
	if len(b.Ops) > 0 {
		_ = local.Execute(context.Background(), &b)
	}
	for i, f := range fills {
		if i == 0 || fills[i-1].stripe != f.stripe {
			g.stripes[f.stripe].mu.Unlock()
		}
	}
}

// drop runs op (a delete of the local copy) and advances the stripe's
// generation, so that no fill read before it lands after it.
func (g *fillGuard) drop(local *ndbclient.Client, key []byte, op *ndbclient.Op, shard int) {
	s := g.stripe(key)
	s.mu.Lock()
	s.gen.Add(1)
	b := ndbclient.Batch{Ops: []*ndbclient.Op{op}, Shard: shard}
	_ = local.Execute(context.Background(), &b)
	s.mu.Unlock()
}
