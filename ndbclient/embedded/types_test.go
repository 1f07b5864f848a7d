package embedded

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

type roundTrip struct{ in, want ndbclient.Value }

type badValue struct {
	v    ndbclient.Value
	code ndbclient.Code
}

func same(vs ...ndbclient.Value) []roundTrip {
	out := make([]roundTrip, len(vs))
	for i, v := range vs {
		out[i] = roundTrip{v, v}
	}
	return out
}

func bad(code ndbclient.Code, vs ...ndbclient.Value) []badValue {
	out := make([]badValue, len(vs))
	for i, v := range vs {
		out[i] = badValue{v, code}
	}
	return out
}

var (
	I, U, F = ndbclient.Int, ndbclient.Uint, ndbclient.Float
	B       = func(s string) ndbclient.Value { return ndbclient.Bytes([]byte(s)) }
	inv     = ndbclient.CodeInvalidArgument
	big     = ndbclient.CodeTooLarge
)

type typeCase struct {
	col ndbclient.Column
	ok  []roundTrip
	bad []badValue
}

func typeCases() []typeCase {
	col := func(t ndbclient.ColumnType, length int) ndbclient.Column {
		return ndbclient.Column{Name: "c", Type: t, Length: length}
	}
	return []typeCase{
		{col(ndbclient.TypeInt8, 0), same(I(math.MinInt8), I(-1), I(0), I(math.MaxInt8)),
			bad(inv, I(-129), I(128), U(1), F(1), B("1"))},
		{col(ndbclient.TypeUint8, 0), same(U(0), U(math.MaxUint8)), bad(inv, U(256), I(1))},
		{col(ndbclient.TypeInt16, 0), same(I(math.MinInt16), I(math.MaxInt16)), bad(inv, I(math.MinInt16-1), I(math.MaxInt16+1))},
		{col(ndbclient.TypeUint16, 0), same(U(0), U(math.MaxUint16)), bad(inv, U(math.MaxUint16+1))},
		{col(ndbclient.TypeInt24, 0), same(I(-8388608), I(-1), I(8388607)), bad(inv, I(-8388609), I(8388608))},
		{col(ndbclient.TypeUint24, 0), same(U(0), U(16777215)), bad(inv, U(16777216))},
		{col(ndbclient.TypeInt32, 0), same(I(math.MinInt32), I(math.MaxInt32)), bad(inv, I(math.MinInt32-1), I(math.MaxInt32+1))},
		{col(ndbclient.TypeUint32, 0), same(U(0), U(math.MaxUint32)), bad(inv, U(math.MaxUint32+1))},
		{col(ndbclient.TypeInt64, 0), same(I(math.MinInt64), I(-1), I(math.MaxInt64)), bad(inv, U(1))},
		{col(ndbclient.TypeUint64, 0), same(U(0), U(math.MaxUint64)), bad(inv, I(1))},
		{col(ndbclient.TypeFloat, 0),
			append(same(F(1.5), F(-3.25), F(0), F(math.MaxFloat32), F(math.Inf(-1))), roundTrip{F(0.1), F(float64(float32(0.1)))}),
			bad(inv, F(1e39), F(-1e39), U(1))},
		{col(ndbclient.TypeDouble, 0), same(F(math.MaxFloat64), F(math.SmallestNonzeroFloat64), F(-0.5)), bad(inv, I(1))},
		{ndbclient.Column{Name: "c", Type: ndbclient.TypeDecimal, Precision: 5, Scale: 2}, same(B("-123.45"), B("0.00")), bad(big, B("-1234.567"))},
		{col(ndbclient.TypeChar, 5),
			[]roundTrip{{B("ab"), B("ab")}, {B("ab   "), B("ab")}, {B("abcde"), B("abcde")}, {B(""), B("")}, {B(" a"), B(" a")}, {B("abcde     "), B("abcde")}},
			append(bad(big, B("abcdef")), bad(inv, U(1))...)},
		{col(ndbclient.TypeVarchar, 10), same(B(""), B("x"), B("0123456789"), B("tail  ")), bad(big, B("0123456789a"))},
		{col(ndbclient.TypeBinary, 4),
			[]roundTrip{{B("a\x00b"), B("a\x00b\x00")}, {B(""), B("\x00\x00\x00\x00")}, {B("\xff\xff\xff\xff"), B("\xff\xff\xff\xff")}},
			bad(big, B("12345"))},
		{col(ndbclient.TypeVarbinary, 300), same(B(""), B("\x00\x00\x01"), ndbclient.Bytes(bytes.Repeat([]byte{0, 0xff}, 150))),
			bad(big, ndbclient.Bytes(make([]byte, 301)))},
		{col(ndbclient.TypeVarbinary, 70000), same(ndbclient.Bytes(bytes.Repeat([]byte("z"), 70000))), bad(big, ndbclient.Bytes(make([]byte, 70001)))},
		{col(ndbclient.TypeDate, 0), same(B("2024-02-29"), B("1000-01-01")), bad(big, B("2024-02-29 and more"))},
		{col(ndbclient.TypeDatetime, 0), same(B("2024-02-29 23:59:59.999999")), bad(inv, I(0))},
		{col(ndbclient.TypeTime, 0), same(B("-838:59:59"), B("838:59:59.000000")), nil},
		{col(ndbclient.TypeTimestamp, 0), same(B("2038-01-19 03:14:07")), nil},
		{col(ndbclient.TypeYear, 0), same(U(0), U(1901), U(2155)), bad(inv, U(1900), U(2156), I(2000))},
		{col(ndbclient.TypeBit, 1), same(U(0), U(1)), bad(inv, U(2))},
		{col(ndbclient.TypeBit, 12), same(U(4095)), bad(inv, U(4096))},
		{col(ndbclient.TypeBit, 64), same(U(math.MaxUint64)), nil},
		{col(ndbclient.TypeBlob, 0), same(ndbclient.Bytes(bytes.Repeat([]byte{1, 0}, 30000))), bad(big, ndbclient.Bytes(make([]byte, 1<<16)))},
		{col(ndbclient.TypeText, 200000), same(ndbclient.Bytes(bytes.Repeat([]byte("t"), 200000))), nil},
	}
}

