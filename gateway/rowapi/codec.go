package rowapi

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ndbgate/ndbgate/internal/charset"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// JSON type mapping, as RonDB's REST server has it:
//   - integers of every width, YEAR: JSON numbers, range-checked;
//   - FLOAT, DOUBLE: numbers;
//   - DECIMAL: exact. Accepted as a number or a string of digits. Returned as a
//     number when its precision is at most 15 digits (every such value survives
//     a trip through a float64, which is what most JSON parsers make of a
//     number), else as a string, so no client silently loses digits;
//   - CHAR, VARCHAR: strings, which must be valid UTF-8. Stored in the
//     column's character set (Column.Charset: utf8mb4, utf8, latin1 (MySQL's,
//     that is Windows-1252), ascii): a character the set cannot hold is
//     refused, as MySQL's strict mode refuses it. Binary-charset columns
//     (tables made through the NDB API) keep the bytes as they are;
//   - ENUM: the value's name; SET: its members' names joined by commas, in
//     the column's order, as MySQL shows them (NDB stores the index or the
//     bitmask; the names come from mysqld's table definition). Writes take
//     names, matched without regard to case, and "" for the empty SET;
//   - a column the row API cannot serve (BLOB, TEXT, JSON, ...;
//     Column.Unsupported) is refused, by name, wherever a request names it;
//   - BINARY, VARBINARY, BIT: base64 strings (BIT: big-endian bytes);
//   - DATE "YYYY-MM-DD", DATETIME and TIMESTAMP "YYYY-MM-DD hh:mm:ss[.ffffff]",
//     TIME "[-]hhh:mm:ss[.ffffff]": strings;
//   - NULL: null.

// maxExactDecimal is the largest DECIMAL precision returned as a JSON number.
const maxExactDecimal = 15

// errf builds the InvalidArgument a bad value gets; it names the column.
func errf(col *ndbclient.Column, format string, args ...any) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %q (%s): "+format, append([]any{col.Name, typeName(col)}, args...)...)
}

func typeName(col *ndbclient.Column) string {
	switch {
	case col.Enum != nil:
		return "ENUM"
	case col.Set != nil:
		return "SET"
	}
	switch col.Type {
	case ndbclient.TypeChar, ndbclient.TypeVarchar:
		if col.Chars > 0 {
			return fmt.Sprintf("%s(%d)", col.Type, col.Chars)
		}
		return fmt.Sprintf("%s(%d)", col.Type, col.Length)
	case ndbclient.TypeBinary, ndbclient.TypeVarbinary, ndbclient.TypeBit:
		return fmt.Sprintf("%s(%d)", col.Type, col.Length)
	case ndbclient.TypeDecimal:
		return fmt.Sprintf("DECIMAL(%d,%d)", col.Precision, col.Scale)
	}
	return col.Type.String()
}

// unsupported is the error for a column the row API cannot serve.
func unsupported(col *ndbclient.Column) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %q is %s", col.Name, col.Unsupported)
}

