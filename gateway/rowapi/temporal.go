package rowapi

import (
	"errors"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Temporal values travel as text in MySQL's formats (ndbclient's parsers).
// They are checked here against MySQL's strict ranges and stored in
// canonical form, with exactly the column's fractional digits.

func parseDate(s string) (string, error) {
	d, err := checkedDate(s)
	if err != nil {
		return "", err
	}
	return string(d.AppendDate(nil)), nil
}

// checkedDate parses a date that exists, in 1000-01-01..9999-12-31.
func checkedDate(s string) (ndbclient.Temporal, error) {
	d, err := ndbclient.ParseDate(s)
	if err != nil {
		return d, err
	}
	if d.Year < 1000 || d.Month < 1 || d.Month > 12 || d.Day < 1 || d.Day > daysIn(d.Year, d.Month) {
		return d, errors.New("no such date (range 1000-01-01..9999-12-31)")
	}
	return d, nil
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func parseDatetime(s string, scale int, timestamp bool) (string, error) {
	date, clock, ok := ndbclient.CutDatetime(s)
	if !ok {
		return "", errors.New("not a datetime")
	}
	d, err := checkedDate(date)
	if err != nil {
		return "", err
	}
	if err := ndbclient.ParseClock(&d, clock, scale); err != nil {
		return "", err
	}
	if timestamp {
		if t := d.Unix(); t < 1 || t > 1<<31-1 {
			return "", errors.New("TIMESTAMP range is 1970-01-01 00:00:01..2038-01-19 03:14:07 UTC")
		}
	}
	return string(d.AppendDatetime(nil, scale)), nil
}

func parseTime(s string, scale int) (string, error) {
	t, err := ndbclient.ParseTime(s, scale)
	if err != nil {
		return "", err
	}
	return string(t.AppendTime(nil, scale)), nil
}
