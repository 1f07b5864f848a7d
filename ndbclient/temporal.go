package ndbclient

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The contract's temporal values are text in MySQL's formats (see the Type
// constants). These functions split that text into fields and write it back
// in canonical form: the row API checks values with them, and a driver packs
// the fields into its native format. They check shape and the ranges every
// caller shares; date ranges (zero dates, days in month) and the TIMESTAMP
// range are each caller's to decide.

// Temporal is a DATE, DATETIME, TIMESTAMP or TIME value split into fields.
// Frac counts units of 10^-fsp seconds for the column's fsp digits.
type Temporal struct {
	Neg                  bool // TIME only
	Year, Month, Day     int
	Hour, Minute, Second int
	Frac                 int
}

// MaxTimeHour is MySQL's TIME range: -838:59:59..838:59:59.
const MaxTimeHour = 838

func atoiFixed(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// ParseDate reads "YYYY-MM-DD"; which years, months and days exist is the
// caller's to check.
func ParseDate(s string) (Temporal, error) {
	var t Temporal
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return t, errors.New("not a date")
	}
	y, ok1 := atoiFixed(s[:4])
	m, ok2 := atoiFixed(s[5:7])
	d, ok3 := atoiFixed(s[8:])
	if !ok1 || !ok2 || !ok3 {
		return t, errors.New("not a date")
	}
	t.Year, t.Month, t.Day = y, m, d
	return t, nil
}

// CutDatetime splits "YYYY-MM-DD hh:mm:ss[.f]" (or 'T' for the space) into
// its date and its time of day.
func CutDatetime(s string) (date, clock string, ok bool) {
	if len(s) < 19 || (s[10] != ' ' && s[10] != 'T') {
		return "", "", false
	}
	return s[:10], s[11:], true
}

// ParseClock reads the time of day "hh:mm:ss[.f]" into t, the fraction
// scaled to fsp digits.
func ParseClock(t *Temporal, s string, fsp int) error {
	clock, frac, err := cutFraction(s)
	if err != nil {
		return err
	}
	if len(clock) != 8 || clock[2] != ':' || clock[5] != ':' {
		return errors.New("not a time of day")
	}
	h, ok1 := atoiFixed(clock[:2])
	mi, ok2 := atoiFixed(clock[3:5])
	sec, ok3 := atoiFixed(clock[6:])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
		return errors.New("no such time of day")
	}
	f, err := parseFraction(frac, fsp)
	if err != nil {
		return err
	}
	t.Hour, t.Minute, t.Second, t.Frac = h, mi, sec, f
	return nil
}

// ParseDatetime reads "YYYY-MM-DD hh:mm:ss[.f]" (ParseDate, then ParseClock;
// a caller that checks the date before the clock calls those itself).
func ParseDatetime(s string, fsp int) (Temporal, error) {
	date, clock, ok := CutDatetime(s)
	if !ok {
		return Temporal{}, errors.New("not a datetime")
	}
	t, err := ParseDate(date)
	if err != nil {
		return t, err
	}
	return t, ParseClock(&t, clock, fsp)
}

// ParseTime reads "[-]hh[h]:mm:ss[.f]" within MySQL's TIME range. "-0" is 0.
func ParseTime(s string, fsp int) (Temporal, error) {
	var t Temporal
	if strings.HasPrefix(s, "-") {
		t.Neg, s = true, s[1:]
	}
	s, frac, err := cutFraction(s)
	if err != nil {
		return t, err
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 || len(parts[0]) < 2 || len(parts[0]) > 3 || len(parts[1]) != 2 || len(parts[2]) != 2 {
		return t, errors.New("not a time")
	}
	h, ok1 := atoiFixed(parts[0])
	mi, ok2 := atoiFixed(parts[1])
	sec, ok3 := atoiFixed(parts[2])
	if !ok1 || !ok2 || !ok3 || mi > 59 || sec > 59 {
		return t, errors.New("not a time")
	}
	f, err := parseFraction(frac, fsp)
	if err != nil {
		return t, err
	}
	t.Hour, t.Minute, t.Second, t.Frac = h, mi, sec, f
	if !t.InTimeRange() {
		return t, errors.New("TIME range is -838:59:59..838:59:59")
	}
	if h == 0 && mi == 0 && sec == 0 && f == 0 {
		t.Neg = false
	}
	return t, nil
}

// Unix is a DATETIME's seconds since 1970 read as UTC (a TIMESTAMP's
// value); the fraction is left out.
func (t Temporal) Unix() int64 {
	return time.Date(t.Year, time.Month(t.Month), t.Day, t.Hour, t.Minute, t.Second, 0, time.UTC).Unix()
}

// InTimeRange reports whether t is within MySQL's TIME range.
func (t Temporal) InTimeRange() bool {
	return t.Hour < MaxTimeHour || t.Hour == MaxTimeHour && (t.Minute < 59 || t.Second < 59 || t.Frac == 0)
}

// cutFraction splits "x.f" at the point; a point with no digits is an error.
func cutFraction(s string) (whole, frac string, err error) {
	whole, frac, found := strings.Cut(s, ".")
	if found && frac == "" {
		return "", "", errors.New("bad fractional seconds")
	}
	return whole, frac, nil
}

// parseFraction reads up to 6 fractional digits scaled to fsp digits. Digits
// beyond fsp must be zeros: rounding them would carry into the seconds, which
// MySQL does and a client rarely expects.
func parseFraction(frac string, fsp int) (int, error) {
	if frac == "" {
		return 0, nil
	}
	v, ok := atoiFixed(frac)
	if !ok {
		return 0, errors.New("bad fractional seconds")
	}
	if len(frac) > 6 {
		return 0, errors.New("more than 6 fractional digits")
	}
	for n := len(frac); n > fsp; n-- {
		if v%10 != 0 {
			return 0, fmt.Errorf("more fractional digits than the column's %d", fsp)
		}
		v /= 10
	}
	for n := len(frac); n < fsp; n++ {
		v *= 10
	}
	return v, nil
}

// AppendDate appends "YYYY-MM-DD".
func (t Temporal) AppendDate(dst []byte) []byte {
	dst = appendPadded(dst, t.Year, 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, t.Month, 2)
	dst = append(dst, '-')
	return appendPadded(dst, t.Day, 2)
}

// AppendDatetime appends "YYYY-MM-DD hh:mm:ss", and ".f" with fsp digits.
func (t Temporal) AppendDatetime(dst []byte, fsp int) []byte {
	dst = append(t.AppendDate(dst), ' ')
	return t.appendClock(dst, fsp)
}

// AppendTime appends "[-]hh:mm:ss", and ".f" with fsp digits.
func (t Temporal) AppendTime(dst []byte, fsp int) []byte {
	if t.Neg && (t.Hour != 0 || t.Minute != 0 || t.Second != 0 || t.Frac != 0) {
		dst = append(dst, '-')
	}
	return t.appendClock(dst, fsp)
}

func (t Temporal) appendClock(dst []byte, fsp int) []byte {
	dst = appendPadded(dst, t.Hour, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, t.Minute, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, t.Second, 2)
	if fsp > 0 {
		dst = append(dst, '.')
		dst = appendPadded(dst, t.Frac, fsp)
	}
	return dst
}

// appendPadded appends n in decimal with at least width digits.
func appendPadded(dst []byte, n, width int) []byte {
	var b [20]byte
	s := strconv.AppendInt(b[:0], int64(n), 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}