// DecodeValue turns the JSON text of one value into a column value. Bytes
// values may point into raw or into newly allocated memory.
func DecodeValue(col *ndbclient.Column, raw []byte) (ndbclient.Value, error) {
	if col.Unsupported != "" {
		return ndbclient.Value{}, unsupported(col)
	}
	raw = trimSpace(raw)
	if len(raw) == 0 {
		return ndbclient.Value{}, errf(col, "no value")
	}
	if string(raw) == "null" {
		if !col.Nullable {
			return ndbclient.Value{}, errf(col, "is NOT NULL; null is not allowed")
		}
		return ndbclient.Null(), nil
	}
	t := col.Type
	switch {
	case t.IsInteger() && t != ndbclient.TypeBit:
		return decodeInteger(col, raw)
	case t == ndbclient.TypeFloat || t == ndbclient.TypeDouble:
		if !IsJSONNumber(raw) {
			return ndbclient.Value{}, errf(col, "wants a number, got %s", describe(raw))
		}
		bits := 64
		if t == ndbclient.TypeFloat {
			bits = 32
		}
		f, err := strconv.ParseFloat(string(raw), bits)
		if err != nil {
			return ndbclient.Value{}, errf(col, "%s is out of range", raw)
		}
		return ndbclient.Float(f), nil
	case t == ndbclient.TypeDecimal:
		text := raw
		if raw[0] == '"' {
			s, err := decodeString(col, raw)
			if err != nil {
				return ndbclient.Value{}, err
			}
			text = s
		} else if !IsJSONNumber(raw) {
			return ndbclient.Value{}, errf(col, "wants a number or a string of digits, got %s", describe(raw))
		}
		d, err := canonicalDecimal(col, string(text))
		if err != nil {
			return ndbclient.Value{}, err
		}
		return ndbclient.String(d), nil
	}
	sb, err := decodeString(col, raw)
	if err != nil {
		return ndbclient.Value{}, err
	}
	switch {
	case col.Enum != nil:
		return encodeEnum(col, sb)
	case col.Set != nil:
		return encodeSet(col, sb)
	}
	switch t {
	case ndbclient.TypeChar, ndbclient.TypeVarchar, ndbclient.TypeText:
		if col.Chars > 0 {
			if n := utf8.RuneCount(sb); n > col.Chars {
				return ndbclient.Value{}, errf(col, "value of %d characters is longer than the column's %d", n, col.Chars)
			}
		}
		k := charset.Of(col.Charset)
		b, err := sb, error(nil)
		if k != charset.UTF8MB4 && k != charset.Binary {
			// utf8mb4 and binary store the UTF-8 decodeString checked.
			b, err = k.Encode(nil, sb)
		}
		if err != nil {
			var nr *charset.NotRepresentable
			if errors.As(err, &nr) {
				return ndbclient.Value{}, errf(col, "%v (MySQL refuses it too, in strict mode)", err)
			}
			return ndbclient.Value{}, errf(col, "cannot be stored in character set %s: %v", charset.Name(col.Charset), err)
		}
		if col.Chars <= 0 && col.Length > 0 && len(b) > col.Length {
			return ndbclient.Value{}, errf(col, "value of %d bytes is longer than the column's %d", len(b), col.Length)
		}
		return ndbclient.Bytes(b), nil
	}
	s := string(sb)
	switch t {
	case ndbclient.TypeBinary, ndbclient.TypeVarbinary, ndbclient.TypeBlob:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return ndbclient.Value{}, errf(col, "is not valid base64 (standard alphabet, padded): %v", err)
		}
		if col.Length > 0 && len(b) > col.Length {
			return ndbclient.Value{}, errf(col, "value of %d bytes is longer than the column's %d", len(b), col.Length)
		}
		return ndbclient.Bytes(b), nil
	case ndbclient.TypeBit:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return ndbclient.Value{}, errf(col, "is not valid base64 of the bits (big-endian bytes): %v", err)
		}
		if len(b) > 8 {
			return ndbclient.Value{}, errf(col, "takes at most %d bits", col.Length)
		}
		var v uint64
		for _, c := range b {
			v = v<<8 | uint64(c)
		}
		if col.Length < 64 && v>>uint(col.Length) != 0 {
			return ndbclient.Value{}, errf(col, "value has bits set above the column's %d", col.Length)
		}
		return ndbclient.Uint(v), nil
	case ndbclient.TypeDate:
		d, err := parseDate(s)
		if err != nil {
			return ndbclient.Value{}, errf(col, "%q: %v (want YYYY-MM-DD)", s, err)
		}
		return ndbclient.String(d), nil
	case ndbclient.TypeDatetime, ndbclient.TypeTimestamp:
		d, err := parseDatetime(s, col.Scale, t == ndbclient.TypeTimestamp)
		if err != nil {
			return ndbclient.Value{}, errf(col, "%q: %v (want YYYY-MM-DD hh:mm:ss[.ffffff])", s, err)
		}
		return ndbclient.String(d), nil
	case ndbclient.TypeTime:
		d, err := parseTime(s, col.Scale)
		if err != nil {
			return ndbclient.Value{}, errf(col, "%q: %v (want [-]hhh:mm:ss[.ffffff])", s, err)
		}
		return ndbclient.String(d), nil
	}
	return ndbclient.Value{}, errf(col, "type is not supported by the row API")
}

