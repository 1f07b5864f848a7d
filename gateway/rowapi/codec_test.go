package rowapi

import (
	"fmt"
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

// strCol is a CHAR or VARCHAR of n characters in collation id cs, as the
// NDB driver describes it (Length in bytes, Chars from the character set).
func strCol(typ ndbclient.ColumnType, n, cs, maxBytes int) *ndbclient.Column {
	return &ndbclient.Column{Name: "c", Type: typ, Length: n * maxBytes, Chars: n, Charset: cs}
}

// enumCol and setCol are as the NDB driver describes them from mysqld's
// table definition: a CHAR of binary character set with the names.
func enumCol(names ...string) *ndbclient.Column {
	n := 1
	if len(names) > 255 {
		n = 2
	}
	return &ndbclient.Column{Name: "c", Type: ndbclient.TypeChar, Length: n, Chars: n, Charset: 63, Enum: names}
}

func setCol(names ...string) *ndbclient.Column {
	n := (len(names) + 7) / 8
	if n > 4 {
		n = 8
	}
	return &ndbclient.Column{Name: "c", Type: ndbclient.TypeChar, Length: n, Chars: n, Charset: 63, Set: names}
}

func appendOK(t testing.TB, c *ndbclient.Column, v ndbclient.Value) string {
	t.Helper()
	out, err := AppendValue(nil, c, v)
	require.NoError(t, err)
	return string(out)
}

// CHAR and VARCHAR are stored in the column's character set and shown as
// UTF-8 (the issue: latin1 'café' came back as "caf\ufffd").
func TestCodecCharacterSets(t *testing.T) {
	latin1 := strCol(ndbclient.TypeVarchar, 10, 8, 1)
	v, err := DecodeValue(latin1, []byte(`"café €"`))
	require.NoError(t, err)
	assert.Equal(t, []byte("caf\xe9 \x80"), v.B, "stored as latin1 (cp1252) bytes")
	assert.Equal(t, `"café €"`, appendOK(t, latin1, v))
	// Every byte a latin1 column can hold reads as its character, so the
	// five bytes cp1252 leaves undefined come back as MySQL shows them.
	assert.Equal(t, "\"\u0081é\"", appendOK(t, latin1, ndbclient.Bytes([]byte{0x81, 0xE9})))
	// Length in characters: 10 latin1 characters fit, 11 do not.
	_, err = DecodeValue(latin1, []byte(`"ééééééééééé"`))
	assert.ErrorContains(t, err, "11 characters is longer than the column's 10")
	_, err = DecodeValue(latin1, []byte(`"zażółć"`))
	require.Error(t, err)
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, `column "c"`)
	assert.ErrorContains(t, err, "cannot be stored in latin1")
	_, err = DecodeValue(latin1, []byte(`"😀"`))
	assert.ErrorContains(t, err, "latin1")

	ascii := strCol(ndbclient.TypeChar, 4, 11, 1)
	_, err = DecodeValue(ascii, []byte(`"é"`))
	assert.ErrorContains(t, err, "cannot be stored in ascii")
	v, err = DecodeValue(ascii, []byte(`"ok"`))
	require.NoError(t, err)
	assert.Equal(t, `"ok"`, appendOK(t, ascii, v))

	utf8 := strCol(ndbclient.TypeVarchar, 4, 33, 3)
	_, err = DecodeValue(utf8, []byte(`"a😀"`))
	assert.ErrorContains(t, err, "cannot be stored in utf8")
	v, err = DecodeValue(utf8, []byte(`"naïv"`))
	require.NoError(t, err)
	assert.Equal(t, `"naïv"`, appendOK(t, utf8, v))

	mb4 := strCol(ndbclient.TypeVarchar, 4, 45, 4)
	v, err = DecodeValue(mb4, []byte(`"😀 é"`))
	require.NoError(t, err)
	assert.Equal(t, "😀 é", string(v.B))
	assert.Equal(t, `"😀 é"`, appendOK(t, mb4, v))

	// Binary character set (a table made through the NDB API): bytes.
	bin := strCol(ndbclient.TypeVarchar, 8, 63, 1)
	v, err = DecodeValue(bin, []byte(`"é"`))
	require.NoError(t, err)
	assert.Equal(t, []byte("é"), v.B)
	assert.Equal(t, `"é"`, appendOK(t, bin, v))

	// A character set the row API does not know is refused, not guessed.
	sjis := strCol(ndbclient.TypeVarchar, 8, 13, 2)
	_, err = AppendValue(nil, sjis, ndbclient.Bytes([]byte("a")))
	assert.ErrorContains(t, err, "collation id 13")
}

