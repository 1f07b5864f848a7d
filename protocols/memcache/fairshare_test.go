package memcache

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
)

// serveAll serves in until a call uses none of it; it returns what is left.
func serveAll(cs *connState, in []byte) []byte {
	for len(in) > 0 {
		used := cs.serve(in)
		if used == 0 {
			break
		}
		in = in[used:]
	}
	return in
}

// heldService is a gateway over the embedded engine whose batches wait
// until the test releases them (ndbclienttest.Hold), for the demo
// container with values of up to 1 MiB.
func heldService(t *testing.T, cfg ndbclient.DispatchConfig) (*ndbclienttest.Held, *gateway.Service) {
	t.Helper()
	drv := ndbclienttest.Hold(newEngine(t))
	tbl, err := drv.CreateTable(gateway.DemoTable(1 << 20))
	require.NoError(t, err)
	ct, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{
		Backend: ndbclient.NewClientWith(drv, cfg),
		Routes:  []gateway.Route{{Container: ct}},
	})
	require.NoError(t, err)
	return drv, svc
}

// A connection stops being read once its commands hold MaxPendingKeys
// keys at the gateway, or fairShareKeys while the dispatcher is crowded;
// another connection is then still admitted, not refused as overloaded,
// and every reply comes once the backend answers.
func TestAConnectionHoldsItsShareOfKeys(t *testing.T) {
	const maxInFlight = 1024 // crowded from 512
	drv, svc := heldService(t, ndbclient.DispatchConfig{Lanes: true, MaxInFlight: maxInFlight})
	srv := NewServer(Config{MaxPending: 1024, MaxPendingKeys: 384, Version: "test"}, svc, discardLog)
	gets := func(n int) []byte { return []byte(strings.Repeat("get fs:x\r\n", n)) }

	// Uncrowded, a pipeline stops at MaxPendingKeys: three runs of 128.
	a, ra := recordedConn(srv)
	restA := serveAll(a, gets(2000))
	assert.Equal(t, 384, a.keysOut)
	assert.Equal(t, 2000-384, len(restA)/len("get fs:x\r\n"))
	assert.False(t, svc.Crowded())

	// A second pipeline makes the dispatcher crowded (512 in flight) and
	// then holds no more than fairShareKeys.
	b, rb := recordedConn(srv)
	restB := serveAll(b, gets(2000))
	assert.Equal(t, fairShareKeys, b.keysOut, "two runs of 128, then crowded")
	require.True(t, svc.Crowded())

	// A connection with few keys out is still served.
	c, rc := recordedConn(srv)
	assert.Empty(t, serveAll(c, gets(10)))
	assert.Equal(t, 10, c.keysOut)

	// The backend answers: every reply comes, none refused.
	for len(restA)+len(restB) > 0 || drv.Pending() {
		drv.Release()
		for _, p := range []*connState{a, b, c} {
			p.flush()
		}
		restA, restB = serveAll(a, restA), serveAll(b, restB)
	}
	for _, p := range []*connState{a, b, c} {
		p.flush()
		assert.Zero(t, p.keysOut)
	}
	assert.Equal(t, strings.Repeat("END\r\n", 2000), string(ra.out))
	assert.Equal(t, strings.Repeat("END\r\n", 2000), string(rb.out))
	assert.Equal(t, strings.Repeat("END\r\n", 10), string(rc.out))
}

// A connection's requests are bulk (gateway.Request.Bulk) once its earlier
// commands hold bulkFromKeys keys at the gateway: a pipeline of 16 single
// gets is not, nor are the pieces of one 100-key get (16 keys each here,
// where a value may take 1 MiB).
func TestRequestsAreBulkPastAFewKeys(t *testing.T) {
	drv, svc := heldService(t, ndbclient.DispatchConfig{Lanes: true})
	require.Equal(t, 16, svc.MultiGetPiece())
	srv := NewServer(Config{MaxPending: 1024, MaxPendingKeys: 4096, Version: "test"}, svc, discardLog)
	cs, _ := recordedConn(srv)
	get := func(keys int) string { return "get" + strings.Repeat(" bk:x", keys) + "\r\n" }
	bulk := func() []bool {
		var b []bool
		for _, p := range cs.queue {
			b = append(b, p.req.Bulk)
		}
		return b
	}
	none := func(n int) []bool { return make([]bool, n) }

	require.Empty(t, serveAll(cs, []byte(strings.Repeat(get(1), 16))))
	require.Empty(t, serveAll(cs, []byte(get(bulkFromKeys-16-1))))
	assert.Equal(t, none(2), bulk(), "16 pipelined gets in one run, then a get of 15 keys")
	require.Empty(t, serveAll(cs, []byte(get(100))))
	assert.Equal(t, none(2+7), bulk(), "a 100-key get in 7 pieces, counted from before it")
	require.Empty(t, serveAll(cs, []byte(get(1))))
	assert.Equal(t, append(none(2+7), true), bulk(), "a get past the mark")
	for drv.Pending() {
		drv.Release()
	}
	cs.flush()
	assert.Zero(t, cs.keysOut)
	require.Empty(t, serveAll(cs, []byte(get(100)+get(1))))
	assert.Equal(t, append(none(7), true), bulk(), "answered, the connection held nothing before the 100-key get")
}