func decodeInteger(col *ndbclient.Column, raw []byte) (ndbclient.Value, error) {
	if !IsJSONNumber(raw) {
		return ndbclient.Value{}, errf(col, "wants an integer, got %s", describe(raw))
	}
	s := string(raw)
	if strings.ContainsAny(s, ".eE") {
		// 1.0 and 1e3 are integers to a JSON encoder that writes every number
		// as a float; a fraction is not.
		if hugeExponent(s) {
			return ndbclient.Value{}, errf(col, "%s is out of range", describe(raw))
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok || !r.IsInt() {
			return ndbclient.Value{}, errf(col, "wants an integer, got %s", s)
		}
		s = r.Num().String()
	}
	lo, hi, uhi := intRange(col)
	if col.Type.IsSigned() {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < lo || n > hi {
			return ndbclient.Value{}, errf(col, "%s is out of range %d..%d", s, lo, hi)
		}
		return ndbclient.Int(n), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > uhi {
		return ndbclient.Value{}, errf(col, "%s is out of range 0..%d", s, uhi)
	}
	if col.Type == ndbclient.TypeYear && n != 0 && (n < 1901 || n > 2155) {
		return ndbclient.Value{}, errf(col, "%d is not a year in 1901..2155 (or 0)", n)
	}
	return ndbclient.Uint(n), nil
}

// intRange is the range of an integer column.
func intRange(col *ndbclient.Column) (lo, hi int64, uhi uint64) {
	bits := map[ndbclient.ColumnType]int{
		ndbclient.TypeInt8: 8, ndbclient.TypeUint8: 8, ndbclient.TypeInt16: 16, ndbclient.TypeUint16: 16,
		ndbclient.TypeInt24: 24, ndbclient.TypeUint24: 24, ndbclient.TypeInt32: 32, ndbclient.TypeUint32: 32,
		ndbclient.TypeInt64: 64, ndbclient.TypeUint64: 64, ndbclient.TypeYear: 16,
	}[col.Type]
	if col.Type == ndbclient.TypeYear {
		return 0, 0, 2155
	}
	if bits == 64 {
		return math.MinInt64, math.MaxInt64, math.MaxUint64
	}
	return -1 << (bits - 1), 1<<(bits-1) - 1, 1<<bits - 1
}

// decodeString unquotes a JSON string, refusing invalid UTF-8 (encoding/json
// would quietly replace it). A string without escapes is returned in place.
func decodeString(col *ndbclient.Column, raw []byte) ([]byte, error) {
	if raw[0] != '"' {
		return nil, errf(col, "wants a string, got %s", describe(raw))
	}
	if !utf8.Valid(raw) {
		return nil, errf(col, "string is not valid UTF-8")
	}
	if len(raw) >= 2 && raw[len(raw)-1] == '"' {
		inner := raw[1 : len(raw)-1]
		plain := true
		for _, c := range inner {
			if c == '\\' || c == '"' || c < 0x20 {
				plain = false
				break
			}
		}
		if plain {
			return inner, nil
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errf(col, "is not a valid JSON string")
	}
	return []byte(s), nil
}

// describe names the JSON kind of raw for error messages, without echoing
// arbitrarily long input.
func describe(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	if IsJSONNumber(raw) {
		return "a number"
	}
	if len(raw) > 32 {
		return fmt.Sprintf("%q...", raw[:32])
	}
	return fmt.Sprintf("%q", raw)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// IsJSONNumber checks RFC 8259's number grammar.
func IsJSONNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i == len(b)
}

// hugeExponent reports an exponent too large for any column (1e999999999
// would make big.Rat compute a billion-digit number).
func hugeExponent(s string) bool {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return false
	}
	e := strings.TrimLeft(s[i+1:], "+-")
	e = strings.TrimLeft(e, "0")
	return len(e) > 3 || len(e) == 3 && e > "100"
}

// isDecimalText reports whether s is a decimal number as MySQL writes one:
// a sign, digits with at most one point among or after them, and a decimal
// exponent. big.Rat takes more (fractions, 0x and 0b prefixes, a binary
// exponent p), and "1p99999999" made it compute a number of 30 million
// digits, 11 s of CPU for one value.
func isDecimalText(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, point := 0, false
	for ; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			digits++
		} else if c == '.' && !point {
			point = true
		} else {
			break
		}
	}
	if digits == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	return i < len(s) && strings.Trim(s[i:], "0123456789") == ""
}

