package embedded

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// rowCharge is what one row of the memcache table with a value of n bytes,
// a key of k bytes and no math value costs (see the row layout in
// rowcodec.go).
func rowCharge(k, n int) uint64 {
	// Key length, key (its length byte, its bytes), null bitmap, the NOT
	// NULL fixed columns (flags, cas, expiry; math is NULL: no byte), the
	// value (the last variable-length column: no length prefix).
	size := 1 + 1 + k + 1 + 4 + 8 + 4 + n
	_, chunk := classOf(size)
	return uint64(chunk)
}

// rowBytes is what e's rows are charged for their chunks: its bytes stat
// less what its slot arrays and indexes are charged.
func rowBytes(e *Engine) uint64 { return e.Stats().Bytes - uint64(e.metaBytes.Load()) }

func arenaBytes(t *testing.T, e *Engine, tbl *ndbclient.Table) int64 {
	et, err := e.tableOf(tbl)
	require.NoError(t, err)
	var n int64
	for _, p := range et.parts {
		p.mu.Lock()
		n += p.arena.pageBytes
		p.mu.Unlock()
	}
	return n
}

func TestBytesAccounting(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("t", 1<<20))
	put(t, e, tbl, "k1", item{value: strings.Repeat("v", 32)})
	assert.Equal(t, rowCharge(2, 32), e.Stats().Bytes)
	put(t, e, tbl, "k1", item{value: strings.Repeat("v", 1000)})
	assert.Equal(t, rowCharge(2, 1000), e.Stats().Bytes, "an update is charged its new size")
	put(t, e, tbl, "k2", item{value: strings.Repeat("v", 700_000)}) // a dedicated page
	assert.Equal(t, rowCharge(2, 1000)+rowCharge(2, 700_000), e.Stats().Bytes)
	v, ok := getValue(t, e, tbl, "k2")
	require.True(t, ok)
	assert.Equal(t, 700_000, len(v))
	pages := arenaBytes(t, e, tbl)
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "k2"))
	assert.Less(t, arenaBytes(t, e, tbl), pages-600_000, "a big row's page is released")
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "k1"))
	assert.Equal(t, uint64(0), e.Stats().Bytes)
}

func TestLRUEvictionOrder(t *testing.T) {
	clock := newClock()
	per := rowCharge(2, 10)
	e := newEngine(t, Config{Partitions: 1, MemoryLimit: 5 * per, Now: clock.now})
	tbl := mustCreate(t, e, memcacheTable("cache", 64))
	val := strings.Repeat("x", 10)
	for i := range 5 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: val})
	}
	require.Equal(t, uint64(5), e.Stats().Items)
	require.Equal(t, 5*per, e.Stats().Bytes)

	clock.advance(lruBumpInterval - 1)
	_, ok := getValue(t, e, tbl, "k0") // too soon after its write: no bump
	require.True(t, ok)
	clock.advance(1)
	_, ok = getValue(t, e, tbl, "k0") // a read bumps k0: k1 is now the oldest
	require.True(t, ok)
	put(t, e, tbl, "k3", item{value: val}) // a write bumps k3
	put(t, e, tbl, "k5", item{value: val})
	put(t, e, tbl, "k6", item{value: val})
	put(t, e, tbl, "k7", item{value: val})

	present := func() []string {
		var out []string
		for i := range 8 {
			if _, ok := getValue(t, e, tbl, fmt.Sprint("k", i)); ok {
				out = append(out, fmt.Sprint("k", i))
			}
		}
		return out
	}
	// Evicted in LRU order: k1, k2, k4 (k0 was read, k3 rewritten).
	assert.Equal(t, []string{"k0", "k3", "k5", "k6", "k7"}, present())
	st := e.Stats()
	assert.Equal(t, uint64(3), st.Evictions)
	assert.Equal(t, uint64(0), st.OutOfMemory)
	assert.LessOrEqual(t, st.Bytes, st.LimitBytes)

	// The list is now k7 k6 k5 k3 k0 (k0 is the tail). Reading k3 a minute
	// later bumps it, and the next insert evicts k0.
	clock.advance(lruBumpInterval)
	_, _ = getValue(t, e, tbl, "k3")
	put(t, e, tbl, "k8", item{value: val})
	_, ok = getValue(t, e, tbl, "k0")
	assert.False(t, ok, "k0 was the least recently used")
	_, ok = getValue(t, e, tbl, "k3")
	assert.True(t, ok)
}

