package ndbapi

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// NDB's temporal formats (NdbSqlUtil's pack/unpack functions). The old types
// are little endian: DATE packs year<<9 | month<<5 | day in 3 bytes, DATETIME
// is the number YYYYMMDDhhmmss in 8 bytes, TIME the signed number hhmmss in 3,
// TIMESTAMP unix seconds in 4. The fractional-second types of MySQL 5.6 and
// later are big endian with 0-3 bytes of fraction after the whole seconds:
// TIME2 (3 bytes), DATETIME2 (5 bytes), TIMESTAMP2 (4 bytes). The contract's
// values are text ("YYYY-MM-DD hh:mm:ss[.ffffff]", "[-]hhh:mm:ss[.ffffff]");
// TIMESTAMP text is UTC.

// fracBytes is the fraction bytes for fsp digits of fractional seconds.
func fracBytes(fsp int) int { return (fsp + 1) / 2 }

// clock is a parsed temporal value. frac counts units of 10^-fsp seconds.
type clock struct {
	neg               bool
	year, month, day  int
	hour, minute, sec int
	frac              int
}

func temporalError(c *column, s []byte, why string) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s value %.40q: %s", temporalName(c.ndbType), s, why)
}

func temporalName(t uint8) string {
	switch t {
	case ndbDate:
		return "DATE"
	case ndbDatetime, ndbDatetime2:
		return "DATETIME"
	case ndbTime, ndbTime2:
		return "TIME"
	}
	return "TIMESTAMP"
}

