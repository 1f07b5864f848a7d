package embedded

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// The warm passes guess the slot lookup will read; for a table at its usual
// load the guess is nearly always that slot. It may be another key's whose
// 32-bit tag is the same, and so its home too, and comes first: among 20,000
// keys about one run in twenty has such a pair (the hash is seeded per
// engine). A wrong guess costs a wasted prefetch, never a wrong answer.
func TestLikelySlotIsLookups(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("warm", 1024))
	const n = 20_000
	for i := 0; i < n; i += 500 {
		var ops []*ndbclient.Op
		for j := i; j < i+500; j++ {
			ops = append(ops, writeOp(ndbclient.OpWrite, tbl, fmt.Sprintf("k%06d", j), set(colValue, ndbclient.Bytes([]byte("v")))))
		}
		run(t, e, ops...)
	}
	x := execPool.Get().(*exec)
	defer execPool.Put(x)
	x.e = e
	defer x.done()
	same, other := 0, 0
	for j := range n {
		pr := x.prepare(readOp(tbl, fmt.Sprintf("k%06d", j), colValue), false)
		require.NotNil(t, pr.p)
		key := x.keys[pr.koff:pr.kend]
		pr.p.mu.Lock()
		want, got := pr.p.lookup(pr.tag, key), pr.p.likelySlot(pr.tag)
		pr.p.mu.Unlock()
		require.GreaterOrEqual(t, want, int32(0), "key %d", j)
		switch got {
		case -1:
		case want:
			same++
		default:
			other++
		}
	}
	assert.Greater(t, same, n*9/10, "guessed %d of %d slots", same, n)
	assert.LessOrEqual(t, other, n/1000, "guessed another key's slot for %d of %d keys: more than tag collisions explain", other, n)
}

// warm never waits for a partition lock: a batch whose partition another
// caller holds goes on to its main pass, which waits there as before.
func TestWarmPassesOverHeldLocks(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("warm", 1024))
	var ops []*ndbclient.Op
	for j := range 32 {
		k := fmt.Sprintf("k%02d", j)
		put(t, e, tbl, k, item{value: "v"})
		ops = append(ops, readOp(tbl, k, colValue))
	}
	x := execPool.Get().(*exec)
	defer execPool.Put(x)
	x.e = e
	defer x.done()
	x.keys = x.keys[:0]
	x.prep = x.prep[:0]
	for _, op := range ops {
		x.prep = append(x.prep, x.prepare(op, false))
	}
	x.orderByPartition(0, len(ops))
	held := x.prep[uint32(x.order[0])].p
	held.mu.Lock()
	defer held.mu.Unlock()
	done := make(chan struct{})
	go func() {
		x.warm(false)
		x.warm(true)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("warm waited for a held partition lock")
	}
}