// ENUM and SET read and write their names (the issue: ENUM 'c' came back
// as "\u0003", SET 'x,z' as "\u0005").
func TestCodecEnumAndSet(t *testing.T) {
	e := enumCol("a", "b", "c")
	assert.Equal(t, `"c"`, appendOK(t, e, ndbclient.Bytes([]byte{3})))
	assert.Equal(t, `""`, appendOK(t, e, ndbclient.Bytes([]byte{0})), "index 0 is MySQL's empty error value")
	v, err := DecodeValue(e, []byte(`"b"`))
	require.NoError(t, err)
	assert.Equal(t, []byte{2}, v.B)
	v, err = DecodeValue(e, []byte(`"C"`))
	require.NoError(t, err)
	assert.Equal(t, []byte{3}, v.B, "names match without regard to case")
	_, err = DecodeValue(e, []byte(`"d"`))
	assert.ErrorContains(t, err, `"d" is not one of its values ("a", "b", "c")`)
	assert.ErrorContains(t, err, `column "c" (ENUM)`)
	_, err = DecodeValue(e, []byte(`3`))
	assert.ErrorContains(t, err, "wants a string")
	_, err = AppendValue(nil, e, ndbclient.Bytes([]byte{4}))
	assert.ErrorContains(t, err, "index 4")

	// A 2-byte ENUM (over 255 values), its index little-endian.
	many := make([]string, 300)
	for i := range many {
		many[i] = fmt.Sprintf("v%d", i+1)
	}
	e2 := enumCol(many...)
	v, err = DecodeValue(e2, []byte(`"v260"`))
	require.NoError(t, err)
	assert.Equal(t, []byte{4, 1}, v.B)
	assert.Equal(t, `"v260"`, appendOK(t, e2, v))
	// A space-trimmed index byte (0x20) is still the whole value.
	assert.Equal(t, `"v32"`, appendOK(t, e2, ndbclient.Bytes([]byte{0x20, 0})))

	s := setCol("x", "y", "z")
	assert.Equal(t, `"x,z"`, appendOK(t, s, ndbclient.Bytes([]byte{5})))
	assert.Equal(t, `""`, appendOK(t, s, ndbclient.Bytes([]byte{0})))
	v, err = DecodeValue(s, []byte(`"z,x,x"`))
	require.NoError(t, err)
	assert.Equal(t, []byte{5}, v.B)
	v, err = DecodeValue(s, []byte(`""`))
	require.NoError(t, err)
	assert.Equal(t, []byte{0}, v.B)
	_, err = DecodeValue(s, []byte(`"x,w"`))
	assert.ErrorContains(t, err, `"w" is not one of its members ("x", "y", "z")`)
	_, err = AppendValue(nil, s, ndbclient.Bytes([]byte{8}))
	assert.ErrorContains(t, err, "past its 3 members")

	// A SET of 64 members is 8 bytes.
	members := make([]string, 64)
	for i := range members {
		members[i] = fmt.Sprintf("m%d", i)
	}
	s64 := setCol(members...)
	v, err = DecodeValue(s64, []byte(`"m0,m63"`))
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 0, 0, 0, 0, 0, 0, 0x80}, v.B)
	assert.Equal(t, `"m0,m63"`, appendOK(t, s64, v))
}

