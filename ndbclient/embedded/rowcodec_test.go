package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// encodeV1 is row in the data dir's version 1 encoding (rowcodec.go): what
// upgradeRow reads. Only tests write it.
func encodeV1(tb *table, row []byte) []byte {
	key := rowKey(row)
	out := binary.LittleEndian.AppendUint16(nil, uint16(len(key)))
	out = append(out, key...)
	_, base := keyBounds(row)
	out = append(out, row[base:base+tb.nullBytes]...)
	fixed := make([]byte, tb.v1Fixed)
	var v ndbclient.Value
	for i := range tb.cols {
		if ci := &tb.cols[i]; ci.keyPos < 0 && ci.width > 0 {
			if tb.decode(row, i, &v); !v.IsNull() {
				ci.putFixed(fixed[ci.v1Off:], &v)
			}
		}
	}
	out = append(out, fixed...)
	for _, c := range tb.varCols {
		tb.decode(row, c, &v)
		out = tb.cols[c].appendVar(out, v.B, true)
	}
	return out
}

// rowCodecTable has every part of the row encoding: a composite key, NOT NULL
// and nullable fixed columns, and nullable and NOT NULL variable ones.
func rowCodecTable(keyLen int) *ndbclient.Table {
	return &ndbclient.Table{Database: "test", Name: "codec", Columns: []ndbclient.Column{
		{Name: "k", Type: ndbclient.TypeVarbinary, Length: keyLen},
		{Name: "n1", Type: ndbclient.TypeUint64, Nullable: true},
		{Name: "f", Type: ndbclient.TypeInt24},
		{Name: "v1", Type: ndbclient.TypeVarchar, Length: 300, Nullable: true},
		{Name: "n2", Type: ndbclient.TypeBinary, Length: 3, Nullable: true},
		{Name: "n3", Type: ndbclient.TypeInt16, Nullable: true},
		{Name: "k2", Type: ndbclient.TypeUint8},
		{Name: "v2", Type: ndbclient.TypeVarbinary, Length: 70000},
	}, PrimaryKey: []int{0, 6}, ExpireColumn: -1}
}

// Rows built by a random series of assignments, NULLs included, decode to
// what was assigned, pass checkRow, and survive the trip through the
// version 1 encoding.
func TestRowCodecRandomAssignments(t *testing.T) {
	for _, keyLen := range []int{10, 400} { // 400: a key length in 3 bytes
		t.Run(fmt.Sprint("key=", keyLen), func(t *testing.T) {
			e := newEngine(t, Config{})
			tb, err := e.tableOf(mustCreate(t, e, rowCodecTable(keyLen)))
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(keyLen), 3))
			keyVals := []ndbclient.Value{ndbclient.Bytes(bytes.Repeat([]byte{'k'}, keyLen)), ndbclient.Uint(7)}
			key := tb.appendKey(nil, keyVals)
			value := func(c int) ndbclient.Value {
				ci := &tb.cols[c]
				if ci.Nullable && rng.IntN(3) == 0 {
					return ndbclient.Value{}
				}
				switch c {
				case 1:
					return ndbclient.Uint(rng.Uint64())
				case 2:
					return ndbclient.Int(int64(rng.IntN(1<<23)) - 1<<22)
				case 4:
					return ndbclient.Bytes([]byte{byte(rng.IntN(256)), 1})
				case 5:
					return ndbclient.Int(int64(rng.IntN(1<<15)) - 1<<14)
				case 3:
					return ndbclient.String(strings.Repeat("c", rng.IntN(300)))
				}
				n := rng.IntN(300)
				if rng.IntN(8) == 0 {
					n = rng.IntN(70001)
				}
				return ndbclient.Bytes(bytes.Repeat([]byte{'v'}, n))
			}
			// A new row: NULL where nullable, zero elsewhere.
			model := map[int]ndbclient.Value{1: {}, 2: ndbclient.Int(0), 3: {}, 4: {}, 5: {}, 7: ndbclient.Bytes(nil)}
			var row []byte
			for step := range 2000 {
				var sets []ndbclient.ColumnValue
				for range rng.IntN(4) {
					c := []int{1, 2, 3, 4, 5, 7}[rng.IntN(6)]
					v := value(c)
					sets = append(sets, ndbclient.ColumnValue{Column: c, Value: v})
					model[c] = v
				}
				xcol, xval := -1, (*ndbclient.Value)(nil)
				if rng.IntN(4) == 0 {
					xcol = []int{1, 3, 5}[rng.IntN(3)]
					v := value(xcol)
					xval = &v
					model[xcol] = v
				}
				row = tb.buildRow(nil, key, row, sets, xcol, xval)
				require.NoError(t, tb.checkRow(row), "step %d", step)
				require.Equal(t, key, rowKey(row))
				var got ndbclient.Value
				for c, want := range model {
					tb.decode(row, c, &got)
					require.True(t, tb.cols[c].equal(&got, &want), "step %d column %d: got %v, want %v", step, c, got, want)
				}
				for pos, c := range tb.pk {
					tb.decode(row, c, &got)
					require.True(t, tb.cols[c].equal(&got, &keyVals[pos]), "step %d key column %d", step, c)
				}
				v1 := encodeV1(tb, row)
				require.NoError(t, tb.checkRowV1(v1), "step %d", step)
				require.Equal(t, row, tb.upgradeRow(nil, v1), "step %d: through version 1", step)
			}
		})
	}
}

// The default container's row is what issue 23's accounting counts on: key
// length, key, null bitmap, flags, cas and expiry, then the value unprefixed;
// a NULL math value takes no byte, a set one 8.
func TestRowCodecMemcacheRowSize(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("size", 1<<20))
	tb, err := e.tableOf(tbl)
	require.NoError(t, err)
	key := tb.appendKey(nil, key("0123456789"))
	row := tb.buildRow(nil, key, nil, item{value: strings.Repeat("v", 32)}.set(), -1, nil)
	require.Len(t, row, 1+11+1+4+8+4+32)
	math := ndbclient.Uint(5)
	row = tb.buildRow(nil, key, row, nil, colMath, &math)
	require.Len(t, row, 1+11+1+4+8+4+8+32)
	require.Equal(t, uint64(5), tb.colValue(row, colMath).Uint())
	require.Equal(t, strings.Repeat("v", 32), string(tb.colValue(row, colValue).B))
}
