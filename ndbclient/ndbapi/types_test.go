package ndbapi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func decCol(prec, scale int) *column {
	return &column{ndbType: ndbDecimal, precision: prec, scale: scale}
}

func encode(t *testing.T, c *column, s string) []byte {
	t.Helper()
	b, err := appendNative(nil, c, ndbclient.String(s))
	require.NoError(t, err, "%q", s)
	return b
}

// Vectors from the description of the format in MySQL's strings/decimal.cc.
func TestDecimalKnownBytes(t *testing.T) {
	cases := []struct {
		prec, scale int
		in, canon   string
		wire        []byte
	}{
		{14, 4, "1234567890.1234", "1234567890.1234", []byte{0x81, 0x0D, 0xFB, 0x38, 0xD2, 0x04, 0xD2}},
		{14, 4, "-1234567890.1234", "-1234567890.1234", []byte{0x7E, 0xF2, 0x04, 0xC7, 0x2D, 0xFB, 0x2D}},
		{5, 2, "123.45", "123.45", []byte{0x80, 0x7B, 0x2D}},
		{5, 2, "-123.45", "-123.45", []byte{0x7F, 0x84, 0xD2}},
		{5, 2, "0", "0.00", []byte{0x80, 0x00, 0x00}},
		{5, 2, "-0.00", "0.00", []byte{0x80, 0x00, 0x00}},
		{5, 2, ".5", "0.50", []byte{0x80, 0x00, 0x32}},
		{5, 2, "+007.10", "7.10", []byte{0x80, 0x07, 0x0A}},
		{5, 2, "1.230", "1.23", []byte{0x80, 0x01, 0x17}},
		{10, 0, "1", "1", []byte{0x80, 0, 0, 0, 1}},
		{3, 3, "0.125", "0.125", []byte{0x80, 0x7D}},
		{18, 9, "-1.000000001", "-1.000000001", []byte{0x7F, 0xFF, 0xFF, 0xFE, 0xFF, 0xFF, 0xFF, 0xFE}},
	}
	for _, tc := range cases {
		c := decCol(tc.prec, tc.scale)
		got := encode(t, c, tc.in)
		assert.Equal(t, tc.wire, got, "DECIMAL(%d,%d) %s", tc.prec, tc.scale, tc.in)
		assert.Equal(t, decimalSize(tc.prec, tc.scale), len(got))
		assert.Equal(t, tc.canon, string(decodeNative(c, got).B))
	}
}

func TestDecimalRefusesWhatDoesNotFit(t *testing.T) {
	for _, tc := range []struct {
		col *column
		in  string
	}{
		{decCol(5, 2), "1234.5"}, // 4 integer digits, room for 3
		{decCol(5, 2), "1.234"},  // a third decimal
		{decCol(5, 2), "abc"},    // not a number
		{decCol(5, 2), ""},       // nothing
		{decCol(5, 2), "-"},      // a sign alone
		{decCol(5, 2), "1e3"},    // exponents are the JSON layer's business
		{decCol(5, 2), "1.2.3"},  // two points
		{decCol(66, 2), "1"},     // more digits than MySQL allows
		{&column{ndbType: ndbDecimalunsigned, precision: 5, scale: 2}, "-1"},
	} {
		_, err := appendNative(nil, tc.col, ndbclient.String(tc.in))
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err), "DECIMAL(%d,%d) %q", tc.col.precision, tc.col.scale, tc.in)
	}
	// Malformed bytes read as NULL, never as a wrong number.
	assert.True(t, decodeNative(decCol(5, 2), []byte{0x80, 0x7B, 0xFF}).IsNull(), "fraction group 255 > 99")
	assert.True(t, decodeNative(decCol(5, 2), []byte{0x80}).IsNull(), "short")
}

// The format's defining property: the bytes sort as the numbers do.
func TestDecimalBytesSortAsNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{5, 2}, {14, 4}, {20, 10}, {30, 0}, {65, 30}, {9, 9}} {
		c := decCol(shape[0], shape[1])
		var prev *big.Rat
		var prevBytes []byte
		for i := 0; i < 300; i++ {
			s := randomDecimal(rng, shape[0], shape[1])
			b := encode(t, c, s)
			back := string(decodeNative(c, b).B)
			r1, _ := new(big.Rat).SetString(s)
			r2, ok := new(big.Rat).SetString(back)
			require.True(t, ok, back)
			require.Zero(t, r1.Cmp(r2), "%s read back as %s", s, back)
			if prev != nil {
				assert.Equal(t, prev.Cmp(r1), bytes.Compare(prevBytes, b), "%s vs %s in DECIMAL%v", prev.FloatString(shape[1]), s, shape)
			}
			prev, prevBytes = r1, b
		}
	}
}

