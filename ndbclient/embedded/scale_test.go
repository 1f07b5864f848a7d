package embedded

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// One million small rows must not mean a million heap objects: rows live in
// pointer-free pages, slots and index arrays, so the heap object count (what
// the GC has to trace and sweep) barely moves.
func TestMillionRowsStayOffTheGCHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 1M rows")
	}
	const rows = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("big", 1<<20)) // string_value VARBINARY(1048576)
	value := make([]byte, 32)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	const per = 1000
	ops := make([]ndbclient.Op, per)
	batch := &ndbclient.Batch{Ops: make([]*ndbclient.Op, per)}
	keys := make([]byte, 0, per*16)
	for i := range ops {
		ops[i].Key = make([]ndbclient.Value, 1)
		ops[i].Set = make([]ndbclient.ColumnValue, 4)
		batch.Ops[i] = &ops[i]
	}
	for base := 0; base < rows; base += per {
		keys = keys[:0]
		for i := range ops {
			o := &ops[i]
			n := len(keys)
			keys = strconv.AppendInt(append(keys, "key:"...), int64(base+i), 10)
			o.Kind, o.Table = ndbclient.OpInsert, tbl
			o.Key[0] = ndbclient.Bytes(keys[n:])
			o.Set[0] = set(colValue, ndbclient.Bytes(value))
			o.Set[1] = set(colFlags, ndbclient.Uint(uint64(i)))
			o.Set[2] = set(colCas, ndbclient.Uint(uint64(base+i)))
			o.Set[3] = set(colExpire, ndbclient.Uint(0))
		}
		require.NoError(t, e.Execute(context.Background(), batch))
		for i := range ops {
			if ops[i].Err != nil {
				t.Fatalf("insert %d: %v", base+i, ops[i].Err)
			}
		}
	}
	runtime.GC()
	start := time.Now()
	runtime.GC()
	gcTime := time.Since(start)
	runtime.ReadMemStats(&after)

	st := e.Stats()
	require.Equal(t, uint64(rows), st.Items)
	objects := int64(after.HeapObjects) - int64(before.HeapObjects)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("1M rows: +%d heap objects, %.1f heap bytes/row, %.1f charged bytes/row, forced GC %v",
		objects, float64(heap)/rows, float64(st.Bytes)/rows, gcTime)
	assert.Less(t, objects, int64(5000), "heap objects do not grow per row")
	assert.Less(t, heap/rows, int64(200), "bytes per small row")

	for _, i := range []int{0, 1, 4242, 999_999} {
		rd := readOp(tbl, fmt.Sprint("key:", i), colValue, colCas)
		run(t, e, rd)
		require.NoError(t, rd.Err)
		assert.Equal(t, string(value), rd.Row[0].Str())
		assert.Equal(t, uint64(i), rd.Row[1].Uint())
	}
	runtime.KeepAlive(e)
}
