// Package typecases is the mapping from each MySQL column type to
// ndbgate's documented JSON encoding (gateway/rowapi/codec.go,
// protocols/rest/openapi.yaml, README "REST and gRPC"), in one place, for
// the tests that check it: tests/sqloracle against SQL on a live cluster,
// and tests/e2e (TestTypeCasesEmbedded) on the embedded engine, with the
// same cases. For every type it says:
//   - how a random value is drawn, edge values first (Gen, Draw);
//   - what the value is as an SQL parameter, as the JSON sent to ndbgate's
//     row API, as the JSON expected back, and as memcache text (Value);
//   - how two JSON values of the type are compared (CmpKind, SameJSON).
//
// How SQL's reading of a column becomes that JSON is tests/sqloracle's.
//
// The encoding, per the docs:
//
//	TINYINT..BIGINT [UNSIGNED], YEAR   JSON number, exact
//	FLOAT, DOUBLE                      JSON number; compared as float32/float64
//	                                   bit patterns, so -0 differs from 0
//	DECIMAL(p,s)                       exactly s fraction digits; a JSON number
//	                                   when p <= 15, else a JSON string
//	CHAR, VARCHAR (any charset)        JSON string of UTF-8; CHAR loses its
//	                                   trailing spaces (MySQL's PAD SPACE read)
//	BINARY, VARBINARY, BIT(n)          base64 (standard, padded); BINARY is
//	                                   zero-padded to its length, BIT is
//	                                   (n+7)/8 big-endian bytes
//	DATE                               "YYYY-MM-DD"
//	DATETIME(f), TIMESTAMP(f)          "YYYY-MM-DD hh:mm:ss[.f digits]";
//	                                   TIMESTAMP in UTC
//	TIME(f)                            "[-]hh[h]:mm:ss[.f digits]"
//	ENUM, SET                          JSON string of the member name(s), SET
//	                                   members in definition order joined by ","
//	                                   (not in the docs: what SQL says)
//	TEXT                               JSON string; BLOB base64 (codec.go)
//	NULL                               null
package typecases

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// CmpKind is how two JSON texts of a type are compared.
type CmpKind uint8

const (
	CmpExact   CmpKind = iota // the JSON text itself (numbers)
	CmpString                 // both JSON strings, equal once decoded
	CmpFloat32                // both JSON numbers, the same float32 bits
	CmpFloat64                // both JSON numbers, the same float64 bits
)

// Column is one column of a table: in tests/sqloracle from
// information_schema, in tests/e2e from a declared type (Parse). The
// words are information_schema's.
type Column struct {
	Table, Name string
	DataType    string // information_schema DATA_TYPE: int, decimal, varchar, ...
	ColumnType  string // COLUMN_TYPE: "int(10) unsigned", "enum('a',...)"
	Unsigned    bool
	Nullable    bool
	Key         bool // part of the primary key
	Unique      bool // has a UNIQUE index of its own
	Charset     string
	Collation   string
	MaxLen      int // characters for CHAR/VARCHAR, bytes for BINARY/VARBINARY
	Prec, Scale int // DECIMAL
	FSP         int // TIME, DATETIME, TIMESTAMP
	Bits        int // BIT(n)
	Members     []string
	Cmp         CmpKind // set by Setup
}

// Family names the column's type for the totals: "INT UNSIGNED",
// "DECIMAL(65,30)", "TIME(3)", "VARCHAR utf8mb4_bin", ...
func (c *Column) Family() string {
	u := ""
	if c.Unsigned {
		u = " UNSIGNED"
	}
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "float", "double":
		return strings.ToUpper(c.DataType) + u
	case "decimal":
		return fmt.Sprintf("DECIMAL(%d,%d)%s", c.Prec, c.Scale, u)
	case "time", "datetime", "timestamp":
		return fmt.Sprintf("%s(%d)", strings.ToUpper(c.DataType), c.FSP)
	case "char", "varchar":
		cs := c.Charset
		if strings.HasSuffix(c.Collation, "_bin") {
			cs = c.Collation
		}
		return strings.ToUpper(c.DataType) + " " + cs
	case "bit":
		return fmt.Sprintf("BIT(%d)", c.Bits)
	}
	return strings.ToUpper(c.DataType)
}