// A column the row API cannot serve is refused by name, both ways.
func TestCodecUnsupported(t *testing.T) {
	c := &ndbclient.Column{Name: "doc", Type: ndbclient.TypeText, Nullable: true, Unsupported: "a TEXT column: ndbgate does not read or write BLOB/TEXT"}
	_, err := DecodeValue(c, []byte(`"x"`))
	require.Error(t, err)
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, `column "doc" is a TEXT column`)
	_, err = AppendValue(nil, c, ndbclient.Null())
	assert.ErrorContains(t, err, `column "doc" is a TEXT column`)
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
		{"DECIMAL(10,2)", `"+1.5"`, "1.50"}, {"DECIMAL(10,2)", `".5"`, "0.50"}, {"DECIMAL(10,2)", `"5."`, "5.00"},
		{"DECIMAL(10,2)", `"1E2"`, "100.00"}, {"DECIMAL(10,2)", `"-2.5e-1"`, "-0.25"},
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
		assert.Equal(t, want, appendOK(t, c, v), "%s %s", tc.typ, tc.in)
	}
}

func TestCodecNull(t *testing.T) {
	for _, typ := range []string{"INT", "VARCHAR(3)", "VARBINARY(3)", "DATE", "DECIMAL(5,2)", "BIT(3)"} {
		v, err := DecodeValue(col(typ, true), []byte("null"))
		require.NoError(t, err)
		assert.True(t, v.IsNull())
		assert.Equal(t, "null", appendOK(t, col(typ, true), v))
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
		{"DECIMAL(40,10)", `"4P10000000"`, "not a decimal"}, {"DECIMAL(5,2)", `"0x10"`, "not a decimal"},
		{"DECIMAL(5,2)", `"1.2.3"`, "not a decimal"}, {"DECIMAL(5,2)", `"."`, "not a decimal"}, {"DECIMAL(5,2)", `"1e"`, "not a decimal"},
		{"DECIMAL(5,2)", `"1_0"`, "not a decimal"}, {"DECIMAL(5,2)", `" 1"`, "not a decimal"},
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
	var types []*ndbclient.Column
	for _, spec := range []string{"TINYINT", "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED", "FLOAT", "DOUBLE", "DECIMAL(10,3)",
		"DECIMAL(40,10)", "CHAR(4)", "VARCHAR(8)", "BINARY(4)", "VARBINARY(8)", "BIT(10)", "DATE", "DATETIME(6)",
		"TIMESTAMP", "TIME(3)", "YEAR"} {
		types = append(types, col(spec, false))
	}
	types = append(types, strCol(ndbclient.TypeVarchar, 6, 8, 1), strCol(ndbclient.TypeChar, 6, 8, 1),
		strCol(ndbclient.TypeVarchar, 6, 11, 1), strCol(ndbclient.TypeVarchar, 6, 33, 3), strCol(ndbclient.TypeVarchar, 6, 63, 1),
		enumCol("a", "B", "c d", ""), setCol("x", "y", "z", "w", "v", "u", "t", "s", "r"))
	f.Add(uint8(18), []byte(`"caf\u00e9"`))
	f.Add(uint8(23), []byte(`"c d"`))
	f.Add(uint8(24), []byte(`"x,s,r"`))
	f.Add(uint8(7), []byte(`"4P10000000"`)) // big.Rat's binary exponent: 11 s of CPU before isDecimalText
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		c := *types[int(which&0x7f)%len(types)]
		c.Nullable = which&0x80 != 0
		v, err := DecodeValue(&c, raw)
		if err != nil {
			if ndbclient.CodeOf(err) != ndbclient.CodeInvalidArgument {
				t.Fatalf("%s %q: error %v is not InvalidArgument", c.Type, raw, err)
			}
			return
		}
		// A value accepted once is accepted again from its own output and
		// comes back the same: the canonical form is a fixed point.
		out, err := AppendValue(nil, &c, v)
		if err != nil {
			t.Fatalf("%s %q: %v", c.Type, raw, err)
		}
		v2, err := DecodeValue(&c, out)
		if err != nil {
			t.Fatalf("%s %q -> %s refused: %v", c.Type, raw, out, err)
		}
		if out2, err := AppendValue(nil, &c, v2); err != nil || string(out2) != string(out) {
			t.Fatalf("%s %q: %s then %s (%v)", c.Type, raw, out, out2, err)
		}
	})
}
