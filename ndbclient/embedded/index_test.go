package embedded

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// reachable reports whether (tag, s) is found probing from its home before
// an empty entry: the invariant backward-shift deletion must keep.
func (ix *index) reachable(tag uint32, s int32) bool {
	for i := ix.home(tag); !ix.e[i].empty(); i = ix.next(i) {
		if ix.e[i].is(tag, s) {
			return true
		}
	}
	return false
}

func TestIndexInsertRemove(t *testing.T) {
	for _, tagBits := range []uint{3, 8, 32} { // few distinct tags: long collision runs
		t.Run(fmt.Sprint("tagbits=", tagBits), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tagBits), 9))
			ix := index{reg: new(region)}
			ix.init()
			defer ix.reg.free()
			live := map[int32]uint32{}
			next := int32(0)
			for step := range 6000 {
				if len(live) == 0 || rng.IntN(5) < 3 {
					tag := uint32(rng.Uint64() >> (64 - tagBits))
					if tagBits == 32 {
						tag = rng.Uint32()
					}
					ix.insert(tag, next)
					live[next] = tag
					next++
				} else {
					for s, tag := range live { // map order is random enough
						ix.remove(tag, s)
						delete(live, s)
						break
					}
				}
				if step%211 == 0 || len(live) < 20 {
					require.Equal(t, len(live), ix.n)
					for s, tag := range live {
						require.True(t, ix.reachable(tag, s), "step %d: slot %d lost", step, s)
					}
					occupied := 0
					for _, e := range ix.e {
						if !e.empty() {
							occupied++
							require.Equal(t, live[int32(e.slot-1)], e.tag, "an entry's tag moved with it")
						}
					}
					require.Equal(t, len(live), occupied)
				}
			}
			assert.LessOrEqual(t, ix.n*indexLoadDen, len(ix.e)*indexLoadNum)
		})
	}
}

func TestSizeClasses(t *testing.T) {
	require.Equal(t, uint32(minChunk), classSizes[0])
	require.Equal(t, uint32(maxChunk), classSizes[len(classSizes)-1])
	for i := 1; i < len(classSizes); i++ {
		require.Greater(t, classSizes[i], classSizes[i-1])
		require.LessOrEqual(t, float64(classSizes[i]), float64(classSizes[i-1])*1.3+16, "classes grow by ~1.25x")
	}
	for n := 1; n <= maxChunk+10000; n += 7 {
		cls, size := classOf(n)
		require.GreaterOrEqual(t, size, n)
		if cls != classBig {
			require.Equal(t, int(classSizes[cls]), size)
			if cls > 0 {
				require.Less(t, int(classSizes[cls-1]), n, "the smallest class that fits")
			}
		} else {
			require.Greater(t, n, maxChunk)
		}
	}
	t.Logf("%d classes: %v", len(classSizes), classSizes)
}

// A random mix of ops against one partition agrees with a map model.
func TestModelRandomOps(t *testing.T) {
	for _, parts := range []int{1, 5} {
		t.Run(fmt.Sprint("partitions=", parts), func(t *testing.T) {
			e := newEngine(t, Config{Partitions: parts})
			tbl := mustCreate(t, e, memcacheTable("model", 300))
			model := map[string]string{}
			rng := rand.New(rand.NewPCG(uint64(parts), 1))
			val := make([]byte, 300)
			for i := range val {
				val[i] = byte('a' + i%26)
			}
			for step := range 30000 {
				k := fmt.Sprint(rng.IntN(400))
				v := string(val[:rng.IntN(300)])
				var op *ndbclient.Op
				switch rng.IntN(5) {
				case 0:
					op = writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.String(v)))
					if _, ok := model[k]; !ok {
						model[k] = v
					}
				case 1:
					op = writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.String(v)))
					model[k] = v
				case 2:
					op = writeOp(ndbclient.OpUpdate, tbl, k, set(colValue, ndbclient.String(v)))
					if _, ok := model[k]; ok {
						model[k] = v
					}
				case 3:
					op = writeOp(ndbclient.OpDelete, tbl, k)
					delete(model, k)
				case 4:
					got, ok := getValue(t, e, tbl, k)
					want, wok := model[k]
					require.Equal(t, wok, ok, "step %d key %s", step, k)
					require.Equal(t, want, got, "step %d key %s", step, k)
					continue
				}
				run(t, e, op)
			}
			require.Equal(t, uint64(len(model)), e.Stats().Items)
			for k, want := range model {
				got, ok := getValue(t, e, tbl, k)
				require.True(t, ok)
				require.Equal(t, want, got)
			}
		})
	}
}

// Rows that grow or shrink into another size class move in the arena; the
// slot must follow them, since lookups read the row through it.
func TestIndexFollowsMovedRows(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("moves", 200<<10))
	const keys = 300
	sizes := []int{1, 40, 200, 3000, 150000, 5} // 150000: a page of its own
	for step, n := range sizes {
		for i := range keys {
			k := fmt.Sprint("key-", i)
			put(t, e, tbl, k, item{value: fmt.Sprintf("%d-%s", step, strings.Repeat("x", n+i%7))})
		}
		for i := range keys {
			k := fmt.Sprint("key-", i)
			v, ok := getValue(t, e, tbl, k)
			require.True(t, ok, "step %d: %s lost", step, k)
			require.Equal(t, fmt.Sprintf("%d-%s", step, strings.Repeat("x", n+i%7)), v)
		}
	}
	live := 0
	for _, p := range e.byName[tbl.FullName()].parts {
		for s := range p.slots {
			sl := &p.slots[s]
			if sl.size == 0 {
				continue
			}
			live++
			row := p.row(int32(s))
			require.Equal(t, int32(s), p.lookup(p.tagOf(int32(s)), rowKey(row)), "slot %d", s)
			require.Equal(t, int32(s), p.slotAt(p.tagOf(int32(s)), uint32(sl.page), sl.off), "slot %d", s)
		}
	}
	require.Equal(t, keys, live)
}
