package embedded

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Many goroutines hammer overlapping keys with every op kind, in single ops
// and multi-partition batches. Counters updated with atomic adds must come out
// exact, and every value read must be one some writer wrote whole.
func TestConcurrentOverlappingKeys(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8, Nodes: 2, ReapInterval: time.Millisecond})
	tbl := mustCreate(t, e, memcacheTable("conc", 512))
	const workers, iters, keys = 8, 1500, 64
	counters := []string{"c0", "c1", "c2", "c3"}
	for _, c := range counters {
		put(t, e, tbl, c, item{math: u64(0)})
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			batch := &ndbclient.Batch{}
			for i := range iters {
				k := fmt.Sprint("k", rng.IntN(keys))
				// A value is its own checksum: one repeated lower-case letter,
				// then any upper-case letters appends added.
				v := strings.Repeat(string(rune('a'+w)), 1+rng.IntN(400))
				var ops []*ndbclient.Op
				switch rng.IntN(7) {
				case 0:
					ops = append(ops, writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.String(v))))
				case 1:
					ops = append(ops, writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.String(v))))
				case 2:
					ops = append(ops, writeOp(ndbclient.OpDelete, tbl, k))
				case 3:
					ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key(k), AppendColumn: colValue,
						Data: []byte{byte('A' + w)}, Set: []ndbclient.ColumnValue{set(colFlags, ndbclient.Uint(1))}})
				case 4:
					ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(counters[i%len(counters)]), AddColumn: colMath, Delta: 1})
				case 5: // a multi-get over many partitions
					for j := range 10 {
						ops = append(ops, readOp(tbl, fmt.Sprint("k", (i+j*7)%keys), colValue))
					}
				case 6: // a short transaction
					ops = txn(
						&ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(counters[0]), AddColumn: colMath, Delta: 1},
						writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.String(v)), set(colExpire, ndbclient.Uint(1))), // expired at once
					)
				}
				batch.Ops = ops
				assert.NoError(t, e.Execute(t.Context(), batch))
				for _, op := range ops {
					switch codeOf(op) {
					case ndbclient.CodeOK, ndbclient.CodeNotFound, ndbclient.CodeDuplicate, ndbclient.CodeTooLarge:
					default:
						t.Errorf("%v: %v", op.Kind, op.Err)
					}
					if op.Kind == ndbclient.OpRead && op.Err == nil {
						s := strings.TrimRight(op.Row[0].Str(), "ABCDEFGH")
						if s != "" && strings.Count(s, s[:1]) != len(s) {
							t.Errorf("torn value %q", op.Row[0].Str())
						}
					}
				}
			}
		})
	}
	wg.Wait()
	var total uint64
	for _, c := range counters {
		rd := readOp(tbl, c, colMath)
		run(t, e, rd)
		require.NoError(t, rd.Err)
		total += rd.Row[0].Uint()
	}
	// Count what the workers added: replay their random choices.
	var want uint64
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		for range iters {
			rng.IntN(keys)
			rng.IntN(400)
			switch rng.IntN(7) {
			case 4, 6:
				want++
			}
		}
	}
	assert.Equal(t, want, total)
}

// Eviction across partitions (TryLock) under concurrent writers stays within
// the limit and never deadlocks.
func TestConcurrentEviction(t *testing.T) {
	per := rowCharge(6, 100)
	e := newEngine(t, Config{Partitions: 4, MemoryLimit: 200 * per})
	tbl := mustCreate(t, e, memcacheTable("cache", 4096))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 2000 {
				n := 100
				if rng.IntN(20) == 0 {
					n = 3000 // sometimes more than a partition's share
				}
				op := writeOp(ndbclient.OpWrite, tbl, fmt.Sprintf("%06d", rng.IntN(5000)), set(colValue, ndbclient.Bytes(make([]byte, n))))
				rd := readOp(tbl, fmt.Sprintf("%06d", rng.IntN(5000)), colValue)
				assert.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: []*ndbclient.Op{op, rd}}))
				if op.Err != nil {
					// Only when every other partition was busy at that instant.
					assert.Equal(t, ndbclient.CodeOutOfMemory, codeOf(op))
				}
			}
		})
	}
	wg.Wait()
	st := e.Stats()
	assert.LessOrEqual(t, st.Bytes, st.LimitBytes)
	assert.Positive(t, st.Evictions)
	t.Logf("items %d evictions %d oom %d", st.Items, st.Evictions, st.OutOfMemory)
}

// Flushes, reaping and stats run safely beside writers.
func TestConcurrentFlushAndStats(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 4, ReapInterval: time.Millisecond, Now: clock.now})
	tbl := mustCreate(t, e, memcacheTable("flush", 64))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				it := item{value: "v", expire: uint64(clock.now()) + uint64(i%3)}
				op := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint(w, "-", i%100), it.set()...)
				assert.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
				assert.NoError(t, op.Err)
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			op := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
			assert.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
			_ = e.Stats()
			clock.advance(1)
			time.Sleep(50 * time.Microsecond)
		}
		close(stop)
	})
	wg.Wait()
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl})
	assert.Equal(t, uint64(0), e.Stats().Items)
	assert.Equal(t, uint64(0), e.Stats().Bytes)
}
