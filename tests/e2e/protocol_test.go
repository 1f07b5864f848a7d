package e2e

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every expected byte string in this file was taken from memcached 1.6.18, and
// forEachTarget re-checks it against a real memcached in the same run when one
// is on PATH.

// protoCase is one raw-protocol scenario on a fresh connection. Unless closes is
// set, the runner afterwards checks that nothing else is pending and that the
// connection still answers (expectSentinel).
type protoCase struct {
	name   string
	closes bool
	run    func(t *testing.T, c *rawConn, tg *target)
}

var (
	reGetsValue = regexp.MustCompile(`^VALUE (\S+) (\d+) (\d+) (\d+)\r\n$`)
	reVersion   = regexp.MustCompile(`^VERSION (\d+\.\d+\.\d+\S*)\r\n$`)
)

func key250() string { return strings.Repeat("k", 250) }
func key251() string { return strings.Repeat("k", 251) }

// gets issues "gets key" for one existing key and returns its cas unique,
// checking flags and value exactly.
func gets(t *testing.T, c *rawConn, key string, flags int, value string) uint64 {
	t.Helper()
	c.send("gets " + key + "\r\n")
	m := c.readLineMatch(reGetsValue)
	require.Equal(t, key, m[1])
	require.Equal(t, strconv.Itoa(flags), m[2])
	require.Equal(t, strconv.Itoa(len(value)), m[3])
	c.expect(value + "\r\nEND\r\n")
	cas, err := strconv.ParseUint(m[4], 10, 64)
	require.NoError(t, err)
	return cas
}

// dataLineReply is what follows the error for a storage command refused after
// its length was read. memcached 1.6.18 (Debian's) then runs the data line as a
// command, so a value could execute ("x" gives ERROR); ndbgate swallows the data
// block, as current memcached's proto_parser does, so a value never runs.
func dataLineReply(tg *target) string {
	if tg.isReference() {
		return "ERROR\r\n"
	}
	return ""
}