// Every type round-trips as a non-key column (nullable and not) and, where a
// key may hold it, as the primary key itself; bad values are refused with the
// right code and nothing is stored.
func TestColumnTypesRoundTrip(t *testing.T) {
	for _, tc := range typeCases() {
		for _, nullable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s(%d)/nullable=%v", tc.col.Type, tc.col.Length, nullable), func(t *testing.T) {
				e := newEngine(t, Config{Partitions: 2})
				c := tc.col
				c.Nullable = nullable
				// pad checks that columns after c decode at the right place.
				tbl := mustCreate(t, e, &ndbclient.Table{Database: "types", Name: "t", ExpireColumn: -1,
					Columns:    []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32}, c, {Name: "pad", Type: ndbclient.TypeVarchar, Length: 8}},
					PrimaryKey: []int{0}})
				for i, r := range tc.ok {
					k := []ndbclient.Value{U(uint64(i))}
					w := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k, Set: []ndbclient.ColumnValue{set(1, r.in), set(2, B("after"))}}
					run(t, e, w)
					require.NoError(t, w.Err, "insert %v", r.in)
					rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k, Read: []int{1, 2, 0}}
					run(t, e, rd)
					require.NoError(t, rd.Err)
					assertRow(t, []ndbclient.Value{r.want, B("after"), U(uint64(i))}, rd.Row)
				}
				// NULL
				w := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: []ndbclient.Value{U(1000)}, Set: []ndbclient.ColumnValue{set(1, ndbclient.Null())}}
				run(t, e, w)
				if nullable {
					require.NoError(t, w.Err)
					rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: w.Key, Read: []int{1}}
					run(t, e, rd)
					require.NoError(t, rd.Err)
					assert.True(t, rd.Row[0].IsNull())
				} else {
					assert.Equal(t, inv, codeOf(w))
					assert.Contains(t, w.Err.Error(), `"c"`)
				}
				items := e.Stats().Items
				for _, b := range tc.bad {
					w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{U(2000)}, Set: []ndbclient.ColumnValue{set(1, b.v)}}
					run(t, e, w)
					assert.Equal(t, b.code, codeOf(w), "value %v: %v", b.v, w.Err)
					assert.Contains(t, fmt.Sprint(w.Err), `"c"`, "the error names the column")
				}
				assert.Equal(t, items, e.Stats().Items, "refused writes store nothing")
			})
		}
		if tc.col.Type == ndbclient.TypeBlob || tc.col.Type == ndbclient.TypeText || tc.col.Length > maxKeyBytes {
			continue // not allowed in a key (see TestCreateTable)
		}
		t.Run(fmt.Sprintf("%s(%d)/key", tc.col.Type, tc.col.Length), func(t *testing.T) {
			e := newEngine(t, Config{Partitions: 3})
			tbl := mustCreate(t, e, &ndbclient.Table{Database: "types", Name: "k", ExpireColumn: -1,
				Columns:    []ndbclient.Column{tc.col, {Name: "v", Type: ndbclient.TypeUint32}},
				PrimaryKey: []int{0}})
			for i, r := range tc.ok {
				w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{r.in}, Set: []ndbclient.ColumnValue{set(1, U(uint64(i)))}}
				run(t, e, w)
				require.NoError(t, w.Err)
				// Reading with the canonical form finds the same row.
				rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{r.want}, Read: []int{0, 1}}
				run(t, e, rd)
				require.NoError(t, rd.Err, "key %v", r.in)
				assertRow(t, []ndbclient.Value{r.want, U(uint64(i))}, rd.Row)
			}
			for _, b := range tc.bad {
				rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{b.v}}
				run(t, e, rd)
				assert.Equal(t, b.code, codeOf(rd), "key %v", b.v)
			}
		})
	}
}

