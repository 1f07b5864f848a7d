package embedded

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// engineMemory is what e holds for its rows: arena pages, slot arrays and
// indexes, in bytes, with the rows' live chunk bytes.
type engineMemory struct{ pages, live, slots, index int64 }

func memoryOf(e *Engine) engineMemory {
	var m engineMemory
	for _, p := range e.allPartitions() {
		p.mu.Lock()
		m.pages += p.arena.pageBytes
		for _, l := range p.arena.live {
			m.live += int64(l)
		}
		// A mapped slot array is resident as far as slots were used (its
		// pages are touched in order); the rest of it is address space.
		used := int64(len(p.slots)) * int64(unsafe.Sizeof(slot{}))
		if p.arena.m.slots.mapped {
			used = (used + pageAlign - 1) &^ (pageAlign - 1)
		} else {
			used = int64(len(p.arena.m.slots.mem))
		}
		m.slots += used
		m.index += int64(len(p.arena.m.index.mem))
		p.mu.Unlock()
	}
	return m
}

// fillMemcache inserts n items of the default container's shape with keys
// "key:<i>" (10 bytes from i = 100000 on) and values of size bytes.
func fillMemcache(t testing.TB, e *Engine, tbl *ndbclient.Table, from, n, size int) {
	value := make([]byte, size)
	const per = 500
	ops := make([]ndbclient.Op, per)
	batch := &ndbclient.Batch{}
	keys := make([]byte, 0, per*16)
	for base := from; base < from+n; base += per {
		k := min(per, from+n-base)
		keys, batch.Ops = keys[:0], batch.Ops[:0]
		for i := range k {
			o := &ops[i]
			at := len(keys)
			keys = strconv.AppendInt(append(keys, "key:"...), int64(base+i), 10)
			*o = ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.Bytes(keys[at:])},
				Set: []ndbclient.ColumnValue{set(colValue, ndbclient.Bytes(value)), set(colFlags, ndbclient.Uint(0)),
					set(colCas, ndbclient.Uint(uint64(base+i))), set(colExpire, ndbclient.Uint(0))}}
			batch.Ops = append(batch.Ops, o)
		}
		require.NoError(t, e.Execute(context.Background(), batch))
		for _, o := range batch.Ops {
			require.NoError(t, o.Err)
		}
	}
}

// Issue 23: an item of the default container with a 10-byte key costs the
// engine, all told (arena chunk, slot, index share), about 100 bytes for a
// 32-byte value (chunk 64, slot 24, index 12 at 12,500 rows a partition)
// and 1,140 for 1 KiB (chunk 1,104), against memcached's 120 and 1,184 of
// slab chunk alone. What it charges against the memory limit covers what it
// holds.
func TestBytesPerItem(t *testing.T) {
	const n = 200_000
	for _, c := range []struct {
		size  int
		bound float64
	}{{32, 102}, {1024, 1145}} {
		t.Run(fmt.Sprint("value=", c.size), func(t *testing.T) {
			e := newEngine(t, Config{})
			tbl := mustCreate(t, e, memcacheTable("items", 1<<20))
			fillMemcache(t, e, tbl, 100_000, n, c.size)
			m := memoryOf(e)
			st := e.Stats()
			require.Equal(t, uint64(n), st.Items)
			held := m.live + m.slots + m.index
			t.Logf("%d B values: per item %.1f held (chunks %.1f, slots %.1f, index %.1f), %.1f charged, pages %.1f",
				c.size, float64(held)/n, float64(m.live)/n, float64(m.slots)/n, float64(m.index)/n, float64(st.Bytes)/n, float64(m.pages)/n)
			assert.LessOrEqual(t, float64(held)/n, c.bound, "bytes per item")
			free := int64(len(e.allPartitions())) * metaFree // (not charged, see metaFree)
			assert.GreaterOrEqual(t, int64(st.Bytes), held-free, "the charge covers chunks, slots and index")
			runtime.KeepAlive(e)
		})
	}
}

// Slot arrays and indexes are charged as they are, so with the rows' chunks
// they stay within the limit (but for each partition's first metaFree
// bytes), and come off the pages' cap: pages, slot arrays and indexes
// together stay within it (docs/CONFIGURATION.md, memory_limit). They shrink when mostly
// empty, so a table whose rows were evicted gives their memory back. With
// these rows (32-byte chunks) that is also under two thirds of the limit.
func checkMetaBound(t *testing.T, e *Engine, limit int64, what string) {
	t.Helper()
	m := memoryOf(e)
	st := e.Stats()
	parts := int64(len(e.allPartitions()))
	t.Logf("%s: %d items, bytes %d KiB, slots %d KiB, index %d KiB, pages %d KiB", what, st.Items, st.Bytes>>10, m.slots>>10, m.index>>10, m.pages>>10)
	require.LessOrEqual(t, st.Bytes, uint64(limit), what)
	require.LessOrEqual(t, m.slots+m.index, int64(st.Bytes)-m.live+parts*metaFree, "%s: slots and index are charged", what)
	require.LessOrEqual(t, m.pages+m.slots+m.index, limit+limit/2+parts*(firstPage+metaFree)+maxPage, "%s: pages, slots and index within the cap", what)
	perRow := float64(unsafe.Sizeof(slot{})) + 25.0/16*float64(unsafe.Sizeof(ixEntry{}))
	require.LessOrEqual(t, m.slots+m.index, int64(float64(limit)/float64(32)*perRow)*2/3+parts*metaFree, "%s: two thirds", what)
}

func TestSlotsAndIndexStayBounded(t *testing.T) {
	const limit = 4 << 20
	e := newEngine(t, Config{MemoryLimit: limit})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<20))
	for fill, size := range []int{1, 40, 3000, 1} {
		fillMemcache(t, e, tbl, fill*1_000_000, 2*limit/(size+20), size)
		checkMetaBound(t, e, limit, fmt.Sprintf("after %d-byte values", size))
	}
}

// Tiny items in one cache container, then in another (which evicts the
// first one's): the first table's slot arrays and indexes shrink as its rows
// go, so both together stay within the bound (before they shrank, each table
// kept its own peak, twice the bound).
func TestSlotsAndIndexStayBoundedAcrossTables(t *testing.T) {
	const limit = 4 << 20
	clock := newClock()
	e := newEngine(t, Config{MemoryLimit: limit, Now: clock.now})
	tables := []*ndbclient.Table{mustCreate(t, e, memcacheTable("a", 1<<20)), mustCreate(t, e, memcacheTable("b", 1<<20))}
	for i, tbl := range tables {
		clock.advance(600) // the other table's rows are older: they are evicted first
		fillMemcache(t, e, tbl, (i+1)*1_000_000, 2*limit/21, 1)
		checkMetaBound(t, e, limit, fmt.Sprintf("after filling table %d", i))
	}
}
