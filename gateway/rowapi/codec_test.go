package rowapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func col(spec string, nullable bool) *ndbclient.Column {
	c := &ndbclient.Column{Name: "c", Nullable: nullable}
	if err := ndbclient.ParseColumnType(spec, c); err != nil {
		panic(err)
	}
	return c
}

// Every type round-trips: JSON in, value stored, the same (canonical) JSON out.
func TestCodecRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		typ, in, out string
	}{
		{"TINYINT", "-128", ""}, {"TINYINT", "127", ""}, {"TINYINT UNSIGNED", "255", ""}, {"TINYINT UNSIGNED", "0", ""},
		{"SMALLINT", "-32768", ""}, {"SMALLINT", "32767", ""}, {"SMALLINT UNSIGNED", "65535", ""},
		{"MEDIUMINT", "-8388608", ""}, {"MEDIUMINT", "8388607", ""}, {"MEDIUMINT UNSIGNED", "16777215", ""},
		{"INT", "-2147483648", ""}, {"INT", "2147483647", ""}, {"INT UNSIGNED", "4294967295", ""},
		{"BIGINT", "-9223372036854775808", ""}, {"BIGINT", "9223372036854775807", ""},
		{"BIGINT UNSIGNED", "18446744073709551615", ""},
		{"INT", "1.0", "1"}, {"INT", "1e3", "1000"}, {"INT", " 7 ", "7"},
		{"FLOAT", "1.5", ""}, {"FLOAT", "-3.4028235e+38", ""}, {"DOUBLE", "1.7976931348623157e+308", ""}, {"DOUBLE", "0.1", ""},
		{"DECIMAL(10,2)", "12.5", "12.50"}, {"DECIMAL(10,2)", `"-0.00"`, "0.00"}, {"DECIMAL(10,2)", "99999999.99", ""},
		{"DECIMAL(5,0)", "-99999", ""},
		{"DECIMAL(30,4)", `"12345678901234567890123456.1234"`, ""}, {"DECIMAL(30,4)", "1.5", `"1.5000"`},
		{"CHAR(3)", `"abc"`, ""}, {"CHAR(3)", `"ñéü"`, ""}, {"VARCHAR(5)", `""`, ""},
		{"VARCHAR(5)", `"a\"b\\c"`, ""}, {"VARCHAR(5)", `"\u0000\n"`, `"\u0000\n"`},
		{"VARCHAR(4)", `"日本語!"`, ""},
		{"BINARY(4)", `"AAECAw=="`, ""}, {"VARBINARY(8)", `""`, ""}, {"VARBINARY(8)", `"AAAAAAAAAAA="`, ""},
		{"BIT(1)", `"AQ=="`, ""}, {"BIT(12)", `"D/8="`, ""}, {"BIT(64)", `"//////////8="`, ""},
		{"DATE", `"2024-02-29"`, ""}, {"DATE", `"1000-01-01"`, ""}, {"DATE", `"9999-12-31"`, ""},
		{"DATETIME", `"2024-01-02 03:04:05"`, ""}, {"DATETIME", `"2024-01-02T03:04:05"`, `"2024-01-02 03:04:05"`},
		{"DATETIME(6)", `"2024-01-02 03:04:05.123456"`, ""}, {"DATETIME(3)", `"2024-01-02 03:04:05.1"`, `"2024-01-02 03:04:05.100"`},
		{"DATETIME", `"2024-01-02 03:04:05.000"`, `"2024-01-02 03:04:05"`},
		{"TIMESTAMP", `"1970-01-01 00:00:01"`, ""}, {"TIMESTAMP", `"2038-01-19 03:14:07"`, ""},
		{"TIME", `"838:59:59"`, ""}, {"TIME", `"-838:59:59"`, ""}, {"TIME", `"01:02:03"`, ""}, {"TIME(2)", `"-00:00:00.5"`, `"-00:00:00.50"`},
		{"YEAR", "1901", ""}, {"YEAR", "2155", ""}, {"YEAR", "0", ""},
	} {
		c := col(tc.typ, false)
		v, err := DecodeValue(c, []byte(tc.in))
		require.NoError(t, err, "%s %s", tc.typ, tc.in)
		want := tc.out
		if want == "" {
			want = strings.TrimSpace(tc.in)
		}
		assert.Equal(t, want, string(AppendValue(nil, c, v)), "%s %s", tc.typ, tc.in)
	}
}

func TestCodecNull(t *testing.T) {
	for _, typ := range []string{"INT", "VARCHAR(3)", "VARBINARY(3)", "DATE", "DECIMAL(5,2)", "BIT(3)"} {
		v, err := DecodeValue(col(typ, true), []byte("null"))
		require.NoError(t, err)
		assert.True(t, v.IsNull())
		assert.Equal(t, "null", string(AppendValue(nil, col(typ, true), v)))
		_, err = DecodeValue(col(typ, false), []byte("null"))
		assert.ErrorContains(t, err, "NOT NULL")
	}
}

