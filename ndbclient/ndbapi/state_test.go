package ndbapi

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

const (
	colValue   = 1
	colCas     = 3
	colExpire  = 4
	colState   = 6
	stateNow   = uint32(1_800_000_000)
	stateWhile = uint64(stateNow - 10) // an access 10 s ago
)

func TestReadStateFollowsTheEmbeddedEngineAccessOnceAMinute(t *testing.T) {
	read := func(mod func(*ndbclient.Op)) *ndbclient.Op {
		op := &ndbclient.Op{Kind: ndbclient.OpRead}
		if mod != nil {
			mod(op)
		}
		return op
	}
	lease := func(o *ndbclient.Op) { o.Lease = true }
	for _, tc := range []struct {
		name   string
		old    uint64
		op     *ndbclient.Op
		expire uint64
		bump   bool
		next   uint64
		token  bool
	}{
		{"first read of a version is fetched, access within the minute kept", stateWhile, read(nil), 0, true, stateWhile | stateFetched, false},
		{"a read a minute later records the access", uint64(stateNow-60) | stateFetched, read(nil), 0, true, uint64(stateNow) | stateFetched, false},
		{"a NULL state (no state yet) starts now", 0, read(nil), 0, true, uint64(stateNow) | stateFetched, false},
		{"no bump (mg u) changes nothing", stateWhile, read(func(o *ndbclient.Op) { o.NoBump = true }), 0, true, stateWhile, false},
		{"a lease on a fresh item takes nothing", stateWhile | stateFetched, read(lease), 0, true, stateWhile | stateFetched, false},
		{"a lease on a stale item takes the token", stateWhile | stateFetched | stateStale, read(lease), 0, true, stateWhile | stateFetched | stateStale | stateToken, true},
		{"nobody takes a token already sent", stateWhile | stateFetched | stateStale | stateToken, read(lease), 0, true, stateWhile | stateFetched | stateStale | stateToken, false},
		{"recache: an expiry before R's time takes the token", stateWhile | stateFetched,
			read(func(o *ndbclient.Op) { o.Lease, o.RecacheAt = true, stateNow+30 }), uint64(stateNow + 10), true, stateWhile | stateFetched | stateToken, true},
		{"recache: an expiry after it does not", stateWhile | stateFetched,
			read(func(o *ndbclient.Op) { o.Lease, o.RecacheAt = true, stateNow+30 }), uint64(stateNow + 40), true, stateWhile | stateFetched, false},
		{"recache: no expiry never", stateWhile | stateFetched,
			read(func(o *ndbclient.Op) { o.Lease, o.RecacheAt = true, stateNow+30 }), 0, true, stateWhile | stateFetched, false},
		{"a read again after a lost race only tries for the token", stateWhile | stateStale, read(lease), 0, false, stateWhile | stateStale | stateToken, true},
	} {
		next, token := readState(tc.old, tc.op, tc.expire, stateNow, tc.bump)
		assert.Equal(t, tc.next, next, tc.name)
		assert.Equal(t, tc.token, token, tc.name)
	}
}

func TestWriteStates(t *testing.T) {
	assert.Equal(t, uint64(stateNow), freshState(&ndbclient.Op{}, stateNow), "a new version starts afresh")
	assert.Equal(t, uint64(stateNow)|stateStale, freshState(&ndbclient.Op{MarkStale: true}, stateNow), "ms I with an older cas")
	assert.Equal(t, uint64(stateNow)|stateToken, freshState(&ndbclient.Op{TokenSent: true}, stateNow), "mg N vivifies with the token taken")
	invalidate := &ndbclient.Op{KeepState: true, MarkStale: true}
	assert.Equal(t, stateWhile|stateFetched|stateStale, keptState(stateWhile|stateFetched|stateToken, invalidate, stateNow),
		"md I: stale, the token released, fetched and access kept")
	assert.Equal(t, uint64(stateNow)|stateStale, keptState(0, invalidate, stateNow), "md I on a row with no state yet")
	m := metaOf(stateWhile | stateFetched | stateToken)
	assert.Equal(t, ndbclient.ItemMeta{LastAccess: uint32(stateWhile), Fetched: true, TokenSent: true}, m)
}

// stateTables is demo_table with item_state as its state column.
func stateTables(t *testing.T) (*tableInfo, func(*ndbclient.Table) (*tableInfo, error)) {
	t.Helper()
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 7, describeDemo(true))
	require.NoError(t, err)
	ti.schema.ExpireColumn = colExpire
	ti.schema.StateColumn = "item_state"
	return ti, func(*ndbclient.Table) (*tableInfo, error) { return ti, nil }
}

