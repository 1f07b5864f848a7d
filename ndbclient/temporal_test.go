package ndbclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTemporalTextRoundTrips(t *testing.T) {
	dt, err := ParseDatetime("2024-02-29T23:59:58.25", 4)
	require.NoError(t, err)
	assert.Equal(t, "2024-02-29 23:59:58.2500", string(dt.AppendDatetime(nil, 4)))
	assert.Equal(t, int64(1709251198), dt.Unix())

	tm, err := ParseTime("-100:02:03.5", 1)
	require.NoError(t, err)
	assert.Equal(t, Temporal{Neg: true, Hour: 100, Minute: 2, Second: 3, Frac: 5}, tm)
	assert.Equal(t, "-100:02:03.5", string(tm.AppendTime(nil, 1)))

	zero, err := ParseTime("-00:00:00.000", 3)
	require.NoError(t, err)
	assert.Equal(t, "00:00:00.000", string(zero.AppendTime(nil, 3)), "no negative zero")

	edge, err := ParseTime("838:00:00.5", 1)
	require.NoError(t, err, "MySQL's TIME ends at 838:59:59, not at 838:00:00")
	assert.True(t, edge.InTimeRange())
}

func TestTemporalTextErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"2024-1-01", "not a date"},
		{"2024-01-01", "not a datetime"},
		{"2024-01-01 24:00:00", "no such time of day"},
		{"2024-01-01 10-00-00", "not a time of day"},
		{"2024-01-01 10:00:00.", "bad fractional seconds"},
		{"2024-01-01 10:00:00.1234567", "more than 6"},
		{"2024-01-01 10:00:00.15", "more fractional digits than the column's 1"},
	} {
		_, err := ParseDatetime(tc.in, 1)
		assert.ErrorContains(t, err, tc.want, tc.in)
	}
	for _, tc := range []struct{ in, want string }{
		{"1:00:00", "not a time"}, {"10:60:00", "not a time"},
		{"839:00:00", "TIME range"}, {"838:59:59.5", "TIME range"},
	} {
		_, err := ParseTime(tc.in, 1)
		assert.ErrorContains(t, err, tc.want, tc.in)
	}
}
