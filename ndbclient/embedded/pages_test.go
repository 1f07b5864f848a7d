package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// checkArena verifies a partition's memory structures (its lock held): every
// row is indexed where it lies, each regular page is tiled exactly by live
// and free chunks, every free chunk is on its class's list once, and the
// per-page live bytes, the page total and the charges add up. It returns
// the bytes of the pages.
func checkArena(t testing.TB, p *partition) int64 {
	t.Helper()
	a := &p.arena
	require.Equal(t, len(a.pages), len(a.live))
	type chunk struct{ page, off uint32 }
	liveAt := map[chunk]int32{}
	liveBytes := make([]uint32, len(a.pages))
	var charged int64
	items := 0
	for s := range p.slots {
		sl := &p.slots[s]
		if sl.size == 0 {
			continue
		}
		items++
		require.NotNil(t, a.pages[sl.page], "slot %d on a released page", s)
		row := p.row(int32(s))
		tag := uint32(p.e.hash(rowKey(row)))
		require.Equal(t, tag, p.tagOf(int32(s)), "slot %d: tag", s)
		require.Equal(t, int32(s), p.slotAt(tag, uint32(sl.page), sl.off), "slot %d: index entry", s)
		require.Equal(t, int32(s), p.lookup(tag, rowKey(row)), "slot %d: lookup", s)
		size := chunkSize(sl.class, sl.size)
		require.LessOrEqual(t, int(sl.size), size)
		if sl.class == classBig {
			require.Equal(t, uint32(0), sl.off)
			require.Equal(t, size, len(a.pages[sl.page]), "slot %d: a big row's page", s)
		}
		liveAt[chunk{uint32(sl.page), sl.off}] = int32(s)
		liveBytes[sl.page] += uint32(size)
		charged += int64(size)
	}
	require.Equal(t, items, p.idx.n, "index entries")
	require.Equal(t, int64(items), p.items.Load())
	require.Equal(t, p.metaSize(), p.metaCharged, "slot array and index charged")
	require.Equal(t, charged+p.metaCharged, p.charged, "charged")

	// Free lists: well formed, and each chunk listed once.
	listed := map[chunk]uint16{}
	for cls, head := range a.free {
		prev := uint64(0)
		for l := head; l != 0; {
			page, off := unlinkOf(l)
			c := a.pages[page][off:]
			require.True(t, isFree(c), "class %d: listed chunk %d/%d is not free", cls, page, off)
			require.Equal(t, uint16(cls), binary.LittleEndian.Uint16(c[fcClass:]))
			if prev != 0 {
				require.Equal(t, prev, get48(c[fcPrev:]), "class %d: prev link of %d/%d", cls, page, off)
			}
			_, dup := listed[chunk{page, off}]
			require.False(t, dup, "chunk %d/%d listed twice", page, off)
			listed[chunk{page, off}] = uint16(cls)
			prev, l = l, get48(c[fcNext:])
		}
	}
	var pageBytes int64
	for v, pg := range a.pages {
		if pg == nil {
			require.Zero(t, a.live[v])
			continue
		}
		pageBytes += int64(len(pg))
		require.Equal(t, liveBytes[v], a.live[v], "page %d: live bytes", v)
		if s, ok := liveAt[chunk{uint32(v), 0}]; ok && p.slots[s].class == classBig {
			continue
		}
		end := len(pg)
		if v == a.cur {
			end = a.used
		}
		off := 0
		for off+minChunk <= end {
			if s, ok := liveAt[chunk{uint32(v), uint32(off)}]; ok {
				off += int(classSizes[p.slots[s].class])
				continue
			}
			cls, ok := listed[chunk{uint32(v), uint32(off)}]
			require.True(t, ok, "page %d: offset %d is neither a row nor a listed free chunk", v, off)
			delete(listed, chunk{uint32(v), uint32(off)})
			off += int(classSizes[cls])
		}
		require.LessOrEqual(t, off, end, "page %d: chunks run past its end", v)
		if v != a.cur {
			require.Less(t, end-off, minChunk, "page %d: bytes lost at its end", v)
		}
	}
	require.Empty(t, listed, "free chunks on no page")
	require.Equal(t, pageBytes, a.pageBytes)
	return pageBytes
}

