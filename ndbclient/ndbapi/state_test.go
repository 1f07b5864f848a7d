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
	assert.Equal(t, uint64(stateNow), freshState(&ndbclient.Op{}, stateNow, 0), "a new version starts afresh")
	assert.Equal(t, uint64(stateNow)|stateStale, freshState(&ndbclient.Op{MarkStale: true}, stateNow, 0), "ms I with an older cas")
	assert.Equal(t, uint64(stateNow)|stateToken, freshState(&ndbclient.Op{TokenSent: true}, stateNow, 0), "mg N vivifies with the token taken")
	invalidate := &ndbclient.Op{KeepState: true, MarkStale: true}
	const tag = 5 << 35
	assert.Equal(t, tag|uint64(stateNow)|stateFetched|stateStale, keptState(tag|stateWhile|stateFetched|stateToken, invalidate, stateNow),
		"md I: stale, the token released, fetched and the version's tag kept, the access recorded")
	assert.Equal(t, uint64(stateNow)|stateStale, keptState(0, invalidate, stateNow), "md I on a row with no state yet")
	m := metaOf(tag | stateWhile | stateFetched | stateToken)
	assert.Equal(t, ndbclient.ItemMeta{LastAccess: uint32(stateWhile), Fetched: true, TokenSent: true}, m, "the tag is no part of the meta")
}

// Two versions written in the same second must not have equal states: a
// reader's conditional update planned on the first would apply to the second
// (ABA), marking a version fetched that nobody read.
func TestVersionsWrittenInOneSecondDiffer(t *testing.T) {
	_, tables := stateTables(t)
	ti, _ := tables(nil)
	set := func() *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpWrite, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")},
			Set: []ndbclient.ColumnValue{{Column: colValue, Value: ndbclient.String("v")}}}
	}
	seen := map[uint64]bool{}
	var a, b stateFlight // two executors, or two gateways
	for i := 0; i < 100; i++ {
		for _, r := range []*stateFlight{&a, &b} {
			_, err := r.plan([]*ndbclient.Op{set()}, tables, stateNow)
			require.NoError(t, err)
			v := r.extra[0].value
			assert.Equal(t, uint64(stateNow), v&^stateTag, "the time, no flags")
			assert.False(t, seen[v], "state %#x given twice", v)
			seen[v] = true
		}
	}
	// The bump and the token keep the tag: they are the same version.
	v := uint64(7)<<35 | stateWhile
	next, _ := readState(v, &ndbclient.Op{Kind: ndbclient.OpRead}, 0, stateNow, true)
	assert.Equal(t, uint64(7)<<35, next&stateTag)
	assert.Equal(t, uint64(7)<<35|uint64(stateNow), accessed(uint64(7)<<35|uint64(stateNow-60), stateNow))
	assert.Equal(t, uint64(7)<<35|uint64(stateNow-59), accessed(uint64(7)<<35|uint64(stateNow-59), stateNow), "within the minute: kept")
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

func TestStateFlightAddsColumnsToReadsAndWrites(t *testing.T) {
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

	var r stateFlight
	stateful, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	require.True(t, stateful)
	assert.Equal(t, stateExtra{read: true, readExpire: true, col: colState, expireCol: colExpire}, r.extra[0])
	assert.Equal(t, uint64(stateNow), r.extra[1].value&^stateTag)
	assert.Equal(t, stateExtra{set: true, col: colState, value: r.extra[1].value}, r.extra[1])
	assert.Equal(t, stateExtra{read: true, col: colState}, r.extra[2], "touch keeps the state and reads it back")
	assert.Equal(t, []int{3}, r.pre, "md I reads the state first")

	pre := r.preReads(ops)
	require.Len(t, pre, 1)
	assert.Equal(t, ndbclient.OpRead, pre[0].Kind)
	assert.Equal(t, []int{colState}, pre[0].Read)
	pre[0].Row = append(pre[0].Row, ndbclient.Uint(stateWhile|stateFetched|stateToken))
	assert.Equal(t, ops, r.applyPreReads(ops))
	assert.Equal(t, stateExtra{set: true, col: colState, value: uint64(stateNow) | stateFetched | stateStale}, r.extra[3])

	// On the wire: the read asks for its projection, then state and expiry;
	// the writes carry the state after their own columns.
	req, err := encodeFlight(nil, ops, r.extra, tables, stateNow)
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
	w.ok()                                                               // set
	w.ok(binary.LittleEndian.AppendUint64(nil, stateWhile|stateFetched)) // touch, its state read back
	w.ok()                                                               // md I
	w.ok()                                                               // delete
	require.NoError(t, decodeResults(w.b, ops, r.extra, tables))
	r.afterFlight(ops)
	require.Len(t, get.Row, 1)
	assert.Equal(t, ndbclient.ItemMeta{LastAccess: uint32(stateWhile), Fetched: true, Stale: true}, get.Meta)
	assert.Empty(t, touch.Row, "the state stays out of the touch's row")
	assert.Equal(t, ndbclient.ItemMeta{}, touch.Meta)
	require.Len(t, r.steps, 1, "a stale item's token is free: one conditional update; the touch's access within the minute is kept")
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
	assert.True(t, get.Meta.TokenSent, "the loser answers Z, as it would after the winner on memcached")
	assert.True(t, get.Meta.Stale)
}