var protoCases = []protoCase{
	// First, on a fresh server: no expired items are waiting to be reaped
	// while the counters are compared.
	{name: "stats", run: func(t *testing.T, c *rawConn, tg *target) {
		before := c.stats("")
		for _, name := range []string{
			"pid", "uptime", "time", "version", "curr_connections", "total_connections",
			"cmd_get", "cmd_set", "get_hits", "get_misses", "delete_hits", "delete_misses",
			"incr_hits", "incr_misses", "decr_hits", "decr_misses", "cas_hits", "cas_misses",
			"cas_badval", "touch_hits", "touch_misses", "curr_items", "total_items", "bytes",
			"evictions", "limit_maxbytes", "threads", "cmd_meta", "get_flushed", "store_too_large",
			"store_no_memory", "accepting_conns", "listen_disabled_num", "time_in_listen_disabled_us",
		} {
			assert.Contains(t, before, name, "stats lacks %s", name)
		}
		assert.Equal(t, strconv.Itoa(tg.pid), before["pid"], "stats pid")
		statUint(t, before, "uptime")
		now := uint64(time.Now().Unix())
		ts := statUint(t, before, "time")
		assert.InDelta(t, float64(now), float64(ts), 5, "stats time is not the current unix time")
		assert.GreaterOrEqual(t, statUint(t, before, "curr_connections"), uint64(1))

		c.roundTrip("set sx:new 0 0 3\r\nabc\r\n", "STORED\r\n")
		c.roundTrip("get sx:new sx:missing\r\n", "VALUE sx:new 0 3\r\nabc\r\nEND\r\n")
		c.roundTrip("delete sx:missing\r\n", "NOT_FOUND\r\n")
		after := c.stats("")
		delta := func(name string) uint64 { return statUint(t, after, name) - statUint(t, before, name) }
		assert.Equal(t, uint64(1), delta("curr_items"), "curr_items after one new item")
		assert.Equal(t, uint64(1), delta("cmd_set"), "cmd_set after one set")
		assert.Equal(t, uint64(1), delta("get_hits"), "get_hits after one hit")
		assert.Equal(t, uint64(1), delta("get_misses"), "get_misses after one miss")
		assert.Equal(t, uint64(2), delta("cmd_get"), "cmd_get counts keys")
		assert.Equal(t, uint64(1), delta("delete_misses"), "delete_misses")
		// A gat's keys count as touches, not gets, in memcached 1.6.18.
		c.roundTrip("gat 100 sx:new sx:missing\r\n", "VALUE sx:new 0 3\r\nabc\r\nEND\r\n")
		touched := c.stats("")
		assert.Equal(t, statUint(t, after, "cmd_get"), statUint(t, touched, "cmd_get"), "cmd_get after a gat")
		assert.Equal(t, statUint(t, after, "get_hits"), statUint(t, touched, "get_hits"), "get_hits after a gat")
		assert.Equal(t, uint64(2), statUint(t, touched, "cmd_touch")-statUint(t, after, "cmd_touch"), "cmd_touch after a gat")
		assert.Equal(t, uint64(1), statUint(t, touched, "touch_hits")-statUint(t, after, "touch_hits"), "touch_hits after a gat")
		assert.Equal(t, uint64(1), statUint(t, touched, "touch_misses")-statUint(t, after, "touch_misses"), "touch_misses after a gat")
		// An mg with T counts a hit as a touch, and a miss as a get miss.
		c.roundTrip("mg sx:new v T100\r\nmg sx:missing v T100\r\n", "VA 3\r\nabc\r\nEN\r\n")
		metaTouched := c.stats("")
		for _, s := range []struct {
			name string
			want uint64
		}{{"cmd_touch", 1}, {"touch_hits", 1}, {"touch_misses", 0}, {"cmd_get", 1}, {"get_hits", 0}, {"get_misses", 1}} {
			assert.Equal(t, s.want, statUint(t, metaTouched, s.name)-statUint(t, touched, s.name), "%s after an mg T hit and miss", s.name)
		}
		// memcached counts only me in cmd_meta, and an me in no get counter.
		c.send("me sx:new\r\nme sx:missing\r\nmn\r\n")
		c.readLineMatch(regexp.MustCompile(`^ME sx:new exp=\S+ la=\d+ cas=\d+ fetch=(yes|no) cls=\d+ size=\d+\r\n$`))
		c.expect("EN\r\nMN\r\n")
		debugged := c.stats("")
		for _, s := range []struct {
			name string
			want uint64
		}{{"cmd_meta", 2}, {"cmd_get", 0}, {"get_hits", 0}, {"get_misses", 0}} {
			assert.Equal(t, s.want, statUint(t, debugged, s.name)-statUint(t, metaTouched, s.name), "%s after an me hit and miss", s.name)
		}
		c.roundTrip("set sx:big 0 0 2000000\r\n"+strings.Repeat("z", 2000000)+"\r\n", "SERVER_ERROR object too large for cache\r\n")
		assert.Equal(t, uint64(1), statUint(t, c.stats(""), "store_too_large")-statUint(t, before, "store_too_large"), "store_too_large")
		assert.Equal(t, "1", after["accepting_conns"])
		// Stored already expired, as memcached stores it: any command that
		// then finds it counts in get_expired, a write too. On NDB a set
		// writes without reading the row, so it cannot tell.
		expiredCmds := [][2]string{{"get sx:gone\r\n", "END\r\n"}, {"incr sx:gone 1\r\n", "NOT_FOUND\r\n"},
			{"touch sx:gone 10\r\n", "NOT_FOUND\r\n"}, {"delete sx:gone\r\n", "NOT_FOUND\r\n"},
			{"add sx:gone 0 0 1\r\n2\r\n", "STORED\r\n"}}
		if !onNDB(tg) {
			expiredCmds = append(expiredCmds, [2]string{"set sx:gone 0 0 1\r\n2\r\n", "STORED\r\n"})
		}
		for _, cmd := range expiredCmds {
			// One write: the reaper has no time to take the row first.
			c.roundTrip("set sx:gone 0 -1 1\r\n1\r\n"+cmd[0], "STORED\r\n"+cmd[1])
		}
		end := c.stats("")
		assert.Equal(t, uint64(len(expiredCmds)), statUint(t, end, "get_expired")-statUint(t, before, "get_expired"), "get_expired")
		assert.Equal(t, statUint(t, before, "reclaimed"), statUint(t, end, "reclaimed"), "reclaimed: found expired is not reclaimed")

		settings := c.stats("settings")
		assert.Equal(t, "1048576", settings["item_size_max"], "stats settings item_size_max")
		evictions := "on" // NDB never evicts: a full table refuses writes
		if onNDB(tg) {
			evictions = "off"
		}
		for name, want := range map[string]string{ // the ones memcached's binary.t checks, and detail's
			"evictions": evictions, "cas_enabled": "yes", "flush_enabled": "yes",
			"detail_enabled": "no", "stat_key_prefix": ":",
		} {
			assert.Equal(t, want, settings[name], "stats settings %s", name)
		}
	}},
	{name: "stats count cas failures, stale marks and created counters as memcached", run: func(t *testing.T, c *rawConn, tg *target) {
		counters := []string{"delete_hits", "delete_misses", "incr_hits", "incr_misses", "decr_hits", "decr_misses", "cmd_set"}
		moved := func(before, after map[string]string) map[string]uint64 {
			d := map[string]uint64{}
			for _, name := range counters {
				if n := statUint(t, after, name) - statUint(t, before, name); n != 0 {
					d[name] = n
				}
			}
			return d
		}
		c.roundTrip("set sc:a 0 0 1\r\n5\r\nset sc:b 0 0 1\r\n5\r\n", "STORED\r\nSTORED\r\n")
		before := c.stats("")
		// (No cas this server made is near 99999999.) md counts a cas
		// mismatch as a miss, and marking stale as nothing;
		// ma counts neither a cas mismatch nor the item it created.
		c.roundTrip("md sc:a C99999999\r\nma sc:a C99999999\r\nmd sc:a I\r\nma sc:n N30\r\nma sc:m N30 MD\r\n", "EX\r\nEX\r\nHD\r\nHD\r\nHD\r\n")
		meta := c.stats("")
		assert.Equal(t, map[string]uint64{"delete_misses": 1}, moved(before, meta), "after md and ma")
		// The binary protocol's delete counts a cas mismatch nowhere, and
		// its incr neither a cas mismatch nor the item it created.
		b := dialRaw(t, tg.addr)
		withCas := func(req []byte, cas uint64) string {
			binary.BigEndian.PutUint64(req[16:], cas)
			return string(req)
		}
		arith := func(delta, initial uint64, exp uint32) []byte {
			return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, delta), initial), exp)
		}
		for _, step := range []struct {
			req    string
			status uint16
		}{
			{withCas(binRequest(0x04, []byte("sc:b"), nil, nil, 1), 99999999), 2},            // DELETE, cas mismatch: exists
			{withCas(binRequest(0x05, []byte("sc:b"), arith(1, 0, 0), nil, 2), 99999999), 2}, // INCREMENT, cas mismatch
			{string(binRequest(0x05, []byte("sc:bn"), arith(1, 7, 0), nil, 3)), 0},           // INCREMENT creates the item
			{string(binRequest(0x06, []byte("sc:bm"), arith(1, 7, 0), nil, 4)), 0},           // DECREMENT creates the item
		} {
			b.send(step.req)
			st, _, _ := readBinResponse(t, b)
			assert.Equal(t, step.status, st, "binary status")
		}
		assert.Empty(t, moved(meta, c.stats("")), "after binary cas mismatches and created counters")
	}},
	{name: "a pipelined mg shows the fetch of the mg before it", run: func(t *testing.T, c *rawConn, _ *target) {
		// On NDB a read records the fetch after its flight: an mg with h
		// waits for the reads of its key before it. Without, about one
		// run in two showed h0 here.
		for i := range 200 {
			k := fmt.Sprintf("pf:%d", i)
			c.roundTrip("ms "+k+" 5 q\r\n12 ab\r\nmn\r\n", "MN\r\n")
			c.roundTrip("verbosity 1\r\ndelete pf:none\r\nmg "+k+" s h\r\nmg "+k+" s h k\r\nmn\r\n",
				"OK\r\nNOT_FOUND\r\nHD s5 h0\r\nHD s5 h1 k"+k+"\r\nMN\r\n")
		}
	}},
	{name: "stats detail counts per key prefix", run: func(t *testing.T, c *rawConn, _ *target) {
		// One write: each stats line counts every command before it.
		c.send("stats detail on\r\nset dt:b 0 0 1\r\nx\r\nget dt:b dt:c nokey\r\ndelete dt:c\r\n" +
			"append dt:b 0 0 1\r\ny\r\nstats detail dump\r\nstats detail\r\nstats detail off\r\n" +
			"get dt:b\r\nstats detail dump\r\n")
		c.expect("OK\r\nSTORED\r\nVALUE dt:b 0 1\r\nx\r\nEND\r\nNOT_FOUND\r\nSTORED\r\n" +
			"PREFIX dt get 2 hit 1 set 2 del 1\r\nEND\r\n" +
			"CLIENT_ERROR usage: stats detail on|off|dump\r\nOK\r\n" +
			"VALUE dt:b 0 2\r\nxy\r\nEND\r\nPREFIX dt get 2 hit 1 set 2 del 1\r\nEND\r\n")
	}},
	{name: "storage commands", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set st:a 0 0 5\r\nhello\r\n", "STORED\r\n")
		c.roundTrip("get st:a\r\n", "VALUE st:a 0 5\r\nhello\r\nEND\r\n")
		c.roundTrip("add st:a 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
		c.roundTrip("add st:b 7 0 2\r\nbb\r\n", "STORED\r\n")
		c.roundTrip("replace st:c 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
		c.roundTrip("replace st:a 3 0 5\r\nHELLO\r\n", "STORED\r\n")
		c.roundTrip("append st:a 0 0 3\r\n!!!\r\n", "STORED\r\n")
		c.roundTrip("prepend st:a 0 0 2\r\n>>\r\n", "STORED\r\n")
		c.roundTrip("append st:missing 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
		c.roundTrip("prepend st:missing 0 0 1\r\nx\r\n", "NOT_STORED\r\n")
		c.roundTrip("get st:a st:b st:c st:missing\r\n",
			"VALUE st:a 3 10\r\n>>HELLO!!!\r\nVALUE st:b 7 2\r\nbb\r\nEND\r\n")
		// A key asked for twice is returned twice.
		c.roundTrip("get st:b st:b\r\n", "VALUE st:b 7 2\r\nbb\r\nVALUE st:b 7 2\r\nbb\r\nEND\r\n")
		// Empty value, largest flags, and a binary value holding CR, LF and NUL.
		c.roundTrip("set st:e 0 0 0\r\n\r\n", "STORED\r\n")
		c.roundTrip("get st:e\r\n", "VALUE st:e 0 0\r\n\r\nEND\r\n")
		c.roundTrip("set st:f 4294967295 0 1\r\nx\r\n", "STORED\r\n")
		c.roundTrip("get st:f\r\n", "VALUE st:f 4294967295 1\r\nx\r\nEND\r\n")
		bin := "a\r\nb\x00\xff\n"
		c.roundTrip(fmt.Sprintf("set st:bin 0 0 %d\r\n%s\r\n", len(bin), bin), "STORED\r\n")
		c.roundTrip("get st:bin\r\n", fmt.Sprintf("VALUE st:bin 0 %d\r\n%s\r\nEND\r\n", len(bin), bin))
		// A 250-byte key is the longest allowed.
		k := key250()
		c.roundTrip("set "+k+" 1 0 3\r\nabc\r\n", "STORED\r\n")
		c.roundTrip("get "+k+"\r\n", "VALUE "+k+" 1 3\r\nabc\r\nEND\r\n")
		c.roundTrip("delete "+k+"\r\n", "DELETED\r\n")
	}},
	{name: "delete", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set dl:a 0 0 1\r\nx\r\n", "STORED\r\n")
		c.roundTrip("delete dl:a\r\n", "DELETED\r\n")
		c.roundTrip("delete dl:a\r\n", "NOT_FOUND\r\n")
		c.roundTrip("get dl:a\r\n", "END\r\n")
		c.roundTrip("set dl:a 0 0 1\r\nx\r\n", "STORED\r\n")
		c.roundTrip("delete dl:a 0\r\n", "DELETED\r\n")
		c.roundTrip("delete dl:a 1\r\n", "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n")
		c.roundTrip("delete\r\n", "ERROR\r\n")
	}},
	{name: "touch", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("touch to:a 100\r\n", "NOT_FOUND\r\n")
		c.roundTrip("set to:a 2 0 1\r\nx\r\n", "STORED\r\n")
		c.roundTrip("touch to:a 100\r\n", "TOUCHED\r\n")
		c.roundTrip("get to:a\r\n", "VALUE to:a 2 1\r\nx\r\nEND\r\n")
		c.roundTrip("touch to:a\r\n", "ERROR\r\n")
		c.roundTrip("touch to:a abc\r\n", "CLIENT_ERROR invalid exptime argument\r\n")
		// A negative expiry expires the item at once.
		c.roundTrip("touch to:a -1\r\n", "TOUCHED\r\n")
		c.roundTrip("get to:a\r\n", "END\r\n")
	}},
	{name: "gets and cas", run: func(t *testing.T, c *rawConn, tg *target) {
		c.roundTrip("set cs:a 5 0 3\r\none\r\n", "STORED\r\n")
		c.roundTrip("set cs:b 0 0 1\r\nb\r\n", "STORED\r\n")
		casA := gets(t, c, "cs:a", 5, "one")
		casB := gets(t, c, "cs:b", 0, "b")
		assert.NotEqual(t, casA, casB, "two items share a cas unique")
		// gets of several keys returns each with its own cas.
		c.send("gets cs:a cs:nope cs:b\r\n")
		m := c.readLineMatch(reGetsValue)
		require.Equal(t, []string{"cs:a", "5", "3", strconv.FormatUint(casA, 10)}, m[1:])
		c.expect("one\r\n")
		m = c.readLineMatch(reGetsValue)
		require.Equal(t, []string{"cs:b", "0", "1", strconv.FormatUint(casB, 10)}, m[1:])
		c.expect("b\r\nEND\r\n")
		// A wrong unique is refused and changes nothing.
		c.roundTrip(fmt.Sprintf("cas cs:a 0 0 3 %d\r\nbad\r\n", casA+1), "EXISTS\r\n")
		require.Equal(t, casA, gets(t, c, "cs:a", 5, "one"))
		// The right unique stores, with the new flags, and gives a new unique.
		c.roundTrip(fmt.Sprintf("cas cs:a 9 0 3 %d\r\ntwo\r\n", casA), "STORED\r\n")
		casA2 := gets(t, c, "cs:a", 9, "two")
		assert.NotEqual(t, casA, casA2, "cas unique did not change on update")
		// The old unique is now stale.
		c.roundTrip(fmt.Sprintf("cas cs:a 0 0 3 %d\r\nold\r\n", casA), "EXISTS\r\n")
		// Any other write changes the unique too.
		c.roundTrip("set cs:a 9 0 5\r\nthree\r\n", "STORED\r\n")
		c.roundTrip(fmt.Sprintf("cas cs:a 0 0 3 %d\r\nold\r\n", casA2), "EXISTS\r\n")
		casA3 := gets(t, c, "cs:a", 9, "three")
		assert.NotEqual(t, casA2, casA3)
		c.roundTrip("cas cs:nope 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n")
		// cas with noreply sends nothing but stores.
		c.send(fmt.Sprintf("cas cs:a 1 0 4 %d noreply\r\nfour\r\n", casA3))
		c.roundTrip("get cs:a\r\n", "VALUE cs:a 1 4\r\nfour\r\nEND\r\n")
		// Malformed cas lines.
		c.roundTrip("cas cs:a 0 0 1\r\ny\r\n", "ERROR\r\nERROR\r\n")
		c.roundTrip("cas cs:a 0 0 1 abc\r\ny\r\n", "CLIENT_ERROR bad command line format\r\n"+dataLineReply(tg))
		c.roundTrip("get cs:a\r\n", "VALUE cs:a 1 4\r\nfour\r\nEND\r\n")
	}},
	{name: "gat and gats", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set ga:a 5 0 1\r\nx\r\n", "STORED\r\n")
		c.roundTrip("gat 100 ga:a\r\n", "VALUE ga:a 5 1\r\nx\r\nEND\r\n")
		c.roundTrip("gat 100 ga:nope\r\n", "END\r\n")
		casA := gets(t, c, "ga:a", 5, "x")
		c.send("gats 100 ga:a ga:nope\r\n")
		m := c.readLineMatch(reGetsValue)
		require.Equal(t, []string{"ga:a", "5", "1", strconv.FormatUint(casA, 10)}, m[1:])
		c.expect("x\r\nEND\r\n")
		c.roundTrip("gat\r\n", "ERROR\r\n")
		c.roundTrip("gat x ga:a\r\n", "CLIENT_ERROR invalid exptime argument\r\n")
		// A negative expiry returns the item and expires it.
		c.roundTrip("gat -1 ga:a\r\n", "VALUE ga:a 5 1\r\nx\r\nEND\r\n")
		c.roundTrip("get ga:a\r\n", "END\r\n")
	}},
	{name: "noreply forms send nothing", run: func(t *testing.T, c *rawConn, _ *target) {
		c.send("set nr:a 0 0 1 noreply\r\nx\r\n" +
			"add nr:a 0 0 1 noreply\r\ny\r\n" + // NOT_STORED, silently
			"replace nr:a 0 0 1 noreply\r\nz\r\n" +
			"append nr:a 0 0 1 noreply\r\n1\r\n" +
			"prepend nr:a 0 0 1 noreply\r\n0\r\n" +
			"replace nr:nope 0 0 1 noreply\r\nq\r\n" +
			"set nr:n 0 0 2 noreply\r\n10\r\n" +
			"incr nr:n 5 noreply\r\n" +
			"decr nr:n 3 noreply\r\n" +
			"incr nr:nope 1 noreply\r\n" +
			"incr nr:a 1 noreply\r\n" + // non-numeric: the error is not sent either
			"set nr:d 0 0 1 noreply\r\nd\r\n" +
			"touch nr:d 100 noreply\r\n" +
			"delete nr:d noreply\r\n" +
			"delete nr:d noreply\r\n" +
			"touch nr:d 100 noreply\r\n" +
			"cas nr:nope 0 0 1 5 noreply\r\nx\r\n" +
			"verbosity 1 noreply\r\n")
		c.roundTrip("get nr:a nr:n nr:d nr:nope\r\n", "VALUE nr:a 0 3\r\n0z1\r\nVALUE nr:n 0 2\r\n12\r\nEND\r\n")
	}},
	{name: "incr and decr", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("incr in:nope 1\r\n", "NOT_FOUND\r\n")
		c.roundTrip("decr in:nope 1\r\n", "NOT_FOUND\r\n")
		c.roundTrip("set in:n 7 0 2\r\n10\r\n", "STORED\r\n")
		c.roundTrip("incr in:n 5\r\n", "15\r\n")
		c.roundTrip("decr in:n 3\r\n", "12\r\n")
		c.roundTrip("incr in:n 0\r\n", "12\r\n")
		c.roundTrip("get in:n\r\n", "VALUE in:n 7 2\r\n12\r\nEND\r\n") // flags kept
		// decr clamps at zero.
		c.roundTrip("decr in:n 100\r\n", "0\r\n")
		c.roundTrip("decr in:n 1\r\n", "0\r\n")
		// incr wraps at 2^64.
		c.roundTrip("incr in:n 18446744073709551615\r\n", "18446744073709551615\r\n")
		c.roundTrip("incr in:n 2\r\n", "1\r\n")
		c.roundTrip("set in:w 0 0 20\r\n18446744073709551615\r\n", "STORED\r\n")
		c.roundTrip("incr in:w 1\r\n", "0\r\n")
		// A result with more digits than the stored value grows the value.
		c.roundTrip("set in:g 0 0 1\r\n9\r\n", "STORED\r\n")
		c.roundTrip("incr in:g 1\r\n", "10\r\n")
		c.roundTrip("get in:g\r\n", "VALUE in:g 0 2\r\n10\r\nEND\r\n")
		c.roundTrip("incr in:g 18446744073709551000\r\n", "18446744073709551010\r\n")
		c.roundTrip("get in:g\r\n", "VALUE in:g 0 20\r\n18446744073709551010\r\nEND\r\n")
		// memcached pads a shortened number with spaces; such a value still counts.
		c.roundTrip("set in:sp 0 0 3\r\n5  \r\n", "STORED\r\n")
		c.roundTrip("incr in:sp 1\r\n", "6\r\n")
		// Non-numeric values.
		const nonNumeric = "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
		c.roundTrip("set in:s 0 0 2\r\nab\r\n", "STORED\r\n")
		c.roundTrip("incr in:s 1\r\n", nonNumeric)
		c.roundTrip("decr in:s 1\r\n", nonNumeric)
		c.roundTrip("set in:neg 0 0 2\r\n-1\r\n", "STORED\r\n")
		c.roundTrip("incr in:neg 1\r\n", nonNumeric)
		c.roundTrip("set in:long 0 0 25\r\n1234567890123456789012345\r\n", "STORED\r\n")
		c.roundTrip("incr in:long 1\r\n", nonNumeric)
		c.roundTrip("get in:s\r\n", "VALUE in:s 0 2\r\nab\r\nEND\r\n") // unchanged
		// Bad deltas.
		const badDelta = "CLIENT_ERROR invalid numeric delta argument\r\n"
		c.roundTrip("incr in:n abc\r\n", badDelta)
		c.roundTrip("incr in:n -1\r\n", badDelta)
		c.roundTrip("decr in:n 18446744073709551616\r\n", badDelta)
		c.roundTrip("incr in:n\r\n", "ERROR\r\n")
		c.roundTrip("incr in:n 0\r\n", "1\r\n")
	}},
	{name: "unknown and malformed commands", run: func(t *testing.T, c *rawConn, tg *target) {
		c.roundTrip("bogus\r\n", "ERROR\r\n")
		c.roundTrip("GET mf:a\r\n", "ERROR\r\n") // commands are case-sensitive
		c.roundTrip("\r\n", "ERROR\r\n")
		c.roundTrip("set mf:a 0 0\r\n", "ERROR\r\n") // length missing: no data expected
		c.roundTrip("set mf:a abc 0 1\r\nx\r\n", "CLIENT_ERROR bad command line format\r\n"+dataLineReply(tg))
		c.roundTrip("set mf:a 0 abc 1\r\nx\r\n", "CLIENT_ERROR bad command line format\r\n"+dataLineReply(tg))
		c.roundTrip("set mf:a 0 0 abc\r\n", "CLIENT_ERROR bad command line format\r\n")
		c.roundTrip("set mf:a 0 0 -1\r\n", "CLIENT_ERROR bad command line format\r\n")
		c.roundTrip("get\r\n", "ERROR\r\n")
		c.roundTrip("gets\r\n", "ERROR\r\n")
		c.roundTrip("incr mf:a abc\r\n", "CLIENT_ERROR invalid numeric delta argument\r\n")
		c.roundTrip("verbosity\r\n", "ERROR\r\n")
		c.roundTrip("verbosity x\r\n", "CLIENT_ERROR bad command line format\r\n")
		c.roundTrip("flush_all x\r\n", "CLIENT_ERROR invalid exptime argument\r\n")
		c.roundTrip("stats bogus\r\n", "ERROR\r\n")
		// None of the malformed sets stored anything.
		c.roundTrip("get mf:a\r\n", "END\r\n")
	}},
	{name: "value longer than declared", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set bd:a 0 0 1\r\nA\r\n", "STORED\r\n")
		// memcached reads the declared 3 bytes plus two, finds "d\r" instead of
		// "\r\n", and then parses the leftover "\n" as an (empty) command line.
		c.roundTrip("set bd:a 0 0 3\r\nabcd\r\n", "CLIENT_ERROR bad data chunk\r\nERROR\r\n")
		c.roundTrip("get bd:a\r\n", "VALUE bd:a 0 1\r\nA\r\nEND\r\n")
	}},
	{name: "value larger than item size max", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set ov:a 0 0 1\r\nx\r\n", "STORED\r\n")
		const n = 2000000
		c.send(fmt.Sprintf("set ov:a 0 0 %d\r\n", n) + strings.Repeat("z", n) + "\r\n")
		c.expect("SERVER_ERROR object too large for cache\r\n")
		// The data was swallowed (the next command is understood) and the
		// previous value was unlinked, as memcached does.
		c.roundTrip("get ov:a\r\n", "END\r\n")
		c.roundTrip("set ov:a 0 0 2\r\nok\r\n", "STORED\r\n")
		c.roundTrip("get ov:a\r\n", "VALUE ov:a 0 2\r\nok\r\nEND\r\n")
	}},
	{name: "absurd value length", run: func(t *testing.T, c *rawConn, _ *target) {
		// Past INT_MAX-2 the command line is malformed: nothing is swallowed,
		// so the next line runs as a command.
		c.roundTrip("set ab:a 0 0 2147483646\r\nget ab:a\r\n", "CLIENT_ERROR bad command line format\r\nEND\r\n")
		c.roundTrip("ms ab:a 2147483646\r\nmn\r\n", "CLIENT_ERROR bad command line format\r\nMN\r\n")
	}},
	{name: "key of 251 bytes", run: func(t *testing.T, c *rawConn, tg *target) {
		k := key251()
		const bad = "CLIENT_ERROR bad command line format\r\n"
		c.roundTrip("set "+k+" 0 0 1\r\nx\r\n", bad+dataLineReply(tg))
		c.roundTrip("get "+k+"\r\n", bad)
		c.roundTrip("get ok "+k+"\r\n", bad)
		c.roundTrip("delete "+k+"\r\n", bad)
		c.roundTrip("incr "+k+" 1\r\n", bad)
		c.roundTrip("touch "+k+" 1\r\n", bad)
	}},
	{name: "flush_all", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("set fa:a 0 0 1\r\na\r\nset fa:b 0 0 1\r\nb\r\n", "STORED\r\nSTORED\r\n")
		c.roundTrip("flush_all\r\n", "OK\r\n")
		c.roundTrip("get fa:a fa:b\r\n", "END\r\n")
		c.roundTrip("set fa:a 0 0 1\r\nA\r\n", "STORED\r\n")
		c.roundTrip("get fa:a\r\n", "VALUE fa:a 0 1\r\nA\r\nEND\r\n")
		c.roundTrip("flush_all 0\r\n", "OK\r\n")
		c.roundTrip("get fa:a\r\n", "END\r\n")
		c.roundTrip("set fa:a 0 0 1\r\nA\r\n", "STORED\r\n")
		c.send("flush_all noreply\r\n")
		c.roundTrip("get fa:a\r\n", "END\r\n")
		c.roundTrip("flush_all 1 2 3\r\n", "ERROR\r\n")
	}},
	{name: "version", run: func(t *testing.T, c *rawConn, tg *target) {
		c.send("version\r\n")
		m := c.readLineMatch(reVersion)
		if !tg.isReference() {
			assert.True(t, strings.HasPrefix(m[1], "1.6.0-ndbgate-"), "version %q, want 1.6.0-ndbgate-<version>", m[1])
		}
	}},
	{name: "verbosity", run: func(t *testing.T, c *rawConn, _ *target) {
		c.roundTrip("verbosity 1\r\n", "OK\r\n")
		c.roundTrip("verbosity 0\r\n", "OK\r\n")
		c.send("verbosity 1 noreply\r\n")
	}},
	{name: "quit closes the connection", closes: true, run: func(t *testing.T, c *rawConn, _ *target) {
		c.send("set qu:a 0 0 1\r\nx\r\nquit\r\nget qu:a\r\n")
		c.expect("STORED\r\n")
		c.expectClosed()
	}},
	{name: "pipelined commands in one write", run: func(t *testing.T, c *rawConn, _ *target) {
		var req, want strings.Builder
		for i := 0; i < 100; i++ {
			v := strings.Repeat(strconv.Itoa(i%10), i+1)
			fmt.Fprintf(&req, "set pl:%d %d 0 %d\r\n%s\r\n", i, i, len(v), v)
			want.WriteString("STORED\r\n")
			fmt.Fprintf(&req, "get pl:%d pl:none\r\n", i)
			fmt.Fprintf(&want, "VALUE pl:%d %d %d\r\n%s\r\nEND\r\n", i, i, len(v), v)
			switch i % 5 {
			case 0:
				fmt.Fprintf(&req, "add pl:%d 0 0 1\r\nx\r\n", i)
				want.WriteString("NOT_STORED\r\n")
			case 1:
				fmt.Fprintf(&req, "delete pl:%d\r\n", i)
				want.WriteString("DELETED\r\n")
			case 2:
				fmt.Fprintf(&req, "touch pl:%d 1000\r\n", i)
				want.WriteString("TOUCHED\r\n")
			case 3:
				fmt.Fprintf(&req, "bogus %d\r\n", i)
				want.WriteString("ERROR\r\n")
			case 4:
				fmt.Fprintf(&req, "set pl:n%d 0 0 1 noreply\r\n7\r\nincr pl:n%d %d\r\n", i, i, i)
				fmt.Fprintf(&want, "%d\r\n", 7+i)
			}
		}
		req.WriteString("get pl:0 pl:1 pl:2\r\n")
		want.WriteString("VALUE pl:0 0 1\r\n0\r\nVALUE pl:2 2 3\r\n222\r\nEND\r\n")
		c.send(req.String())
		c.expect(want.String())
	}},
	{name: "commands split across many small writes", run: func(t *testing.T, c *rawConn, _ *target) {
		req := "set sp:a 3 0 10\r\n0123456789\r\nget sp:a\r\nappend sp:a 0 0 2\r\n\r\n\r\nget sp:a sp:b\r\nincr sp:x 1\r\ndelete sp:a\r\n"
		want := "STORED\r\nVALUE sp:a 3 10\r\n0123456789\r\nEND\r\nSTORED\r\nVALUE sp:a 3 12\r\n0123456789\r\n\r\nEND\r\nNOT_FOUND\r\nDELETED\r\n"
		for i := 0; i < len(req); i += 3 {
			c.send(req[i:min(i+3, len(req))])
			time.Sleep(time.Millisecond)
		}
		c.expect(want)
	}},
}