// Setup derives what the mapping needs from information_schema's words.
func (c *Column) Setup() error {
	switch c.DataType {
	case "float":
		c.Cmp = CmpFloat32
	case "double":
		c.Cmp = CmpFloat64
	case "char", "varchar", "text", "tinytext", "mediumtext", "longtext", "enum", "set",
		"binary", "varbinary", "bit", "blob", "tinyblob", "mediumblob", "longblob",
		"date", "time", "datetime", "timestamp":
		c.Cmp = CmpString
	case "decimal":
		c.Cmp = CmpExact
		if c.Prec > MaxExactDecimal {
			c.Cmp = CmpString
		}
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		c.Cmp = CmpExact
	default:
		return fmt.Errorf("column %s.%s: type %s is not in the test's mapping", c.Table, c.Name, c.ColumnType)
	}
	return nil
}

// MaxExactDecimal is the largest DECIMAL precision ndbgate returns as a JSON
// number (gateway/rowapi/codec.go).
const MaxExactDecimal = 15

// Value is one drawn value in each of its forms.
type Value struct {
	SQL  any    // the INSERT parameter; nil for NULL
	In   string // the JSON sent to ndbgate's row API
	Want string // the JSON expected back (after CHAR trimming, BINARY padding, ...)
	Text string // memcache text: the value as MySQL prints it; "" for NULL
}

// NullValue is SQL's NULL.
func NullValue() Value { return Value{SQL: nil, In: "null", Want: "null"} }

// JSONString is s as a JSON string (no HTML escaping).
func JSONString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Gen draws a value for c: edge values a third of the time, NULL a tenth of
// the time when c is nullable.
func (c *Column) Gen(r *rand.Rand) Value {
	if c.Nullable && r.Intn(10) == 0 {
		return NullValue()
	}
	return c.Draw(r, r.Intn(3) == 0)
}

// Draw draws a value for c that is not NULL: with edge, one of the type's
// edge values (its limits, zero, empty and full-length strings, spaces at
// either end, 4-byte characters, leap days, the ends of TIME's and
// TIMESTAMP's ranges, ...), else any value of the type.
func (c *Column) Draw(r *rand.Rand, edge bool) Value {
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint":
		return c.genInt(r, edge)
	case "year":
		y := int64(1901 + r.Intn(2155-1901+1))
		if edge {
			y = []int64{0, 1901, 2155, 2000, 1970}[r.Intn(5)]
		}
		s := strconv.FormatInt(y, 10)
		return Value{SQL: y, In: s, Want: s, Text: s}
	case "float":
		return c.genFloat(r, edge, 32)
	case "double":
		return c.genFloat(r, edge, 64)
	case "decimal":
		return c.genDecimal(r, edge)
	case "date":
		s := randDate(r, edge)
		return TextValue(s, s)
	case "time":
		return temporalValue(r, randTime(r, edge, c.FSP))
	case "datetime":
		s := randDate(r, edge) + " " + randClock(r, edge, c.FSP)
		if edge && r.Intn(3) == 0 {
			s = []string{"1000-01-01 00:00:00", "9999-12-31 23:59:59", "2024-02-29 23:59:59"}[r.Intn(3)] + maxFrac(c.FSP)
		}
		return temporalValue(r, s)
	case "timestamp":
		return temporalValue(r, randTimestamp(r, edge, c.FSP))
	case "char", "varchar", "text":
		s := RandString(r, edge, c.MaxLen, c.Charset == "latin1")
		want := s
		if c.DataType == "char" {
			want = strings.TrimRight(s, " ")
		}
		return Value{SQL: s, In: JSONString(s), Want: JSONString(want), Text: want}
	case "binary", "varbinary", "blob":
		b := randBytes(r, edge, c.MaxLen)
		want := b
		if c.DataType == "binary" {
			want = append(append([]byte(nil), b...), make([]byte, c.MaxLen-len(b))...)
		}
		return Value{SQL: b, In: JSONString(base64.StdEncoding.EncodeToString(b)),
			Want: JSONString(base64.StdEncoding.EncodeToString(want))}
	case "bit":
		return c.genBit(r, edge)
	case "enum":
		m := c.Members[r.Intn(len(c.Members))]
		return TextValue(m, m)
	case "set":
		var in []string
		for _, m := range c.Members {
			if r.Intn(2) == 0 {
				in = append(in, m)
			}
		}
		s := strings.Join(in, ",")
		return TextValue(s, s)
	}
	panic("typecases: no generator for " + c.ColumnType)
}

