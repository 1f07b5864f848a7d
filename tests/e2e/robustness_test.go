package e2e

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oomConfig is a non-evicting container (database semantics) under a 2 MiB
// memory limit.
const oomConfig = `embedded:
  memory_limit: 2m
containers:
  - name: db
    database: app
    table: kv
    key_columns: [k]
    value_columns: [v]
    flags_column: flags
    cas_column: cas
    expire_column: exp
    math_column: math
    eviction: false
key_prefixes:
  - prefix: ""
    container: db
    policy: ndb-only
`

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// oomValue is the deterministic 4 KiB value stored under key number i.
func oomValue(i int) string {
	head := fmt.Sprintf("value-%05d-", i)
	return head + strings.Repeat(string(rune('a'+i%26)), 4096-len(head))
}

// TestOutOfMemoryNoEviction fills a non-evicting container until the engine
// refuses a write with memcached's out-of-memory error, then checks that
// nothing stored before was lost or changed, that the refusal is stable, and
// that deletes make room for new writes.
func TestOutOfMemoryNoEviction(t *testing.T) {
	embeddedOnly(t, "--memory-limit bounds the embedded engine; NDB's DataMemory is the cluster's")
	s := startServer(t, "--config", writeFile(t, "oom.yaml", oomConfig))
	c := dialRaw(t, s.memcacheAddr)
	const oomReply = "SERVER_ERROR out of memory storing object\r\n"

	stored := 0
	refused := false
	for i := 0; i < 5000; i++ { // 2 MiB / 4 KiB is about 500; the bound only guards a broken limit
		v := oomValue(i)
		c.send(fmt.Sprintf("set oom:%05d %d 0 %d\r\n%s\r\n", i, i, len(v), v))
		line := c.readLine()
		if line == "STORED\r\n" {
			stored++
			continue
		}
		require.Equal(t, oomReply, line, "reply to set number %d", i)
		refused = true
		break
	}
	require.True(t, refused, "5000 sets of 4 KiB (20 MiB) all stored under a 2 MiB memory limit")
	require.Greater(t, stored, 100, "only %d 4 KiB items fit in 2 MiB", stored)
	t.Logf("stored %d items of 4 KiB before the engine was full", stored)

	// The refused key was not stored.
	c.roundTrip(fmt.Sprintf("get oom:%05d\r\n", stored), "END\r\n")

	checkAll := func(from, to int, skip func(int) bool) {
		t.Helper()
		for lo := from; lo < to; lo += 50 {
			hi := min(lo+50, to)
			var req, want strings.Builder
			req.WriteString("get")
			for i := lo; i < hi; i++ {
				fmt.Fprintf(&req, " oom:%05d", i)
				if skip != nil && skip(i) {
					continue
				}
				v := oomValue(i)
				fmt.Fprintf(&want, "VALUE oom:%05d %d %d\r\n%s\r\n", i, i, len(v), v)
			}
			want.WriteString("END\r\n")
			c.roundTrip(req.String()+"\r\n", want.String())
		}
	}
	checkAll(0, stored, nil)

	// Still full: another new key is refused, and so is growing an existing
	// item; the existing item keeps its value (no eviction, no unlink).
	c.roundTrip(fmt.Sprintf("set oom:new 0 0 4096\r\n%s\r\n", strings.Repeat("n", 4096)), oomReply)
	big := strings.Repeat("B", 256<<10)
	c.roundTrip(fmt.Sprintf("set oom:00000 0 0 %d\r\n%s\r\n", len(big), big), oomReply)
	c.roundTrip(fmt.Sprintf("append oom:00001 0 0 %d\r\n%s\r\n", len(big), big), oomReply)
	checkAll(0, stored, nil)
	c.roundTrip("get oom:new\r\n", "END\r\n")

	// Deletes free room for new writes.
	freed := 0
	for i := 0; i < stored; i += 4 {
		c.roundTrip(fmt.Sprintf("delete oom:%05d\r\n", i), "DELETED\r\n")
		freed++
	}
	newOK := 0
	for j := 0; j < freed/2; j++ {
		v := oomValue(100000 + j)
		c.roundTrip(fmt.Sprintf("set oomnew:%05d 0 0 %d\r\n%s\r\n", j, len(v), v), "STORED\r\n")
		newOK++
	}
	for j := 0; j < newOK; j++ {
		v := oomValue(100000 + j)
		c.roundTrip(fmt.Sprintf("get oomnew:%05d\r\n", j), fmt.Sprintf("VALUE oomnew:%05d 0 %d\r\n%s\r\nEND\r\n", j, len(v), v))
	}
	checkAll(0, stored, func(i int) bool { return i%4 == 0 })
	c.expectSentinel()

	// The refusals are counted.
	_, body := s.httpGet(t, "/metrics")
	oom := metricSum(parseMetrics(t, body), "ndbgate_engine_out_of_memory_total", nil)
	assert.GreaterOrEqual(t, oom, 4.0, "ndbgate_engine_out_of_memory_total")
}

