package drivertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// ColState is the item state column of StateTable.
const ColState = ColMath + 1

// StateTable is Table with an item_state column that the table's
// StateColumn names: where a driver without item state of its own keeps it.
func StateTable(db, name string) *ndbclient.Table {
	t := Table(db, name)
	t.Columns = append(t.Columns, ndbclient.Column{Name: "item_state", Type: ndbclient.TypeUint64, Nullable: true})
	t.StateColumn = "item_state"
	t.ExpireColumn = ColExpire
	return t
}

// RunItemState checks memcached's item state (Op.Meta, Op.Won and the
// inputs that drive them) on a StateTable: the embedded engine keeps it
// itself, the NDB driver in the state column; both must answer alike.
func RunItemState(t *testing.T, prefix string, open func(t *testing.T) (ndbclient.Driver, *ndbclient.Table)) {
	d, tbl := open(t)
	k := func(s string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(prefix + s)} }
	exec := func(t *testing.T, op *ndbclient.Op) *ndbclient.Op {
		t.Helper()
		require.NoError(t, d.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op
	}
	store := func(t *testing.T, key string, expire uint64, mod func(*ndbclient.Op)) {
		t.Helper()
		op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: k(key), Set: []ndbclient.ColumnValue{
			{Column: ColValue, Value: ndbclient.String("v")}, {Column: ColCas, Value: ndbclient.Uint(1)},
			{Column: ColExpire, Value: ndbclient.Uint(expire)}}}
		if mod != nil {
			mod(op)
		}
		require.NoError(t, exec(t, op).Err)
	}
	get := func(t *testing.T, key string, mod func(*ndbclient.Op)) *ndbclient.Op {
		t.Helper()
		op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k(key), Read: []int{ColValue}, Lease: true}
		if mod != nil {
			mod(op)
		}
		require.NoError(t, exec(t, op).Err)
		require.Len(t, op.Row, 1, "the state stays out of the caller's row")
		assert.Equal(t, "v", string(op.Row[0].B))
		return op
	}
	invalidate := func(t *testing.T, key string) {
		t.Helper()
		require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k(key), KeepState: true, MarkStale: true,
			Set: []ndbclient.ColumnValue{{Column: ColCas, Value: ndbclient.Uint(2)}}}).Err)
	}

	t.Run("fetched after the first read, not before", func(t *testing.T) {
		before := uint32(time.Now().Unix())
		store(t, "fetch", 0, nil)
		first := get(t, "fetch", nil)
		assert.False(t, first.Meta.Fetched)
		assert.False(t, first.Meta.Stale)
		assert.False(t, first.Won)
		assert.GreaterOrEqual(t, first.Meta.LastAccess, before, "a write records its time")
		assert.LessOrEqual(t, first.Meta.LastAccess, uint32(time.Now().Unix()))
		assert.True(t, get(t, "fetch", nil).Meta.Fetched)
		store(t, "fetch", 0, nil)
		assert.False(t, get(t, "fetch", nil).Meta.Fetched, "a new version starts afresh")
	})
	t.Run("a touch or a write that marks fetched leaves it fetched", func(t *testing.T) {
		noBump := func(o *ndbclient.Op) { o.NoBump = true }
		store(t, "touched", 0, nil)
		require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("touched"), KeepState: true,
			Set: []ndbclient.ColumnValue{{Column: ColExpire, Value: ndbclient.Uint(0)}}}).Err)
		assert.False(t, get(t, "touched", noBump).Meta.Fetched, "an update that keeps the state alone does not fetch")
		require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("touched"), KeepState: true, MarkFetched: true,
			Set: []ndbclient.ColumnValue{{Column: ColExpire, Value: ndbclient.Uint(0)}}}).Err)
		assert.True(t, get(t, "touched", noBump).Meta.Fetched, "memcached's touch bumps the item")
		store(t, "vivified", 0, func(o *ndbclient.Op) { o.MarkFetched = true })
		assert.True(t, get(t, "vivified", noBump).Meta.Fetched, "memcached bumps an item mg N created")
	})
	t.Run("no bump leaves the state", func(t *testing.T) {
		store(t, "nobump", 0, nil)
		noBump := func(o *ndbclient.Op) { o.NoBump = true }
		get(t, "nobump", noBump)
		assert.False(t, get(t, "nobump", noBump).Meta.Fetched)
	})
	t.Run("a stale item's token goes to one reader", func(t *testing.T) {
		store(t, "stale", 0, nil)
		get(t, "stale", nil)
		invalidate(t, "stale")
		first := get(t, "stale", nil)
		assert.True(t, first.Meta.Stale)
		assert.True(t, first.Meta.Fetched, "invalidation keeps the fetched mark")
		assert.False(t, first.Meta.TokenSent)
		assert.True(t, first.Won)
		second := get(t, "stale", nil)
		assert.True(t, second.Meta.TokenSent)
		assert.False(t, second.Won)
		invalidate(t, "stale")
		assert.True(t, get(t, "stale", nil).Won, "invalidating again releases the token")
		store(t, "stale", 0, nil)
		fresh := get(t, "stale", nil)
		assert.False(t, fresh.Meta.Stale, "a new version is not stale")
		assert.False(t, fresh.Won)
	})
	t.Run("a read without a lease takes no token", func(t *testing.T) {
		store(t, "nolease", 0, nil)
		invalidate(t, "nolease")
		assert.False(t, get(t, "nolease", func(o *ndbclient.Op) { o.Lease = false }).Won)
		assert.True(t, get(t, "nolease", nil).Won)
	})
	t.Run("recache below a remaining TTL", func(t *testing.T) {
		now := uint64(time.Now().Unix())
		store(t, "recache", now+30, nil)
		recache := func(at uint64) func(*ndbclient.Op) {
			return func(o *ndbclient.Op) { o.RecacheAt = uint32(at) }
		}
		assert.False(t, get(t, "recache", recache(now+10)).Won, "30 s left is not below 10 s")
		assert.True(t, get(t, "recache", recache(now+60)).Won)
		assert.False(t, get(t, "recache", recache(now+60)).Won, "once")
	})
	t.Run("a write made with the token taken (vivify)", func(t *testing.T) {
		if err := exec(t, &ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: k("vivify")}).Err; err != nil {
			require.ErrorIs(t, err, ndbclient.ErrNotFound) // left by an earlier run, or not
		}
		require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k("vivify"), TokenSent: true,
			Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("v")}}}).Err)
		assert.True(t, get(t, "vivify", nil).Meta.TokenSent)
	})
	t.Run("touch keeps the state", func(t *testing.T) {
		store(t, "touch", 0, nil)
		get(t, "touch", nil)
		require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("touch"), KeepState: true,
			Set: []ndbclient.ColumnValue{{Column: ColExpire, Value: ndbclient.Uint(0)}}}).Err)
		assert.True(t, get(t, "touch", nil).Meta.Fetched)
	})
	t.Run("touch, incr and md I record their access", func(t *testing.T) {
		// An access two minutes ago, set in the state column directly (a
		// driver that keeps the state itself ignores the column).
		long := uint64(time.Now().Unix()) - 120
		for _, write := range []struct {
			name string
			op   *ndbclient.Op
		}{
			{"touch", &ndbclient.Op{Kind: ndbclient.OpUpdate, KeepState: true, Set: []ndbclient.ColumnValue{{Column: ColExpire, Value: ndbclient.Uint(0)}}}},
			{"incr", &ndbclient.Op{Kind: ndbclient.OpAdd, KeepState: true, AddColumn: ColMath, Delta: 1, Read: []int{ColMath}}},
			{"md I", &ndbclient.Op{Kind: ndbclient.OpUpdate, KeepState: true, MarkStale: true, Set: []ndbclient.ColumnValue{{Column: ColCas, Value: ndbclient.Uint(3)}}}},
		} {
			key := "access:" + write.name
			store(t, key, 0, func(o *ndbclient.Op) {
				o.Set = append(o.Set, ndbclient.ColumnValue{Column: ColMath, Value: ndbclient.Uint(1)})
			})
			require.NoError(t, exec(t, &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k(key), KeepState: true, NoBump: true,
				Set: []ndbclient.ColumnValue{{Column: ColState, Value: ndbclient.Uint(long)}}}).Err)
			before := uint32(time.Now().Unix())
			write.op.Table, write.op.Key = tbl, k(key)
			require.NoError(t, exec(t, write.op).Err, write.name)
			assert.GreaterOrEqual(t, get(t, key, func(o *ndbclient.Op) { o.NoBump = true }).Meta.LastAccess, before, "%s records its access", write.name)
		}
	})
	t.Run("concurrent readers: exactly one wins the token", func(t *testing.T) {
		const readers, trials = 8, 5
		for r := 0; r < trials; r++ {
			store(t, "race", 0, nil)
			invalidate(t, "race")
			var won, toldTaken atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := 0; i < readers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k("race"), Read: []int{ColValue}, Lease: true}
					if err := d.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}); err != nil || op.Err != nil {
						return
					}
					if op.Won {
						won.Add(1)
					} else if op.Meta.TokenSent {
						toldTaken.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			assert.Equal(t, int32(1), won.Load(), "trial %d: one winner of %d readers", r, readers)
			assert.Equal(t, int32(readers-1), toldTaken.Load(), "trial %d: every loser is told the token is taken (Z)", r)
		}
	})
}