// When its own partition has nothing left to give, a write evicts from the
// table's other partitions.
func TestEvictionSpillsToOtherPartitions(t *testing.T) {
	per := rowCharge(4, 100)
	e := newEngine(t, Config{Partitions: 4, MemoryLimit: 40 * per})
	tbl := mustCreate(t, e, memcacheTable("cache", 4096))
	for i := range 500 {
		put(t, e, tbl, fmt.Sprintf("%04d", i), item{value: strings.Repeat("v", 100)})
		require.LessOrEqual(t, e.Stats().Bytes, 40*per)
	}
	st := e.Stats()
	assert.Equal(t, uint64(40), st.Items)
	assert.Equal(t, uint64(460), st.Evictions)
	// One row as big as a third of the limit: more than its partition holds.
	put(t, e, tbl, "huge", item{value: strings.Repeat("h", int(13*per))})
	v, ok := getValue(t, e, tbl, "huge")
	require.True(t, ok)
	assert.Len(t, v, int(13*per))
}

func TestRowBiggerThanLimitIsRefusedWithoutEvicting(t *testing.T) {
	per := rowCharge(1, 10)
	e := newEngine(t, Config{Partitions: 2, MemoryLimit: 10 * per})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<20))
	for i := range 5 {
		put(t, e, tbl, fmt.Sprint(i), item{value: strings.Repeat("v", 10)})
	}
	w := writeOp(ndbclient.OpWrite, tbl, "x", set(colValue, ndbclient.Bytes(make([]byte, 11*per))))
	run(t, e, w)
	assert.Equal(t, ndbclient.CodeOutOfMemory, codeOf(w))
	assert.Equal(t, uint64(5), e.Stats().Items)
	assert.Equal(t, uint64(0), e.Stats().Evictions)
	assert.Equal(t, uint64(1), e.Stats().OutOfMemory)
}