// garbageInputs are hostile byte streams sent by throw-away connections. None
// of them touches the keys ("ga:") used by the well-behaved connection, and
// none is a flush.
func garbageInputs(rng *rand.Rand) [][]byte {
	random := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	printable := func(n int) []byte {
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \r\n\t-:"
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return b
	}
	return [][]byte{
		random(64 << 10),
		random(3),
		printable(64 << 10),
		append([]byte("get "), printable(200<<10)...), // one very long line
		[]byte(strings.Repeat("x", 300<<10)),          // no newline at all
		[]byte("set gx:a 0 0 4294967295\r\n" + strings.Repeat("y", 1000)),
		[]byte("set gx:b 0 0 1000000\r\n" + strings.Repeat("y", 1000)), // close mid-value
		[]byte("set gx:c 0 0 5\r\nab"),                                 // close mid-value
		{0x80, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'}, // binary-protocol GET
		[]byte("mg gx:d v\r\nms gx:d 2\r\nhi\r\nmn\r\nme gx:d\r\nma gx:d\r\nmd gx:d\r\n"),
		[]byte("\x00\x00\x00\r\r\r\n\n\n\xff\xfe\r\n"),
		[]byte("gat 99999999999999999999 gx:e\r\nincr gx:e 99999999999999999999999\r\ntouch gx:e -99999999999999999999\r\n" +
			"set gx:e 99999999999999999999 0 1\r\nx\r\nset gx:e 0 -99999999999999999999 1\r\nx\r\nverbosity 99999999999\r\n" +
			"get " + strings.Repeat("gx:k ", 5000) + "\r\n" + "cas gx:e 0 0 1 99999999999999999999999\r\nx\r\n"),
		[]byte(strings.Repeat("get gx:f\r\n", 20000)), // replies never read
		[]byte("stats\r\nstats settings\r\nstats items\r\nstats slabs\r\nstats sizes\r\nstats conns\r\nstats reset\r\nstats detail dump\r\n"),
		[]byte("lru_crawler metadump all\r\nslabs reassign 1 2\r\nwatch\r\nshutdown\r\n"),
	}
}

// TestGarbageDoesNotDisturbOthers: while one connection does ordinary traffic,
// others send random bytes and malformed or hostile commands and hang up. The
// well-behaved connection sees only correct replies, and the server keeps
// serving (the harness also fails the test if the output mentions a panic).
func TestGarbageDoesNotDisturbOthers(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		good := dialRaw(t, tg.addr)
		rng := rand.New(rand.NewSource(42))
		inputs := garbageInputs(rng)

		var (
			wg   sync.WaitGroup
			sent atomic.Int64 // garbage connections
			stop = make(chan struct{})
		)
		deadline := time.Now().Add(30 * time.Second)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for n := 0; time.Now().Before(deadline); n++ {
					select {
					case <-stop:
						return
					default:
					}
					sendGarbage(tg.addr, inputs[(w+n*4)%len(inputs)], n%2 == 0)
					sent.Add(1)
				}
			}(w)
		}

		// Ordinary traffic for at least 1500 set+get pairs and until every
		// garbage input has been sent at least twice.
		last := map[string]string{} // key -> expected get reply
		i := 0
		for ; i < 1500 || (sent.Load() < int64(2*len(inputs)) && time.Now().Before(deadline)); i++ {
			v := strconv.Itoa(i) + strings.Repeat(".", i%300)
			key := fmt.Sprintf("ga:%d", i%50)
			good.roundTrip(fmt.Sprintf("set %s %d 0 %d\r\n%s\r\n", key, i, len(v), v), "STORED\r\n")
			last[key] = fmt.Sprintf("VALUE %s %d %d\r\n%s\r\n", key, i, len(v), v)
			good.roundTrip("get "+key+"\r\n", last[key]+"END\r\n")
		}
		close(stop)
		wg.Wait()
		t.Logf("%d set+get pairs alongside %d garbage connections", i, sent.Load())
		require.GreaterOrEqual(t, sent.Load(), int64(2*len(inputs)), "garbage connections sent")

		if tg.srv != nil {
			require.True(t, tg.srv.alive(), "ndbgate died")
		}
		good.expectSentinel()
		fresh := dialRaw(t, tg.addr)
		fresh.roundTrip("set ga:after 0 0 2\r\nok\r\n", "STORED\r\n")
		fresh.roundTrip("get ga:after ga:7\r\n", "VALUE ga:after 0 2\r\nok\r\n"+last["ga:7"]+"END\r\n")
		st := fresh.stats("")
		assert.Contains(t, st, "curr_items")
	})
}