func randomDecimal(rng *rand.Rand, prec, scale int) string {
	var b []byte
	if rng.IntN(2) == 0 {
		b = append(b, '-')
	}
	intg := rng.IntN(prec - scale + 1)
	for i := 0; i < intg; i++ {
		b = append(b, byte('0'+rng.IntN(10)))
	}
	if intg == 0 {
		b = append(b, '0')
	}
	if scale > 0 {
		b = append(b, '.')
		for i := rng.IntN(scale + 1); i > 0; i-- {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		if b[len(b)-1] == '.' {
			b = append(b, '0')
		}
	}
	return string(b)
}

func TestTemporalKnownBytes(t *testing.T) {
	// MySQL's own arithmetic for the packed forms (sql-common/my_time.cc),
	// written differently from the driver's, so a slip in either shows.
	ymd := func(y, m, d int) uint64 { return uint64((y*13+m)<<5 | d) }
	hms := func(h, m, s int) uint64 { return uint64(h<<12 | m<<6 | s) }
	be := func(v uint64, n int) []byte { return appendBigEndian(nil, v, n) }
	dt2 := ymd(2012, 4, 1)<<17 | hms(12, 34, 56)

	cases := []struct {
		col       column
		in, canon string
		wire      []byte
	}{
		{column{ndbType: ndbDate}, "2026-11-23", "2026-11-23", le3(2026<<9 | 11<<5 | 23)},
		{column{ndbType: ndbDate}, "0000-00-00", "0000-00-00", []byte{0, 0, 0}},
		{column{ndbType: ndbDatetime}, "2026-11-23 10:11:12", "2026-11-23 10:11:12", binary.LittleEndian.AppendUint64(nil, 20261123101112)},
		{column{ndbType: ndbDatetime2}, "2012-04-01 12:34:56", "2012-04-01 12:34:56", be(dt2+0x8000000000, 5)},
		{column{ndbType: ndbDatetime2, fsp: 3}, "2012-04-01T12:34:56.123", "2012-04-01 12:34:56.123", append(be(dt2+0x8000000000, 5), be(1230, 2)...)},
		{column{ndbType: ndbDatetime2, fsp: 6}, "2012-04-01 12:34:56.000001", "2012-04-01 12:34:56.000001", append(be(dt2+0x8000000000, 5), 0, 0, 1)},
		{column{ndbType: ndbDatetime2, fsp: 2}, "2012-04-01 12:34:56.5", "2012-04-01 12:34:56.50", append(be(dt2+0x8000000000, 5), 50)},
		{column{ndbType: ndbTime2}, "12:34:56", "12:34:56", be(hms(12, 34, 56)+0x800000, 3)},
		{column{ndbType: ndbTime2}, "-12:34:56", "-12:34:56", be(0x800000-hms(12, 34, 56), 3)},
		{column{ndbType: ndbTime2}, "838:59:59", "838:59:59", be(hms(838, 59, 59)+0x800000, 3)},
		{column{ndbType: ndbTime2}, "-00:00:00", "00:00:00", be(0x800000, 3)},
		{column{ndbType: ndbTime2, fsp: 4}, "01:00:00.25", "01:00:00.2500", be((hms(1, 0, 0)+0x800000)<<16|2500, 5)},
		{column{ndbType: ndbTime}, "-100:02:03", "-100:02:03", le3(uint32(1<<24 - 1000203))},
		{column{ndbType: ndbTimestamp}, "2026-11-23 00:00:00", "2026-11-23 00:00:00", binary.LittleEndian.AppendUint32(nil, 1795392000)},
		{column{ndbType: ndbTimestamp2, fsp: 6}, "1970-01-01 00:00:01.000002", "1970-01-01 00:00:01.000002", []byte{0, 0, 0, 1, 0, 0, 2}},
		{column{ndbType: ndbTimestamp2, fsp: 1}, "0000-00-00 00:00:00", "0000-00-00 00:00:00.0", []byte{0, 0, 0, 0, 0}},
	}
	for _, tc := range cases {
		got := encode(t, &tc.col, tc.in)
		assert.Equal(t, tc.wire, got, "type %d fsp %d %s", tc.col.ndbType, tc.col.fsp, tc.in)
		assert.Equal(t, temporalSize(&tc.col), len(got))
		assert.Equal(t, tc.canon, string(decodeNative(&tc.col, got).B), "type %d %s", tc.col.ndbType, tc.in)
	}
}

func TestTemporalRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		col column
		in  string
	}{
		{column{ndbType: ndbDate}, "2026-13-01"},
		{column{ndbType: ndbDate}, "2026-1-01"},
		{column{ndbType: ndbDate}, "2026-01-01 00:00:00"},
		{column{ndbType: ndbDatetime2}, "2026-01-01 24:00:00"},
		{column{ndbType: ndbDatetime2}, "2026-01-01"},
		{column{ndbType: ndbDatetime2, fsp: 2}, "2026-01-01 00:00:00.123"}, // a third digit, not zero
		{column{ndbType: ndbDatetime2, fsp: 6}, "2026-01-01 00:00:00.1234567"},
		{column{ndbType: ndbDatetime2, fsp: 6}, "2026-01-01 00:00:00."},
		{column{ndbType: ndbTime2}, "839:00:00"},
		{column{ndbType: ndbTime2, fsp: 1}, "838:59:59.5"},
		{column{ndbType: ndbTime2}, "12:60:00"},
		{column{ndbType: ndbTime2}, "1234:00:00"},
		{column{ndbType: ndbTimestamp2}, "1969-12-31 23:59:59"},
		{column{ndbType: ndbTimestamp}, "2038-01-19 03:14:08"},
		{column{ndbType: ndbTimestamp}, "yesterday"},
	} {
		_, err := appendNative(nil, &tc.col, ndbclient.String(tc.in))
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err), "type %d fsp %d %q", tc.col.ndbType, tc.col.fsp, tc.in)
	}
	// Trailing zeros beyond the column's digits are only a longer spelling.
	b := encode(t, &column{ndbType: ndbDatetime2, fsp: 2}, "2026-01-01 00:00:00.120000")
	assert.Equal(t, "2026-01-01 00:00:00.12", string(decodeNative(&column{ndbType: ndbDatetime2, fsp: 2}, b).B))
}

