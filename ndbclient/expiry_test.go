package ndbclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestExpiryValueAndSeconds(t *testing.T) {
	u32 := &Column{Type: TypeUint32}
	ts := &Column{Type: TypeTimestamp, Nullable: true}
	tsNotNull := &Column{Type: TypeTimestamp}
	for _, c := range []struct {
		col  *Column
		at   uint64
		want Value
		back uint64 // ExpirySeconds of want
	}{
		{u32, 0, Uint(0), 0},
		{u32, 1795392000, Uint(1795392000), 1795392000},
		{ts, 0, Null(), 0},
		{tsNotNull, 0, String("0000-00-00 00:00:00"), 0},
		{ts, 1, String("1970-01-01 00:00:01"), 1},
		{ts, 1795392000, String("2026-11-23 00:00:00"), 1795392000},
		{ts, MaxTimestamp, String("2038-01-19 03:14:07"), MaxTimestamp},
		{ts, 1<<32 - 1, String("2038-01-19 03:14:07"), MaxTimestamp}, // past the range: its last second
	} {
		v := ExpiryValue(c.col, c.at)
		assert.Equal(t, c.want, v, "%s %d", c.col.Type, c.at)
		assert.Equal(t, c.back, ExpirySeconds(v), "%s %d back", c.col.Type, c.at)
	}
	for in, want := range map[string]uint64{
		"2026-11-23 00:00:00.500":    1795392000, // whole seconds count
		"0000-00-00 00:00:00.000":    0,          // zero at any precision: never
		"1970-01-01 00:00:00":        1,          // not a TIMESTAMP: already past
		"1969-12-31 23:59:59":        1,
		"yesterday":                  1, // does not parse: already past, not kept for ever
		"2038-01-19 03:14:07.999999": MaxTimestamp,
	} {
		assert.Equal(t, want, ExpirySeconds(String(in)), in)
	}
	assert.Equal(t, uint64(1), ExpirySeconds(Int(-5)), "a negative time has passed")
	assert.Equal(t, uint64(7), ExpirySeconds(Int(7)))
	assert.True(t, IsExpiryType(TypeTimestamp) && IsExpiryType(TypeUint32) && IsExpiryType(TypeInt64))
	assert.False(t, IsExpiryType(TypeDatetime) || IsExpiryType(TypeVarchar))
}
