package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
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
