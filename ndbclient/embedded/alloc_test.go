package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// The hot path allocates nothing once the caller's op and the engine's scratch
// buffers are warm: in memory, and with a data dir (the log's buffers are
// reused too; with fsync always, through Submit, whose completion comes from
// the log writer).
func TestSteadyStateAllocations(t *testing.T) {
	t.Run("in memory", func(t *testing.T) {
		e := newEngine(t, Config{})
		steadyStateAllocations(t, e, nil)
	})
	for _, mode := range []FsyncMode{FsyncEverySec, FsyncAlways} {
		t.Run("data dir, fsync "+mode.String(), func(t *testing.T) {
			e, err := Open(Config{DataDir: t.TempDir(), Fsync: mode, ReapInterval: -1, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, e.Close()) })
			var submit func(*ndbclient.Batch)
			if mode == FsyncAlways {
				ch := make(chan struct{}, 1)
				done := func(*ndbclient.Batch, error) { ch <- struct{}{} }
				submit = func(b *ndbclient.Batch) { e.Submit(b, done); <-ch }
			}
			steadyStateAllocations(t, e, submit)
		})
	}
}

// steadyStateAllocations runs the hot path's ops through exec (nil:
// Execute) and checks they allocate nothing.
func steadyStateAllocations(t *testing.T, e *Engine, exec func(*ndbclient.Batch)) {
	tbl := mustCreate(t, e, memcacheTable("alloc", 1024))
	for i := range 1000 {
		put(t, e, tbl, fmt.Sprint("key:", i), item{value: strings.Repeat("v", 32), math: u64(1)})
	}
	ctx := context.Background()
	value := []byte(strings.Repeat("w", 32))
	k := []ndbclient.Value{ndbclient.String("key:7")}

	read := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k, Read: []int{colValue, colFlags, colCas, colMath}}
	write := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: k, Set: []ndbclient.ColumnValue{
		set(colValue, ndbclient.Bytes(value)), set(colFlags, ndbclient.Uint(1)), set(colCas, ndbclient.Uint(2)), set(colExpire, ndbclient.Uint(0)),
	}}
	incr := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: k, AddColumn: colMath, Delta: 1, Read: []int{colMath}}
	miss := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.String("absent")}, Read: []int{colValue}}
	insDel := []*ndbclient.Op{
		{Kind: ndbclient.OpInsert, Table: tbl, Key: []ndbclient.Value{ndbclient.String("churn")}, Set: write.Set},
		{Kind: ndbclient.OpDelete, Table: tbl, Key: []ndbclient.Value{ndbclient.String("churn")}},
	}
	var multi []*ndbclient.Op
	for i := range 32 {
		multi = append(multi, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl,
			Key: []ndbclient.Value{ndbclient.String(fmt.Sprint("key:", i*13))}, Read: []int{colValue, colFlags}})
	}

	cases := []struct {
		name   string
		ops    []*ndbclient.Op
		pooled bool // uses the sync.Pool'ed scratch (multi-op batches)
	}{
		{"read", []*ndbclient.Op{read}, false},
		{"read miss", []*ndbclient.Op{miss}, false},
		{"write", []*ndbclient.Op{write}, false},
		{"incr", []*ndbclient.Op{incr}, false},
		{"insert+delete batch", insDel, true},
		{"32-key multi-get", multi, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.pooled && raceEnabled {
				t.Skip("sync.Pool drops items under -race")
			}
			b := &ndbclient.Batch{Ops: c.ops}
			allocs := testing.AllocsPerRun(1000, func() {
				if exec != nil {
					exec(b)
				} else if err := e.Execute(ctx, b); err != nil {
					panic(err)
				}
			})
			for _, op := range c.ops {
				if op != miss {
					require.NoError(t, op.Err)
				}
			}
			assert.Zero(t, allocs)
			t.Logf("%s: %v allocs/op", c.name, allocs)
		})
	}
}

// benchEngine is a memcache table with n rows of 32-byte values.
func benchEngine(b *testing.B, n int) (*Engine, *ndbclient.Table) {
	e := newEngine(b, Config{})
	tbl := mustCreate(b, e, memcacheTable("bench", 1<<20))
	val := []byte(strings.Repeat("v", 32))
	batch := &ndbclient.Batch{}
	for i := 0; i < n; i += 100 {
		batch.Ops = batch.Ops[:0]
		for j := i; j < min(i+100, n); j++ {
			batch.Ops = append(batch.Ops, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(fmt.Sprintf("key:%08d", j)),
				Set: []ndbclient.ColumnValue{set(colValue, ndbclient.Bytes(val)), set(colFlags, ndbclient.Uint(0)), set(colCas, ndbclient.Uint(uint64(j)))}})
		}
		require.NoError(b, e.Execute(context.Background(), batch))
	}
	return e, tbl
}

