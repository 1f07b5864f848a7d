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

// parseStored parses a DATE (withClock false) or a DATETIME/TIMESTAMP for
// storing. Zero parts pass, as MySQL stores them outside strict modes; the row
// API has already refused them where MySQL would.
func parseStored(s []byte, withClock bool, fsp int) (ndbclient.Temporal, error) {
	var v ndbclient.Temporal
	var err error
	if withClock {
		v, err = ndbclient.ParseDatetime(string(s), fsp)
	} else {
		v, err = ndbclient.ParseDate(string(s))
	}
	if err == nil && (v.Month > 12 || v.Day > 31) {
		err = fmt.Errorf("no such date")
	}
	return v, err
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
func sane(v ndbclient.Temporal, maxHour int) bool {
	return v.Frac >= 0 && v.Month <= 12 && v.Day <= 31 && v.Year <= 9999 &&
		v.Hour <= maxHour && v.Minute <= 59 && v.Second <= 59
}

// appendTemporal appends the text s in c's native temporal format.
func appendTemporal(dst []byte, c *column, s []byte) ([]byte, error) {
	fsp := c.fsp
	switch c.ndbType {
	case ndbDate:
		v, err := parseStored(s, false, 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		w := uint32(v.Year)<<9 | uint32(v.Month)<<5 | uint32(v.Day)
		return append(dst, byte(w), byte(w>>8), byte(w>>16)), nil
	case ndbDatetime:
		v, err := parseStored(s, true, 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		n := uint64(v.Year)*1e10 + uint64(v.Month)*1e8 + uint64(v.Day)*1e6 + uint64(v.Hour)*1e4 + uint64(v.Minute)*100 + uint64(v.Second)
		return binary.LittleEndian.AppendUint64(dst, n), nil
	case ndbDatetime2:
		v, err := parseStored(s, true, fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		w := uint64(1) // sign: MySQL's DATETIME is never negative
		w = w<<17 | uint64(v.Year*13+v.Month)
		w = w<<5 | uint64(v.Day)
		w = w<<5 | uint64(v.Hour)
		w = w<<6 | uint64(v.Minute)
		w = w<<6 | uint64(v.Second)
		fb := fracBytes(fsp)
		return appendBigEndian(dst, w<<(8*fb)|fracField(v.Frac, fsp), 5+fb), nil
	case ndbTime:
		v, err := ndbclient.ParseTime(string(s), 0)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		n := int32(v.Hour*10000 + v.Minute*100 + v.Second)
		if v.Neg {
			n = -n
		}
		return append(dst, byte(n), byte(n>>8), byte(n>>16)), nil
	case ndbTime2:
		v, err := ndbclient.ParseTime(string(s), fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		fb := fracBytes(fsp)
		var w uint64
		if !v.Neg {
			w = 1 // sign bit set for non-negative
		}
		w = w<<1 | 0 // interval bit, unused by MySQL
		w = w<<10 | uint64(v.Hour)
		w = w<<6 | uint64(v.Minute)
		w = w<<6 | uint64(v.Second)
		val := w<<(8*fb) | fracField(v.Frac, fsp)
		if v.Neg {
			val = uint64(1)<<(23+8*fb) - val
		}
		return appendBigEndian(dst, val, 3+fb), nil
	case ndbTimestamp, ndbTimestamp2:
		v, err := parseStored(s, true, fsp)
		if err != nil {
			return dst, temporalError(c, s, err.Error())
		}
		var secs int64
		if v.Year != 0 || v.Month != 0 || v.Day != 0 || v.Hour != 0 || v.Minute != 0 || v.Second != 0 || v.Frac != 0 {
			secs = v.Unix()
			if secs < 1 || secs > 1<<31-1 {
				return dst, temporalError(c, s, "TIMESTAMP range is 1970-01-01 00:00:01..2038-01-19 03:14:07 UTC")
			}
		}
		if c.ndbType == ndbTimestamp {
			return binary.LittleEndian.AppendUint32(dst, uint32(secs)), nil
		}
		dst = appendBigEndian(dst, uint64(secs), 4)
		return appendBigEndian(dst, fracField(v.Frac, fsp), fracBytes(fsp)), nil
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
	var v ndbclient.Temporal
	switch c.ndbType {
	case ndbDate:
		w := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		v.Year, v.Month, v.Day = int(w>>9), int(w>>5&15), int(w&31)
		return string(v.AppendDate(nil)), sane(v, 0)
	case ndbDatetime:
		n := binary.LittleEndian.Uint64(b)
		v.Second, n = int(n%100), n/100
		v.Minute, n = int(n%100), n/100
		v.Hour, n = int(n%100), n/100
		v.Day, n = int(n%100), n/100
		v.Month, n = int(n%100), n/100
		v.Year = int(n)
		return string(v.AppendDatetime(nil, 0)), sane(v, 23)
	case ndbDatetime2:
		fb := fracBytes(fsp)
		val := readBigEndian(b)
		if val>>(39+8*fb)&1 == 0 {
			return "", false // negative: MySQL never stores one
		}
		v.Frac = fracValue(val&(1<<(8*fb)-1), fsp)
		w := val >> (8 * fb)
		v.Second, w = int(w&63), w>>6
		v.Minute, w = int(w&63), w>>6
		v.Hour, w = int(w&31), w>>5
		v.Day, w = int(w&31), w>>5
		ym := int(w & (1<<17 - 1))
		v.Year, v.Month = ym/13, ym%13
		return string(v.AppendDatetime(nil, fsp)), sane(v, 23)
	case ndbTime:
		n := int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16) << 8 >> 8
		if n < 0 {
			v.Neg, n = true, -n
		}
		v.Hour, v.Minute, v.Second = int(n/10000), int(n/100%100), int(n%100)
		return string(v.AppendTime(nil, 0)), sane(v, ndbclient.MaxTimeHour)
	case ndbTime2:
		fb := fracBytes(fsp)
		val := readBigEndian(b)
		spos := uint(23 + 8*fb)
		if val>>spos&1 == 0 {
			v.Neg = true
			val = uint64(1)<<spos - val
		}
		v.Frac = fracValue(val&(1<<(8*fb)-1), fsp)
		w := val >> (8 * fb)
		v.Second, w = int(w&63), w>>6
		v.Minute, w = int(w&63), w>>6
		v.Hour = int(w & 1023)
		if w>>10&1 != 0 || w>>12 != 0 {
			return "", false // the interval bit, or bits above the sign
		}
		return string(v.AppendTime(nil, fsp)), sane(v, ndbclient.MaxTimeHour) && v.InTimeRange()
	case ndbTimestamp, ndbTimestamp2:
		var secs uint64
		if c.ndbType == ndbTimestamp {
			secs = uint64(binary.LittleEndian.Uint32(b))
		} else {
			secs = readBigEndian(b[:4])
			v.Frac = fracValue(readBigEndian(b[4:]), fsp)
		}
		if secs != 0 {
			t := time.Unix(int64(secs), 0).UTC()
			v.Year, v.Month, v.Day = t.Year(), int(t.Month()), t.Day()
			v.Hour, v.Minute, v.Second = t.Hour(), t.Minute(), t.Second()
		}
		return string(v.AppendDatetime(nil, fsp)), v.Frac >= 0 && secs < 1<<31
	}
	return "", false
}
