package ndbapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A table written by encodeCreate reads back through decodeDescribe as the
// same schema: the shim parses the spec with describe's reader layout.
func TestEncodeCreateIsDescribesInverse(t *testing.T) {
	want := &ndbclient.Table{
		Database: "shop", Name: "orders", ExpireColumn: -1,
		Columns: []ndbclient.Column{
			{Name: "region", Type: ndbclient.TypeUint16},
			{Name: "id", Type: ndbclient.TypeUint64},
			{Name: "customer", Type: ndbclient.TypeVarchar, Length: 64},
			{Name: "note", Type: ndbclient.TypeVarchar, Length: 1000, Nullable: true},
			{Name: "payload", Type: ndbclient.TypeVarbinary, Length: 13500, Nullable: true},
			{Name: "code", Type: ndbclient.TypeChar, Length: 4},
			{Name: "total", Type: ndbclient.TypeDecimal, Precision: 12, Scale: 2},
			{Name: "placed_at", Type: ndbclient.TypeDatetime, Scale: 3},
			{Name: "day", Type: ndbclient.TypeDate, Nullable: true},
			{Name: "score", Type: ndbclient.TypeDouble},
			{Name: "delta", Type: ndbclient.TypeInt32},
		},
		PrimaryKey:      []int{0, 1},
		DistributionKey: []int{1},
	}
	spec, err := encodeCreate(want)
	require.NoError(t, err)
	got, err := decodeDescribe("shop", "orders", 3, spec)
	require.NoError(t, err)
	// The dictionary gives scalar columns a length of 1; strings keep the
	// spec's character set (none here), so no bound in characters.
	expect := append([]ndbclient.Column(nil), want.Columns...)
	for i := range expect {
		if expect[i].Length == 0 {
			expect[i].Length = 1
		}
	}
	require.Equal(t, expect, got.schema.Columns)
	require.Equal(t, want.PrimaryKey, got.schema.PrimaryKey)
	require.Equal(t, want.DistributionKey, got.schema.DistributionKey)
	require.Equal(t, uint8(ndbLongvarchar), got.cols[3].ndbType, "VARCHAR over 255 bytes takes NDB's 2-byte prefix")
	require.Equal(t, uint8(ndbVarchar), got.cols[2].ndbType)
}

func TestEncodeCreateRefusesAnInvalidTable(t *testing.T) {
	_, err := encodeCreate(&ndbclient.Table{Database: "d", Name: "t", ExpireColumn: -1,
		Columns: []ndbclient.Column{{Name: "k", Type: ndbclient.TypeUint32}}})
	require.ErrorContains(t, err, "no primary key")
}

// A utf8mb4 VARCHAR(16) takes 64 bytes; the row API bounds it in characters.
func TestDescribeCharsFromTheCharacterSet(t *testing.T) {
	want := &ndbclient.Table{Database: "d", Name: "t", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{{Name: "k", Type: ndbclient.TypeUint32}, {Name: "s", Type: ndbclient.TypeVarchar, Length: 64}}}
	spec, err := encodeCreate(want)
	require.NoError(t, err)
	spec[len(spec)-2] = 45 // the last column's character set: utf8mb4_general_ci
	got, err := decodeDescribe("d", "t", 0, spec)
	require.NoError(t, err)
	require.Equal(t, 16, got.schema.Columns[1].Chars)
	require.Equal(t, 45, got.schema.Columns[1].Charset)
}

// An AutoIncrement column travels as key flag 8 both ways: the shim makes
// the table's sequence from it, and describe reports getAutoIncrement.
func TestEncodeCreateAutoIncrement(t *testing.T) {
	want := &ndbclient.Table{Database: "d", Name: "parts", ExpireColumn: -1, PrimaryKey: []int{0, 1},
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32, AutoIncrement: true},
			{Name: "part", Type: ndbclient.TypeInt16}, {Name: "content", Type: ndbclient.TypeVarbinary, Length: 100}}}
	spec, err := encodeCreate(want)
	require.NoError(t, err)
	got, err := decodeDescribe("d", "parts", 0, spec)
	require.NoError(t, err)
	require.True(t, got.schema.Columns[0].AutoIncrement)
	require.False(t, got.schema.Columns[1].AutoIncrement)
	require.Equal(t, []int{0, 1}, got.schema.PrimaryKey, "flag 8 is no key flag")
	require.Nil(t, got.schema.DistributionKey)

	two := *want
	two.Columns = append([]ndbclient.Column(nil), want.Columns...)
	two.Columns[1].AutoIncrement = true
	_, err = encodeCreate(&two)
	require.ErrorContains(t, err, "both AUTO_INCREMENT")
	text := *want
	text.Columns = append([]ndbclient.Column(nil), want.Columns...)
	text.Columns[0].AutoIncrement, text.Columns[2].AutoIncrement = false, true
	_, err = encodeCreate(&text)
	require.ErrorContains(t, err, "is an integer")
}