// num reads exactly n digits.
func num(s []byte, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	v := 0
	for _, c := range s[:n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// parseFraction reads ".ffffff" (1-6 digits) scaled to fsp digits; digits
// beyond fsp must be zeros (rounding would carry into the seconds).
func parseFraction(s []byte, fsp int) (int, error) {
	if len(s) == 0 {
		return 0, nil
	}
	if s[0] != '.' || len(s) < 2 || len(s) > 7 {
		return 0, fmt.Errorf("bad fractional seconds")
	}
	digits := s[1:]
	v, ok := num(digits, len(digits))
	if !ok {
		return 0, fmt.Errorf("bad fractional seconds")
	}
	for n := len(digits); n > fsp; n-- {
		if v%10 != 0 {
			return 0, fmt.Errorf("more fractional digits than the column's %d", fsp)
		}
		v /= 10
	}
	for n := len(digits); n < fsp; n++ {
		v *= 10
	}
	return v, nil
}

// parseDateTime reads "YYYY-MM-DD" and, for withClock, " hh:mm:ss[.f]" (or
// 'T' for the space). Zero dates ("0000-00-00") pass, as MySQL stores them.
func parseDateTime(s []byte, withClock bool, fsp int) (clock, error) {
	var v clock
	y, ok1 := num(s, 4)
	m, ok2 := num(s[min(5, len(s)):], 2)
	d, ok3 := num(s[min(8, len(s)):], 2)
	if !ok1 || !ok2 || !ok3 || s[4] != '-' || s[7] != '-' {
		return v, fmt.Errorf("want YYYY-MM-DD")
	}
	if m > 12 || d > 31 { // zero parts pass: MySQL stores them outside strict modes
		return v, fmt.Errorf("no such date")
	}
	v.year, v.month, v.day = y, m, d
	rest := s[10:]
	if !withClock {
		if len(rest) != 0 {
			return v, fmt.Errorf("want YYYY-MM-DD")
		}
		return v, nil
	}
	if len(rest) < 9 || (rest[0] != ' ' && rest[0] != 'T') || rest[3] != ':' || rest[6] != ':' {
		return v, fmt.Errorf("want YYYY-MM-DD hh:mm:ss[.ffffff]")
	}
	h, ok1 := num(rest[1:], 2)
	mi, ok2 := num(rest[4:], 2)
	sec, ok3 := num(rest[7:], 2)
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
		return v, fmt.Errorf("no such time of day")
	}
	f, err := parseFraction(rest[9:], fsp)
	if err != nil {
		return v, err
	}
	v.hour, v.minute, v.sec, v.frac = h, mi, sec, f
	return v, nil
}

// parseTimeOfDay reads "[-]h[hh]:mm:ss[.f]" within MySQL's TIME range.
func parseTimeOfDay(s []byte, fsp int) (clock, error) {
	var v clock
	if len(s) > 0 && s[0] == '-' {
		v.neg, s = true, s[1:]
	}
	colon := 0
	for colon < len(s) && s[colon] != ':' {
		colon++
	}
	if colon < 1 || colon > 3 || len(s) < colon+6 || s[colon+3] != ':' {
		return v, fmt.Errorf("want [-]hhh:mm:ss[.ffffff]")
	}
	h, ok1 := num(s, colon)
	mi, ok2 := num(s[colon+1:], 2)
	sec, ok3 := num(s[colon+4:], 2)
	if !ok1 || !ok2 || !ok3 || mi > 59 || sec > 59 {
		return v, fmt.Errorf("want [-]hhh:mm:ss[.ffffff]")
	}
	f, err := parseFraction(s[colon+6:], fsp)
	if err != nil {
		return v, err
	}
	if h > 838 || h == 838 && f != 0 {
		return v, fmt.Errorf("TIME range is -838:59:59..838:59:59")
	}
	v.hour, v.minute, v.sec, v.frac = h, mi, sec, f
	if h == 0 && mi == 0 && sec == 0 && f == 0 {
		v.neg = false
	}
	return v, nil
}

// appendBigEndian appends the low n bytes of v, most significant first.
func appendBigEndian(dst []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

func readBigEndian(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// fracField is the fraction as stored: odd fsp keeps one more digit, so the
// field is always a whole number of bytes of decimal digits.
func fracField(f, fsp int) uint64 {
	if fsp%2 != 0 {
		f *= 10
	}
	return uint64(f)
}

// fracValue undoes fracField; -1 for a field no writer makes.
func fracValue(field uint64, fsp int) int {
	if fsp%2 != 0 {
		if field%10 != 0 {
			return -1
		}
		field /= 10
	}
	if field >= uint64(pow10(fsp)) {
		return -1
	}
	return int(field)
}

func pow10(n int) int {
	p := 1
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

// sane reports whether decoded fields are within their ranges; stored bytes
// that are not read as NULL rather than as a value that cannot be written back.
func (v clock) sane(maxHour int) bool {
	return v.frac >= 0 && v.month <= 12 && v.day <= 31 && v.year <= 9999 &&
		v.hour <= maxHour && v.minute <= 59 && v.sec <= 59
}

// appendTemporal appends the text s in c's native temporal format.
func appendTemporal(dst []byte, c *column, s []byte) ([]byte, error) {
	fsp := c.fsp
	switch c.ndbType {
	case ndbDate:
		v, err := parseDateTime(s, false, 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		w := uint32(v.year)<<9 | uint32(v.month)<<5 | uint32(v.day)
		return append(dst, byte(w), byte(w>>8), byte(w>>16)), nil
	case ndbDatetime:
		v, err := parseDateTime(s, true, 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		n := uint64(v.year)*1e10 + uint64(v.month)*1e8 + uint64(v.day)*1e6 + uint64(v.hour)*1e4 + uint64(v.minute)*100 + uint64(v.sec)
		return binary.LittleEndian.AppendUint64(dst, n), nil
	case ndbDatetime2:
		v, err := parseDateTime(s, true, fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		w := uint64(1) // sign: MySQL's DATETIME is never negative
		w = w<<17 | uint64(v.year*13+v.month)
		w = w<<5 | uint64(v.day)
		w = w<<5 | uint64(v.hour)
		w = w<<6 | uint64(v.minute)
		w = w<<6 | uint64(v.sec)
		fb := fracBytes(fsp)
		return appendBigEndian(dst, w<<(8*fb)|fracField(v.frac, fsp), 5+fb), nil
	case ndbTime:
		v, err := parseTimeOfDay(s, 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		n := int32(v.hour*10000 + v.minute*100 + v.sec)
		if v.neg {
			n = -n
		}
		return append(dst, byte(n), byte(n>>8), byte(n>>16)), nil
	case ndbTime2:
		v, err := parseTimeOfDay(s, fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		fb := fracBytes(fsp)
		var w uint64
		if !v.neg {
			w = 1 // sign bit set for non-negative
		}
		w = w<<1 | 0 // interval bit, unused by MySQL
		w = w<<10 | uint64(v.hour)
		w = w<<6 | uint64(v.minute)
		w = w<<6 | uint64(v.sec)
		val := w<<(8*fb) | fracField(v.frac, fsp)
		if v.neg {
			val = uint64(1)<<(23+8*fb) - val
		}
		return appendBigEndian(dst, val, 3+fb), nil
	case ndbTimestamp, ndbTimestamp2:
		v, err := parseDateTime(s, true, fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		var secs int64
		if v.year != 0 || v.month != 0 || v.day != 0 || v.hour != 0 || v.minute != 0 || v.sec != 0 || v.frac != 0 {
			secs = time.Date(v.year, time.Month(v.month), v.day, v.hour, v.minute, v.sec, 0, time.UTC).Unix()
			if secs < 1 || secs > 1<<31-1 {
				return dst, temporalError(c, s, "TIMESTAMP range is 1970-01-01 00:00:01..2038-01-19 03:14:07 UTC")
			}
		}
		if c.ndbType == ndbTimestamp {
			return binary.LittleEndian.AppendUint32(dst, uint32(secs)), nil
		}
		dst = appendBigEndian(dst, uint64(secs), 4)
		return appendBigEndian(dst, fracField(v.frac, fsp), fracBytes(fsp)), nil
	}
	return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "NDB column type %d is not temporal", c.ndbType)
}

// temporalSize is the native bytes of a temporal column (0: not temporal).
func temporalSize(c *column) int {
	switch c.ndbType {
	case ndbDate, ndbTime:
		return 3
	case ndbTimestamp:
		return 4
	case ndbDatetime:
		return 8
	case ndbTime2:
		return 3 + fracBytes(c.fsp)
	case ndbDatetime2:
		return 5 + fracBytes(c.fsp)
	case ndbTimestamp2:
		return 4 + fracBytes(c.fsp)
	}
	return 0
}

// decodeTemporal turns native bytes into the contract's text.
func decodeTemporal(c *column, b []byte) (string, bool) {
	if len(b) != temporalSize(c) || c.fsp < 0 || c.fsp > 6 {
		return "", false
	}
	fsp := c.fsp
	var v clock
	switch c.ndbType {
	case ndbDate:
		w := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		v.year, v.month, v.day = int(w>>9), int(w>>5&15), int(w&31)
		return string(formatDate(nil, v)), v.sane(0)
	case ndbDatetime:
		n := binary.LittleEndian.Uint64(b)
		v.sec, n = int(n%100), n/100
		v.minute, n = int(n%100), n/100
		v.hour, n = int(n%100), n/100
		v.day, n = int(n%100), n/100
		v.month, n = int(n%100), n/100
		v.year = int(n)
		return formatDateTime(v, 0), v.sane(23)
	case ndbDatetime2:
		fb := fracBytes(fsp)
		val := readBigEndian(b)
		if val>>(39+8*fb)&1 == 0 {
			return "", false // negative: MySQL never stores one
		}
		v.frac = fracValue(val&(1<<(8*fb)-1), fsp)
		w := val >> (8 * fb)
		v.sec, w = int(w&63), w>>6
		v.minute, w = int(w&63), w>>6
		v.hour, w = int(w&31), w>>5
		v.day, w = int(w&31), w>>5
		ym := int(w & (1<<17 - 1))
		v.year, v.month = ym/13, ym%13
		return formatDateTime(v, fsp), v.sane(23)
	case ndbTime:
		n := int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16) << 8 >> 8
		if n < 0 {
			v.neg, n = true, -n
		}
		v.hour, v.minute, v.sec = int(n/10000), int(n/100%100), int(n%100)
		return formatTime(v, 0), v.sane(838)
	case ndbTime2:
		fb := fracBytes(fsp)
		val := readBigEndian(b)
		spos := uint(23 + 8*fb)
		if val>>spos&1 == 0 {
			v.neg = true
			val = uint64(1)<<spos - val
		}
		v.frac = fracValue(val&(1<<(8*fb)-1), fsp)
		w := val >> (8 * fb)
		v.sec, w = int(w&63), w>>6
		v.minute, w = int(w&63), w>>6
		v.hour = int(w & 1023)
		if w>>10&1 != 0 || w>>12 != 0 {
			return "", false // the interval bit, or bits above the sign
		}
		return formatTime(v, fsp), v.sane(838) && (v.hour < 838 || v.frac == 0)
	case ndbTimestamp, ndbTimestamp2:
		var secs uint64
		if c.ndbType == ndbTimestamp {
			secs = uint64(binary.LittleEndian.Uint32(b))
		} else {
			secs = readBigEndian(b[:4])
			v.frac = fracValue(readBigEndian(b[4:]), fsp)
		}
		if secs != 0 {
			t := time.Unix(int64(secs), 0).UTC()
			v.year, v.month, v.day = t.Year(), int(t.Month()), t.Day()
			v.hour, v.minute, v.sec = t.Hour(), t.Minute(), t.Second()
		}
		return formatDateTime(v, fsp), v.frac >= 0 && secs < 1<<31
	}
	return "", false
}

func formatDate(dst []byte, v clock) []byte {
	return fmt.Appendf(dst, "%04d-%02d-%02d", v.year, v.month, v.day)
}

func formatDateTime(v clock, fsp int) string {
	b := formatDate(make([]byte, 0, 26), v)
	b = fmt.Appendf(b, " %02d:%02d:%02d", v.hour, v.minute, v.sec)
	return string(appendFraction(b, v.frac, fsp))
}

func formatTime(v clock, fsp int) string {
	b := make([]byte, 0, 17)
	if v.neg && (v.hour != 0 || v.minute != 0 || v.sec != 0 || v.frac != 0) {
		b = append(b, '-')
	}
	b = fmt.Appendf(b, "%02d:%02d:%02d", v.hour, v.minute, v.sec)
	return string(appendFraction(b, v.frac, fsp))
}

func appendFraction(b []byte, f, fsp int) []byte {
	if fsp == 0 {
		return b
	}
	return fmt.Appendf(b, ".%0*d", fsp, f)
}