// TextValue is a value that travels as a JSON string; want, when not empty,
// is the text expected back if it differs.
func TextValue(s, want string) Value {
	if want == "" {
		want = s
	}
	return Value{SQL: s, In: JSONString(s), Want: JSONString(want), Text: want}
}

// temporalValue sends a TIME, DATETIME or TIMESTAMP in its canonical text,
// or now and then in another spelling both MySQL and ndbgate take: 'T'
// between date and time, fraction digits short of the column's (MySQL
// pads them with zeros).
func temporalValue(r *rand.Rand, s string) Value {
	v := TextValue(s, s)
	in := s
	if r.Intn(8) == 0 && len(in) > 10 && in[10] == ' ' {
		in = in[:10] + "T" + in[11:]
	}
	if r.Intn(4) == 0 && strings.Contains(in, ".") {
		in = strings.TrimRight(in, "0")
		in = strings.TrimSuffix(in, ".")
	}
	v.SQL, v.In = in, JSONString(in)
	return v
}

func (c *Column) intBits() int {
	return map[string]int{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}[c.DataType]
}

func (c *Column) genInt(r *rand.Rand, edge bool) Value {
	bits := c.intBits()
	if c.Unsigned {
		hi := uint64(math.MaxUint64)
		if bits < 64 {
			hi = 1<<bits - 1
		}
		var u uint64
		switch {
		case edge:
			u = []uint64{0, 1, hi, hi - 1, hi / 2, hi/2 + 1}[r.Intn(6)]
		case r.Intn(2) == 0:
			u = min(uint64(r.Intn(1000)), hi)
		default:
			u = r.Uint64()
			if bits < 64 {
				u %= hi + 1
			}
		}
		s := strconv.FormatUint(u, 10)
		return Value{SQL: u, In: intForm(r, s), Want: s, Text: s}
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if bits < 64 {
		lo, hi = -1<<(bits-1), 1<<(bits-1)-1
	}
	var n int64
	switch {
	case edge:
		n = []int64{lo, hi, 0, -1, 1, lo + 1, hi - 1}[r.Intn(7)]
	case r.Intn(2) == 0:
		n = max(lo, min(hi, int64(r.Intn(2001)-1000)))
	default:
		n = int64(r.Uint64())
		if bits < 64 {
			n = lo + int64(r.Uint64()%uint64(hi-lo+1))
		}
	}
	s := strconv.FormatInt(n, 10)
	return Value{SQL: n, In: intForm(r, s), Want: s, Text: s}
}

// intForm is how an integer is sent to ndbgate: mostly its digits, now
// and then as "n.0" or "ne0", which an encoder that writes every number as
// a float makes, and which the row API takes as the integer.
func intForm(r *rand.Rand, s string) string {
	switch r.Intn(12) {
	case 0:
		return s + ".0"
	case 1:
		return s + "e0"
	}
	return s
}

func (c *Column) genFloat(r *rand.Rand, edge bool, bits int) Value {
	var f float64
	if bits == 32 {
		var x float32
		switch {
		case edge:
			x = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, -0.1, math.MaxFloat32, -math.MaxFloat32,
				1.17549435e-38, -1.17549435e-38, 16777216, 16777215, 1e-10, 123456.7}[r.Intn(14)]
		case r.Intn(2) == 0:
			x = float32(r.NormFloat64() * math.Pow(10, float64(r.Intn(20)-10)))
		default:
			for {
				x = math.Float32frombits(r.Uint32())
				// Finite and normal: MySQL keeps denormals, but not every path.
				if a := math.Abs(float64(x)); !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) && (a == 0 || a >= 1.17549435e-38) {
					break
				}
			}
		}
		f = float64(x)
	} else {
		switch {
		case edge:
			f = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, -0.1, math.MaxFloat64, -math.MaxFloat64,
				2.2250738585072014e-308, -2.2250738585072014e-308, 1 << 53, 1<<53 + 1, 1e15 + 0.3, 1e-300}[r.Intn(14)]
		case r.Intn(2) == 0:
			f = r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
		default:
			for {
				f = math.Float64frombits(r.Uint64())
				if a := math.Abs(f); !math.IsNaN(f) && !math.IsInf(f, 0) && (a == 0 || a >= 2.2250738585072014e-308) {
					break
				}
			}
		}
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	return Value{SQL: f, In: s, Want: s, Text: s}
}