// sendGarbage writes b on a new connection, draining whatever comes back, then
// hangs up (abruptly with a reset if rst). Errors are expected and ignored.
func sendGarbage(addr string, b []byte, rst bool) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	drained := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(drained)
	}()
	for off := 0; off < len(b); off += 16 << 10 {
		if _, err := c.Write(b[off:min(off+16<<10, len(b))]); err != nil {
			break
		}
	}
	time.Sleep(5 * time.Millisecond)
	if tc, ok := c.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
	<-drained
}

// A client that pipelines large gets and reads nothing for a while fills its
// socket: replies go out in part and the rest waits in the server's outbound
// queue. Every reply must still arrive whole and in order, and other
// connections must be served meanwhile.
func TestSlowReaderGetsEveryReplyInOrder(t *testing.T) {
	s := startServer(t)
	c := dialRaw(t, s.memcacheAddr)
	// Values under the raw-write bound (64 KiB), so that a reply is written
	// raw while nothing waits ahead of it, and queued behind the rest once
	// the socket is full.
	// On a live cluster values are smaller (valueMax) and there are more gets.
	keys, size := 4, min(56<<10, valueMax()-500)
	gets := (24 << 20) / size // 24 MiB of replies
	values := make([]string, keys)
	for k := range values {
		values[k] = strings.Repeat(fmt.Sprintf("value-%d|", k), size/8)
		c.roundTrip(fmt.Sprintf("set slow:%d 0 0 %d\r\n%s\r\n", k, len(values[k]), values[k]), "STORED\r\n")
	}
	// Several sends, so that later replies are written while earlier ones
	// still wait in the queue.
	for i := range gets {
		c.send(fmt.Sprintf("get slow:%d\r\n", (i*3)%keys))
		if i%40 == 39 {
			time.Sleep(30 * time.Millisecond)
		}
	}

	time.Sleep(300 * time.Millisecond) // the server's writes hit a full socket
	other := dialRaw(t, s.memcacheAddr)
	other.roundTrip("set other 0 0 2\r\nok\r\n", "STORED\r\n")
	other.roundTrip("get other\r\n", "VALUE other 0 2\r\nok\r\nEND\r\n")

	for i := range gets {
		k := (i * 3) % keys
		c.expect(fmt.Sprintf("VALUE slow:%d 0 %d\r\n%s\r\nEND\r\n", k, len(values[k]), values[k]))
	}
}

// floodConfig halves the dispatcher's room for operations in flight to
// 4,096, which two connections' pipelines of 20,000 gets used to fill;
// the embedded engine delays each round trip as a data node would.
const floodConfig = `dispatch:
  max_inflight_ops: 4096
`

// TestFloodDoesNotGetOthersRefused: while connections pipeline 20,000 gets
// each and hang up without reading, another connection's gets are all
// answered, none refused with SERVER_ERROR busy: a connection holding many
// keys at the gateway stops being read while the dispatcher is crowded
// (limits.max_pending_keys_per_conn), and its rounds queue behind the
// others'. Before, 4 in 5 of the lone connection's gets were refused here.
func TestFloodDoesNotGetOthersRefused(t *testing.T) {
	cfg := floodConfig
	if liveCluster() == "" {
		cfg += "embedded:\n  simulated_round_trip: 1ms\n"
	}
	s := startServer(t, "--config", writeFile(t, "flood.yaml", cfg))
	good := dialRaw(t, s.memcacheAddr)
	good.roundTrip("set fl:good 0 0 2\r\nok\r\n", "STORED\r\n")
	flood := []byte(strings.Repeat("get fl:x\r\n", 20000))

	var (
		wg    sync.WaitGroup
		stop  atomic.Bool
		sent  atomic.Int64
		until = time.Now().Add(3 * time.Second)
	)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				sendGarbage(s.memcacheAddr, flood, false)
				sent.Add(1)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // the flood first
	gets := 0
	for ; time.Now().Before(until); gets++ {
		good.roundTrip("get fl:good\r\n", "VALUE fl:good 0 2\r\nok\r\nEND\r\n")
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d gets answered beside %d flooding connections", gets, sent.Load())
	require.GreaterOrEqual(t, sent.Load(), int64(4), "flooding connections")
	require.Greater(t, gets, 100, "the lone connection was served throughout")
	require.True(t, s.alive(), "ndbgate died")
	st := good.stats("settings")
	assert.Equal(t, "4096", st["ndbgate_max_pending_keys_per_conn"])
}