// Every refusal is InvalidArgument and says what is wrong.
func TestCodecRefusals(t *testing.T) {
	for _, tc := range []struct{ typ, in, want string }{
		{"TINYINT", "128", "out of range -128..127"}, {"TINYINT", "-129", "out of range"},
		{"TINYINT UNSIGNED", "-1", "out of range 0..255"}, {"TINYINT UNSIGNED", "256", "out of range"},
		{"INT UNSIGNED", "4294967296", "out of range"}, {"BIGINT", "9223372036854775808", "out of range"},
		{"BIGINT UNSIGNED", "18446744073709551616", "out of range"}, {"BIGINT UNSIGNED", "1" + strings.Repeat("0", 400), "out of range"},
		{"INT", "1.5", "wants an integer"}, {"INT", `"1"`, "wants an integer, got a string"}, {"INT", "true", "a boolean"},
		{"INT", "01", "wants an integer"}, {"INT", "1e", "wants an integer"}, {"INT", "{}", "an object"},
		{"FLOAT", "1e39", "out of range"}, {"DOUBLE", "1e309", "out of range"}, {"DOUBLE", `"1"`, "wants a number"},
		{"DECIMAL(5,2)", "1000", "out of range"}, {"DECIMAL(5,2)", "1.005", "more than 2 decimals"},
		{"DECIMAL(5,2)", `"abc"`, "not a decimal"}, {"DECIMAL(5,2)", `"1/2"`, "not a decimal"}, {"DECIMAL(5,2)", "[1]", "an array"},
		{"CHAR(3)", `"abcd"`, "4 characters is longer than the column's 3"}, {"VARCHAR(2)", `"日本語"`, "longer"},
		{"VARCHAR(10)", "\"\xff\"", "not valid UTF-8"}, {"VARCHAR(10)", "12", "wants a string"}, {"VARCHAR(10)", `"abc`, "not a valid JSON string"},
		{"VARBINARY(2)", `"AAAA"`, "3 bytes is longer than the column's 2"}, {"VARBINARY(8)", `"!!"`, "not valid base64"},
		{"BINARY(4)", `"AAECAw"`, "not valid base64"},
		{"BIT(4)", `"EA=="`, "bits set above"}, {"BIT(64)", `"AAAAAAAAAAAA"`, "at most 64 bits"},
		{"DATE", `"2023-02-29"`, "no such date"}, {"DATE", `"2024-13-01"`, "no such date"}, {"DATE", `"24-01-01"`, "not a date"},
		{"DATE", `"0000-00-00"`, "no such date"}, {"DATE", "20240101", "wants a string"},
		{"DATETIME", `"2024-01-01 24:00:00"`, "no such time"}, {"DATETIME", `"2024-01-01 10:00:00.5"`, "more fractional digits"},
		{"DATETIME(6)", `"2024-01-01 10:00:00.1234567"`, "more than 6"}, {"DATETIME", `"2024-01-01"`, "not a datetime"},
		{"TIMESTAMP", `"1970-01-01 00:00:00"`, "TIMESTAMP range"}, {"TIMESTAMP", `"2038-01-19 03:14:08"`, "TIMESTAMP range"},
		{"TIME", `"839:00:00"`, "TIME range"}, {"TIME", `"1:00"`, "not a time"}, {"TIME", `"10:60:00"`, "not a time"},
		{"YEAR", "1900", "not a year"}, {"YEAR", "2156", "out of range"},
		{"INT", "", "no value"},
	} {
		_, err := DecodeValue(col(tc.typ, false), []byte(tc.in))
		require.Error(t, err, "%s %s", tc.typ, tc.in)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
		assert.Contains(t, err.Error(), tc.want, "%s %s", tc.typ, tc.in)
		assert.Contains(t, err.Error(), `column "c"`)
	}
}

func TestAppendJSONStringEscapes(t *testing.T) {
	got := AppendString(nil, []byte("a\x01\"\\\u2028\xffz"))
	assert.Equal(t, `"a\u0001\"\\\u2028\ufffdz"`, string(got))
}

func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{"1", "-1.5e3", `"abc"`, `"AAEC"`, "null", `"2024-01-01 00:00:00.5"`, `"-838:59:59"`, "1e400", `"\u00e9"`} {
		f.Add(uint8(0), []byte(s))
	}
	types := []string{"TINYINT", "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED", "FLOAT", "DOUBLE", "DECIMAL(10,3)",
		"DECIMAL(40,10)", "CHAR(4)", "VARCHAR(8)", "BINARY(4)", "VARBINARY(8)", "BIT(10)", "DATE", "DATETIME(6)",
		"TIMESTAMP", "TIME(3)", "YEAR"}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		c := col(types[int(which)%len(types)], which&0x80 != 0)
		v, err := DecodeValue(c, raw)
		if err != nil {
			if ndbclient.CodeOf(err) != ndbclient.CodeInvalidArgument {
				t.Fatalf("%s %q: error %v is not InvalidArgument", c.Type, raw, err)
			}
			return
		}
		// A value accepted once is accepted again from its own output and
		// comes back the same: the canonical form is a fixed point.
		out := AppendValue(nil, c, v)
		v2, err := DecodeValue(c, out)
		if err != nil {
			t.Fatalf("%s %q -> %s refused: %v", c.Type, raw, out, err)
		}
		if out2 := AppendValue(nil, c, v2); string(out2) != string(out) {
			t.Fatalf("%s %q: %s then %s", c.Type, raw, out, out2)
		}
	})
}
