package embedded

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestItemStateFetchedAndLastAccess(t *testing.T) {
	clk := newClock()
	e := newEngine(t, Config{Now: clk.now})
	tbl := mustCreate(t, e, memcacheTable("st", 100))
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key("k"), Set: item{value: "v"}.set()})
	written := clk.now()
	clk.advance(5)

	r := readOp(tbl, "k", colValue)
	r.NoBump = true
	run(t, e, r)
	assert.Equal(t, ndbclient.ItemMeta{LastAccess: written}, r.Meta, "fresh row: never fetched")

	r = readOp(tbl, "k", colValue)
	run(t, e, r)
	assert.False(t, r.Meta.Fetched, "state is reported as it was before the read")
	clk.advance(3)
	r = readOp(tbl, "k", colValue)
	run(t, e, r)
	assert.True(t, r.Meta.Fetched)
	// On an eviction table the last access moves with the LRU bump, at most
	// once a minute, as memcached's item time does.
	assert.Equal(t, written, r.Meta.LastAccess, "read within the bump interval")
	clk.advance(lruBumpInterval)
	run(t, e, readOp(tbl, "k", colValue))
	r = readOp(tbl, "k", colValue)
	run(t, e, r)
	assert.Equal(t, written+8+lruBumpInterval, r.Meta.LastAccess)

	// A new version starts afresh.
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key("k"), Set: item{value: "w"}.set()})
	r = readOp(tbl, "k", colValue)
	run(t, e, r)
	assert.False(t, r.Meta.Fetched)
}

func TestItemStateLeases(t *testing.T) {
	clk := newClock()
	e := newEngine(t, Config{Now: clk.now})
	tbl := mustCreate(t, e, memcacheTable("lease", 100))
	now := clk.now()
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key("k"), Set: item{value: "v", expire: uint64(now + 30)}.set()})

	lease := func(recacheAt uint32) *ndbclient.Op {
		o := readOp(tbl, "k", colValue)
		o.Lease, o.RecacheAt = true, recacheAt
		run(t, e, o)
		return o
	}
	assert.False(t, lease(now+10).Won, "30s left is not below 10s")
	first := lease(now + 60)
	assert.True(t, first.Won, "30s left is below 60s: first client wins")
	second := lease(now + 60)
	assert.False(t, second.Won)
	assert.True(t, second.Meta.TokenSent, "second client sees the token taken")

	// Invalidation marks stale and releases the token, keeping the value.
	inv := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: key("k"), KeepState: true, MarkStale: true,
		Set: []ndbclient.ColumnValue{set(colCas, ndbclient.Uint(99))}}
	run(t, e, inv)
	w := lease(0)
	assert.True(t, w.Won, "stale row: the next reader wins")
	assert.True(t, w.Meta.Stale)
	require.Len(t, w.Row, 1)
	assert.Equal(t, "v", string(w.Row[0].B))
	assert.False(t, lease(0).Won)

	// A failed transaction restores the state with the row.
	txn := []*ndbclient.Op{
		{Kind: ndbclient.OpWrite, Table: tbl, Key: key("k"), Set: item{value: "x"}.set(), TxnWithNext: true},
		{Kind: ndbclient.OpInsert, Table: tbl, Key: key("k"), Set: item{value: "dup"}.set()},
	}
	require.NoError(t, e.Execute(t.Context(), &ndbclient.Batch{Ops: txn}))
	require.Error(t, txn[1].Err)
	r := readOp(tbl, "k", colValue)
	run(t, e, r)
	assert.True(t, r.Meta.Stale)
	assert.True(t, r.Meta.TokenSent)

	// A fresh write clears everything; an insert can take the token at once.
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key("k"), Set: item{value: "y"}.set()})
	assert.False(t, lease(0).Won)
	viv := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: key("new"), Set: item{}.set(), TokenSent: true}
	run(t, e, viv)
	o := readOp(tbl, "new", colValue)
	o.Lease = true
	run(t, e, o)
	assert.True(t, o.Meta.TokenSent)
	assert.False(t, o.Won)
}

func TestAddWithCondition(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("addc", 100))
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key("n"), Set: item{value: "", cas: 7, math: u64(10)}.set()})
	add := func(cas uint64) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("n"), AddColumn: colMath, Delta: 1,
			HasCond: true, CondColumn: colCas, CondValue: ndbclient.Uint(cas), Read: []int{colMath}}
	}
	o := add(8)
	run(t, e, o)
	assert.ErrorIs(t, o.Err, ndbclient.ErrConditionFailed)
	o = add(7)
	run(t, e, o)
	require.NoError(t, o.Err)
	assert.Equal(t, uint64(11), o.Row[0].Uint())
}