// Every fractional precision round-trips, and the bytes sort as the times do.
func TestTemporalRoundTripAndOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for fsp := 0; fsp <= 6; fsp++ {
		for _, nt := range []uint8{ndbDatetime2, ndbTime2, ndbTimestamp2} {
			c := &column{ndbType: nt, fsp: fsp}
			for i := 0; i < 200; i++ {
				var s string
				frac := ""
				if fsp > 0 {
					frac = fmt.Sprintf(".%0*d", fsp, rng.IntN(pow10(fsp)))
				}
				switch nt {
				case ndbDatetime2:
					s = fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d%s", 1000+rng.IntN(9000), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), frac)
				case ndbTimestamp2:
					s = fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d%s", 1971+rng.IntN(60), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), frac)
				case ndbTime2:
					sign := ""
					if rng.IntN(2) == 0 {
						sign = "-"
					}
					s = fmt.Sprintf("%s%02d:%02d:%02d%s", sign, rng.IntN(838), rng.IntN(60), rng.IntN(60), frac)
				}
				b := encode(t, c, s)
				require.Equal(t, s, string(decodeNative(c, b).B), "type %d fsp %d", nt, fsp)
			}
		}
		// Order: -1 s < -0.5 s (fsp > 0) < 0 < 0.5 s < 1 s for TIME2.
		c := &column{ndbType: ndbTime2, fsp: fsp}
		seq := []string{"-838:59:59", "-01:00:00", "-00:00:01", "00:00:00", "00:00:01", "838:59:59"}
		if fsp > 0 {
			half := "." + fmt.Sprintf("%0*d", fsp, 5*pow10(fsp-1))
			seq = []string{"-838:59:59", "-01:00:00", "-00:00:01", "-00:00:00" + half, "00:00:00", "00:00:00" + half, "00:00:01", "838:59:59"}
		}
		for i := 1; i < len(seq); i++ {
			assert.Equal(t, -1, bytes.Compare(encode(t, c, seq[i-1]), encode(t, c, seq[i])), "fsp %d: %s < %s", fsp, seq[i-1], seq[i])
		}
	}
}

