package memcache

import (
	"bufio"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
)

// Pipelined binary sets, quiet or not, go to the backend as one batch, and
// each answers for itself: SET with its own opaque and the new cas, SETQ
// not at all.
func TestBinarySetRunIsOneBatch(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)

	req := binReq(opSet, []byte("a"), setExtras(1, 0), []byte("va"), 1, 0)
	req = append(req, binReq(opSetQ, []byte("b"), setExtras(2, 0), []byte("vb"), 2, 0)...)
	req = append(req, binReq(opSet, []byte("c"), setExtras(3, 0), []byte("vc"), 3, 0)...)
	req = append(req, binReq(opNoop, nil, nil, nil, 4, 0)...)
	_, err := conn.Write(req)
	require.NoError(t, err)
	a, c, noop := readResp(t, conn), readResp(t, conn), readResp(t, conn)
	assert.Equal(t, []int{3}, drv.take(), "batch sizes")
	assert.Equal(t, []uint8{opSet, opSet, opNoop}, []uint8{a.op, c.op, noop.op})
	assert.Equal(t, []uint32{1, 3, 4}, []uint32{a.opaque, c.opaque, noop.opaque})
	assert.Equal(t, []uint16{statusOK, statusOK}, []uint16{a.status, c.status})
	require.NotZero(t, a.cas)
	require.NotZero(t, c.cas)
	assert.NotEqual(t, a.cas, c.cas, "each set is a version of its own")

	req = binReq(opGetK, []byte("a"), nil, nil, 5, 0)
	req = append(req, binReq(opGetK, []byte("b"), nil, nil, 6, 0)...)
	req = append(req, binReq(opGetK, []byte("c"), nil, nil, 7, 0)...)
	_, err = conn.Write(req)
	require.NoError(t, err)
	for i, want := range []struct {
		key   string
		flags byte
		cas   uint64
	}{{"a", 1, a.cas}, {"b", 2, 0}, {"c", 3, c.cas}} {
		r := readResp(t, conn)
		require.Equal(t, uint16(statusOK), r.status, "get %d", i)
		assert.Equal(t, want.key, string(r.key))
		assert.Equal(t, "v"+want.key, string(r.vb))
		assert.Equal(t, []byte{0, 0, 0, want.flags}, r.extras)
		if want.cas != 0 {
			assert.Equal(t, want.cas, r.cas, "the cas the set answered is the item's")
		}
	}
}

