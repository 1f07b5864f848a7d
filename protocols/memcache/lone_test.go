package memcache

import (
	"bufio"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// loneRecorder records, per key, whether the last batch that held it came
// lone (ndbclient.Batch.Lone), and runs it on the engine.
type loneRecorder struct {
	ndbclient.Driver
	mu   sync.Mutex
	lone map[string]bool
}

func (d *loneRecorder) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	for _, op := range b.Ops {
		if len(op.Key) > 0 {
			d.lone[string(op.Key[0].B)] = b.Lone
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

			text := dialServer(t, addr, 10*time.Second)
			r := bufio.NewReader(text)
			send := func(s string, replies int) []string {
				t.Helper()
				_, err := text.Write([]byte(s))
				require.NoError(t, err)
				return readLines(t, r, replies)
			}
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
