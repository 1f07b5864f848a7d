// Package drivertest is the behaviour suite every ndbclient driver must pass:
// the operation set with its results and canonical errors, transactions,
// per-op isolation and scan-delete, on a memcache-shaped table. The embedded
// engine runs it in CI (ndbclient/embedded); the NDB API driver runs it in
// tests/ndb against a live cluster (build tag ndbapi, NDBGATE_TEST_CONNECTSTRING).
package drivertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Columns of the suite's table: ndbmemcache's demo_table shape.
const (
	ColKey = iota
	ColValue
	ColFlags
	ColCas
	ColExpire
	ColMath
)

// Table is the schema the suite needs; a driver whose tables come from
// elsewhere (NDB) must already have it, created by deploy/'s SQL.
func Table(db, name string) *ndbclient.Table {
	return &ndbclient.Table{
		Database: db,
		Name:     name,
		Columns: []ndbclient.Column{
			{Name: "mkey", Type: ndbclient.TypeVarchar, Length: 250},
			{Name: "string_value", Type: ndbclient.TypeVarbinary, Length: 2048, Nullable: true},
			{Name: "flags", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "cas_value", Type: ndbclient.TypeUint64, Nullable: true},
			{Name: "expire_time", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "math_value", Type: ndbclient.TypeUint64, Nullable: true},
		},
		PrimaryKey:   []int{ColKey},
		ExpireColumn: -1,
	}
}