// canonicalDecimal checks s against DECIMAL(M,D) and returns it with exactly D
// fraction digits and no superfluous zeros. More fraction digits than D are
// refused unless they are zeros: MySQL would round, and a gateway that
// silently rounds money is worse than one that says so.
func canonicalDecimal(col *ndbclient.Column, s string) (string, error) {
	if len(s) > 200 || !isDecimalText(s) {
		return "", errf(col, "%.40q is not a decimal number of at most 65 digits", s)
	}
	if hugeExponent(s) {
		return "", errf(col, "%s is out of range", s)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", errf(col, "%q is not a decimal number", s)
	}
	scale := col.Scale
	out := r.FloatString(scale)
	back, _ := new(big.Rat).SetString(out)
	if back.Cmp(r) != 0 {
		return "", errf(col, "%s has more than %d decimals", s, scale)
	}
	digits := strings.TrimPrefix(out, "-")
	intPart, _, _ := strings.Cut(digits, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if len(intPart) > col.Precision-scale {
		return "", errf(col, "%s is out of range (at most %d digits before the point)", s, col.Precision-scale)
	}
	if r.Sign() == 0 {
		out = strings.TrimPrefix(out, "-")
	}
	return out, nil
}

// AppendValue appends v's JSON text for col to dst. It fails only for a
// column the row API cannot show (Column.Unsupported) and for an ENUM or
// SET value its names do not cover.
func AppendValue(dst []byte, col *ndbclient.Column, v ndbclient.Value) ([]byte, error) {
	if col.Unsupported != "" {
		return dst, unsupported(col)
	}
	if v.IsNull() {
		return append(dst, "null"...), nil
	}
	switch {
	case col.Enum != nil:
		return appendEnum(dst, col, v.B)
	case col.Set != nil:
		return appendSet(dst, col, v.B)
	case col.Type == ndbclient.TypeChar || col.Type == ndbclient.TypeVarchar || col.Type == ndbclient.TypeText:
		switch k := charset.Of(col.Charset); k {
		case charset.Latin1, charset.ASCII:
			var tmp [128]byte
			return AppendString(dst, k.AppendUTF8(tmp[:0], v.B)), nil
		case charset.Unsupported:
			return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %q: character set %s is not supported by the row API", col.Name, charset.Name(col.Charset))
		}
		return AppendString(dst, v.B), nil
	}
	return appendScalar(dst, col, v), nil
}

// appendScalar appends the JSON text of a value of any other type.
func appendScalar(dst []byte, col *ndbclient.Column, v ndbclient.Value) []byte {
	switch t := col.Type; {
	case t == ndbclient.TypeBit:
		var b [8]byte
		n := (col.Length + 7) / 8
		u := v.Uint()
		for i := n - 1; i >= 0; i-- {
			b[i] = byte(u)
			u >>= 8
		}
		return appendBase64(dst, b[:n])
	case t.IsSigned():
		return strconv.AppendInt(dst, v.Int(), 10)
	case t.IsInteger():
		return strconv.AppendUint(dst, v.Uint(), 10)
	case t == ndbclient.TypeFloat:
		return appendFloat(dst, v.Float(), 32)
	case t == ndbclient.TypeDouble:
		return appendFloat(dst, v.Float(), 64)
	case t == ndbclient.TypeDecimal:
		if col.Precision <= maxExactDecimal {
			return append(dst, v.B...)
		}
		return AppendString(dst, v.B)
	case t == ndbclient.TypeBinary || t == ndbclient.TypeVarbinary || t == ndbclient.TypeBlob:
		return appendBase64(dst, v.B)
	}
	return AppendString(dst, v.B)
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...) // JSON has no NaN or infinity
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// AppendString quotes b as a JSON string. Bytes that are not UTF-8 become
// U+FFFD, as encoding/json does (AppendValue converts a column's character
// set to UTF-8 first).
func AppendString(dst, b []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		} else {
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// ENUM and SET. NDB keeps an ENUM as its value's index (from 1; 0 is MySQL's
// empty error value) and a SET as the bitmask of its members, little-endian
// in the column's Length bytes.

func leUint(b []byte) uint64 {
	var x [8]byte
	copy(x[:], b)
	return binary.LittleEndian.Uint64(x[:])
}

func leBytes(col *ndbclient.Column, n uint64) ndbclient.Value {
	var x [8]byte
	binary.LittleEndian.PutUint64(x[:], n)
	size := min(max(col.Length, 1), 8)
	return ndbclient.Bytes(append([]byte(nil), x[:size]...))
}

// findName is the index of name among names: an exact match, else the only
// one equal to it without regard to case (MySQL matches by the column's
// collation, case-insensitive for the usual _ci ones), ignoring trailing
// spaces as MySQL does.
func findName(names []string, name string) int {
	name = strings.TrimRight(name, " ")
	for i, n := range names {
		if n == name {
			return i
		}
	}
	found := -1
	for i, n := range names {
		if strings.EqualFold(n, name) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

func encodeEnum(col *ndbclient.Column, name []byte) (ndbclient.Value, error) {
	i := findName(col.Enum, string(name))
	if i < 0 {
		return ndbclient.Value{}, errf(col, "%s is not one of its values %s", quoteName(string(name)), quoteNames(col.Enum))
	}
	return leBytes(col, uint64(i+1)), nil
}

func encodeSet(col *ndbclient.Column, list []byte) (ndbclient.Value, error) {
	var bits uint64
	if len(list) > 0 {
		for _, name := range strings.Split(string(list), ",") {
			i := findName(col.Set, name)
			if i < 0 {
				return ndbclient.Value{}, errf(col, "%s is not one of its members %s", quoteName(name), quoteNames(col.Set))
			}
			bits |= 1 << uint(i)
		}
	}
	return leBytes(col, bits), nil
}

func appendEnum(dst []byte, col *ndbclient.Column, b []byte) ([]byte, error) {
	i := leUint(b)
	switch {
	case i == 0:
		return append(dst, `""`...), nil // MySQL's error value, shown as ''
	case i <= uint64(len(col.Enum)):
		return AppendString(dst, []byte(col.Enum[i-1])), nil
	}
	return dst, ndbclient.Errorf(ndbclient.CodeInternal, "column %q (ENUM): stored index %d is past its %d values (the table definition and the data disagree)", col.Name, i, len(col.Enum))
}

func appendSet(dst []byte, col *ndbclient.Column, b []byte) ([]byte, error) {
	bits := leUint(b)
	if len(col.Set) < 64 && bits>>uint(len(col.Set)) != 0 {
		return dst, ndbclient.Errorf(ndbclient.CodeInternal, "column %q (SET): stored bits %#x are past its %d members (the table definition and the data disagree)", col.Name, bits, len(col.Set))
	}
	var s []byte
	for i, n := range col.Set {
		if bits&(1<<uint(i)) != 0 {
			if len(s) > 0 {
				s = append(s, ',')
			}
			s = append(s, n...)
		}
	}
	return AppendString(dst, s), nil
}

// quoteName and quoteNames show names in messages, cut short.
func quoteName(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

func quoteNames(names []string) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, n := range names {
		if i == 8 {
			fmt.Fprintf(&b, ", ... %d in all", len(names))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteName(n))
	}
	b.WriteByte(')')
	return b.String()
}