// checkEngine runs checkArena on every partition and checks the engine's
// totals; it returns the bytes of all pages.
func checkEngine(t testing.TB, e *Engine) int64 {
	t.Helper()
	var pages, charged, meta int64
	for _, tb := range *e.tables.Load() {
		for _, p := range tb.parts {
			p.mu.Lock()
			pages += checkArena(t, p)
			h := &tb.hints[p.num]
			require.Equal(t, uintptr(unsafe.Pointer(unsafe.SliceData(p.idx.e))), h.base.Load(), "partition %d's index hint: where", p.num)
			require.Equal(t, uint32(len(p.idx.e)), h.n.Load(), "partition %d's index hint: entries", p.num)
			charged += p.charged
			meta += p.metaCharged
			p.mu.Unlock()
		}
	}
	require.Equal(t, meta, e.metaBytes.Load(), "engine slot array and index bytes")
	require.Equal(t, pages+e.pool.bytes.Load(), e.pageBytes.Load(), "engine page bytes")
	require.Equal(t, charged, e.used.Load(), "engine bytes")
	return pages
}

// A new row whose slot array or index grows takes their bytes off the page
// cap before its chunk takes a page. They were taken off only afterwards, so
// a chunk could take the last room under the cap and the charge then pushed
// the pages past it (by 96 bytes, a rare failure of
// TestPageMovesKeepRowsIntact, whose partitions move with the hash seed).
func TestRowRoomComesOffThePageCapFirst(t *testing.T) {
	e := newEngine(t, Config{MemoryLimit: 2 << 20, Partitions: 1})
	tbl := mustCreateKept(t, e, "db", 1<<20)
	et, err := e.tableOf(tbl)
	require.NoError(t, err)
	p := et.parts[0]
	var need int64
	for i := 0; ; i++ {
		require.Less(t, i, 100_000, "the slot array and index never grew past their free bytes")
		p.mu.Lock()
		if need, err = p.roomForRow(e.now(), false); err != nil || need > 0 {
			break // p.mu held
		}
		p.mu.Unlock()
		run(t, e, writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("k", i), set(colValue, ndbclient.Bytes([]byte("v")))))
	}
	// The row's chunk takes what is left under the cap, then it is charged.
	var took, pages, limit int64
	if err == nil {
		took = e.takePagesUpTo(1<<40, pageAlign, false)
		p.syncMeta(need)
		pages, limit = e.pageBytes.Load(), e.pageCap()
		e.pageBytes.Add(-took)
	}
	p.mu.Unlock() // before any require: a test that stops here must not hold it
	require.NoError(t, err)
	require.Positive(t, took)
	require.LessOrEqual(t, pages, limit, "pages past the cap")
}