// With eviction off, a full engine refuses writes with OutOfMemory and keeps
// every stored row as it was.
func TestOutOfMemoryWithoutEviction(t *testing.T) {
	per := rowCharge(4, 50)
	e := newEngine(t, Config{Partitions: 4, MemoryLimit: 100 * per})
	tbl := mustCreateKept(t, e, "db", 4096)
	stored := map[string]string{}
	var oom *ndbclient.Op
	for i := 0; oom == nil; i++ {
		k, v := fmt.Sprintf("%04d", i), fmt.Sprintf("%050d", i)
		w := writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.String(v)), set(colFlags, ndbclient.Uint(uint64(i))))
		run(t, e, w)
		switch codeOf(w) {
		case ndbclient.CodeOK:
			stored[k] = v
		case ndbclient.CodeOutOfMemory:
			oom = w
		default:
			t.Fatalf("insert %s: %v", k, w.Err)
		}
	}
	require.Len(t, stored, 100)
	assert.True(t, strings.Contains(oom.Err.Error(), "memory"), oom.Err.Error())
	assert.ErrorIs(t, oom.Err, ndbclient.ErrOutOfMemory)
	st := e.Stats()
	assert.Equal(t, uint64(1), st.OutOfMemory)
	assert.Equal(t, uint64(0), st.Evictions)
	_, ok := getValue(t, e, tbl, oom.Key[0].Str())
	assert.False(t, ok, "the refused row is not half-written")

	// Growing a row past the limit fails and leaves the old row intact; so
	// do append and a growing upsert.
	for _, op := range []*ndbclient.Op{
		writeOp(ndbclient.OpUpdate, tbl, "0007", set(colValue, ndbclient.Bytes(make([]byte, 1000))), set(colFlags, ndbclient.Uint(99))),
		writeOp(ndbclient.OpWrite, tbl, "0008", set(colValue, ndbclient.Bytes(make([]byte, 1000)))),
		{Kind: ndbclient.OpAppend, Table: tbl, Key: key("0009"), AppendColumn: colValue, Data: make([]byte, 1000)},
		{Kind: ndbclient.OpAdd, Table: tbl, Key: key("new"), AddColumn: colMath, Create: true, Set: []ndbclient.ColumnValue{set(colValue, ndbclient.Bytes(make([]byte, 100)))}},
	} {
		run(t, e, op)
		assert.Equal(t, ndbclient.CodeOutOfMemory, codeOf(op), "%v", op.Kind)
	}
	for k, v := range stored {
		rd := readOp(tbl, k, colValue, colFlags)
		run(t, e, rd)
		require.NoError(t, rd.Err, k)
		require.Equal(t, v, rd.Row[0].Str(), k)
		i, err := strconv.ParseUint(k, 10, 64)
		require.NoError(t, err)
		require.Equal(t, i, rd.Row[1].Uint(), k)
	}
	assert.Equal(t, uint64(100), e.Stats().Items)

	// Shrinking and deleting make room again.
	sh := writeOp(ndbclient.OpUpdate, tbl, "0001", set(colValue, ndbclient.String("")))
	run(t, e, sh)
	require.NoError(t, sh.Err)
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "0002"))
	w := writeOp(ndbclient.OpInsert, tbl, "fits", set(colValue, ndbclient.String(strings.Repeat("f", 50))))
	run(t, e, w)
	assert.NoError(t, w.Err)
}

// Set/delete churn reuses freed arena space: memory stays flat.
func TestArenaReuseUnderChurn(t *testing.T) {
	e := newEngine(t, Config{Partitions: 4})
	tbl := mustCreate(t, e, memcacheTable("churn", 8192))
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 8192)
	churn := func() {
		for i := range 2000 {
			n := rng.IntN(4000)
			w := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint(i%500), set(colValue, ndbclient.Bytes(buf[:n])))
			run(t, e, w)
			require.NoError(t, w.Err)
			if rng.IntN(3) == 0 {
				run(t, e, writeOp(ndbclient.OpDelete, tbl, fmt.Sprint(rng.IntN(500))))
			}
		}
	}
	for range 10 {
		churn() // warm up: every size class gets its chunks
	}
	warm := arenaBytes(t, e, tbl)
	for range 50 {
		churn() // ~200 MB of writes
	}
	// Per-class free lists settle at each class's peak use; what is left is
	// page granularity (at most one more page per partition).
	assert.LessOrEqual(t, arenaBytes(t, e, tbl), warm+4*maxPage, "churn does not grow the arena")
	assert.Less(t, arenaBytes(t, e, tbl), int64(8<<20))

	// Same-size churn reuses chunks exactly.
	same := func() {
		for i := range 1000 {
			w := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("s", i%100), set(colValue, ndbclient.Bytes(buf[:1000])))
			run(t, e, w)
			require.NoError(t, w.Err)
			run(t, e, writeOp(ndbclient.OpDelete, tbl, fmt.Sprint("s", i%100)))
		}
	}
	same()
	warm = arenaBytes(t, e, tbl)
	same()
	assert.Equal(t, warm, arenaBytes(t, e, tbl))
	for i := range 500 {
		run(t, e, writeOp(ndbclient.OpDelete, tbl, fmt.Sprint(i)))
	}
	assert.Equal(t, uint64(0), e.Stats().Bytes)
	assert.Equal(t, uint64(0), e.Stats().Items)
}
