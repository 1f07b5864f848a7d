package memcache

import (
	"bufio"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
)

// Every expectation below was taken from memcached 1.6.18 given the same bytes.

// Text "stats detail": sent as one write, so each stats line must count
// every command before it, as memcached's sequential loop does.
func TestStatsDetailText(t *testing.T) {
	forEachLoop(t, func(t *testing.T, loop string) {
		addr, _ := startServerConfig(t, Config{EventLoop: loop}, newEngine(t))
		c := dialServer(t, addr, 10*time.Second)
		_, err := c.Write([]byte("stats detail on\r\nset a:b 0 0 1\r\nx\r\nget a:b a:c nokey\r\ndelete a:c\r\n" +
			"append a:b 0 0 1\r\ny\r\nstats detail dump\r\nstats detail\r\nstats detail foo\r\n" +
			"stats detail off\r\nget a:b\r\nstats detail dump\r\nstats reset\r\nstats detail dump\r\n"))
		require.NoError(t, err)
		want := "OK\r\nSTORED\r\nVALUE a:b 0 1\r\nx\r\nEND\r\nNOT_FOUND\r\nSTORED\r\n" +
			"PREFIX a get 2 hit 1 set 2 del 1\r\nEND\r\n" +
			"CLIENT_ERROR usage: stats detail on|off|dump\r\nCLIENT_ERROR usage: stats detail on|off|dump\r\n" +
			"OK\r\nVALUE a:b 0 2\r\nxy\r\nEND\r\n" +
			"PREFIX a get 2 hit 1 set 2 del 1\r\nEND\r\nRESET\r\nEND\r\n"
		got := make([]byte, len(want))
		_, err = readFull(c, got)
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
	})
}

// Binary stats "detail on|off|dump": on and off answer with the bare end of
// stats, dump with one stat "detailed" holding the text dump, anything else
// (including "detail" alone and "detaildump") with key-not-found.
func TestStatsDetailBinary(t *testing.T) {
	addr, _ := startServerConfig(t, Config{}, newEngine(t))
	c := dialServer(t, addr, 10*time.Second)
	send := func(b []byte) {
		_, err := c.Write(b)
		require.NoError(t, err)
	}
	end := func(r binResp, opaque uint32) {
		t.Helper()
		assert.Equal(t, binResp{op: opStat, opaque: opaque, extras: []byte{}, key: []byte{}, vb: []byte{}}, r)
	}
	notFound := func(opaque uint32) {
		t.Helper()
		r := readResp(t, c)
		assert.Equal(t, uint16(statusKeyNotFound), r.status)
		assert.Equal(t, "Not found", string(r.vb))
		assert.Equal(t, opaque, r.opaque)
	}
	send(binReq(opStat, []byte("detail on"), nil, nil, 1, 0))
	end(readResp(t, c), 1)
	send(binReq(opSet, []byte("p:k"), setExtras(0, 0), []byte("v"), 2, 0))
	send(binReq(opGet, []byte("p:k"), nil, nil, 3, 0))
	send(binReq(opGet, []byte("p:z"), nil, nil, 4, 0))
	send(binReq(opDelete, []byte("p:z"), nil, nil, 5, 0))
	assert.Equal(t, uint16(statusOK), readResp(t, c).status)
	assert.Equal(t, "v", string(readResp(t, c).vb))
	assert.Equal(t, uint16(statusKeyNotFound), readResp(t, c).status)
	assert.Equal(t, uint16(statusKeyNotFound), readResp(t, c).status)
	send(binReq(opStat, []byte("detail dump"), nil, nil, 6, 0))
	r := readResp(t, c)
	assert.Equal(t, "detailed", string(r.key))
	assert.Equal(t, "PREFIX p get 2 hit 1 set 1 del 1\r\nEND\r\n", string(r.vb))
	end(readResp(t, c), 6)
	send(binReq(opStat, []byte("detail bogus"), nil, nil, 7, 0))
	notFound(7)
	send(binReq(opStat, []byte("detail"), nil, nil, 8, 0))
	notFound(8)
	send(binReq(opStat, []byte("detail off"), nil, nil, 9, 0))
	end(readResp(t, c), 9)
	send(binReq(opStat, []byte("detaildump"), nil, nil, 10, 0))
	notFound(10)
}

// "stats settings" has the lines memcached's own binary.t checks.
func TestStatsSettingsLikeMemcached(t *testing.T) {
	addr, _ := startServerConfig(t, Config{Evictions: true}, newEngine(t))
	c := dialServer(t, addr, 10*time.Second)
	_, err := c.Write([]byte("stats settings\r\n"))
	require.NoError(t, err)
	r := bufio.NewReader(c)
	got := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if line == "END\r\n" {
			break
		}
		var name, value string
		_, err = fmt.Sscanf(line, "STAT %s %s\r\n", &name, &value)
		require.NoError(t, err, "%q", line)
		got[name] = value
	}
	for name, want := range map[string]string{
		"evictions": "on", "cas_enabled": "yes", "flush_enabled": "yes", "domain_socket": "NULL",
		"detail_enabled": "no", "stat_key_prefix": ":", "dump_enabled": "yes", "udpport": "0",
		"item_size_max": "1048576",
	} {
		assert.Equal(t, want, got[name], name)
	}
}

// The prefix table stops growing at memcached's bound, whatever keys
// clients send; known prefixes keep counting.
func TestPrefixStatsBounded(t *testing.T) {
	var ps prefixStats
	p := &pending{req: &gateway.Request{}, kind: CmdSet}
	p.req.Outcome = gateway.OutcomeStored
	for i := 0; i < maxPrefixes+100; i++ {
		p.req.Reset()
		p.req.Outcome = gateway.OutcomeStored
		p.req.AddKey(fmt.Appendf(nil, "p%d:k", i))
		ps.record(p)
	}
	assert.Len(t, ps.order, maxPrefixes)
	assert.Len(t, ps.byPrefix, maxPrefixes)
	p.req.Reset()
	p.req.Outcome = gateway.OutcomeStored
	p.req.AddKey([]byte("p7:other"))
	ps.record(p)
	assert.Equal(t, uint64(2), ps.byPrefix["p7"].sets)
}