func (c *Column) genDecimal(r *rand.Rand, edge bool) Value {
	intg := c.Prec - c.Scale
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.Intn(10))
		}
		return string(b)
	}
	var ip, fp string
	neg := !c.Unsigned && r.Intn(2) == 0
	switch {
	case edge:
		switch r.Intn(4) {
		case 0: // the largest magnitude
			ip, fp = strings.Repeat("9", intg), strings.Repeat("9", c.Scale)
		case 1: // zero
			ip, fp, neg = "", strings.Repeat("0", c.Scale), false
		case 2: // the smallest step
			ip = ""
			if c.Scale > 0 {
				fp = strings.Repeat("0", c.Scale-1) + "1"
			} else {
				ip = "1"
			}
		default: // a whole number
			ip, fp = digits(r.Intn(intg+1)), strings.Repeat("0", c.Scale)
		}
	default:
		ip, fp = digits(r.Intn(intg+1)), digits(c.Scale)
	}
	ip = strings.TrimLeft(ip, "0")
	if ip == "" {
		ip = "0"
	}
	s := ip
	if c.Scale > 0 {
		s += "." + fp
	}
	if neg && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	want, in := s, s
	if s == strings.TrimLeft(s, "-") && strings.Trim(s, "0.") == "" && r.Intn(2) == 0 {
		in = "-" + s // MySQL and ndbgate both store -0 as 0
	}
	if c.Cmp == CmpString {
		want, in = JSONString(s), JSONString(in)
	} else if r.Intn(2) == 0 {
		in = JSONString(in) // a string is accepted too
	}
	return Value{SQL: s, In: in, Want: want, Text: s}
}

func (c *Column) genBit(r *rand.Rand, edge bool) Value {
	n := c.Bits
	mask := uint64(math.MaxUint64)
	if n < 64 {
		mask = 1<<n - 1
	}
	v := r.Uint64() & mask
	if edge {
		v = []uint64{0, 1, mask, 1 << (n - 1), mask & 0xAAAAAAAAAAAAAAAA, mask & 0x5555555555555555}[r.Intn(6)]
	}
	var w [8]byte
	binary.BigEndian.PutUint64(w[:], v)
	b := w[8-(n+7)/8:]
	s := JSONString(base64.StdEncoding.EncodeToString(b))
	return Value{SQL: append([]byte(nil), b...), In: s, Want: s}
}

// Strings are drawn from these pools; latin1 columns only from the first
// and the latin1 one (MySQL's latin1 is cp1252: € is 0x80, Š 0x8A).
var (
	asciiPool  = []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,;:!?'\"\\/<>&%$#@()[]{}+=*")
	latin1Pool = []rune("éèêëàâäçîïôöûüùÿñßÀÉÖÜØøåÅæÆ¡¿£¥§©®°±²³µ¶·¼½¾×÷\u00a0€ŠšŸŽž")
	widePool   = []rune("éßñøΩЖж中文字€✓→…日本語한국어") // 2- and 3-byte UTF-8
	fourPool   = []rune("😀😎🎉𝄞🀄𠜎🙈")              // 4-byte UTF-8
	ctrlPool   = []rune("\t\n\r\x00\x01\x1f")
)