// Run runs the suite. open returns the driver and the suite's (empty) table;
// each subtest uses its own keys, prefixed by prefix, so a shared cluster
// table works.
func Run(t *testing.T, prefix string, open func(t *testing.T) (ndbclient.Driver, *ndbclient.Table)) {
	d, tbl := open(t)
	k := func(s string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(prefix + s)} }
	exec := func(t *testing.T, ops ...*ndbclient.Op) {
		t.Helper()
		require.NoError(t, d.Execute(context.Background(), &ndbclient.Batch{Ops: ops}))
	}
	write := func(key, value string, cas uint64) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: k(key), Set: []ndbclient.ColumnValue{
			{Column: ColValue, Value: ndbclient.String(value)},
			{Column: ColCas, Value: ndbclient.Uint(cas)},
			{Column: ColMath, Value: ndbclient.Null()},
		}}
	}
	read := func(key string, cols ...int) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k(key), Read: cols}
	}
	valueOf := func(t *testing.T, key string) (string, bool) {
		t.Helper()
		r := read(key, ColValue)
		exec(t, r)
		if ndbclient.CodeOf(r.Err) == ndbclient.CodeNotFound {
			return "", false
		}
		require.NoError(t, r.Err)
		return string(r.Row[0].B), true
	}

	t.Run("write read delete", func(t *testing.T) {
		exec(t, write("a", "hello", 1))
		v, ok := valueOf(t, "a")
		assert.True(t, ok)
		assert.Equal(t, "hello", v)
		del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: k("a")}
		exec(t, del)
		require.NoError(t, del.Err)
		_, ok = valueOf(t, "a")
		assert.False(t, ok)
		del2 := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: k("a")}
		exec(t, del2)
		assert.ErrorIs(t, del2.Err, ndbclient.ErrNotFound)
	})

	t.Run("insert update duplicate notfound", func(t *testing.T) {
		ins := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k("i"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("1")}}}
		exec(t, ins)
		require.NoError(t, ins.Err)
		dup := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k("i"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("2")}}}
		exec(t, dup)
		assert.ErrorIs(t, dup.Err, ndbclient.ErrDuplicate)
		upd := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("i"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("3")}}}
		exec(t, upd)
		require.NoError(t, upd.Err)
		v, _ := valueOf(t, "i")
		assert.Equal(t, "3", v)
		miss := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("nope"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("x")}}}
		exec(t, miss)
		assert.ErrorIs(t, miss.Err, ndbclient.ErrNotFound)
	})

	t.Run("conditional update and delete on cas", func(t *testing.T) {
		exec(t, write("c", "v1", 10))
		cond := func(kind ndbclient.OpKind, cas uint64) *ndbclient.Op {
			o := &ndbclient.Op{Kind: kind, Table: tbl, Key: k("c"), CondColumn: ColCas, CondValue: ndbclient.Uint(cas)}
			if kind == ndbclient.OpCondUpdate {
				o.Set = []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("v2")}, {Column: ColCas, Value: ndbclient.Uint(11)}}
			} else {
				o.HasCond = true
			}
			return o
		}
		bad := cond(ndbclient.OpCondUpdate, 9)
		exec(t, bad)
		assert.ErrorIs(t, bad.Err, ndbclient.ErrConditionFailed)
		good := cond(ndbclient.OpCondUpdate, 10)
		exec(t, good)
		require.NoError(t, good.Err)
		v, _ := valueOf(t, "c")
		assert.Equal(t, "v2", v)
		badDel := cond(ndbclient.OpDelete, 10)
		exec(t, badDel)
		assert.ErrorIs(t, badDel.Err, ndbclient.ErrConditionFailed)
		goodDel := cond(ndbclient.OpDelete, 11)
		exec(t, goodDel)
		require.NoError(t, goodDel.Err)
	})

	t.Run("atomic add wraps, clamps, refuses NULL", func(t *testing.T) {
		set := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: k("n"), Set: []ndbclient.ColumnValue{
			{Column: ColValue, Value: ndbclient.String("")}, {Column: ColMath, Value: ndbclient.Uint(5)}}}
		exec(t, set)
		add := func(delta uint64, sub bool) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: k("n"), AddColumn: ColMath, Delta: delta, Subtract: sub, Read: []int{ColMath}}
		}
		a := add(3, false)
		exec(t, a)
		require.NoError(t, a.Err)
		assert.Equal(t, uint64(8), a.Row[0].Uint())
		s := add(100, true)
		exec(t, s)
		require.NoError(t, s.Err)
		assert.Equal(t, uint64(0), s.Row[0].Uint(), "decr clamps at 0")
		w := add(^uint64(0), false)
		exec(t, w)
		require.NoError(t, w.Err)
		w2 := add(2, false)
		exec(t, w2)
		require.NoError(t, w2.Err)
		assert.Equal(t, uint64(1), w2.Row[0].Uint(), "incr wraps at 2^64")
		exec(t, write("nn", "text", 1)) // math NULL
		nn := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: k("nn"), AddColumn: ColMath, Delta: 1}
		exec(t, nn)
		assert.ErrorIs(t, nn.Err, ndbclient.ErrNotNumeric)
		nnCond := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: k("nn"), AddColumn: ColMath, Delta: 1,
			HasCond: true, CondColumn: ColCas, CondValue: ndbclient.Uint(12345)}
		exec(t, nnCond)
		assert.ErrorIs(t, nnCond.Err, ndbclient.ErrNotNumeric, "a NULL column fails before the condition")
		missing := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: k("none"), AddColumn: ColMath, Delta: 1}
		exec(t, missing)
		assert.ErrorIs(t, missing.Err, ndbclient.ErrNotFound)
	})

	t.Run("append and prepend", func(t *testing.T) {
		exec(t, write("p", "mid", 1))
		app := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: k("p"), AppendColumn: ColValue, Data: []byte(">")}
		pre := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: k("p"), AppendColumn: ColValue, Data: []byte("<"), Prepend: true}
		exec(t, app)
		exec(t, pre)
		require.NoError(t, app.Err)
		require.NoError(t, pre.Err)
		v, _ := valueOf(t, "p")
		assert.Equal(t, "<mid>", v)
		miss := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: k("none"), AppendColumn: ColValue, Data: []byte("x")}
		exec(t, miss)
		assert.ErrorIs(t, miss.Err, ndbclient.ErrNotFound)
	})

	t.Run("per-op results in one batch", func(t *testing.T) {
		// NDB runs neighbouring committed reads in one transaction: misses
		// among hits, and a locking read between them, must each still
		// get their own answer.
		var ops []*ndbclient.Op
		exists := func(i int) bool { return i < 20 && i%7 != 3 }
		for i := 0; i < 20; i++ {
			if exists(i) {
				exec(t, write(fmt.Sprintf("b%d", i), fmt.Sprintf("v%d", i), 1))
			}
		}
		for i := 0; i < 25; i++ { // b3, b10, b17 and b20..b24 do not exist
			o := read(fmt.Sprintf("b%d", i), ColValue)
			if i == 12 {
				o.Lock = ndbclient.LockShared
			}
			o.Tag = 1000 + i
			ops = append(ops, o)
		}
		exec(t, ops...)
		for i, o := range ops {
			assert.Equal(t, 1000+i, o.Tag, "b%d: the caller's tag is left alone", i)
			if exists(i) {
				require.NoError(t, o.Err, "b%d", i)
				assert.Equal(t, fmt.Sprintf("v%d", i), string(o.Row[0].B))
			} else {
				assert.ErrorIs(t, o.Err, ndbclient.ErrNotFound, "b%d", i)
			}
		}
	})

	t.Run("transaction commits or rolls back whole", func(t *testing.T) {
		exec(t, write("t1", "old", 1))
		w := write("t1", "new", 2)
		w.TxnWithNext = true
		dup := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k("t1"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("x")}}}
		require.NoError(t, d.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{w, dup}}))
		assert.Error(t, w.Err, "the run failed as a whole")
		assert.ErrorIs(t, dup.Err, ndbclient.ErrDuplicate)
		v, _ := valueOf(t, "t1")
		assert.Equal(t, "old", v, "rolled back")

		r := read("t1", ColValue)
		r.Lock, r.TxnWithNext = ndbclient.LockExclusive, true
		u := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: k("t1"), Set: []ndbclient.ColumnValue{{Column: ColValue, Value: ndbclient.String("newer")}}}
		exec(t, r, u)
		require.NoError(t, r.Err)
		require.NoError(t, u.Err)
		assert.Equal(t, "old", string(r.Row[0].B), "read before the update in the same transaction")
		v, _ = valueOf(t, "t1")
		assert.Equal(t, "newer", v)
	})

	// A large value's read: its row under a shared lock and its parts read
	// simple (no lock held after the read), in one transaction; a part's
	// miss is its own, as a committed read's.
	t.Run("simple reads in a transaction", func(t *testing.T) {
		exec(t, write("s1", "row", 1), write("s2", "part", 2))
		run := func(part string) (*ndbclient.Op, *ndbclient.Op) {
			head := read("s1", ColValue)
			head.Lock, head.TxnWithNext = ndbclient.LockShared, true
			p := read(part, ColValue)
			p.Lock = ndbclient.LockSimple
			exec(t, head, p)
			return head, p
		}
		head, p := run("s2")
		require.NoError(t, head.Err)
		require.NoError(t, p.Err)
		assert.Equal(t, "row", string(head.Row[0].B))
		assert.Equal(t, "part", string(p.Row[0].B))
		head, p = run("s-missing")
		assert.ErrorIs(t, p.Err, ndbclient.ErrNotFound)
		require.NoError(t, head.Err, "the run stands")
		assert.Equal(t, "row", string(head.Row[0].B))
	})

	t.Run("submit completes every op", func(t *testing.T) {
		exec(t, write("s", "sv", 1))
		r := read("s", ColValue)
		ch := make(chan error, 1)
		d.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{r}}, func(_ *ndbclient.Batch, err error) { ch <- err })
		require.NoError(t, <-ch)
		require.NoError(t, r.Err)
		assert.Equal(t, "sv", string(r.Row[0].B))
	})

	t.Run("delete all", func(t *testing.T) {
		exec(t, write("z", "1", 1))
		da := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
		exec(t, da)
		require.NoError(t, da.Err)
		assert.Positive(t, da.Affected)
		_, ok := valueOf(t, "z")
		assert.False(t, ok)
	})
}
