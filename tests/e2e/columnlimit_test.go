package e2e

import (
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallValuesConfig puts the prefix "s:" on a declared table whose value
// column holds 16 bytes, far less than the item size limit, as ndbmemcache's
// demo_table holds 13,500 bytes against memcached's 1 MiB.
const smallValuesConfig = `
tables:
  - database: app
    name: small_values
    primary_key: [mkey]
    columns:
      - {name: mkey, type: VARCHAR(250)}
      - {name: string_value, type: VARBINARY(16)}
      - {name: flags, type: INT UNSIGNED}
      - {name: cas_value, type: BIGINT UNSIGNED}
      - {name: expire_time, type: INT UNSIGNED}
containers:
  - name: small
    database: app
    table: small_values
    key_columns: [mkey]
    value_columns: [string_value]
    flags_column: flags
    cas_column: cas_value
    expire_column: expire_time
key_prefixes:
  - {prefix: "s:", container: small, policy: ndb-only}
  - {prefix: "", container: default, policy: ndb-only}
`

// A memcache set whose value the container's column cannot hold is refused
// as memcached refuses one over its item size (SERVER_ERROR object too
// large for cache; binary status 0x0003), and the key's old item is gone,
// so no client reads the value the set meant to replace. A REST write
// refused the same way changes nothing.
func TestSetTooLongForItsColumn(t *testing.T) {
	srv := startServer(t, "--config", writeFile(t, "ndbgate.yaml", smallValuesConfig))
	fits, long := strings.Repeat("f", 16), strings.Repeat("l", 17)

	t.Run("gomemcache", func(t *testing.T) {
		mc := newClient(t, srv.memcacheAddr)
		require.NoError(t, mc.Set(&memcache.Item{Key: "s:gm", Value: []byte("old")}))
		err := mc.Set(&memcache.Item{Key: "s:gm", Value: []byte(long)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "object too large for cache")
		requireMiss(t, mc, "s:gm")
		require.NoError(t, mc.Set(&memcache.Item{Key: "s:gm", Value: []byte(fits)}))
		requireItem(t, mc, "s:gm", fits, 0)
	})

	t.Run("text and meta", func(t *testing.T) {
		c := dialRaw(t, srv.memcacheAddr)
		defer c.close()
		for _, set := range []string{"set s:t 0 0 17\r\n", "ms s:t 17\r\n", "ms s:t 17 MR\r\n", "ms s:t 17 C1\r\n"} {
			c.roundTrip("set s:t 0 0 3\r\nold\r\n", "STORED\r\n")
			c.roundTrip(set+long+"\r\n", "SERVER_ERROR object too large for cache\r\n")
			c.roundTrip("get s:t\r\n", "END\r\n")
		}
		c.roundTrip("set s:t 0 0 3\r\nold\r\n", "STORED\r\n")
		c.roundTrip("append s:t 0 0 15\r\n"+long[:15]+"\r\n", "SERVER_ERROR object too large for cache\r\n")
		c.roundTrip("get s:t\r\n", "VALUE s:t 0 3\r\nold\r\nEND\r\n") // memcached's append keeps the item too
	})

	t.Run("pipelined sets", func(t *testing.T) {
		c := dialRaw(t, srv.memcacheAddr)
		defer c.close()
		c.roundTrip("set s:p1 0 0 3\r\nold\r\nset s:p2 0 0 3\r\nold\r\n", "STORED\r\nSTORED\r\n")
		c.roundTrip("set s:p1 0 0 17\r\n"+long+"\r\nset s:p2 0 0 2\r\nok\r\nget s:p1 s:p2\r\n",
			"SERVER_ERROR object too large for cache\r\nSTORED\r\nVALUE s:p2 0 2\r\nok\r\nEND\r\n")
	})

	t.Run("binary set and setq", func(t *testing.T) {
		c := dialRaw(t, srv.memcacheAddr)
		defer c.close()
		extras := binary.BigEndian.AppendUint32(make([]byte, 4), 0) // flags, exptime
		for _, step := range []struct {
			op  byte
			cas uint64
		}{{0x01, 0}, {0x11, 0}, {0x01, 12345}, {0x11, 12345}} { // SET, SETQ; a cas changes nothing
			c.send(string(binRequest(0x01, []byte("s:b"), extras, []byte("old"), 1)))
			status, _, _ := readBinResponse(t, c)
			require.Equal(t, uint16(0), status)
			set := binRequest(step.op, []byte("s:b"), extras, []byte(long), 2)
			binary.BigEndian.PutUint64(set[16:], step.cas)
			c.send(string(set))
			status, opaque, _ := readBinResponse(t, c)
			assert.Equal(t, uint16(0x0003), status, "%+v: value too large", step)
			assert.Equal(t, uint32(2), opaque)
			c.send(string(binRequest(0x00, []byte("s:b"), nil, nil, 3)))
			status, _, _ = readBinResponse(t, c)
			assert.Equal(t, uint16(0x0001), status, "%+v: the old item is gone", step)
		}
	})

	t.Run("REST", func(t *testing.T) {
		put := func(value string) int {
			req, err := http.NewRequest(http.MethodPut, "http://"+srv.restAddr+"/v1/kv/small/r", strings.NewReader(value))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			return resp.StatusCode
		}
		require.Equal(t, http.StatusNoContent, put("old"))
		assert.Equal(t, http.StatusBadRequest, put(long))
		code, body := srv.httpGet(t, "/v1/kv/small/r")
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "old", body, "a refused REST write changes nothing")
	})
}

// A container's expiry on a declared table: an item stored already
// expired, or past its time, is a miss, as in memcached. (Before, the
// embedded engine made declared tables without their expire column, and
// served such items.)
func TestDeclaredTableKeepsExpiry(t *testing.T) {
	srv := startServer(t, "--config", writeFile(t, "ndbgate.yaml", smallValuesConfig))
	c := dialRaw(t, srv.memcacheAddr)
	defer c.close()
	c.roundTrip("set s:x 0 -1 2\r\nxx\r\nget s:x\r\n", "STORED\r\nEND\r\n")
	c.roundTrip("set s:x 0 0 2\r\nxx\r\nset s:x 0 -1 2\r\nyy\r\nget s:x\r\n", "STORED\r\nSTORED\r\nEND\r\n")
	c.roundTrip("add s:x 0 1000 2\r\nzz\r\ngat -1 s:x\r\nget s:x\r\n", "STORED\r\nVALUE s:x 0 2\r\nzz\r\nEND\r\nEND\r\n")
}