// RandString draws up to n characters (at most 300). Edge cases: empty, only spaces,
// trailing and leading spaces, the full length in 4-byte characters,
// quotes, backslashes and control characters.
func RandString(r *rand.Rand, edge bool, n int, latin1 bool) string {
	n = max(0, min(n, 300))
	s := []rune(drawString(r, edge, n, latin1))
	return string(s[:min(len(s), n)])
}

func drawString(r *rand.Rand, edge bool, max int, latin1 bool) string {
	if max <= 0 {
		return ""
	}
	pools := [][]rune{asciiPool, widePool, fourPool, ctrlPool}
	if latin1 {
		pools = [][]rune{asciiPool, latin1Pool}
	}
	if edge {
		switch r.Intn(8) {
		case 0:
			return ""
		case 1:
			return strings.Repeat(" ", 1+r.Intn(min(3, max)))
		case 2:
			return strings.TrimRight(RandString(r, false, max-2, latin1), " ") + strings.Repeat(" ", 1+r.Intn(2))
		case 3:
			return " " + RandString(r, false, max-1, latin1)
		case 4:
			pool := fourPool
			if latin1 {
				pool = latin1Pool
			}
			b := make([]rune, max)
			for i := range b {
				b[i] = pool[r.Intn(len(pool))]
			}
			return string(b)
		case 5:
			return `"\'` + RandString(r, false, max-3, latin1)
		}
	}
	n := r.Intn(max + 1)
	if n > 12 && r.Intn(2) == 0 {
		n = r.Intn(13)
	}
	b := make([]rune, n)
	for i := range b {
		p := pools[0]
		if r.Intn(3) == 0 {
			p = pools[1+r.Intn(len(pools)-1)]
		}
		b[i] = p[r.Intn(len(p))]
	}
	return string(b)
}

func randBytes(r *rand.Rand, edge bool, max int) []byte {
	max = min(max, 300)
	if max <= 2 {
		edge = false
	}
	if edge {
		switch r.Intn(5) {
		case 0:
			return []byte{}
		case 1:
			return make([]byte, 1+r.Intn(max))
		case 2:
			return bytes.Repeat([]byte{0xff}, max)
		case 3:
			b := randBytes(r, false, max-2)
			return append(b, 0, 0)[:min(len(b)+2, max)]
		}
	}
	b := make([]byte, r.Intn(max+1))
	r.Read(b)
	return b
}

func randDate(r *rand.Rand, edge bool) string {
	if edge {
		return []string{"2024-02-29", "2000-02-29", "1000-01-01", "9999-12-31", "1970-01-01", "1900-02-28", "2038-01-19"}[r.Intn(7)]
	}
	d := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.Intn(3287181))
	return d.Format("2006-01-02")
}

// frac draws fsp fraction digits (with the point), or "" for fsp 0.
func frac(r *rand.Rand, fsp int) string {
	if fsp == 0 {
		return ""
	}
	b := make([]byte, fsp)
	for i := range b {
		b[i] = byte('0' + r.Intn(10))
	}
	return "." + string(b)
}

func maxFrac(fsp int) string {
	if fsp == 0 {
		return ""
	}
	return "." + strings.Repeat("9", fsp)
}

func randClock(r *rand.Rand, edge bool, fsp int) string {
	if edge && r.Intn(2) == 0 {
		return []string{"00:00:00", "23:59:59", "12:00:00"}[r.Intn(3)] + []string{frac(r, fsp), maxFrac(fsp)}[r.Intn(2)]
	}
	return fmt.Sprintf("%02d:%02d:%02d%s", r.Intn(24), r.Intn(60), r.Intn(60), frac(r, fsp))
}

