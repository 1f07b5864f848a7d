package embedded

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Columns of the memcache-shaped table used throughout the tests.
const (
	colKey = iota
	colValue
	colFlags
	colCas
	colExpire
	colMath
)

// memcacheTable is the shape ndbgate gives memcache containers.
func memcacheTable(name string, valueMax int) *ndbclient.Table {
	return &ndbclient.Table{
		Database: "test",
		Name:     name,
		Columns: []ndbclient.Column{
			{Name: "mkey", Type: ndbclient.TypeVarchar, Length: 250},
			{Name: "string_value", Type: ndbclient.TypeVarbinary, Length: valueMax},
			{Name: "flags", Type: ndbclient.TypeUint32},
			{Name: "cas_value", Type: ndbclient.TypeUint64},
			{Name: "expire_time", Type: ndbclient.TypeUint32},
			{Name: "math_value", Type: ndbclient.TypeUint64, Nullable: true},
		},
		PrimaryKey:   []int{colKey},
		Eviction:     true,
		ExpireColumn: colExpire,
	}
}

// testClock is an injectable Unix-seconds clock.
type testClock struct{ t atomic.Uint32 }

func newClock() *testClock {
	c := &testClock{}
	c.t.Store(1_700_000_000)
	return c
}

func (c *testClock) now() uint32      { return c.t.Load() }
func (c *testClock) advance(s uint32) { c.t.Add(s) }

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = -1 // tests that want the reaper ask for it
	}
	e := New(cfg)
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func mustCreate(t testing.TB, e *Engine, s *ndbclient.Table) *ndbclient.Table {
	t.Helper()
	tbl, err := e.CreateTable(s)
	require.NoError(t, err)
	return tbl
}

// mustCreateKept creates a memcache-shaped table without eviction: its rows
// are never dropped for memory, only refused.
func mustCreateKept(t testing.TB, e *Engine, name string, valueMax int) *ndbclient.Table {
	t.Helper()
	s := memcacheTable(name, valueMax)
	s.Eviction = false
	return mustCreate(t, e, s)
}

// run runs ops as one batch.
func run(t testing.TB, e *Engine, ops ...*ndbclient.Op) {
	t.Helper()
	require.NoError(t, e.Execute(context.Background(), &ndbclient.Batch{Ops: ops}))
}

func key(s string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(s)} }

func set(col int, v ndbclient.Value) ndbclient.ColumnValue {
	return ndbclient.ColumnValue{Column: col, Value: v}
}

// item is a memcache row's values for the helpers.
type item struct {
	value      string
	flags, cas uint64
	expire     uint64
	math       *uint64 // nil: NULL
}

func (it item) set() []ndbclient.ColumnValue {
	s := []ndbclient.ColumnValue{
		set(colValue, ndbclient.String(it.value)),
		set(colFlags, ndbclient.Uint(it.flags)),
		set(colCas, ndbclient.Uint(it.cas)),
		set(colExpire, ndbclient.Uint(it.expire)),
	}
	if it.math != nil {
		s = append(s, set(colMath, ndbclient.Uint(*it.math)))
	}
	return s
}

func u64(v uint64) *uint64 { return &v }

// op builders
func readOp(tbl *ndbclient.Table, k string, cols ...int) *ndbclient.Op {
	return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(k), Read: cols}
}

func writeOp(kind ndbclient.OpKind, tbl *ndbclient.Table, k string, sets ...ndbclient.ColumnValue) *ndbclient.Op {
	return &ndbclient.Op{Kind: kind, Table: tbl, Key: key(k), Set: sets}
}

// put upserts a memcache item.
func put(t testing.TB, e *Engine, tbl *ndbclient.Table, k string, it item) {
	t.Helper()
	op := writeOp(ndbclient.OpWrite, tbl, k, it.set()...)
	run(t, e, op)
	require.NoError(t, op.Err, "put %q", k)
}

// getValue reads a key's value column; ok is false on NotFound.
func getValue(t testing.TB, e *Engine, tbl *ndbclient.Table, k string) (string, bool) {
	t.Helper()
	op := readOp(tbl, k, colValue)
	run(t, e, op)
	if ndbclient.CodeOf(op.Err) == ndbclient.CodeNotFound {
		return "", false
	}
	require.NoError(t, op.Err, "get %q", k)
	return op.Row[0].Str(), true
}

func codeOf(op *ndbclient.Op) ndbclient.Code { return ndbclient.CodeOf(op.Err) }

// assertRow compares values by kind and content (an empty Bytes may be nil).
func assertRow(t testing.TB, want, got []ndbclient.Value) {
	t.Helper()
	if !assert.Len(t, got, len(want)) {
		return
	}
	for i := range want {
		assert.True(t, want[i].Equal(got[i]), "value %d: want %v, got %v", i, want[i], got[i])
	}
}