// Random sizes (16 bytes to 200 KB), writes, appends and deletes on a cache
// and a table without eviction under one small limit: values always read back
// as written (rows that moved included), the table without eviction loses
// nothing, and the structures stay consistent.
func TestPageMovesKeepRowsIntact(t *testing.T) {
	const limit = 2 << 20
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 3})
	cache := mustCreate(t, e, memcacheTable("cache", 1<<20))
	db := mustCreateKept(t, e, "db", 1<<20)
	rng := rand.New(rand.NewPCG(5, 6))
	models := map[*ndbclient.Table]map[string][]byte{cache: {}, db: {}}
	size := func() int { return int(math.Exp(rng.Float64() * math.Log(200_000))) }
	for i := range 30_000 {
		tbl := cache
		if rng.IntN(3) == 0 {
			tbl = db
		}
		m := models[tbl]
		k := fmt.Sprint("k", rng.IntN(400))
		switch rng.IntN(6) {
		case 0:
			w := writeOp(ndbclient.OpDelete, tbl, k)
			run(t, e, w)
			delete(m, k)
		case 1:
			data := valueOf(rng.IntN(3000), i)
			w := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key(k), AppendColumn: colValue, Data: data}
			run(t, e, w)
			if w.Err == nil {
				m[k] = append(m[k], data...)
			} else if codeOf(w) == ndbclient.CodeNotFound {
				delete(m, k) // evicted
			}
		default:
			v := valueOf(size(), i)
			w := writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.Bytes(v)))
			run(t, e, w)
			if w.Err == nil {
				m[k] = v
			} else {
				require.Equal(t, ndbclient.CodeOutOfMemory, codeOf(w))
				if tbl == cache {
					// Only the rows of the table without eviction can keep it out.
					_, chunk := classOf(len(v) + 64)
					require.Greater(t, tableCharged(e, db)+int64(chunk), int64(limit)-int64(3*maxChunk), "a cache write refused")
				}
			}
		}
		require.LessOrEqual(t, e.pageBytes.Load(), e.pageCap())
		if i%3000 == 0 {
			checkEngine(t, e)
		}
	}
	checkEngine(t, e)
	for tbl, m := range models {
		for k, v := range m {
			got, ok := getValue(t, e, tbl, k)
			if tbl == cache && !ok {
				continue // evicted
			}
			require.True(t, ok, "%s %s", tbl.Name, k)
			require.Equal(t, string(v), got, "%s %s", tbl.Name, k)
		}
	}
	st := e.Stats()
	t.Logf("bytes %d KiB, pages %d KiB of %d, evictions %d, oom %d", st.Bytes>>10, e.pageBytes.Load()>>10, e.pageCap()>>10, st.Evictions, st.OutOfMemory)
	assert.Positive(t, st.Evictions)
}

// A cache that fills the limit used to leave a table without eviction no room
// at all: 0 of 20 writes stored. Now cache rows give way to it (least
// recently used first) until its own rows fill the limit, and its rows are
// never evicted for the cache.
func TestCacheMakesRoomForTableWithoutEviction(t *testing.T) {
	const limit = 1 << 20
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 4})
	cache := mustCreate(t, e, memcacheTable("cache", 1<<20))
	db := mustCreateKept(t, e, "db", 1<<20)
	v := strings.Repeat("c", 4000)
	for i := range 1000 { // 4 MB of cache sets
		put(t, e, cache, fmt.Sprint("c", i), item{value: v})
	}
	require.Greater(t, e.Stats().Bytes, uint64(limit-2*rowCharge(5, 4000)), "the cache fills the limit")

	for i := range 20 {
		w := writeOp(ndbclient.OpInsert, db, fmt.Sprint("d", i), set(colValue, ndbclient.String(v)))
		run(t, e, w)
		require.NoError(t, w.Err, "write %d of 20", i)
	}
	// More cache writes evict cache rows only.
	for i := range 1000 {
		put(t, e, cache, fmt.Sprint("c2-", i), item{value: v})
	}
	for i := range 20 {
		_, ok := getValue(t, e, db, fmt.Sprint("d", i))
		require.True(t, ok)
	}
	// The table without eviction may take the whole limit.
	n := 20
	for ; ; n++ {
		w := writeOp(ndbclient.OpInsert, db, fmt.Sprint("d", n), set(colValue, ndbclient.String(v)))
		run(t, e, w)
		if w.Err != nil {
			require.Equal(t, ndbclient.CodeOutOfMemory, codeOf(w))
			break
		}
	}
	per := rowCharge(4, 4000)
	assert.GreaterOrEqual(t, uint64(n)*per, uint64(limit)-4*per, "the table without eviction filled the limit")
	checkEngine(t, e)
	t.Logf("table without eviction: %d rows of 4000 bytes; cache rows left %d", n, e.Stats().Items-uint64(n))
}

// tableCharged is what tbl's rows are charged.
func tableCharged(e *Engine, tbl *ndbclient.Table) int64 {
	et, _ := e.tableOf(tbl)
	var n int64
	for _, p := range et.parts {
		p.mu.Lock()
		n += p.charged
		p.mu.Unlock()
	}
	return n
}