// TestProtocol runs every protoCase, each on its own connection, against
// memcached (reference) and ndbgate.
func TestProtocol(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		for _, pc := range protoCases {
			t.Run(strings.ReplaceAll(pc.name, " ", "_"), func(t *testing.T) {
				c := dialRaw(t, tg.addr)
				pc.run(t, c, tg)
				if !pc.closes {
					c.expectSentinel()
				}
			})
		}
	})
}

// TestFlushAllDelayed: "flush_all 2" leaves items readable at first and removes
// them (including ones written after the command) once the delay has passed.
func TestFlushAllDelayed(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		c := dialRaw(t, tg.addr)
		c.roundTrip("set fd:a 0 0 1\r\na\r\n", "STORED\r\n")
		c.roundTrip("flush_all 2\r\n", "OK\r\n")
		c.roundTrip("get fd:a\r\n", "VALUE fd:a 0 1\r\na\r\nEND\r\n")
		c.roundTrip("set fd:b 0 0 1\r\nb\r\n", "STORED\r\n")
		c.roundTrip("get fd:a fd:b\r\n", "VALUE fd:a 0 1\r\na\r\nVALUE fd:b 0 1\r\nb\r\nEND\r\n")
		start := time.Now()
		gone := waitFor(5*time.Second, func() bool {
			c.send("get fd:a fd:b\r\n")
			return len(c.readUntilEnd(10)) == 0
		})
		require.True(t, gone, "items still there %v after flush_all 2", time.Since(start))
		t.Logf("flush_all 2 took effect after %v", time.Since(start))
		// memcached's flush clock has one-second resolution: an item written in
		// the second the flush takes effect is flushed too. Write the next one a
		// second later.
		time.Sleep(1100 * time.Millisecond)
		c.roundTrip("set fd:c 0 0 1\r\nc\r\n", "STORED\r\n")
		c.roundTrip("get fd:a fd:b fd:c\r\n", "VALUE fd:c 0 1\r\nc\r\nEND\r\n")

		// A delay past 30 days is a unix time, as an exptime is (memcached's
		// own t/flush-all.t): not 56 years from now.
		c.roundTrip(fmt.Sprintf("flush_all %d\r\n", time.Now().Unix()+2), "OK\r\n")
		c.roundTrip("get fd:c\r\n", "VALUE fd:c 0 1\r\nc\r\nEND\r\n")
		start = time.Now()
		gone = waitFor(6*time.Second, func() bool {
			c.send("get fd:c\r\n")
			return len(c.readUntilEnd(10)) == 0
		})
		require.True(t, gone, "fd:c still there %v after flush_all at a unix time 2 s ahead", time.Since(start))
		c.expectSentinel()
	})
}

