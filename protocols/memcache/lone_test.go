package memcache

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// loneRecorder records, per key, whether the last batch that held it came
// lone (ndbclient.Batch.Lone), and whether it may poll (Batch.Poll), and
// runs it on the engine.
type loneRecorder struct {
	ndbclient.Driver
	mu   sync.Mutex
	lone map[string]bool
	poll map[string]bool
}

func (d *loneRecorder) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	for _, op := range b.Ops {
		if len(op.Key) > 0 {
			d.lone[string(op.Key[0].B)] = b.Lone
			if d.poll != nil {
				d.poll[string(op.Key[0].B)] = b.Poll
			}
		}
	}
	d.mu.Unlock()
	d.Driver.Submit(b, done)
}

// take returns what was recorded for keys, and forgets everything.
func (d *loneRecorder) take(keys ...string) map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	got := map[string]bool{}
	for _, k := range keys {
		if l, ok := d.lone[k]; ok {
			got[k] = l
		}
	}
	d.lone = map[string]bool{}
	return got
}

// A request is lone only when it is the last command of its input, in a
// turn of the epoll loop that serves that connection alone: then its loop
// has nothing else to do while it runs. A pipeline's earlier commands, a run
// closed by the command after it, and a run's two requests are not.
func TestLoneRequests(t *testing.T) {
	for _, loop := range []string{EventLoopEpoll, loopEpollRing} {
		t.Run(loop, func(t *testing.T) {
			// One node: every request is one round, which reaches the
			// driver lone exactly when the request is.
			e := embedded.New(embedded.Config{Partitions: 8, Nodes: 1})
			t.Cleanup(func() { _ = e.Close() })
			rec := &loneRecorder{Driver: e, lone: map[string]bool{}}
			addr := startServer(t, loop, rec, 64)

			send := textSender(t, addr)
			assert.Equal(t, []string{"STORED\r\n"}, send("set a 0 0 1\r\nx\r\n", 1))
			assert.Equal(t, map[string]bool{"a": true}, rec.take("a"), "a set alone")
			assert.Equal(t, []string{"VALUE a 0 1\r\n", "x\r\n", "END\r\n"}, send("get a\r\n", 3))
			assert.Equal(t, map[string]bool{"a": true}, rec.take("a"), "a get alone")
			assert.Equal(t, []string{"END\r\n", "END\r\n"}, send("get b x\r\nget c\r\n", 2))
			assert.Equal(t, map[string]bool{"b": false, "x": false, "c": true}, rec.take("b", "x", "c"), "a pipeline: its last get only")
			// get j, get k: one run (one-key text gets), closed by the end of the input.
			assert.Equal(t, []string{"END\r\n", "END\r\n"}, send("get j\r\nget k\r\n", 2))
			assert.Equal(t, map[string]bool{"j": true, "k": true}, rec.take("j", "k"), "a text run at the end of the input")
			// get l, version: the run closes before the version.
			assert.Equal(t, []string{"END\r\n", "VERSION test\r\n"}, send("get l\r\nversion\r\n", 2))
			assert.Equal(t, map[string]bool{"l": false}, rec.take("l"), "a text run closed by the command after it")

			bin := dialServer(t, addr, 10*time.Second)
			sendBin := func(req []byte, replies int) {
				t.Helper()
				_, err := bin.Write(req)
				require.NoError(t, err)
				for range replies {
					readResp(t, bin)
				}
			}
			// GETQ d, GETQ e, GET f: one run, closed by the end of the input.
			req := binReq(opGetQ, []byte("d"), nil, nil, 1, 0)
			req = append(req, binReq(opGetQ, []byte("e"), nil, nil, 2, 0)...)
			req = append(req, binReq(opGet, []byte("f"), nil, nil, 3, 0)...)
			sendBin(req, 1)
			assert.Equal(t, map[string]bool{"d": true, "e": true, "f": true}, rec.take("d", "e", "f"), "a run at the end of the input")
			// GETQ g, NOOP: the run closes before the NOOP.
			sendBin(append(binReq(opGetQ, []byte("g"), nil, nil, 4, 0), binReq(opNoop, nil, nil, nil, 5, 0)...), 1)
			assert.Equal(t, map[string]bool{"g": false}, rec.take("g"), "a run closed by the command after it")
			// SETQ h, GET i: a run of two requests.
			req = binReq(opSetQ, []byte("h"), setExtras(0, 0), []byte("1"), 6, 0)
			req = append(req, binReq(opGet, []byte("i"), nil, nil, 7, 0)...)
			sendBin(req, 1)
			assert.Equal(t, map[string]bool{"h": false, "i": false}, rec.take("h", "i"), "a run's two requests")
		})
	}
}

// A lone request may poll for its answer (ndbclient.Batch.Poll) only in a
// solo turn: the connection's second lone turn in a row on its loop, a
// client sending one request at a time with no other client taking turns
// there. A pipeline's earlier commands never may.
func TestSoloRequestsMayPoll(t *testing.T) {
	e := embedded.New(embedded.Config{Partitions: 8, Nodes: 1})
	t.Cleanup(func() { _ = e.Close() })
	rec := &loneRecorder{Driver: e, lone: map[string]bool{}, poll: map[string]bool{}}
	addr, _ := startServerConfig(t, Config{EventLoop: EventLoopEpoll, Loops: 1, MaxPending: 64}, rec)
	a, b := dialServer(t, addr, 10*time.Second), dialServer(t, addr, 10*time.Second)
	ra, rb := bufio.NewReader(a), bufio.NewReader(b)
	get := func(c net.Conn, r *bufio.Reader, cmd string, replies int) {
		t.Helper()
		_, err := c.Write([]byte(cmd))
		require.NoError(t, err)
		readLines(t, r, replies)
	}
	polls := func(keys ...string) map[string]bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		got := map[string]bool{}
		for _, k := range keys {
			got[k] = rec.poll[k]
		}
		return got
	}
	get(b, rb, "version\r\n", 1) // both connections are on the loop now
	get(a, ra, "get a1\r\n", 1)
	get(a, ra, "get a2\r\n", 1)
	get(a, ra, "get a3 a4\r\nget a5\r\n", 2)
	assert.Equal(t, map[string]bool{"a2": true, "a3": false, "a4": false, "a5": true}, polls("a2", "a3", "a4", "a5"),
		"one client alone: its lone requests after the first, the last of a pipeline only")
	get(b, rb, "get b1\r\n", 1)
	get(a, ra, "get a6\r\n", 1)
	get(b, rb, "get b2\r\n", 1)
	get(a, ra, "get a7\r\n", 1)
	assert.Equal(t, map[string]bool{"b1": false, "a6": false, "b2": false, "a7": false}, polls("b1", "a6", "b2", "a7"),
		"two clients taking turns: lone, never solo")
	assert.Equal(t, map[string]bool{"a7": true}, rec.take("a7"), "still lone")
}
