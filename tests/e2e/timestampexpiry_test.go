package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// timestampExpiryConfig puts the prefix "s:" on a table whose expire column
// is a TIMESTAMP, as ndbmemcache's demo_table_tabs keeps it
// (`expire_time TIMESTAMP NULL`) and as a table made in SQL would.
const timestampExpiryConfig = `
tables:
  - database: app
    name: sessions
    primary_key: [id]
    columns:
      - {name: id, type: VARCHAR(64)}
      - {name: data, type: VARBINARY(512)}
      - {name: flags, type: INT UNSIGNED, nullable: true}
      - {name: cas_value, type: BIGINT UNSIGNED, nullable: true}
      - {name: expires, type: TIMESTAMP, nullable: true}
containers:
  - name: sessions
    database: app
    table: sessions
    key_columns: [id]
    value_columns: [data]
    flags_column: flags
    cas_column: cas_value
    expire_column: expires
key_prefixes:
  - {prefix: "s:", container: sessions, policy: ndb-only}
  - {prefix: "", container: default, policy: ndb-only}
`

// Items in a container whose expire column is a TIMESTAMP expire as
// memcached's do, through gomemcache, the text and meta protocols; the row
// holds the expiry as the UTC time, NULL for none, which the row API reads.
func TestTimestampExpiryColumn(t *testing.T) {
	srv := startServer(t, "--config", writeFile(t, "ndbgate.yaml", timestampExpiryConfig))
	mc := newClient(t, srv.memcacheAddr)
	start := time.Now().Unix()
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:short", Value: []byte("a"), Flags: 3, Expiration: 1}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:never", Value: []byte("b")}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:hour", Value: []byte("c"), Expiration: 3600}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:touched", Value: []byte("d")}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:past", Value: []byte("e"), Expiration: int32(start - 100)}))
	requireItem(t, mc, "s:short", "a", 3)
	requireItem(t, mc, "s:never", "b", 0)
	requireMiss(t, mc, "s:past")
	require.NoError(t, mc.Touch("s:touched", 1))

	c := dialRaw(t, srv.memcacheAddr)
	defer c.close()
	c.roundTripTTL("mg s:hour t v\r\n", "VA 1 t3600\r\nc\r\n")
	c.roundTrip("mg s:never t v\r\n", "VA 1 t-1\r\nb\r\n")

	rows := newSpecClient(t, srv)
	expires := func(key string) any {
		t.Helper()
		r := rows.post("/0.1.0/app/sessions/pk-read", `{"filters":[{"column":"id","value":"`+key+`"}]}`) // the key without its prefix
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["data"].(map[string]any)["expires"]
	}
	assert.Nil(t, expires("never"), "no expiry: NULL")
	at, ok := expires("hour").(string)
	require.True(t, ok, "a TIMESTAMP reads as text")
	when, err := time.Parse(time.DateTime, at)
	require.NoError(t, err, at)
	assert.InDelta(t, start+3600, when.Unix(), 2, "%s: the UTC time an hour after the set", at)

	time.Sleep(2100 * time.Millisecond)
	requireMiss(t, mc, "s:short")
	requireMiss(t, mc, "s:touched")
	requireItem(t, mc, "s:never", "b", 0)
	requireItem(t, mc, "s:hour", "c", 0)
	require.NoError(t, mc.Add(&memcache.Item{Key: "s:short", Value: []byte("again")}), "add over an expired item")
	requireItem(t, mc, "s:short", "again", 0)
	c.roundTrip("touch s:hour 0\r\n", "TOUCHED\r\n")
	assert.Nil(t, expires("hour"), "touch 0: no expiry again")
	c.roundTrip("gat 100 s:never\r\n", "VALUE s:never 0 1\r\nb\r\nEND\r\n")
	at, _ = expires("never").(string)
	when, err = time.Parse(time.DateTime, at)
	require.NoError(t, err, "gat 100 set an expiry: %q", at)
	assert.InDelta(t, time.Now().Unix()+100, when.Unix(), 2, strconv.Quote(at))
}

// A data dir whose table was made while no container named its expire
// column starts with a configuration whose container does: the column is
// bound, not refused as another shape, and the items written before keep
// their values. Started again without the container's column, nothing
// expires: the column is the container's, not the table's, as on NDB.
func TestExpireColumnNamedAfterTheDataDirMadeTheTable(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	noExpiry := strings.Replace(timestampExpiryConfig, "    expire_column: expires\n", "", 1)
	require.NotEqual(t, timestampExpiryConfig, noExpiry)
	start := func(config string) *server {
		return startServer(t, "--data-dir", dir, "--config", writeFile(t, "ndbgate.yaml", config))
	}

	s := start(noExpiry)
	mc := newClient(t, s.memcacheAddr)
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:before", Value: []byte("kept"), Flags: 5}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:ignored", Value: []byte("i"), Expiration: 1}))
	time.Sleep(1100 * time.Millisecond)
	requireItem(t, mc, "s:ignored", "i", 0) // no expire column: memcache's exptime is not kept
	require.Equal(t, 0, s.stop(t))

	s = start(timestampExpiryConfig)
	mc = newClient(t, s.memcacheAddr)
	requireItem(t, mc, "s:before", "kept", 5)
	requireItem(t, mc, "s:ignored", "i", 0)
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:short", Value: []byte("a"), Expiration: 1}))
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:past", Value: []byte("p"), Expiration: int32(time.Now().Unix() - 100)}))
	requireItem(t, mc, "s:short", "a", 0)
	requireMiss(t, mc, "s:past")
	time.Sleep(2100 * time.Millisecond)
	requireMiss(t, mc, "s:short")
	require.NoError(t, mc.Set(&memcache.Item{Key: "s:later", Value: []byte("l"), Expiration: 2}))
	require.Equal(t, 0, s.stop(t))

	s = start(noExpiry)
	mc = newClient(t, s.memcacheAddr)
	requireItem(t, mc, "s:before", "kept", 5)
	requireItem(t, mc, "s:later", "l", 0)
	time.Sleep(2100 * time.Millisecond)
	requireItem(t, mc, "s:later", "l", 0)
	requireMiss(t, mc, "s:short") // freed when it expired
}
