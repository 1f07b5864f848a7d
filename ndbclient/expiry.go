package ndbclient

import "time"

// An expire column (Table.ExpireColumn) holds an item's absolute expiry in
// Unix seconds, 0 or NULL for never. It is an integer column, or a TIMESTAMP
// as ndbmemcache's demo_table_tabs has it, whose values travel as the
// contract's UTC text. These functions move an expiry between seconds and
// the column's Value, so that callers above the drivers never look at the
// column's type.

// MaxTimestamp is the last second a TIMESTAMP holds (2038-01-19 03:14:07 UTC).
const MaxTimestamp = 1<<31 - 1

// zeroTimestamp is MySQL's zero TIMESTAMP, which NDB stores as 0.
const zeroTimestamp = "0000-00-00 00:00:00"

// IsExpiryType reports whether a column of type t can be an expire column.
func IsExpiryType(t ColumnType) bool {
	return t.IsInteger() || t == TypeTimestamp
}

// ExpiryValue is the value that stores expiry at (Unix seconds, 0 for never)
// in col. A TIMESTAMP keeps never as NULL when it can, else as its zero
// value, and a time past its range as its last second.
func ExpiryValue(col *Column, at uint64) Value {
	if col.Type != TypeTimestamp {
		return Uint(at)
	}
	if at == 0 {
		if col.Nullable {
			return Null()
		}
		return String(zeroTimestamp)
	}
	t := time.Unix(int64(min(at, MaxTimestamp)), 0).UTC()
	v := Temporal{Year: t.Year(), Month: int(t.Month()), Day: t.Day(), Hour: t.Hour(), Minute: t.Minute(), Second: t.Second()}
	return Bytes(v.AppendDatetime(make([]byte, 0, len(zeroTimestamp)), 0))
}

// ExpirySeconds is the expiry (Unix seconds, 0 for never) that v, read from
// an expire column, holds. A negative integer is already past (1), as is a
// TIMESTAMP's text that does not parse: a row nobody can date is not kept
// alive for ever.
func ExpirySeconds(v Value) uint64 {
	switch v.Kind {
	case KindNull:
		return 0
	case KindInt:
		if v.Int() < 0 {
			return 1
		}
	case KindBytes:
		t, err := ParseDatetime(string(v.B), 6)
		if err != nil {
			return 1
		}
		if t == (Temporal{}) { // the zero TIMESTAMP, at any precision
			return 0
		}
		if s := t.Unix(); s > 0 {
			return uint64(s)
		}
		return 1
	}
	return v.Uint()
}