// TestExpiry covers relative and absolute expiry times and their interplay
// with touch and gat.
func TestExpiry(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		c := dialRaw(t, tg.addr)
		now := time.Now().Unix()
		c.roundTrip("set ex:short 0 1 1\r\na\r\n", "STORED\r\n")
		c.roundTrip("set ex:touched 0 1 1\r\nb\r\n", "STORED\r\n")
		c.roundTrip("touch ex:touched 100\r\n", "TOUCHED\r\n")
		c.roundTrip("set ex:gat 0 1 1\r\nc\r\n", "STORED\r\n")
		c.roundTrip("gat 100 ex:gat\r\n", "VALUE ex:gat 0 1\r\nc\r\nEND\r\n")
		c.roundTrip("set ex:shortened 0 100 1\r\nd\r\n", "STORED\r\n")
		c.roundTrip("touch ex:shortened 1\r\n", "TOUCHED\r\n")
		c.roundTrip("set ex:forever 0 0 1\r\ne\r\n", "STORED\r\n")
		c.roundTrip(fmt.Sprintf("set ex:abs 0 %d 1\r\nf\r\n", now+100), "STORED\r\n")
		c.roundTrip(fmt.Sprintf("set ex:abspast 0 %d 1\r\ng\r\n", now-100), "STORED\r\n")
		c.roundTrip("set ex:neg 0 -1 1\r\nh\r\n", "STORED\r\n")
		c.roundTrip("get ex:abspast ex:neg\r\n", "END\r\n")
		c.roundTrip("get ex:short ex:shortened\r\n", "VALUE ex:short 0 1\r\na\r\nVALUE ex:shortened 0 1\r\nd\r\nEND\r\n")
		time.Sleep(2500 * time.Millisecond)
		c.roundTrip("get ex:short ex:touched ex:gat ex:shortened ex:forever ex:abs\r\n",
			"VALUE ex:touched 0 1\r\nb\r\nVALUE ex:gat 0 1\r\nc\r\nVALUE ex:forever 0 1\r\ne\r\nVALUE ex:abs 0 1\r\nf\r\nEND\r\n")
		c.roundTrip("touch ex:short 100\r\n", "NOT_FOUND\r\n")
		c.roundTrip("add ex:short 0 0 1\r\nA\r\n", "STORED\r\n")
		c.roundTrip("get ex:short\r\n", "VALUE ex:short 0 1\r\nA\r\nEND\r\n")
	})
}

