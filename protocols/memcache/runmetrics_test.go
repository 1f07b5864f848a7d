package memcache

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// requestCounts reads ndbgate_requests_total and the request-duration
// sample counts of the memcache front end, by command and outcome.
type requestCounts struct {
	counts map[string]uint64 // "get/ok"
	timed  map[string]uint64 // "get"
}

func readRequestCounts(t *testing.T) requestCounts {
	t.Helper()
	rc := requestCounts{counts: map[string]uint64{}, timed: map[string]uint64{}}
	for k := CmdNone; k < numCommandKinds; k++ {
		for o := 0; o < numOutcomes; o++ {
			rc.counts[commandNames[k]+"/"+outcomeLabels[o]] = requestMetrics.Counts.Value(int(k)*numOutcomes + o)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(requestMetrics.Durations)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "command" {
					rc.timed[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return rc
}

// since is what moved from before to rc: the counters that changed.
func (rc requestCounts) since(before requestCounts) (counts, timed map[string]uint64) {
	counts, timed = map[string]uint64{}, map[string]uint64{}
	for k, v := range rc.counts {
		if d := v - before.counts[k]; d != 0 {
			counts[k] = d
		}
	}
	for k, v := range rc.timed {
		if d := v - before.timed[k]; d != 0 {
			timed[k] = d
		}
	}
	return counts, timed
}

// waitCounts waits until the request counters have moved by want (they
// are counted as a reply is flushed, just before it is sent, or after, when
// it spills).
func waitCounts(t *testing.T, before requestCounts, want, wantTimed map[string]uint64) {
	t.Helper()
	var counts, timed map[string]uint64
	ok := assert.Eventually(t, func() bool {
		counts, timed = readRequestCounts(t).since(before)
		return fmt.Sprint(counts) == fmt.Sprint(want) && fmt.Sprint(timed) == fmt.Sprint(wantTimed)
	}, 2*time.Second, 10*time.Millisecond)
	if !ok {
		assert.Equal(t, want, counts, "ndbgate_requests_total")
		assert.Equal(t, wantTimed, timed, "ndbgate_request_duration_seconds samples")
	}
}

// A pipeline of text gets and sets is served as one run, and each of its
// commands counts in ndbgate_requests_total and the duration histogram as
// the command it is, with its own outcome.
func TestTextRunCountsEachCommand(t *testing.T) {
	drv := &countingDriver{Driver: failKeyDriver{Driver: newEngine(t), key: "bad"}}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	_, err := conn.Write([]byte("set a 0 0 1\r\nx\r\n"))
	require.NoError(t, err)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "STORED\r\n", line)
	drv.take()

	before := readRequestCounts(t)
	var req strings.Builder
	for i := range 4 {
		fmt.Fprintf(&req, "set s%d 0 0 1\r\ny\r\nget a\r\n", i)
	}
	req.WriteString("get missing\r\nget bad\r\n")
	_, err = conn.Write([]byte(req.String()))
	require.NoError(t, err)
	var replies []string
	for len(replies) < 4*2+2 {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		switch {
		case strings.HasPrefix(line, "VALUE"):
			_, err = rd.ReadString('\n') // the value
			require.NoError(t, err)
			_, err = rd.ReadString('\n') // END
			require.NoError(t, err)
			replies = append(replies, "hit")
		default:
			replies = append(replies, strings.TrimSpace(line))
		}
	}
	want := []string{"STORED", "hit", "STORED", "hit", "STORED", "hit", "STORED", "hit", "END", "SERVER_ERROR out of memory storing object"}
	require.Equal(t, want, replies)
	assert.ElementsMatch(t, []int{4, 6}, drv.take(), "the run's two batches: its sets and its gets")
	waitCounts(t, before,
		map[string]uint64{"set/ok": 4, "get/ok": 5, "get/server_error": 1},
		map[string]uint64{"set": 4, "get": 6})
}

// Binary GETs, GATs' touches and SETs in one pipeline: each counts as
// itself.
func TestBinaryRunCountsEachCommand(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	_, err := conn.Write(append(binReq(opSetQ, []byte("a"), setExtras(0, 0), []byte("va"), 0, 0),
		binReq(opNoop, nil, nil, nil, 0, 0)...))
	require.NoError(t, err)
	readResp(t, conn)
	drv.take()

	before := readRequestCounts(t)
	_, err = conn.Write(binSetGetPairs(3))
	require.NoError(t, err)
	for i := range 6 {
		r := readResp(t, conn)
		require.Equal(t, uint32(i), r.opaque)
		require.Equal(t, uint16(statusOK), r.status)
	}
	assert.ElementsMatch(t, []int{3, 3}, drv.take(), "the run's two batches")
	waitCounts(t, before, map[string]uint64{"set/ok": 3, "get/ok": 3}, map[string]uint64{"set": 3, "get": 3})

	// A run of touches and GATs (one verb: GAT, the same exptime).
	before = readRequestCounts(t)
	req := append(binReq(opTouch, []byte("a"), be32(100), nil, 10, 0), binReq(opGAT, []byte("s0"), be32(100), nil, 11, 0)...)
	req = append(req, binReq(opTouch, []byte("missing"), be32(100), nil, 12, 0)...)
	_, err = conn.Write(req)
	require.NoError(t, err)
	statuses := []uint16{readResp(t, conn).status, readResp(t, conn).status, readResp(t, conn).status}
	assert.Equal(t, []uint16{statusOK, statusOK, statusKeyNotFound}, statuses)
	assert.Len(t, drv.take(), 1, "one batch (a GAT's key has two ops)")
	waitCounts(t, before, map[string]uint64{"touch/ok": 1, "touch/miss": 1, "gat/ok": 1}, map[string]uint64{"touch": 2, "gat": 1})

	// A touch of a missing key alone, a run of one, counts as a miss too.
	before = readRequestCounts(t)
	_, err = conn.Write(binReq(opTouch, []byte("missing"), be32(100), nil, 13, 0))
	require.NoError(t, err)
	assert.Equal(t, uint16(statusKeyNotFound), readResp(t, conn).status)
	waitCounts(t, before, map[string]uint64{"touch/miss": 1}, map[string]uint64{"touch": 1})
}

// Quiet meta gets ended by one without q are one run of mg commands.
func TestMetaRunCountsEachCommand(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	_, err := conn.Write([]byte("ms a 1\r\nx\r\n"))
	require.NoError(t, err)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "HD\r\n", line)
	drv.take()

	before := readRequestCounts(t)
	_, err = conn.Write([]byte("mg a v q\r\nmg b v q\r\nmg a v\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"VA 1\r\n", "x\r\n", "VA 1\r\n", "x\r\n"} {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, line)
	}
	assert.Equal(t, []int{3}, drv.take(), "one batch")
	waitCounts(t, before, map[string]uint64{"mg/ok": 3}, map[string]uint64{"mg": 3})
}

// tooLargeDriver refuses the store of one key as too large for its row,
// as NDB does for a value longer than the table's column.
type tooLargeDriver struct {
	ndbclient.Driver
	key string
}

func (d tooLargeDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.Driver.Submit(b, func(b *ndbclient.Batch, err error) {
		for _, op := range b.Ops {
			if op.Kind != ndbclient.OpRead && len(op.Key) > 0 && string(op.Key[0].B) == d.key {
				op.Err = ndbclient.Errorf(ndbclient.CodeTooLarge, "value longer than its column")
			}
		}
		done(b, err)
	})
}

// A set of a run refused as too large counts in store_too_large, as a
// lone one does, and as a client error.
func TestRunSetTooLargeCounts(t *testing.T) {
	addr, srv := startServerConfig(t, Config{MaxPending: 64}, tooLargeDriver{Driver: newEngine(t), key: "big"})
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	tooLarge := srv.m.stats.Value(statStoreTooLarge)
	before := readRequestCounts(t)
	_, err := conn.Write([]byte("set big 0 0 1\r\nx\r\nset small 0 0 1\r\nx\r\nget small\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"SERVER_ERROR object too large for cache\r\n", "STORED\r\n", "VALUE small 0 1\r\n", "x\r\n", "END\r\n"} {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, line)
	}
	waitCounts(t, before,
		map[string]uint64{"set/client_error": 1, "set/ok": 1, "get/ok": 1},
		map[string]uint64{"set": 2, "get": 1})
	assert.Equal(t, tooLarge+1, srv.m.stats.Value(statStoreTooLarge), "store_too_large")
}

// A run of mgs whose request fails whole answers each mg with the error (q
// hides a miss, not an error, as in memcached), and counts each.
func TestMetaRunFailedAnswersEachCommand(t *testing.T) {
	addr := startServer(t, "", failingDriver{newEngine(t)}, 64)
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	before := readRequestCounts(t)
	_, err := conn.Write([]byte("mg a v q\r\nmg b v q\r\nmg c v\r\nmn\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"SERVER_ERROR backend unavailable\r\n", "SERVER_ERROR backend unavailable\r\n",
		"SERVER_ERROR backend unavailable\r\n", "MN\r\n"} {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, line)
	}
	waitCounts(t, before, map[string]uint64{"mg/server_error": 3, "mn/ok": 1}, map[string]uint64{"mg": 3, "mn": 1})
}

// Sets refused while parsing as too large, with noreply too, count as the
// client's error, and text ones in store_too_large, as memcached 1.6.18
// counts them (not its binary ones); the unlink that follows (memcached
// drops the old item) is the server's, not counted.
func TestSetRefusedWhileParsingCounts(t *testing.T) {
	addr, srv := startServerConfig(t, Config{MaxPending: 64, ItemSizeMax: 1024}, newEngine(t))
	big := strings.Repeat("x", 2000)

	text := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(text)
	tooLarge := srv.m.stats.Value(statStoreTooLarge)
	before := readRequestCounts(t)
	_, err := text.Write([]byte("set a 0 0 2000\r\n" + big + "\r\nset b 0 0 2000 noreply\r\n" + big + "\r\nmn\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"SERVER_ERROR object too large for cache\r\n", "MN\r\n"} {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, line)
	}
	waitCounts(t, before, map[string]uint64{"set/client_error": 2, "mn/ok": 1}, map[string]uint64{"set": 2, "mn": 1})
	assert.Equal(t, tooLarge+2, srv.m.stats.Value(statStoreTooLarge), "store_too_large")

	bin := dialServer(t, addr, 10*time.Second)
	before = readRequestCounts(t)
	_, err = bin.Write(binReq(opSet, []byte("c"), setExtras(0, 0), []byte(big), 7, 0))
	require.NoError(t, err)
	r := readResp(t, bin)
	assert.Equal(t, uint16(statusTooLarge), r.status)
	waitCounts(t, before, map[string]uint64{"set/client_error": 1}, map[string]uint64{"set": 1})
	assert.Equal(t, tooLarge+2, srv.m.stats.Value(statStoreTooLarge), "store_too_large: not for binary")
}

// The metrics of a pipelined run of 8 sets and 8 gets, all answered: the
// bulk path (31 ns a run here; 82 ns command by command, 16 ns when a run
// counted once).
func BenchmarkObserveRun(b *testing.B) {
	m := newServerMetrics()
	p := &pending{cs: &connState{}, dialect: dialectText, kind: CmdSet, req: &gateway.Request{}, sets: &gateway.Request{}, hasSets: true}
	p.text.run, p.text.getKind = true, CmdGet
	for range 8 {
		p.text.cmds = append(p.text.cmds, textCmd{set: true}, textCmd{})
		p.req.AddKey([]byte("k"))
		p.sets.AddSet([]byte("s"), []byte("v"), 0, 0)
	}
	p.req.Outcome, p.sets.Outcome = gateway.OutcomeValues, gateway.OutcomeValues
	p.req.Items, p.sets.Items = make([]gateway.Item, 8), make([]gateway.Item, 8)
	b.ReportAllocs()
	for b.Loop() {
		m.observe(p, 1000)
	}
}
