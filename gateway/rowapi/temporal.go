package rowapi

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Temporal values travel as text in MySQL's formats. They are checked here
// and stored in canonical form, with exactly the column's fractional digits.

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

func parseDate(s string) (string, error) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return "", errors.New("not a date")
	}
	y, ok1 := atoiFixed(s[:4])
	m, ok2 := atoiFixed(s[5:7])
	d, ok3 := atoiFixed(s[8:])
	if !ok1 || !ok2 || !ok3 {
		return "", errors.New("not a date")
	}
	if y < 1000 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return "", errors.New("no such date (range 1000-01-01..9999-12-31)")
	}
	return s, nil
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// fraction checks a fractional-seconds part against the column's scale and
// returns it padded to exactly scale digits. Digits beyond the scale must be
// zeros: rounding them would carry into the seconds, which MySQL does and a
// client rarely expects.
func fraction(frac string, scale int) (string, error) {
	if _, ok := atoiFixed(frac); !ok && frac != "" {
		return "", errors.New("bad fractional seconds")
	}
	if len(frac) > 6 {
		return "", errors.New("more than 6 fractional digits")
	}
	if len(frac) > scale {
		if strings.Trim(frac[scale:], "0") != "" {
			return "", fmt.Errorf("more fractional digits than the column's %d", scale)
		}
		frac = frac[:scale]
	}
	return frac + strings.Repeat("0", scale-len(frac)), nil
}

func parseDatetime(s string, scale int, timestamp bool) (string, error) {
	if len(s) < 19 || (s[10] != ' ' && s[10] != 'T') {
		return "", errors.New("not a datetime")
	}
	date, err := parseDate(s[:10])
	if err != nil {
		return "", err
	}
	clock := s[11:]
	frac := ""
	if i := strings.IndexByte(clock, '.'); i >= 0 {
		clock, frac = clock[:i], clock[i+1:]
		if frac == "" {
			return "", errors.New("bad fractional seconds")
		}
	}
	if len(clock) != 8 || clock[2] != ':' || clock[5] != ':' {
		return "", errors.New("not a time of day")
	}
	h, ok1 := atoiFixed(clock[:2])
	mi, ok2 := atoiFixed(clock[3:5])
	sec, ok3 := atoiFixed(clock[6:])
	if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
		return "", errors.New("no such time of day")
	}
	f, err := fraction(frac, scale)
	if err != nil {
		return "", err
	}
	if timestamp {
		y, _ := atoiFixed(date[:4])
		m, _ := atoiFixed(date[5:7])
		d, _ := atoiFixed(date[8:])
		t := time.Date(y, time.Month(m), d, h, mi, sec, 0, time.UTC).Unix()
		if t < 1 || t > 1<<31-1 {
			return "", errors.New("TIMESTAMP range is 1970-01-01 00:00:01..2038-01-19 03:14:07 UTC")
		}
	}
	out := date + " " + clock
	if scale > 0 {
		out += "." + f
	}
	return out, nil
}

func parseTime(s string, scale int) (string, error) {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	frac := ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s, frac = s[:i], s[i+1:]
		if frac == "" {
			return "", errors.New("bad fractional seconds")
		}
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 || len(parts[0]) < 2 || len(parts[0]) > 3 || len(parts[1]) != 2 || len(parts[2]) != 2 {
		return "", errors.New("not a time")
	}
	h, ok1 := atoiFixed(parts[0])
	mi, ok2 := atoiFixed(parts[1])
	sec, ok3 := atoiFixed(parts[2])
	if !ok1 || !ok2 || !ok3 || mi > 59 || sec > 59 {
		return "", errors.New("not a time")
	}
	f, err := fraction(frac, scale)
	if err != nil {
		return "", err
	}
	if h > 838 || (h == 838 && (mi > 59 || sec > 59)) || (h == 838 && mi == 59 && sec == 59 && strings.Trim(f, "0") != "") {
		return "", errors.New("TIME range is -838:59:59..838:59:59")
	}
	out := fmt.Sprintf("%s%02d:%02d:%02d", sign, h, mi, sec)
	if scale > 0 {
		out += "." + f
	}
	if out == "-00:00:00" || strings.HasPrefix(out, "-00:00:00.") && strings.Trim(f, "0") == "" {
		out = out[1:]
	}
	return out, nil
}