func le3(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

func TestDescribeMapsDecimalAndTemporalColumns(t *testing.T) {
	var w []byte
	w = binary.LittleEndian.AppendUint32(w, 8)
	w = binary.LittleEndian.AppendUint16(w, 4)
	col := func(name string, typ uint8, prec, scale int, size uint32, pk bool) {
		w = binary.LittleEndian.AppendUint16(w, uint16(len(name)))
		w = append(w, name...)
		w = append(w, typ)
		w = binary.LittleEndian.AppendUint32(w, 1)
		flags := byte(0)
		if pk {
			flags = 3
		}
		w = append(w, 0, flags, 0)
		w = binary.LittleEndian.AppendUint16(w, uint16(prec))
		w = binary.LittleEndian.AppendUint16(w, uint16(scale))
		w = binary.LittleEndian.AppendUint32(w, size)
		w = binary.LittleEndian.AppendUint16(w, 0)
	}
	col("day", ndbDate, 0, 0, 3, true)
	col("price", ndbDecimal, 12, 2, 6, false)
	col("at", ndbDatetime2, 3, 0, 7, false)
	col("span", ndbTime2, 6, 0, 6, false)
	ti, err := decodeDescribe("shop", "orders", 3, w)
	require.NoError(t, err)
	cols := ti.schema.Columns
	assert.Equal(t, ndbclient.TypeDate, cols[0].Type)
	assert.Equal(t, ndbclient.Column{Name: "price", Type: ndbclient.TypeDecimal, Length: 1, Precision: 12, Scale: 2}, cols[1])
	assert.Equal(t, ndbclient.TypeDatetime, cols[2].Type)
	assert.Equal(t, 3, cols[2].Scale, "fractional digits come from the dictionary's precision")
	assert.Equal(t, 6, ti.cols[3].fsp)
	assert.Equal(t, []int{0}, ti.schema.PrimaryKey)

	// A BLOB or TEXT column leaves the table served; the column is refused,
	// by name, in any op that names it, and so is a delete of a row.
	blob := bytes.Replace(w, []byte{'s', 'p', 'a', 'n', ndbTime2}, []byte{'s', 'p', 'a', 'n', ndbBlob}, 1)
	ti, err = decodeDescribe("shop", "orders", 3, blob)
	require.NoError(t, err)
	assert.Equal(t, ndbclient.TypeBlob, ti.schema.Columns[3].Type)
	assert.Contains(t, ti.schema.Columns[3].Unsupported, "BLOB")
	tables := func(*ndbclient.Table) (*tableInfo, error) { return ti, nil }
	key := []ndbclient.Value{ndbclient.String("2024-01-02")}
	for _, op := range []*ndbclient.Op{
		{Kind: ndbclient.OpRead, Table: ti.schema, Key: key, Read: []int{3}},
		{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: key, Set: []ndbclient.ColumnValue{{Column: 3, Value: ndbclient.String("x")}}},
		{Kind: ndbclient.OpDelete, Table: ti.schema, Key: key},
		{Kind: ndbclient.OpDeleteAll, Table: ti.schema},
	} {
		_, err = encodeFlight(nil, []*ndbclient.Op{op}, nil, tables, 0)
		require.Error(t, err, "%s", op.Kind)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
		assert.Contains(t, err.Error(), "span", "%s names the column", op.Kind)
	}
	// Ops on the other columns run.
	_, err = encodeFlight(nil, []*ndbclient.Op{{Kind: ndbclient.OpRead, Table: ti.schema, Key: key, Read: []int{1}}}, nil, tables, 0)
	require.NoError(t, err)
}

// FuzzNativeDecimalTemporal: no bytes crash the decoders, and any value they
// return encodes back to bytes that decode to the same text.
func FuzzNativeDecimalTemporal(f *testing.F) {
	f.Add(uint8(0), uint8(5), uint8(2), []byte{0x80, 0x7B, 0x2D})
	f.Add(uint8(1), uint8(3), uint8(0), []byte{0x99, 0x8B, 0x42, 0x8E, 0x50, 0x04, 0xCE})
	f.Add(uint8(2), uint8(6), uint8(0), []byte{0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xCE})
	f.Add(uint8(3), uint8(2), uint8(0), []byte{0x61, 0xB3, 0x2C, 0x40, 0x32})
	f.Add(uint8(4), uint8(0), uint8(0), []byte{0x77, 0xFD, 0x0F})
	types := []uint8{ndbDecimal, ndbDatetime2, ndbTime2, ndbTimestamp2, ndbDate, ndbDatetime, ndbTime, ndbTimestamp, ndbDecimalunsigned}
	f.Fuzz(func(t *testing.T, which, a, b uint8, raw []byte) {
		c := &column{ndbType: types[int(which)%len(types)]}
		if c.ndbType == ndbDecimal || c.ndbType == ndbDecimalunsigned {
			c.precision, c.scale = 1+int(a)%65, int(b)%31
			if c.scale > c.precision {
				c.scale = c.precision
			}
		} else {
			c.fsp = int(a) % 7
		}
		v := decodeNative(c, raw)
		if v.IsNull() {
			return
		}
		again, err := appendNative(nil, c, v)
		if err != nil {
			return // stored bytes no writer of ours makes (e.g. month 15 in an old DATETIME)
		}
		back := decodeNative(c, again)
		require.False(t, back.IsNull(), "%q encoded to %x, which does not decode", v.B, again)
		require.Equal(t, string(v.B), string(back.B), "type %d: %x -> %q -> %x", c.ndbType, raw, v.B, again)
	})
}

func TestStaleSchemaRetriesVersionErrorsAndNamesTables(t *testing.T) {
	a := &ndbclient.Table{Database: "d", Name: "a"}
	b := &ndbclient.Table{Database: "d", Name: "b"}
	ops := []*ndbclient.Op{
		{Table: a, Err: mapError(errSchemaVersion, 0, classSchema, "Invalid schema object version")},
		{Table: a, Err: mapError(errTableNotDefined, 0, classSchema, "Table not defined in transaction coordinator")},
		{Table: b, Err: mapError(errNoSuchTable, 0, classSchema, "No such table existed")},
		{Table: b, Err: mapError(626, 0, classNoDataFound, "Tuple did not exist")},
		{Table: b},
	}
	stale := staleSchema(ops)
	assert.Equal(t, []*ndbclient.Table{a, b}, stale, "each table once")
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(ops[0].Err), "not executed: the dispatcher may retry")
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(ops[1].Err))
	assert.Contains(t, ops[0].Err.Error(), "d.a changed")
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(ops[2].Err), "a dropped table stays an error")
	assert.Equal(t, ndbclient.CodeNotFound, ndbclient.CodeOf(ops[3].Err))
	assert.NoError(t, ops[4].Err)
	assert.Empty(t, staleSchema(ops[3:]))
}