// One cache container that fills the limit does not starve another: a cache
// write evicts another cache table's row when that row was used less recently
// than its own partition's least recently used.
func TestCacheTablesShareTheLimit(t *testing.T) {
	const limit = 1 << 20
	clock := newClock()
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 4, Now: clock.now})
	a := mustCreate(t, e, memcacheTable("a", 1<<20))
	b := mustCreate(t, e, memcacheTable("b", 1<<20))
	v := strings.Repeat("a", 4000)
	for i := range 1000 {
		put(t, e, a, fmt.Sprint("a", i), item{value: v})
	}
	aFull := tableCharged(e, a)
	clock.advance(1)
	for i := range 1000 {
		put(t, e, b, fmt.Sprint("b", i), item{value: v}) // put fails the test on any error
	}
	assert.Zero(t, e.Stats().OutOfMemory)
	assert.Zero(t, tableCharged(e, a), "a's rows were older than any of b's")
	assert.Greater(t, tableCharged(e, b), aFull-4*int64(rowCharge(5, 4000)), "b took the room a had")
	for i := 900; i < 1000; i++ {
		_, ok := getValue(t, e, b, fmt.Sprint("b", i))
		assert.True(t, ok)
	}
	// Used again later, a's new rows are as good as b's: each table now
	// evicts its own least recently used.
	clock.advance(1)
	for i := range 100 {
		put(t, e, a, fmt.Sprint("a", i), item{value: v})
	}
	assert.Greater(t, tableCharged(e, a), 90*int64(rowCharge(4, 4000)))
	checkEngine(t, e)
}

// Writers of every size on a cache and a table without eviction, at the
// limit, concurrently: page moves between partitions (try-locked) stay
// consistent, within the cap, and deadlock-free.
func TestConcurrentPageMoves(t *testing.T) {
	const limit = 2 << 20
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 4, Nodes: 2})
	cache := mustCreate(t, e, memcacheTable("cache", 1<<20))
	db := mustCreateKept(t, e, "db", 1<<20)
	var wg sync.WaitGroup
	var peak sync.Mutex
	maxPages := int64(0)
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 3000 {
				phase := i * 6 / 3000 // sizes shift over time, as in the probe
				n := int(float64(200) * math.Pow(3, float64(phase)) * (0.5 + rng.Float64()))
				tbl := cache
				if rng.IntN(4) == 0 {
					tbl = db
				}
				k := fmt.Sprintf("%d-%d", w, rng.IntN(300))
				var ops []*ndbclient.Op
				if rng.IntN(3) == 0 {
					ops = append(ops, writeOp(ndbclient.OpDelete, tbl, k))
				} else {
					ops = append(ops, writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.Bytes(valueOf(n, i)))))
				}
				ops = append(ops, readOp(cache, fmt.Sprintf("%d-%d", w, rng.IntN(300)), colValue))
				assert.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: ops}))
				for _, op := range ops {
					switch codeOf(op) {
					case ndbclient.CodeOK, ndbclient.CodeNotFound, ndbclient.CodeOutOfMemory:
					default:
						t.Errorf("%v: %v", op.Kind, op.Err)
					}
				}
				peak.Lock()
				maxPages = max(maxPages, e.pageBytes.Load())
				peak.Unlock()
			}
		})
	}
	wg.Wait()
	checkEngine(t, e)
	st := e.Stats()
	t.Logf("items %d bytes %d KiB pages peak %d KiB of %d, evictions %d oom %d", st.Items, st.Bytes>>10, maxPages>>10, e.pageCap()>>10, st.Evictions, st.OutOfMemory)
	assert.LessOrEqual(t, st.Bytes, st.LimitBytes)
	assert.LessOrEqual(t, maxPages, e.pageCap()+maxPage, "the cap, and one compaction's page")
}