func TestKeptStateUpdateRecordsItsAccessOnceAMinute(t *testing.T) {
	ti, tables := stateTables(t)
	incr := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")},
		KeepState: true, AddColumn: colValue, Delta: 1, Read: []int{colValue}}
	ops := []*ndbclient.Op{incr}
	var r stateFlight
	_, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	assert.Equal(t, stateExtra{read: true, col: colState}, r.extra[0])
	const tag = 3 << 35
	incr.Row = append(incr.Row, ndbclient.Uint(8), ndbclient.Uint(tag|uint64(stateNow-60)|stateFetched))
	r.afterFlight(ops)
	assert.Equal(t, []ndbclient.Value{ndbclient.Uint(8)}, incr.Row)
	require.Equal(t, []stateStep{{op: 0, old: tag | uint64(stateNow-60) | stateFetched, next: tag | uint64(stateNow) | stateFetched}}, r.steps)
	u := r.stepOps(ops)[0]
	assert.Equal(t, ndbclient.OpCondUpdate, u.Kind)
	u.Err = ndbclient.ErrConditionFailed
	assert.False(t, r.afterSteps(ops), "a state changed since is left as it is")
	assert.False(t, incr.Won)

	// gat's update: its read records the access, the update does not again.
	gatTouch := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: incr.Key, KeepState: true, NoBump: true}
	stateful, err := r.plan([]*ndbclient.Op{gatTouch}, tables, stateNow)
	require.NoError(t, err)
	assert.True(t, stateful)
	assert.Equal(t, stateExtra{col: colState}, r.extra[0])
}

// A pre-read that fails (other than NotFound) fails its md I, which must not
// go out without the state: it would answer HD and never mark the item stale.
// The rest of its transaction stays out with it; other ops go on.
func TestFailedPreReadKeepsItsUpdateOutOfTheFlight(t *testing.T) {
	ti, tables := stateTables(t)
	k := func(s string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(s)} }
	invalidate := func(key string) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: k(key), KeepState: true, MarkStale: true}
	}
	get := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: k("a"), Read: []int{colValue}}
	linked := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: k("b"), TxnWithNext: true}
	bad, missing, good := invalidate("b"), invalidate("c"), invalidate("d")
	ops := []*ndbclient.Op{get, linked, bad, missing, good}
	var r stateFlight
	_, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	pre := r.preReads(ops)
	require.Len(t, pre, 3)
	pre[0].Err = errTemporaryForTest
	pre[1].Err = ndbclient.ErrNotFound
	pre[2].Row = append(pre[2].Row, ndbclient.Uint(stateWhile))

	goOn := r.applyPreReads(ops)
	assert.Equal(t, []*ndbclient.Op{get, missing, good}, goOn)
	require.Len(t, r.extra, 3, "the extras follow the ops that go on")
	assert.True(t, r.extra[0].read)
	assert.False(t, r.extra[1].set, "a missing row: the update finds none either")
	assert.Equal(t, uint64(stateNow)|stateStale, r.extra[2].value)
	assert.Equal(t, errTemporaryForTest, bad.Err)
	assert.Equal(t, errTemporaryForTest, linked.Err, "its transaction fails with it")
	assert.NoError(t, get.Err)
	r.release()
	assert.Empty(t, r.goOn)
}

var errTemporaryForTest = &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: 266, Message: "time-out"}

func TestStateFlightTakesTheTokenOnce(t *testing.T) {
	ti, tables := stateTables(t)
	get := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")}, Lease: true}
	ops := []*ndbclient.Op{get}
	var r stateFlight
	_, err := r.plan(ops, tables, stateNow)
	require.NoError(t, err)
	get.Row = append(get.Row, ndbclient.Null()) // a row from before the column
	r.afterFlight(ops)
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
	r.afterFlight(ops)
	r.stepOps(ops)
	assert.False(t, r.afterSteps(ops))
	assert.True(t, get.Won)
	assert.True(t, get.Meta.Stale)
	assert.False(t, get.Meta.TokenSent, "Meta is the state before the read")
}

func TestStateColumnMustBeBigintUnsigned(t *testing.T) {
	ti, tables := stateTables(t)
	ti.schema.StateColumn = "flags" // INT UNSIGNED
	var r stateFlight
	_, err := r.plan([]*ndbclient.Op{{Kind: ndbclient.OpRead, Table: ti.schema}}, tables, stateNow)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, `"flags"`)

	ti.schema.StateColumn = ""
	stateful, err := r.plan([]*ndbclient.Op{{Kind: ndbclient.OpRead, Table: ti.schema}}, tables, stateNow)
	require.NoError(t, err)
	assert.False(t, stateful, "a table without a state column costs nothing")
	assert.Nil(t, r.extra)
}
