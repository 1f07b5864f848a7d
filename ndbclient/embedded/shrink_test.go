package embedded

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// lruKeys lists p's rows' keys from most to least recently used, checking
// the links both ways.
func lruKeys(t *testing.T, p *partition) []string {
	t.Helper()
	var keys []string
	prev := int32(-1)
	for s := p.lruHead; s >= 0; s = p.slots[s].next {
		require.Equal(t, prev, p.slots[s].prev, "slot %d's prev", s)
		require.NotZero(t, p.slots[s].size, "a free slot on the LRU list")
		keys = append(keys, string(rowKey(p.row(s))[1:])) // (past its length byte)
		prev = s
	}
	require.Equal(t, prev, p.lruTail)
	return keys
}

// Deleting most rows shrinks the slot array and the index; the rows left
// keep their values, their index entries and their LRU order, and the
// partition grows again as before.
func TestSlotsAndIndexShrinkKeepRows(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 1, Now: clock.now})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<10))
	tt, err := e.tableOf(tbl)
	require.NoError(t, err)
	p := tt.parts[0]
	const n = 20_000
	for i := range n {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: fmt.Sprint("v", i)})
		if i%1000 == 0 {
			clock.advance(lruBumpInterval) // LRU order differs from slot order below
			put(t, e, tbl, fmt.Sprint("k", i/2), item{value: fmt.Sprint("v", i/2)})
		}
	}
	p.mu.Lock()
	peakSlots, peakCap, peakIndex, peakMeta := len(p.slots), cap(p.slots), len(p.idx.e), p.metaCharged
	p.mu.Unlock()
	kept := map[string]bool{}
	for i := range n {
		if k := fmt.Sprint("k", i); i%10 == 3 {
			kept[k] = true
		} else {
			run(t, e, writeOp(ndbclient.OpDelete, tbl, k))
		}
	}
	p.mu.Lock()
	var want []string
	for _, k := range lruKeys(t, p) {
		require.True(t, kept[k], "%q on the LRU list", k)
		want = append(want, k)
	}
	p.mu.Unlock()

	p.mu.Lock()
	assert.Less(t, len(p.slots), peakSlots/4, "slot array shrunk")
	assert.Less(t, cap(p.slots), peakCap/2, "its room too")
	assert.Less(t, len(p.idx.e), peakIndex/2, "index shrunk")
	assert.Less(t, p.metaCharged, peakMeta/2, "and charged less")
	assert.Equal(t, want, lruKeys(t, p), "LRU order kept")
	p.mu.Unlock()
	checkEngine(t, e)
	for k := range kept {
		v, ok := getValue(t, e, tbl, k)
		require.True(t, ok, k)
		require.Equal(t, "v"+strings.TrimPrefix(k, "k"), v)
	}
	for i := range n {
		put(t, e, tbl, fmt.Sprint("again", i), item{value: "x"})
	}
	checkEngine(t, e)
	assert.Equal(t, uint64(len(kept)+n), e.Stats().Items)
}

// A snapshot walks slots by number across lock holds: while one runs the
// slot array is not renumbered, and shrinks after.
func TestSlotsWaitForSnapshotToShrink(t *testing.T) {
	e := newEngine(t, Config{Partitions: 1})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<10))
	tt, err := e.tableOf(tbl)
	require.NoError(t, err)
	p := tt.parts[0]
	for i := range 4000 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: "v"})
	}
	e.snapshotting.Add(1)
	for i := range 3900 {
		run(t, e, writeOp(ndbclient.OpDelete, tbl, fmt.Sprint("k", i)))
	}
	p.mu.Lock()
	assert.Equal(t, 4000, len(p.slots), "not renumbered during a snapshot")
	p.mu.Unlock()
	e.snapshotting.Add(-1)
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "k3900"))
	p.mu.Lock()
	assert.Equal(t, 99, len(p.slots), "shrunk after it")
	p.mu.Unlock()
	checkEngine(t, e)
}

// The OS refusing a mapping for a slot array or an index (vm.max_map_count)
// fails the write with out of memory; it used to panic.
func TestSlotGrowthRefusedIsOutOfMemory(t *testing.T) {
	e := newEngine(t, Config{Partitions: 1})
	tbl := mustCreate(t, e, memcacheTable("items", 1<<10))
	i := 0
	for ; i < 3000; i++ { // slots and index past offHeapMin: mapped
		put(t, e, tbl, fmt.Sprint("k", i), item{value: "v"})
	}
	refuseMaps.Store(refuseRegions)
	defer refuseMaps.Store(0)
	oom := e.Stats().OutOfMemory
	var failed *ndbclient.Op
	for ; i < 10_000 && failed == nil; i++ {
		w := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("k", i), set(colValue, ndbclient.String("v")))
		run(t, e, w)
		if w.Err != nil {
			failed = w
		}
	}
	require.NotNil(t, failed, "the slot array or index had to grow")
	assert.Equal(t, ndbclient.CodeOutOfMemory, codeOf(failed))
	assert.Equal(t, oom+1, e.Stats().OutOfMemory)
	checkEngine(t, e)
	refuseMaps.Store(0)
	put(t, e, tbl, "after", item{value: "v"})
	checkEngine(t, e)
}

// A rolled-back delete whose row cannot be put back (the OS refuses its
// page) loses the row, logged and counted: it used to index slot -1.
func TestRollbackPutBackRefusedIsCounted(t *testing.T) {
	log := &logBuffer{}
	e := newEngine(t, Config{Partitions: 1, Logger: slog.New(slog.NewTextHandler(log, nil))})
	tbl := mustCreate(t, e, memcacheTable("items", 1<<20))
	put(t, e, tbl, "big", item{value: strings.Repeat("b", 700_000)}) // a page of its own
	put(t, e, tbl, "dup", item{value: "d"})
	refuseMaps.Store(refuseAll)
	defer refuseMaps.Store(0)
	ops := txn(writeOp(ndbclient.OpDelete, tbl, "big"), writeOp(ndbclient.OpInsert, tbl, "dup", set(colValue, ndbclient.String("x"))))
	require.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: ops}))
	assert.Equal(t, ndbclient.CodeDuplicate, codeOf(ops[1]))
	assert.Equal(t, uint64(1), e.Stats().RowsLost)
	assert.Contains(t, log.String(), "could not be put back")
	refuseMaps.Store(0)
	_, ok := getValue(t, e, tbl, "big")
	assert.False(t, ok)
	v, ok := getValue(t, e, tbl, "dup")
	assert.True(t, ok)
	assert.Equal(t, "d", v)
	checkEngine(t, e)
}
