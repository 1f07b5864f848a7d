package ndbclient

import (
	"math"
	"strconv"
)

// Kind says which field of a Value is set.
type Kind uint8

const (
	KindNull Kind = iota
	KindInt
	KindUint
	KindFloat
	KindBytes
)

// Value is one column value. It is a small struct, passed by value, so a row of
// values lives in one slice without a pointer per value (except Bytes' backing
// array). Bytes are not copied by the constructors: the caller keeps them alive
// and unchanged until the operation completes.
type Value struct {
	Kind Kind
	num  uint64 // int64 bits, uint64, or float64 bits
	B    []byte
}

func Null() Value               { return Value{} }
func Int(v int64) Value         { return Value{Kind: KindInt, num: uint64(v)} }
func Uint(v uint64) Value       { return Value{Kind: KindUint, num: v} }
func Float(v float64) Value     { return Value{Kind: KindFloat, num: math.Float64bits(v)} }
func Bytes(b []byte) Value      { return Value{Kind: KindBytes, B: b} }
func String(s string) Value     { return Value{Kind: KindBytes, B: []byte(s)} }
func (v Value) IsNull() bool    { return v.Kind == KindNull }
func (v Value) Int() int64      { return int64(v.num) }
func (v Value) Uint() uint64    { return v.num }
func (v Value) Float() float64  { return math.Float64frombits(v.num) }
func (v Value) Bytes() []byte   { return v.B }
func (v Value) Str() string     { return string(v.B) }
func (v Value) RawBits() uint64 { return v.num }

// Equal compares kind and content.
func (v Value) Equal(o Value) bool {
	if v.Kind != o.Kind {
		return false
	}
	if v.Kind == KindBytes {
		return string(v.B) == string(o.B)
	}
	return v.num == o.num
}

func (v Value) String() string {
	switch v.Kind {
	case KindNull:
		return "NULL"
	case KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case KindUint:
		return strconv.FormatUint(v.num, 10)
	case KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return strconv.Quote(string(v.B))
	}
}