// A key's commands keep their order whatever runs they join: a get after a
// set of its key reads it, a get before it does not, and a later set or
// delete of the key wins. With a backend that completes out of order and
// a small MaxPending too.
func TestBinarySetRunKeepsEachKeysOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		later      bool
		maxPending int
	}{{"inline", false, 64}, {"out of order", true, 64}, {"out of order, 4 pending", true, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			var drv ndbclient.Driver = newEngine(t)
			if tc.later {
				drv = ndbclienttest.Later(drv, 2*time.Millisecond)
			}
			addr := startServer(t, "", drv, tc.maxPending)
			conn := dialServer(t, addr, 20*time.Second)
			for trial := range 20 {
				k := []byte(fmt.Sprintf("k%d", trial))
				other := []byte(fmt.Sprintf("o%d", trial))
				req := binReq(opGet, k, nil, nil, 1, 0) // a miss: nothing set yet
				req = append(req, binReq(opSet, k, setExtras(0, 0), []byte("v1"), 2, 0)...)
				req = append(req, binReq(opSetQ, other, setExtras(0, 0), []byte("x"), 3, 0)...)
				req = append(req, binReq(opGet, k, nil, nil, 4, 0)...)
				req = append(req, binReq(opSet, k, setExtras(0, 0), []byte("v2"), 5, 0)...)
				req = append(req, binReq(opSetQ, k, setExtras(0, 0), []byte("v3"), 6, 0)...)
				req = append(req, binReq(opGet, other, nil, nil, 7, 0)...)
				req = append(req, binReq(opGet, k, nil, nil, 8, 0)...)
				req = append(req, binReq(opDelete, k, nil, nil, 9, 0)...)
				req = append(req, binReq(opGet, k, nil, nil, 10, 0)...)
				req = append(req, binReq(opNoop, nil, nil, nil, 11, 0)...)
				// A run holding a set and a get of one key, closed by a GAT
				// of it (a GAT does not join a run of GETs).
				req = append(req, binReq(opSet, other, setExtras(0, 0), []byte("y"), 12, 0)...)
				req = append(req, binReq(opGet, other, nil, nil, 13, 0)...)
				req = append(req, binReq(opGAT, other, be32(0), nil, 14, 0)...)
				_, err := conn.Write(req)
				require.NoError(t, err)
				want := []struct {
					opaque uint32
					status uint16
					value  string
				}{
					{1, statusKeyNotFound, ""}, {2, statusOK, ""}, {4, statusOK, "v1"}, {5, statusOK, ""},
					{7, statusOK, "x"}, {8, statusOK, "v3"}, {9, statusOK, ""}, {10, statusKeyNotFound, ""}, {11, statusOK, ""},
					{12, statusOK, ""}, {13, statusOK, "y"}, {14, statusOK, "y"},
				}
				for _, w := range want {
					r := readResp(t, conn)
					require.Equal(t, w.opaque, r.opaque, "trial %d: replies in order", trial)
					require.Equal(t, w.status, r.status, "trial %d, opaque %d", trial, w.opaque)
					if w.value != "" {
						require.Equal(t, w.value, string(r.vb), "trial %d, opaque %d", trial, w.opaque)
					}
				}
			}
		})
	}
}

// failKeyDriver reports a failure for the ops on one key, as a backend that
// runs out of memory for one row does, and runs the rest.
type failKeyDriver struct {
	ndbclient.Driver
	key string
}

func (d failKeyDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.Driver.Submit(b, func(b *ndbclient.Batch, err error) {
		for _, op := range b.Ops {
			if len(op.Key) > 0 && string(op.Key[0].B) == d.key {
				op.Err = ndbclient.Errorf(ndbclient.CodeOutOfMemory, "no room for the row")
			}
		}
		done(b, err)
	})
}

// A set of a run that fails answers alone, quiet or not, with its own
// status; the sets beside it are stored. A run whose batch fails whole
// answers every set in it.
func TestBinarySetRunAnswersEachFailure(t *testing.T) {
	addr := startServer(t, "", failKeyDriver{Driver: newEngine(t), key: "bad"}, 64)
	conn := dialServer(t, addr, 10*time.Second)
	req := binReq(opSetQ, []byte("good1"), setExtras(0, 0), []byte("1"), 1, 0)
	req = append(req, binReq(opSetQ, []byte("bad"), setExtras(0, 0), []byte("2"), 2, 0)...)
	req = append(req, binReq(opSet, []byte("good2"), setExtras(0, 0), []byte("3"), 3, 0)...)
	req = append(req, binReq(opGet, []byte("good1"), nil, nil, 4, 0)...)
	_, err := conn.Write(req)
	require.NoError(t, err)
	bad, good2, get := readResp(t, conn), readResp(t, conn), readResp(t, conn)
	assert.Equal(t, uint8(opSetQ), bad.op)
	assert.Equal(t, uint32(2), bad.opaque)
	assert.Equal(t, uint16(statusOutOfMemory), bad.status)
	assert.Equal(t, uint32(3), good2.opaque)
	assert.Equal(t, uint16(statusOK), good2.status)
	assert.Equal(t, "1", string(get.vb))

	addr = startServer(t, "", failingDriver{newEngine(t)}, 64)
	conn = dialServer(t, addr, 10*time.Second)
	req = binReq(opSetQ, []byte("a"), setExtras(0, 0), []byte("1"), 1, 0)
	req = append(req, binReq(opSet, []byte("b"), setExtras(0, 0), []byte("2"), 2, 0)...)
	req = append(req, binReq(opNoop, nil, nil, nil, 3, 0)...)
	_, err = conn.Write(req)
	require.NoError(t, err)
	for i, want := range []uint8{opSetQ, opSet} {
		r := readResp(t, conn)
		assert.Equal(t, want, r.op, "reply %d", i)
		assert.Equal(t, uint32(i+1), r.opaque, "reply %d", i)
		assert.Equal(t, uint16(statusTempFailure), r.status, "reply %d", i)
	}
	assert.Equal(t, uint8(opNoop), readResp(t, conn).op)
}

