package ndbapi

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// sampleDescribe is the shim's describe output for ndbgate_types.frm_sample
// (internal/frm/testdata/README.md), its columns as ndb_desc shows them on
// NDB 7.5.0, followed by frm: the packed definition (nil: none, as for a
// table made through the NDB API; a nil with tooLarge: the marker for one
// that did not fit).
func sampleDescribe(t *testing.T, frm []byte, tooLarge bool) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 2)
	type c struct {
		name   string
		typ    uint8
		length uint32
		array  uint8
		slot   uint32
		cs     uint16
	}
	cols := []c{
		{"id", ndbInt, 1, 0, 4, 0},
		{"c_l1", ndbChar, 10, 0, 10, 8},
		{"v_l1", ndbVarchar, 20, 1, 21, 8},
		{"c_u4", ndbChar, 40, 0, 40, 45},
		{"v_u4", ndbVarchar, 80, 1, 81, 45},
		{"v_u3", ndbVarchar, 60, 1, 61, 33},
		{"v_as", ndbVarchar, 20, 1, 21, 11},
		{"c_bin", ndbBinary, 6, 0, 6, 0},
		{"e", ndbChar, 1, 0, 1, 63},
		{"e_u4", ndbChar, 1, 0, 1, 63},
		{"e_l1", ndbChar, 1, 0, 1, 63},
		{"e_same", ndbChar, 1, 0, 1, 63},
		{"s", ndbChar, 1, 0, 1, 63},
		{"s_u4", ndbChar, 2, 0, 2, 63},
		{"d10", ndbDecimal, 1, 0, 5, 0},
		{"doc", ndbText, 1, 2, 0, 8},
		{"b", ndbBlob, 1, 2, 0, 0},
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(cols)))
	for i, cl := range cols {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(cl.name)))
		b = append(b, cl.name...)
		b = append(b, cl.typ)
		b = binary.LittleEndian.AppendUint32(b, cl.length)
		var flags byte
		if i == 0 {
			flags = 3
		}
		b = append(b, boolByte(i > 0), flags, cl.array)
		prec, scale := 0, 0
		if cl.typ == ndbDecimal {
			prec, scale = 10, 2
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(prec))
		b = binary.LittleEndian.AppendUint16(b, uint16(scale))
		b = binary.LittleEndian.AppendUint32(b, cl.slot)
		b = binary.LittleEndian.AppendUint16(b, cl.cs)
	}
	if tooLarge {
		return binary.LittleEndian.AppendUint32(b, 0xFFFFFFFF)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frm)))
	return append(b, frm...)
}

func samplePackedFrm(t *testing.T) []byte {
	b, err := os.ReadFile("../../internal/frm/testdata/frm_sample.packed-frm")
	require.NoError(t, err)
	return b
}