func TestStateRoundAddsColumnsToReadsAndWrites(t *testing.T) {
	ti, tables := stateTables(t)
	key := []ndbclient.Value{ndbclient.String("k")}
	get := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: key, Read: []int{colValue}, Lease: true, RecacheAt: stateNow + 30}
	set := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: ti.schema, Key: key, Set: []ndbclient.ColumnValue{{Column: colValue, Value: ndbclient.String("v")}}}
	touch := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: key, KeepState: true,
		Set: []ndbclient.ColumnValue{{Column: colExpire, Value: ndbclient.Uint(0)}}}
	invalidate := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: key, KeepState: true, MarkStale: true,
		Set: []ndbclient.ColumnValue{{Column: colCas, Value: ndbclient.Uint(7)}}}
	del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: ti.schema, Key: key}
	ops := []*ndbclient.Op{get, set, touch, invalidate, del}

	var r stateRound
	stateful, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	require.True(t, stateful)
	assert.Equal(t, stateExtra{read: true, readExpire: true, col: colState, expireCol: colExpire}, r.extra[0])
	assert.Equal(t, stateExtra{set: true, col: colState, value: uint64(stateNow)}, r.extra[1])
	assert.Equal(t, stateExtra{col: colState}, r.extra[2], "touch keeps the state: nothing to add")
	assert.Equal(t, []int{3}, r.pre, "md I reads the state first")

	pre := r.preReads(ops)
	require.Len(t, pre, 1)
	assert.Equal(t, ndbclient.OpRead, pre[0].Kind)
	assert.Equal(t, []int{colState}, pre[0].Read)
	pre[0].Row = append(pre[0].Row, ndbclient.Uint(stateWhile|stateFetched|stateToken))
	r.applyPreReads(ops)
	assert.Equal(t, stateExtra{set: true, col: colState, value: stateWhile | stateFetched | stateStale}, r.extra[3])

	// On the wire: the read asks for its projection, then state and expiry;
	// the writes carry the state after their own columns.
	req, err := encodeRound(nil, ops, r.extra, tables, stateNow)
	require.NoError(t, err)
	p := 4 + 8         // the count, the read's header
	p += 2 + 2 + 4 + 2 // one key: its count, col, len, then VARCHAR's 1-byte prefix and "k"
	require.Equal(t, uint16(3), binary.LittleEndian.Uint16(req[p:]), "read columns")
	assert.Equal(t, []uint16{colValue, colState, colExpire},
		[]uint16{binary.LittleEndian.Uint16(req[p+2:]), binary.LittleEndian.Uint16(req[p+4:]), binary.LittleEndian.Uint16(req[p+6:])})
	assert.Equal(t, []int{colValue}, get.Read, "the caller's projection is left as it was")
	assert.Len(t, set.Set, 1, "the caller's sets too")

	// Back from the shim: the extra values are the state's, not the caller's.
	var w shimResponse
	w.ok([]byte("v"), binary.LittleEndian.AppendUint64(nil, stateWhile|stateFetched|stateStale), binary.LittleEndian.AppendUint32(nil, 0))
	for range ops[1:] {
		w.ok()
	}
	require.NoError(t, decodeResults(w.b, ops, r.extra, tables))
	r.afterRound(ops)
	require.Len(t, get.Row, 1)
	assert.Equal(t, ndbclient.ItemMeta{LastAccess: uint32(stateWhile), Fetched: true, Stale: true}, get.Meta)
	require.Len(t, r.steps, 1, "a stale item's token is free: one conditional update")
	assert.Equal(t, stateStep{op: 0, token: true, old: stateWhile | stateFetched | stateStale, next: stateWhile | stateFetched | stateStale | stateToken}, r.steps[0])

	steps := r.stepOps(ops)
	require.Len(t, steps, 1)
	u := steps[0]
	assert.Equal(t, ndbclient.OpCondUpdate, u.Kind)
	assert.Equal(t, colState, u.CondColumn)
	assert.Equal(t, ndbclient.Uint(stateWhile|stateFetched|stateStale), u.CondValue)
	assert.Equal(t, []ndbclient.ColumnValue{{Column: colState, Value: ndbclient.Uint(r.steps[0].next)}}, u.Set)

	// Another client took the token between the read and the update: read
	// again, find it sent, and stop without it.
	u.Err = ndbclient.ErrConditionFailed
	require.True(t, r.afterSteps(ops))
	require.Equal(t, []stateStep{{op: 0, reread: true}}, r.steps)
	again := r.stepOps(ops)
	assert.Equal(t, []int{colState, colExpire}, again[0].Read)
	again[0].Row = append(again[0].Row[:0], ndbclient.Uint(stateWhile|stateFetched|stateStale|stateToken), ndbclient.Uint(0))
	assert.False(t, r.afterSteps(ops), "nothing left to take")
	assert.False(t, get.Won)
}

func TestStateRoundTakesTheTokenOnce(t *testing.T) {
	ti, tables := stateTables(t)
	get := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")}, Lease: true}
	ops := []*ndbclient.Op{get}
	var r stateRound
	_, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	get.Row = append(get.Row, ndbclient.Null()) // a row from before the column
	r.afterRound(ops)
	assert.Equal(t, ndbclient.ItemMeta{}, get.Meta)
	require.Len(t, r.steps, 1)
	u := r.stepOps(ops)[0]
	assert.True(t, u.CondValue.IsNull(), "NULL matches NULL")
	assert.Equal(t, ndbclient.Uint(uint64(stateNow)|stateFetched), u.Set[0].Value)
	assert.False(t, r.afterSteps(ops))
	assert.False(t, get.Won, "not stale: no token")

	// A stale one: the update succeeds and the read has won.
	get.Row = append(get.Row[:0], ndbclient.Uint(stateWhile|stateStale|stateFetched))
	get.Meta = ndbclient.ItemMeta{}
	_, _ = r.plan(ops, tables, stateNow)
	r.afterRound(ops)
	r.stepOps(ops)
	assert.False(t, r.afterSteps(ops))
	assert.True(t, get.Won)
	assert.True(t, get.Meta.Stale)
	assert.False(t, get.Meta.TokenSent, "Meta is the state before the read")
}

func TestStateColumnMustBeBigintUnsigned(t *testing.T) {
	ti, tables := stateTables(t)
	ti.schema.StateColumn = "flags" // INT UNSIGNED
	var r stateRound
	_, err := r.plan([]*ndbclient.Op{{Kind: ndbclient.OpRead, Table: ti.schema}}, tables, stateNow)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, `"flags"`)

	ti.schema.StateColumn = ""
	stateful, err := r.plan([]*ndbclient.Op{{Kind: ndbclient.OpRead, Table: ti.schema}}, tables, stateNow)
	require.NoError(t, err)
	assert.False(t, stateful, "a table without a state column costs nothing")
	assert.Nil(t, r.extra)
}