// A composite key with a distribution key that is part of it: rows sharing
// the distribution key share a partition, and every part of the key counts.
func TestCompositeKeyAndDistributionKey(t *testing.T) {
	e := newEngine(t, Config{Partitions: 16, Nodes: 4})
	tbl := mustCreate(t, e, &ndbclient.Table{Database: "db", Name: "orders", ExpireColumn: -1,
		Columns: []ndbclient.Column{
			{Name: "customer", Type: ndbclient.TypeInt32},
			{Name: "code", Type: ndbclient.TypeChar, Length: 4},
			{Name: "order", Type: ndbclient.TypeBinary, Length: 3},
			{Name: "total", Type: ndbclient.TypeDouble, Nullable: true},
		},
		PrimaryKey:      []int{0, 1, 2},
		DistributionKey: []int{0},
	})
	k := func(c int64, code, order string) []ndbclient.Value { return []ndbclient.Value{I(c), B(code), B(order)} }
	for c := int64(-5); c < 5; c++ {
		parts := map[int]bool{}
		for _, code := range []string{"a", "bb", "ccc"} {
			for _, o := range []string{"1", "2"} {
				parts[e.Partition(tbl, k(c, code, o))] = true
				w := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k(c, code, o), Set: []ndbclient.ColumnValue{set(3, F(float64(c)))}}
				run(t, e, w)
				require.NoError(t, w.Err)
			}
		}
		assert.Len(t, parts, 1, "one distribution key, one partition")
	}
	assert.Equal(t, uint64(60), e.Stats().Items)
	// CHAR padding and BINARY zero padding give the same key.
	dup := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: k(1, "bb  ", "1\x00\x00")}
	run(t, e, dup)
	assert.Equal(t, ndbclient.CodeDuplicate, codeOf(dup))
	rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k(1, "bb", "1"), Read: []int{2, 1, 0, 3}}
	run(t, e, rd)
	require.NoError(t, rd.Err)
	assertRow(t, []ndbclient.Value{B("1\x00\x00"), B("bb"), I(1), F(1)}, rd.Row)
	miss := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: k(1, "bb", "3")}
	run(t, e, miss)
	assert.Equal(t, ndbclient.CodeNotFound, codeOf(miss))
}