// A binary SET or SETQ refused as too large drops the key's old item, with a
// cas too (memcached tests the opcode, not the command's kind); an ADD or
// REPLACE refused so keeps it.
func TestBinaryRefusedStores(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		c := dialRaw(t, tg.addr)
		defer c.close()
		extras := make([]byte, 8) // flags, exptime
		big := []byte(strings.Repeat("z", 2000000))
		withCas := func(req []byte, cas uint64) string {
			binary.BigEndian.PutUint64(req[16:], cas)
			return string(req)
		}
		for _, step := range []struct {
			name  string
			op    byte
			cas   uint64
			drops bool
		}{
			{"SET", 0x01, 0, true}, {"SET with a cas", 0x01, 12345, true}, {"SETQ with a cas", 0x11, 12345, true},
			{"REPLACE", 0x03, 0, false}, {"REPLACE with a cas", 0x03, 12345, false},
		} {
			c.send(string(binRequest(0x01, []byte("rb:k"), extras, []byte("old"), 1)))
			st, _, _ := readBinResponse(t, c)
			require.Equal(t, uint16(0), st, "%s: the old item is stored", step.name)
			c.send(withCas(binRequest(step.op, []byte("rb:k"), extras, big, 2), step.cas))
			st, _, _ = readBinResponse(t, c)
			assert.Equal(t, uint16(0x0003), st, "%s: too large", step.name)
			c.send(string(binRequest(0x00, []byte("rb:k"), nil, nil, 3)))
			st, _, body := readBinResponse(t, c)
			if step.drops {
				assert.Equal(t, uint16(0x0001), st, "%s: the old item is gone", step.name)
			} else {
				assert.Equal(t, uint16(0), st, "%s: the old item stays", step.name)
				assert.True(t, strings.HasSuffix(body, "old"), "%s: the old item stays", step.name)
			}
		}
	})
}
