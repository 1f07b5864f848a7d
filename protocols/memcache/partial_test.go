package memcache

import (
	"bufio"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Values still arriving are held whole until they are all here. Together
// they stay within Config.PartialBytes: past it a storage command is refused
// as memcached refuses a value it has no memory for (its data swallowed, and
// a set's old item dropped), and the budget comes back as values complete or
// their connections close. Without the bound, 150 clients that each start a
// 1 MB set and stall held 311 MB under --memory-limit 64m.
func TestPartialValuesStayWithinTheirBudget(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		const value = 1_000_000
		addr, srv := startServerConfig(t, Config{EventLoop: loop, PartialBytes: 2_500_000}, newEngine(t))
		waitHeld := func(t *testing.T, atLeast int64) {
			t.Helper()
			require.Eventually(t, func() bool { return srv.partial.Load() >= atLeast }, 5*time.Second, time.Millisecond,
				"held %d, want at least %d", srv.partial.Load(), atLeast)
		}
		data := []byte(strings.Repeat("v", value))
		header := func(key string) string { return "set " + key + " 0 0 1000000\r\n" }

		ctl := dialServer(t, addr, 10*time.Second)
		ctlR := bufio.NewReader(ctl)
		_, err := ctl.Write([]byte("set c 0 0 3\r\nold\r\n"))
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, ctlR, 1))
		stats := newTextSession(t, addr)
		noMemory, tooLarge := stats.stat("store_no_memory"), stats.stat("store_too_large")

		// Two values start and stall: 2 MB of the 2.5 MB held.
		a, b := dialServer(t, addr, 10*time.Second), dialServer(t, addr, 10*time.Second)
		for i, c := range []net.Conn{a, b} {
			_, err := c.Write(append([]byte(header(string(rune('a'+i)))), data[:100]...))
			require.NoError(t, err)
			waitHeld(t, int64(i+1)*value)
		}

		// A third does not fit: refused at once, not held.
		cc := dialServer(t, addr, 10*time.Second)
		ccR := bufio.NewReader(cc)
		_, err = cc.Write(append([]byte(header("c")), data[:100]...))
		require.NoError(t, err)
		require.Equal(t, []string{"SERVER_ERROR out of memory storing object\r\n"}, readLines(t, ccR, 1))
		assert.Less(t, srv.partial.Load(), int64(2_500_000))
		// The rest of its data is swallowed, and the connection goes on.
		_, err = cc.Write(append(data[100:], "\r\nget c\r\n"...))
		require.NoError(t, err)
		require.Equal(t, []string{"END\r\n"}, readLines(t, ccR, 1), "the refused set dropped the old value, as memcached does")

		// Binary and meta sets are refused alike.
		bin := dialServer(t, addr, 10*time.Second)
		req := make([]byte, 24+8+1)
		req[0], req[1] = binReqMagic, opSet
		binary.BigEndian.PutUint16(req[2:], 1)
		req[4] = 8
		binary.BigEndian.PutUint32(req[8:], 8+1+value)
		binary.BigEndian.PutUint32(req[12:], 0xfeed)
		req[32] = 'd'
		_, err = bin.Write(append(req, data[:100]...))
		require.NoError(t, err)
		resp := make([]byte, 24)
		_, err = bufio.NewReader(bin).Read(resp)
		require.NoError(t, err)
		assert.Equal(t, uint16(statusOutOfMemory), binary.BigEndian.Uint16(resp[6:]), "binary: out of memory (0x82)")
		assert.Equal(t, uint32(0xfeed), binary.BigEndian.Uint32(resp[12:]))
		meta := dialServer(t, addr, 10*time.Second)
		_, err = meta.Write(append([]byte("ms m 1000000 T0\r\n"), data[:100]...))
		require.NoError(t, err)
		require.Equal(t, []string{"SERVER_ERROR out of memory storing object\r\n"}, readLines(t, bufio.NewReader(meta), 1))
		// A noreply set is refused alike, in silence.
		quiet := newTextSession(t, addr)
		_, err = quiet.conn.Write(append([]byte("set e 0 0 1000000 noreply\r\n"), data[:100]...))
		require.NoError(t, err)
		assert.Equal(t, "MN\r\n", quiet.send(string(data[100:])+"\r\nmn\r\n", 1))
		// Each counts in store_no_memory, as memcached counts a value it has
		// no memory for, except the binary one (memcached 1.6.18 counts no
		// binary store there); none counts as too large.
		assert.Equal(t, noMemory+3, stats.stat("store_no_memory"), "text, meta and noreply text refusals")
		assert.Equal(t, tooLarge, stats.stat("store_too_large"))

		// a completes; its budget comes back, and so does b's when b hangs up.
		_, err = a.Write(append(data[100:], "\r\n"...))
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, bufio.NewReader(a), 1))
		require.NoError(t, b.Close())
		require.Eventually(t, func() bool { return srv.partial.Load() == 0 }, 5*time.Second, time.Millisecond, "held %d", srv.partial.Load())
		_, err = cc.Write(append(append([]byte(header("c")), data...), "\r\n"...))
		require.NoError(t, err)
		require.Equal(t, []string{"STORED\r\n"}, readLines(t, ccR, 1))
	})
}