// A run holds at most setRunBytes of values: a pipeline of large sets goes
// in several batches, each stored whole.
func TestBinarySetRunIsBoundedByItsValues(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	val := make([]byte, setRunBytes/4)
	var req []byte
	for i := range 10 {
		req = append(req, binReq(opSetQ, []byte(fmt.Sprintf("big%d", i)), setExtras(0, 0), val, uint32(i), 0)...)
	}
	req = append(req, binReq(opNoop, nil, nil, nil, 99, 0)...)
	go func() { _, _ = conn.Write(req) }()
	require.Equal(t, uint8(opNoop), readResp(t, conn).op, "quiet sets said nothing")
	sizes := drv.take()
	total := 0
	for _, n := range sizes {
		assert.LessOrEqual(t, n, 4, "batch sizes %v", sizes)
		total += n
	}
	assert.Equal(t, 10, total, "batch sizes %v", sizes)
	for i := range 10 {
		_, err := conn.Write(binReq(opGet, []byte(fmt.Sprintf("big%d", i)), nil, nil, 0, 0))
		require.NoError(t, err)
		r := readResp(t, conn)
		require.Equal(t, uint16(statusOK), r.status)
		require.Len(t, r.vb, len(val))
	}
}

// memtier's mix at 1:1 (a set, a get, a set, ...) reads as two batches, the
// gets' and the sets', and each command still answers in order.
func TestBinaryMixedPipelineIsTwoBatches(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	_, err := conn.Write(append(binReq(opSetQ, []byte("a"), setExtras(0, 0), []byte("va"), 0, 0),
		binReq(opNoop, nil, nil, nil, 0, 0)...))
	require.NoError(t, err)
	readResp(t, conn)
	drv.take()

	_, err = conn.Write(binSetGetPairs(8))
	require.NoError(t, err)
	for i := range 16 {
		r := readResp(t, conn)
		require.Equal(t, uint32(i), r.opaque)
		require.Equal(t, uint16(statusOK), r.status)
		if i%2 == 1 {
			require.Equal(t, "va", string(r.vb))
		}
	}
	assert.ElementsMatch(t, []int{8, 8}, drv.take(), "batch sizes")
}

// A get that answers a key with an error counts as a server error in
// ndbgate_requests_total, not as ok: a refused key prefix, or a backend
// failure of one row, shows there.
func TestGetWithAFailedKeyCountsAsServerError(t *testing.T) {
	addr := startServer(t, "", failKeyDriver{Driver: newEngine(t), key: "bad"}, 64)
	conn := dialServer(t, addr, 10*time.Second)
	counter := int(CmdGet)*numOutcomes + outcomeServerError
	before := requestMetrics.Counts.Value(counter)
	_, err := conn.Write([]byte("get bad\r\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "SERVER_ERROR out of memory storing object\r\n", line)
	assert.Eventually(t, func() bool { return requestMetrics.Counts.Value(counter) == before+1 }, time.Second, 10*time.Millisecond)
}

// binSetGetPairs is a binary pipeline of n pairs: a SET of s<i> (value "v",
// opaque 2i), then a GET of a (opaque 2i+1).
func binSetGetPairs(n int) []byte {
	var req []byte
	for i := range n {
		req = append(req, binReq(opSet, []byte(fmt.Sprintf("s%d", i)), setExtras(0, 0), []byte("v"), uint32(2*i), 0)...)
		req = append(req, binReq(opGet, []byte("a"), nil, nil, uint32(2*i+1), 0)...)
	}
	return req
}
