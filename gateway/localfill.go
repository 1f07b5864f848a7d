package gateway

import (
	"context"
	"hash/maphash"
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

func (g *fillGuard) stripe(key []byte) *fillStripe {
	return &g.stripes[maphash.Bytes(g.seed, key)%fillStripes]
}

// generation is the key's stripe generation, taken before the backend read
// whose result may fill the local copy.
func (g *fillGuard) generation(key []byte) uint64 { return g.stripe(key).gen.Load() }

// fill runs op (a write of the local copy) unless a drop of the key's
// stripe came after gen.
func (g *fillGuard) fill(local *ndbclient.Client, key []byte, gen uint64, op *ndbclient.Op, shard int) {
	s := g.stripe(key)
	s.mu.Lock()
	if s.gen.Load() == gen {
		b := ndbclient.Batch{Ops: []*ndbclient.Op{op}, Shard: shard}
		_ = local.Execute(context.Background(), &b)
	}
	s.mu.Unlock()
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
