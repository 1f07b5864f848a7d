package gateway

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A FLOAT column's value reads as mysql prints it: the shortest text of the
// float32, not of the double it is carried in.
func TestValueTextOfFloatColumns(t *testing.T) {
	f32 := ndbclient.Float(float64(float32(-10.503989)))
	assert.Equal(t, "-10.503989", string(appendValueText(nil, f32, ndbclient.TypeFloat)))
	assert.Equal(t, "-10.503989219665527", string(appendValueText(nil, f32, ndbclient.TypeDouble)), "a DOUBLE keeps every digit")
	assert.Equal(t, "0.1", string(appendValueText(nil, ndbclient.Float(0.1), ndbclient.TypeDouble)))
	assert.Equal(t, "42", string(appendValueText(nil, ndbclient.Uint(42), ndbclient.TypeUint32)))
	assert.Equal(t, "", string(appendValueText(nil, ndbclient.Null(), ndbclient.TypeFloat)))
}

// parseLooseUint answers as memcached 1.6.18's incr does; the e2e
// conversation test checks the same values against memcached itself.
func TestParseLooseUintIsMemcachedsStrtoull(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"12", 12, true}, {" 12", 12, true}, {"\t3\n", 3, true}, {"+7", 7, true}, {"-0", 0, true},
		{"12 ab", 12, true}, {"12\tab", 12, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"-18446744073709551615", 1, true}, // strtoull negates; memcached refuses only a negative signed result
		{"-5", 0, false}, {"12ab", 0, false}, {"", 0, false}, {" ", 0, false}, {"+", 0, false},
		{"ab", 0, false}, {"18446744073709551616", 0, false}, {"- 5", 0, false},
	} {
		got, ok := parseLooseUint([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseLooseUint(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
