package gateway_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestRowInvariants(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	c := h.svc.Containers()[0]
	tbl := c.Table
	inv := h.svc.RowInvariants(c)
	assert.Equal(t, gateway.DefaultContainerName, inv.Container)
	assert.Equal(t, []string{"cas_value"}, inv.Managed, "demo_table without item_state: only the CAS is the container's")

	col := func(name string) int { i := tbl.ColumnIndex(name); require.GreaterOrEqual(t, i, 0, name); return i }
	value, math, cas, flags := col("string_value"), col("math_value"), col("cas_value"), col("flags")
	find := func(set []ndbclient.ColumnValue, c int) (ndbclient.Value, bool) {
		for _, cv := range set {
			if cv.Column == c {
				return cv.Value, true
			}
		}
		return ndbclient.Value{}, false
	}
	keep := func(set ...ndbclient.ColumnValue) []ndbclient.ColumnValue { return inv.Keep(tbl, set) }

	number := keep(ndbclient.ColumnValue{Column: value, Value: ndbclient.Bytes([]byte("41"))})
	m, ok := find(number, math)
	require.True(t, ok, "a value sets the counter too")
	assert.Equal(t, ndbclient.Uint(41), m, "a number counts on from itself")
	c1, ok := find(number, cas)
	require.True(t, ok)

	text := keep(ndbclient.ColumnValue{Column: value, Value: ndbclient.Bytes([]byte("hello"))})
	m, _ = find(text, math)
	assert.True(t, m.IsNull(), "text is no number: the value column is read")
	c2, _ := find(text, cas)
	assert.Greater(t, c2.Uint(), c1.Uint(), "every write takes a new CAS")

	for _, notCanonical := range []string{"041", "-1", " 1", "18446744073709551616", ""} {
		set := keep(ndbclient.ColumnValue{Column: value, Value: ndbclient.Bytes([]byte(notCanonical))})
		m, _ = find(set, math)
		assert.True(t, m.IsNull(), "%q is not a memcache number", notCanonical)
	}

	both := keep(ndbclient.ColumnValue{Column: value, Value: ndbclient.Bytes([]byte("1"))}, ndbclient.ColumnValue{Column: math, Value: ndbclient.Uint(9)})
	assert.Len(t, both, 3, "a write that sets the counter itself keeps it")
	m, _ = find(both, math)
	assert.Equal(t, ndbclient.Uint(9), m)

	flagsOnly := keep(ndbclient.ColumnValue{Column: flags, Value: ndbclient.Uint(3)})
	_, ok = find(flagsOnly, math)
	assert.False(t, ok, "no value written: the counter stays")
	_, ok = find(flagsOnly, cas)
	assert.True(t, ok, "but the CAS moves")
}

// A pk-insert into a container's table sets the columns the container
// keeps, as a pk-write does: demo_table's NOT NULL cas_value, which the
// client may not name, no longer makes every insert fail.
func TestRowAPIInsertIntoAContainersTable(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	c := h.svc.Containers()[0]
	rows := rowapi.New(h.backend, rowapi.Limits{MaxBatch: 8})
	rows.Keep(c.Table.Database, c.Table.Name, h.svc.RowInvariants(c))
	op := func(m rowapi.Method, key string, vals ...rowapi.Field) rowapi.Op {
		return rowapi.Op{Method: m, DB: c.Table.Database, Table: c.Table.Name,
			Filters: []rowapi.Field{{Column: "mkey", Value: []byte(`"` + key + `"`)}}, Values: vals}
	}
	val := rowapi.Field{Column: "string_value", Value: []byte(`"aGk="`)} // base64 of "hi"
	// flags and expire_time are NOT NULL in ndbgate's own demo_table, and
	// the client's to give.
	flags, never := rowapi.Field{Column: "flags", Value: []byte("3")}, rowapi.Field{Column: "expire_time", Value: []byte("0")}
	res, err := rows.Execute(context.Background(), nil, []rowapi.Op{
		op(rowapi.MethodInsert, "k1", val, flags, never),
		op(rowapi.MethodInsert, "k1", val, flags, never),
		op(rowapi.MethodInsert, "k2", val, flags, never, rowapi.Field{Column: "cas_value", Value: []byte("7")}),
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err, "an insert gives the row its cas, as a write does")
	assert.Equal(t, ndbclient.CodeDuplicate, ndbclient.CodeOf(res[1].Err))
	assert.ErrorContains(t, res[2].Err, `value column "cas_value" is kept by memcache container`)
	r := h.do(t, gateway.VerbGet, "", nil, "k1")
	require.True(t, r.Items[0].Hit, "memcache reads the inserted row")
	assert.Equal(t, "hi", string(r.Items[0].Value))
	assert.Equal(t, uint32(3), r.Items[0].Flags)
	assert.NotZero(t, r.Items[0].Cas)
}

// A row-API write of a large-value container's value clears ext_id and
// ext_size, which are the container's: memcache then reads the value the
// row was given, not the parts it named before.
func TestRowInvariantsOfLargeValues(t *testing.T) {
	h := newLargeHarness(t, drivers[0].wrap)
	c := h.svc.Containers()[0]
	inv := h.svc.RowInvariants(c)
	assert.Equal(t, []string{"cas_value", "ext_id", "ext_size"}, inv.Managed)
	long := value("l", 35)
	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
	require.False(t, h.row(t, "k")[1].IsNull(), "in parts")

	set := inv.Keep(c.Table, []ndbclient.ColumnValue{{Column: c.ValueColumns[0], Value: ndbclient.Bytes([]byte("short"))}})
	o := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: c.Table, Key: []ndbclient.Value{ndbclient.Bytes([]byte("k"))}, Set: set}
	require.NoError(t, h.backend.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{o}}))
	require.NoError(t, o.Err)
	assert.Equal(t, "short", h.get(t, "k"))
	assert.True(t, h.row(t, "k")[1].IsNull())

	flagsOnly := inv.Keep(c.Table, []ndbclient.ColumnValue{{Column: c.FlagsColumn, Value: ndbclient.Uint(3)}})
	for _, cv := range flagsOnly {
		assert.NotEqual(t, h.main.ColumnIndex("ext_id"), cv.Column, "a write that keeps the value keeps its parts")
	}
}