func TestCompatibleAcceptsAddedColumnsOnly(t *testing.T) {
	old, err := decodeDescribe("ndbmemcache", "demo_table", 7, demoDescribe())
	require.NoError(t, err)
	same, err := decodeDescribe("ndbmemcache", "demo_table", 7, demoDescribe())
	require.NoError(t, err)
	assert.NoError(t, compatible(old, same))

	added := tableInfo{id: same.id}
	added.schema = &ndbclient.Table{}
	*added.schema = *same.schema
	added.schema.Columns = append(append([]ndbclient.Column(nil), same.schema.Columns...), ndbclient.Column{Name: "extra", Type: ndbclient.TypeInt32})
	added.cols = append(append([]column(nil), same.cols...), column{ndbType: ndbInt})
	assert.NoError(t, compatible(old, &added), "an online ADD COLUMN keeps every old column in place")
	assert.Error(t, compatible(&added, old), "a lost column is refused")

	retyped := tableInfo{id: same.id}
	retyped.schema = &ndbclient.Table{}
	*retyped.schema = *same.schema
	retyped.schema.Columns = append([]ndbclient.Column(nil), same.schema.Columns...)
	retyped.schema.Columns[1].Length++
	retyped.cols = same.cols
	assert.ErrorContains(t, compatible(old, &retyped), "changed type")

	renamed := tableInfo{id: same.id, cols: same.cols}
	renamed.schema = &ndbclient.Table{}
	*renamed.schema = *same.schema
	renamed.schema.Columns = append([]ndbclient.Column(nil), same.schema.Columns...)
	renamed.schema.Columns[2].Name = "other"
	assert.ErrorContains(t, compatible(old, &renamed), "is now other")
}
