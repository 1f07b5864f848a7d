package ndbclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseColumnType(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want Column
	}{
		{"tinyint", Column{Type: TypeInt8}},
		{"TINYINT UNSIGNED", Column{Type: TypeUint8}},
		{"smallint  unsigned", Column{Type: TypeUint16}},
		{"MEDIUMINT", Column{Type: TypeInt24}},
		{"int(11)", Column{Type: TypeInt32}},
		{"INT UNSIGNED", Column{Type: TypeUint32}},
		{"BIGINT", Column{Type: TypeInt64}},
		{"BIGINT UNSIGNED", Column{Type: TypeUint64}},
		{"FLOAT", Column{Type: TypeFloat}},
		{"DOUBLE", Column{Type: TypeDouble}},
		{"DECIMAL(10,2)", Column{Type: TypeDecimal, Precision: 10, Scale: 2}},
		{"DECIMAL", Column{Type: TypeDecimal, Precision: 10}},
		{"CHAR(10)", Column{Type: TypeChar, Length: 40, Chars: 10}},
		{"VARCHAR(250)", Column{Type: TypeVarchar, Length: 1000, Chars: 250}},
		{"BINARY(16)", Column{Type: TypeBinary, Length: 16}},
		{"VARBINARY(1024)", Column{Type: TypeVarbinary, Length: 1024}},
		{"BIT(12)", Column{Type: TypeBit, Length: 12}},
		{"DATE", Column{Type: TypeDate}},
		{"DATETIME(6)", Column{Type: TypeDatetime, Scale: 6}},
		{"TIME", Column{Type: TypeTime}},
		{"TIMESTAMP(3)", Column{Type: TypeTimestamp, Scale: 3}},
		{"YEAR", Column{Type: TypeYear}},
	} {
		var c Column
		require.NoError(t, ParseColumnType(tc.spec, &c), tc.spec)
		assert.Equal(t, tc.want, c, tc.spec)
	}
	for _, bad := range []string{"", "TEXTY", "VARCHAR", "VARCHAR(0)", "VARCHAR(x)", "DECIMAL(5,6)", "BIT(65)",
		"FLOAT UNSIGNED", "DATE(3)", "DATETIME(7)", "CHAR(300)", "INT(", "DECIMAL(66)"} {
		var c Column
		assert.Error(t, ParseColumnType(bad, &c), bad)
	}
}