const benchRows = 100_000

// benchParallel runs body on every benchmark goroutine against one engine
// of benchRows rows; i differs per goroutine, to start its keys elsewhere.
func benchParallel(b *testing.B, body func(e *Engine, tbl *ndbclient.Table, i uint64, pb *testing.PB)) {
	e, tbl := benchEngine(b, benchRows)
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) { body(e, tbl, seq.Add(1)*7919, pb) })
}

// BenchmarkRead: parallel single-key reads of a 32-byte value, like memcached
// get.
func BenchmarkRead(b *testing.B) {
	benchParallel(b, func(e *Engine, tbl *ndbclient.Table, i uint64, pb *testing.PB) {
		keys := make([][]ndbclient.Value, 1024)
		for j := range keys {
			keys[j] = key(fmt.Sprintf("key:%08d", (i+uint64(j)*104729)%benchRows))
		}
		op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Read: []int{colValue, colFlags, colCas}}
		batch := &ndbclient.Batch{Ops: []*ndbclient.Op{op}}
		ctx := context.Background()
		for n := 0; pb.Next(); n++ {
			op.Key = keys[n&1023]
			_ = e.Execute(ctx, batch)
			if op.Err != nil {
				b.Fatal(op.Err)
			}
		}
	})
}

// BenchmarkWrite: parallel single-key upserts of a 32-byte value, like
// memcached set.
func BenchmarkWrite(b *testing.B) {
	val := []byte(strings.Repeat("w", 32))
	benchParallel(b, func(e *Engine, tbl *ndbclient.Table, i uint64, pb *testing.PB) {
		keys := make([][]ndbclient.Value, 1024)
		for j := range keys {
			keys[j] = key(fmt.Sprintf("key:%08d", (i+uint64(j)*104729)%benchRows))
		}
		op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Set: []ndbclient.ColumnValue{
			set(colValue, ndbclient.Bytes(val)), set(colFlags, ndbclient.Uint(0)), set(colCas, ndbclient.Uint(1)), set(colExpire, ndbclient.Uint(0)),
		}}
		batch := &ndbclient.Batch{Ops: []*ndbclient.Op{op}}
		ctx := context.Background()
		for n := 0; pb.Next(); n++ {
			op.Key = keys[n&1023]
			_ = e.Execute(ctx, batch)
			if op.Err != nil {
				b.Fatal(op.Err)
			}
		}
	})
}

// BenchmarkMultiGet: parallel 32-key read batches (per key figures: divide by 32).
func BenchmarkMultiGet(b *testing.B) {
	benchParallel(b, func(e *Engine, tbl *ndbclient.Table, i uint64, pb *testing.PB) {
		batch := &ndbclient.Batch{}
		for j := range 32 {
			batch.Ops = append(batch.Ops, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Read: []int{colValue, colFlags, colCas},
				Key: key(fmt.Sprintf("key:%08d", (i+uint64(j)*104729)%benchRows))})
		}
		ctx := context.Background()
		for pb.Next() {
			_ = e.Execute(ctx, batch)
		}
	})
}

// BenchmarkGets16: batches of 16 single-key reads, each batch of other keys,
// like a memcache connection's pipeline of 16 gets (per key figures: divide
// by 16). Unlike BenchmarkMultiGet, the keys seldom sit in the CPU's nearest
// caches.
func BenchmarkGets16(b *testing.B) {
	benchParallel(b, func(e *Engine, tbl *ndbclient.Table, i uint64, pb *testing.PB) {
		batches := make([]ndbclient.Batch, 1024)
		for n := range batches {
			for j := range 16 {
				k := (i + uint64(n*16+j)*104729) % benchRows
				batches[n].Ops = append(batches[n].Ops, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl,
					Read: []int{colValue, colFlags, colCas}, Key: key(fmt.Sprintf("key:%08d", k))})
			}
		}
		ctx := context.Background()
		for n := 0; pb.Next(); n++ {
			batch := &batches[n&1023]
			_ = e.Execute(ctx, batch)
			if batch.Ops[0].Err != nil {
				b.Fatal(batch.Ops[0].Err)
			}
		}
	})
}