// A table made in SQL: character sets carried, ENUM and SET named from the
// definition, BLOB/TEXT served but refused by name.
func TestDescribeWithTableDefinition(t *testing.T) {
	ti, err := decodeDescribe("ndbgate_types", "frm_sample", 1, sampleDescribe(t, samplePackedFrm(t), false))
	require.NoError(t, err)
	col := func(name string) *ndbclient.Column {
		i := ti.schema.ColumnIndex(name)
		require.GreaterOrEqual(t, i, 0, name)
		return &ti.schema.Columns[i]
	}
	assert.Equal(t, ndbclient.Column{Name: "c_l1", Type: ndbclient.TypeChar, Length: 10, Chars: 10, Nullable: true, Charset: 8}, *col("c_l1"))
	assert.Equal(t, ndbclient.Column{Name: "v_u4", Type: ndbclient.TypeVarchar, Length: 80, Chars: 20, Nullable: true, Charset: 45}, *col("v_u4"))
	assert.Equal(t, 20, col("v_u3").Chars)
	assert.Equal(t, 11, col("v_as").Charset)

	assert.Equal(t, []string{"a", "b", "c"}, col("e").Enum)
	assert.Equal(t, []string{"café", "naïve", "😀", ""}, col("e_u4").Enum)
	assert.Equal(t, []string{"ÿes", "a,b", "no"}, col("e_l1").Enum, "latin1 names in UTF-8")
	assert.Equal(t, []string{"a", "b", "c"}, col("e_same").Enum)
	assert.Equal(t, []string{"x", "y", "z"}, col("s").Set)
	assert.Equal(t, []string{"α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "ι"}, col("s_u4").Set)
	for _, name := range []string{"e", "e_u4", "e_l1", "e_same", "s", "s_u4"} {
		assert.Empty(t, col(name).Unsupported, name)
		assert.True(t, ti.cols[ti.schema.ColumnIndex(name)].exact, name)
	}
	assert.Equal(t, "a TEXT column: ndbgate does not read or write BLOB/TEXT", col("doc").Unsupported)
	assert.Equal(t, "a BLOB column: ndbgate does not read or write BLOB/TEXT", col("b").Unsupported)
	assert.Equal(t, ndbclient.TypeText, col("doc").Type)
	assert.True(t, ti.hasBlob)
	for _, name := range []string{"id", "c_l1", "v_l1", "c_u4", "v_u4", "v_u3", "v_as", "c_bin", "d10"} {
		assert.Empty(t, col(name).Unsupported, name)
	}

	// An ENUM's bytes are kept as stored: index 32 is a space, not trimmed.
	c := &ti.cols[ti.schema.ColumnIndex("e")]
	assert.Equal(t, []byte{' '}, decodeNative(c, []byte{' '}).B)
	native, err := appendNative(nil, c, ndbclient.Bytes([]byte{3}))
	require.NoError(t, err)
	assert.Equal(t, []byte{3}, native)
	// A latin1 CHAR is still space-trimmed, as MySQL shows it.
	assert.Equal(t, []byte("ab"), decodeNative(&ti.cols[1], []byte("ab        ")).B)
}

// Without a definition (a table made through the NDB API), a CHAR of
// binary character set is bytes; with one that cannot be read, an ENUM or
// SET column is refused, saying why, and the rest of the table is served.
func TestDescribeWithoutATableDefinition(t *testing.T) {
	ti, err := decodeDescribe("d", "t", 1, sampleDescribe(t, nil, false))
	require.NoError(t, err)
	e := &ti.schema.Columns[ti.schema.ColumnIndex("e")]
	assert.Nil(t, e.Enum)
	assert.Empty(t, e.Unsupported)
	assert.Equal(t, []byte("x"), decodeNative(&ti.cols[ti.schema.ColumnIndex("e")], []byte("x ")).B)
	assert.Equal(t, "a TEXT column: ndbgate does not read or write BLOB/TEXT", ti.schema.Columns[ti.schema.ColumnIndex("doc")].Unsupported)

	bad := samplePackedFrm(t)
	bad = append(append([]byte(nil), bad[:20]...), make([]byte, len(bad)-20)...)
	for name, b := range map[string][]byte{
		"corrupt":   sampleDescribe(t, bad, false),
		"too large": sampleDescribe(t, nil, true),
	} {
		ti, err := decodeDescribe("d", "t", 1, b)
		require.NoError(t, err, name)
		for _, c := range []string{"e", "s_u4"} {
			u := ti.schema.Columns[ti.schema.ColumnIndex(c)].Unsupported
			assert.Contains(t, u, "an ENUM or SET column", name)
			assert.Contains(t, u, "cannot be read", name)
		}
		assert.Empty(t, ti.schema.Columns[ti.schema.ColumnIndex("v_l1")].Unsupported, name)
	}
}

// A character set the row API does not convert is refused by name.
func TestDescribeUnsupportedCharacterSet(t *testing.T) {
	b := sampleDescribe(t, samplePackedFrm(t), false)
	// v_as's collation id (11, ascii) becomes 28 (gbk_chinese_ci).
	i := 0
	for j := 0; j < len(b)-4; j++ {
		if string(b[j:j+4]) == "v_as" {
			i = j + 4 + 1 + 4 + 3 + 2 + 2 + 4
			break
		}
	}
	require.Equal(t, uint16(11), binary.LittleEndian.Uint16(b[i:]))
	binary.LittleEndian.PutUint16(b[i:], 28)
	ti, err := decodeDescribe("d", "t", 1, b)
	require.NoError(t, err)
	assert.Contains(t, ti.schema.Columns[6].Unsupported, "character set collation id 28")
}

// A new character set or new ENUM names change what a column's bytes mean:
// the table is not served on the old description.
func TestCompatibleSeesNamesAndCharacterSets(t *testing.T) {
	old, err := decodeDescribe("d", "t", 1, sampleDescribe(t, samplePackedFrm(t), false))
	require.NoError(t, err)
	same, err := decodeDescribe("d", "t", 1, sampleDescribe(t, samplePackedFrm(t), false))
	require.NoError(t, err)
	require.NoError(t, compatible(old, same))
	e := same.schema.ColumnIndex("e")
	same.schema.Columns[e].Enum = []string{"a", "b", "c", "d"}
	assert.ErrorContains(t, compatible(old, same), "column e changed type")
	same.schema.Columns[e].Enum = old.schema.Columns[e].Enum
	same.schema.Columns[1].Charset = 45
	assert.ErrorContains(t, compatible(old, same), "column c_l1 changed type")
}