// randTime draws a TIME within -838:59:59..838:59:59.
func randTime(r *rand.Rand, edge bool, fsp int) string {
	if edge {
		switch r.Intn(6) {
		case 0:
			return "-838:59:59" + zeroFrac(fsp)
		case 1:
			return "838:59:59" + zeroFrac(fsp)
		case 2:
			return "00:00:00" + zeroFrac(fsp)
		case 3:
			if fsp > 0 { // less than a second below zero
				return "-00:00:00." + strings.Repeat("0", fsp-1) + "1"
			}
			return "-00:00:01"
		case 4:
			return "23:59:59" + maxFrac(fsp)
		default:
			return "-837:59:59" + maxFrac(fsp)
		}
	}
	h := r.Intn(839)
	var s string
	if h == 838 {
		s = fmt.Sprintf("838:%02d:%02d%s", r.Intn(59), r.Intn(60), frac(r, fsp))
	} else {
		s = fmt.Sprintf("%02d:%02d:%02d%s", h, r.Intn(60), r.Intn(60), frac(r, fsp))
	}
	if r.Intn(2) == 0 && strings.Trim(s, "0:.") != "" {
		s = "-" + s
	}
	return s
}

func zeroFrac(fsp int) string {
	if fsp == 0 {
		return ""
	}
	return "." + strings.Repeat("0", fsp)
}

// randTimestamp draws a TIMESTAMP in 1970-01-01 00:00:01..2038-01-19
// 03:14:07.999999 UTC.
func randTimestamp(r *rand.Rand, edge bool, fsp int) string {
	secs := 1 + r.Int63n(1<<31-1)
	f := frac(r, fsp)
	if edge {
		switch r.Intn(4) {
		case 0:
			secs, f = 1, zeroFrac(fsp)
		case 1:
			secs, f = 1<<31-1, maxFrac(fsp)
		case 2:
			secs = time.Date(2024, 2, 29, 23, 59, 59, 0, time.UTC).Unix()
		default:
			secs = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		}
	}
	return time.Unix(secs, 0).UTC().Format("2006-01-02 15:04:05") + f
}

// DecodeJSONString reports whether s is a JSON string, and its value.
func DecodeJSONString(s string) (string, bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", false
	}
	var out string
	if json.Unmarshal([]byte(s), &out) != nil {
		return "", false
	}
	return out, true
}

// SameJSON compares two JSON texts of column type k: want (SQL's, or what
// was sent) and got (ndbgate's).
func SameJSON(k CmpKind, want, got string) bool {
	want, got = strings.TrimSpace(want), strings.TrimSpace(got)
	if want == "null" || got == "null" {
		return want == got
	}
	switch k {
	case CmpString:
		a, ok1 := DecodeJSONString(want)
		b, ok2 := DecodeJSONString(got)
		return ok1 && ok2 && a == b
	case CmpFloat32, CmpFloat64:
		bits := 64
		if k == CmpFloat32 {
			bits = 32
		}
		if strings.HasPrefix(got, `"`) || strings.HasPrefix(want, `"`) {
			return false
		}
		a, err1 := strconv.ParseFloat(want, bits)
		b, err2 := strconv.ParseFloat(got, bits)
		if err1 != nil || err2 != nil {
			return false
		}
		if bits == 32 {
			return math.Float32bits(float32(a)) == math.Float32bits(float32(b))
		}
		return math.Float64bits(a) == math.Float64bits(b)
	}
	return want == got
}

// TextOfJSON is the memcache text of a JSON value of a column: a string's
// contents, a number's digits, "" for null.
func TextOfJSON(s string) string {
	if s == "null" {
		return ""
	}
	if v, ok := DecodeJSONString(s); ok {
		return v
	}
	return s
}

// SameText compares memcache text fields of a column: floating point by
// value (ndbgate writes 1e+300 where MySQL writes 1e300), the rest exactly.
func SameText(c *Column, want, got string) bool {
	if c.Cmp == CmpFloat32 || c.Cmp == CmpFloat64 {
		if want == "" || got == "" {
			return want == got
		}
		return SameJSON(c.Cmp, want, got)
	}
	return want == got
}

// Shorten keeps report lines readable: long values are cut, invalid UTF-8
// quoted.
func Shorten(s string) string {
	if !utf8.ValidString(s) {
		s = strconv.Quote(s)
	}
	if len(s) > 200 {
		return s[:200] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}
