package e2e

import (
	"net/http"
	"strconv"
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