// Transactions at the cap: a transaction that moves rows between size classes
// and then fails puts every row back as it was (restoring may pass the cap,
// since those rows fitted before), and the structures stay consistent.
func TestPageMovesUnderTransactions(t *testing.T) {
	const limit = 2 << 20
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 2})
	db := mustCreateKept(t, e, "db", 1<<20)
	rng := rand.New(rand.NewPCG(7, 8))
	model := map[string][]byte{}
	for i := range 4000 {
		var ops []*ndbclient.Op
		writes := map[string][]byte{}
		for range 1 + rng.IntN(4) {
			k := fmt.Sprint("k", rng.IntN(200))
			if _, ok := model[k]; ok && rng.IntN(4) == 0 {
				ops = append(ops, writeOp(ndbclient.OpDelete, db, k))
				writes[k] = nil
				continue
			}
			v := valueOf(int(math.Exp(rng.Float64()*math.Log(150_000))), i)
			ops = append(ops, writeOp(ndbclient.OpWrite, db, k, set(colValue, ndbclient.Bytes(v))))
			writes[k] = v
		}
		if rng.IntN(3) == 0 { // fails at its end
			k := fmt.Sprint("k", rng.IntN(200))
			ops = append(ops, writeOp(ndbclient.OpInsert, db, k, set(colValue, ndbclient.String("dup"))))
			if _, ok := model[k]; !ok {
				if _, ok := writes[k]; !ok {
					ops = ops[:len(ops)-1] // would not fail
				}
			}
		}
		run(t, e, txn(ops...)...)
		failed := false
		for _, op := range ops {
			if op.Err != nil { // a delete of a missing row fails it too
				failed = true
			}
		}
		if !failed {
			for k, v := range writes {
				if v == nil {
					delete(model, k)
				} else {
					model[k] = v
				}
			}
		}
		if i%500 == 0 {
			checkEngine(t, e)
		}
	}
	checkEngine(t, e)
	for k, v := range model {
		got, ok := getValue(t, e, db, k)
		require.True(t, ok, k)
		require.Equal(t, string(v), got, k)
	}
	st := e.Stats()
	t.Logf("rows %d, bytes %d KiB, pages %d KiB of %d, oom %d", st.Items, st.Bytes>>10, e.pageBytes.Load()>>10, e.pageCap()>>10, st.OutOfMemory)
	assert.Positive(t, st.OutOfMemory, "the test reached the limit")
}

// mixedAtLimit is a cache at a 16 MiB limit and single-write batches of
// values whose size changes every write, cycling through seven sizes from
// 100 bytes to 100 KB (so pages keep moving between classes).
func mixedAtLimit(t testing.TB) (e *Engine, next func() *ndbclient.Batch) {
	e = newEngine(t, Config{MemoryLimit: 16 << 20})
	tbl := mustCreate(t, e, memcacheTable("c", 1<<20))
	buf := make([]byte, 100_000)
	sizes := []int{100, 300, 1000, 3000, 10000, 30000, 99_900}
	sets := make([][]ndbclient.ColumnValue, len(sizes))
	for i, n := range sizes {
		sets[i] = []ndbclient.ColumnValue{set(colValue, ndbclient.Bytes(buf[:n]))}
	}
	keys := make([][]ndbclient.Value, 1<<14)
	for i := range keys {
		keys[i] = key(fmt.Sprint("k", i))
	}
	op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl}
	b := &ndbclient.Batch{Ops: []*ndbclient.Op{op}}
	i := 0
	return e, func() *ndbclient.Batch {
		op.Key, op.Set = keys[i&(len(keys)-1)], sets[(i*7+i/1000)%len(sets)]
		i++
		return b
	}
}

// Moving pages between classes allocates nothing from the Go heap once the
// engine's scratch is warm.
func TestPageMovesDoNotAllocate(t *testing.T) {
	e, next := mixedAtLimit(t)
	ctx := t.Context()
	for range 50_000 {
		require.NoError(t, e.Execute(ctx, next()))
	}
	evictions := e.Stats().Evictions
	allocs := testing.AllocsPerRun(20_000, func() {
		b := next()
		_ = e.Execute(ctx, b)
		if b.Ops[0].Err != nil {
			panic(b.Ops[0].Err)
		}
	})
	assert.Zero(t, allocs)
	assert.Greater(t, e.Stats().Evictions, evictions+10_000, "the writes evicted")
}

// BenchmarkWriteMixedSizesAtLimit: writes whose value size keeps changing, on a
// cache at its limit, so that chunks and pages move between size classes.
func BenchmarkWriteMixedSizesAtLimit(b *testing.B) {
	e, next := mixedAtLimit(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = e.Execute(ctx, next())
	}
}
