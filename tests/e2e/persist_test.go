package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The data dir (--data-dir): what comes back after a graceful restart, after
// kill -9, after a damaged log, and what a full disk does.

// logFiles lists the data dir's log files.
func logFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log-*"))
	require.NoError(t, err)
	var out []string
	for _, f := range m {
		if !strings.HasSuffix(f, ".dropped") {
			out = append(out, f)
		}
	}
	return out
}

// currentLog is the log file the running server appends to: the newest.
// Older ones can be there too: a start that failed on a taken port (which
// startServer retries) snapshots the data dir on its way out, and that
// snapshot's own log stays.
func currentLog(t testing.TB, dir string) string {
	t.Helper()
	logs := logFiles(t, dir)
	require.NotEmpty(t, logs)
	return logs[len(logs)-1] // the names' zero-padded hex sorts by sequence
}

func fileLen(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// mcConn is a bare text-protocol connection that reports errors instead of
// failing the test: the server may die under it.
type mcConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialMC(addr string) (*mcConn, error) {
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		return nil, err
	}
	return &mcConn{c: c, r: bufio.NewReader(c)}, nil
}

// do sends one command and returns its one-line reply.
func (m *mcConn) do(cmd string) (string, error) { return m.doWithin(cmd, ioTimeout) }

func (m *mcConn) doWithin(cmd string, d time.Duration) (string, error) {
	_ = m.c.SetDeadline(time.Now().Add(d))
	if _, err := m.c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	line, err := m.r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func (m *mcConn) set(key, value string, exptime int) (string, error) {
	return m.do(fmt.Sprintf("set %s 0 %d %d\r\n%s\r\n", key, exptime, len(value), value))
}

// get returns the value and whether the key was there.
func (m *mcConn) get(key string) (string, bool, error) {
	line, err := m.do("get " + key + "\r\n")
	if err != nil || line == "END" {
		return "", false, err
	}
	var k string
	var flags, n int
	if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &k, &flags, &n); err != nil {
		return "", false, fmt.Errorf("reply %q: %v", line, err)
	}
	buf := make([]byte, n+2)
	if _, err := ioReadFull(m.r, buf); err != nil {
		return "", false, err
	}
	end, err := m.r.ReadString('\n')
	if err == nil && end != "END\r\n" {
		err = fmt.Errorf("after the value: %q", end)
	}
	return string(buf[:n]), true, err
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (m *mcConn) close() { _ = m.c.Close() }

func mustDialMC(t testing.TB, addr string) *mcConn {
	t.Helper()
	m, err := dialMC(addr)
	require.NoError(t, err)
	t.Cleanup(m.close)
	return m
}

// keyState is what a key must hold after a restart: its last acknowledged
// value ("" and !present for an acknowledged delete), or, if an op on it was
// in flight at the crash, possibly that op's result.
type keyState struct {
	present        bool
	value          string
	pending        bool // an op was sent and not acknowledged
	pendingPresent bool
	pendingValue   string
}

// TestPersistKill9UnderLoad: writers set and delete keys over concurrent
// connections with --fsync always; the server is killed with SIGKILL in the
// middle; after a restart on the same data dir every acknowledged set is
// there with its value and every acknowledged delete stays deleted.
func TestPersistKill9UnderLoad(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--fsync", "always", "--snapshot-log-size", "1m"}
	s := startServer(t, args...)

	const writers, keysPer = 8, 40
	states := make([]map[string]*keyState, writers)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for g := range writers {
		states[g] = map[string]*keyState{}
		m := mustDialMC(t, s.memcacheAddr)
		wg.Go(func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("w%d-k%d", g, (i*7)%keysPer)
				st := states[g][k]
				if st == nil {
					st = &keyState{}
					states[g][k] = st
				}
				del := i%5 == 3
				value := fmt.Sprintf("%d-%d-%s", g, i, strings.Repeat("x", i%300))
				st.pending, st.pendingPresent, st.pendingValue = true, !del, value
				var reply string
				var err error
				if del {
					reply, err = m.do("delete " + k + "\r\n")
				} else {
					reply, err = m.set(k, value, 0)
				}
				if err != nil {
					return // the server is gone: this op stays pending
				}
				switch reply {
				case "STORED":
					st.present, st.value = true, value
				case "DELETED", "NOT_FOUND":
					st.present, st.value = false, ""
				default:
					t.Errorf("%s: unexpected reply %q", k, reply)
					return
				}
				st.pending = false
				acked.Add(1)
			}
		})
	}
	// Kill once the writers are well under way, and a snapshot has been
	// taken on the way (--snapshot-log-size): recovery is then a snapshot
	// plus the log after it.
	require.Eventually(t, func() bool {
		return acked.Load() >= 6000 && strings.Contains(s.output.String(), "snapshot written")
	}, 60*time.Second, 10*time.Millisecond, "no snapshot was taken under load")
	s.kill()
	wg.Wait()

	s2 := startServer(t, args...)
	assert.Contains(t, s2.output.String(), "data dir loaded")
	m := mustDialMC(t, s2.memcacheAddr)
	checked := 0
	for g := range writers {
		for k, st := range states[g] {
			v, ok, err := m.get(k)
			require.NoError(t, err)
			switch {
			case ok == st.present && v == st.value:
			case st.pending && ok == st.pendingPresent && (!ok || v == st.pendingValue):
			default:
				t.Errorf("%s after the crash: present=%v value=%.20q; acknowledged: present=%v value=%.20q (op in flight: %v)",
					k, ok, v, st.present, st.value, st.pending)
			}
			checked++
		}
	}
	t.Logf("%d writes acknowledged before SIGKILL, %d keys checked", acked.Load(), checked)
}

// TestPersistFlushAllUnderLoadAlways: memcache writers and flush_all with
// --fsync always. A flush_all queued behind a write once waited for the log
// writer from the writer itself: no reply ever came, and SIGTERM did not end
// the process. Every command must be answered, and the server must stop.
func TestPersistFlushAllUnderLoadAlways(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	s := startServer(t, "--data-dir", dir, "--fsync", "always")
	const deadline = 30 * time.Second // only a stuck server misses it
	var wg sync.WaitGroup
	for g := range 4 {
		m := mustDialMC(t, s.memcacheAddr)
		wg.Go(func() {
			for i := range 300 {
				v := fmt.Sprint(g, "-", i)
				reply, err := m.doWithin(fmt.Sprintf("set w%d-%d 0 0 %d\r\n%s\r\n", g, i%20, len(v), v), deadline)
				if err != nil || reply != "STORED" {
					t.Errorf("writer %d, set %d: %q, %v", g, i, reply, err)
					return
				}
			}
		})
	}
	m := mustDialMC(t, s.memcacheAddr)
	wg.Go(func() {
		for i := range 30 {
			reply, err := m.doWithin("flush_all\r\n", deadline)
			if err != nil || reply != "OK" {
				t.Errorf("flush_all %d: %q, %v", i, reply, err)
				return
			}
		}
	})
	wg.Wait()
	require.Equal(t, 0, s.stop(t), "SIGTERM")
}

// TestPersistCasNeverRepeats: a cas handed out before a restart is never
// handed out again after it, and a cas command with an old one fails.
func TestPersistCasNeverRepeats(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	seen := map[uint64]bool{}
	gets := func(m *mcConn, key string) uint64 {
		line, err := m.do("gets " + key + "\r\n")
		require.NoError(t, err)
		var k string
		var flags, n int
		var cas uint64
		_, err = fmt.Sscanf(line, "VALUE %s %d %d %d", &k, &flags, &n, &cas)
		require.NoError(t, err, "gets reply %q", line)
		rest := make([]byte, n+2+len("END\r\n"))
		_, err = ioReadFull(m.r, rest)
		require.NoError(t, err)
		return cas
	}
	var old, first uint64 // the first cas of the last start, of this one
	for start := range 3 {
		s := startServer(t, "--data-dir", dir)
		m := mustDialMC(t, s.memcacheAddr)
		for i := range 5 {
			reply, err := m.set("a", fmt.Sprint("v", start, "-", i), 0)
			require.NoError(t, err)
			require.Equal(t, "STORED", reply)
			cas := gets(m, "a")
			assert.False(t, seen[cas], "start %d: cas %d was handed out before", start, cas)
			seen[cas] = true
			if i == 0 {
				first = cas
			}
			if start > 0 && i == 0 {
				reply, err := m.do(fmt.Sprintf("cas a 0 0 3 %d\r\nold\r\n", old))
				require.NoError(t, err)
				assert.Equal(t, "EXISTS", reply, "a cas from before the restart matched a new item")
			}
		}
		old = first
		require.Equal(t, 0, s.stop(t))
	}
}

// TestPersistFlushAllRefusedByFullDisk: a flush_all the data dir cannot log
// is not applied, and the client is told so (text and binary), not OK.
func TestPersistFlushAllRefusedByFullDisk(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	s := startServer(t, "--data-dir", dir, "--fsync", "always", "--snapshot-interval", "0", "--snapshot-log-size", "0")
	m := mustDialMC(t, s.memcacheAddr)
	reply, err := m.set("kept", "value", 0)
	require.NoError(t, err)
	require.Equal(t, "STORED", reply)
	var old unix.Rlimit
	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, nil, &old))
	full := unix.Rlimit{Cur: uint64(fileLen(t, currentLog(t, dir))), Max: old.Max} // not one more byte
	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, &full, nil), "prlimit on our own child")
	const refused = "SERVER_ERROR cannot write to the data dir (disk full or failing), not stored"
	reply, err = m.set("during", "x", 0)
	require.NoError(t, err)
	require.Equal(t, refused, reply)

	reply, err = m.do("flush_all\r\n")
	require.NoError(t, err)
	assert.Equal(t, refused, reply)
	// The binary protocol's flush (opcode 0x08), on a connection of its
	// own (the first byte picks the protocol): a failure status, not 0.
	bm := mustDialMC(t, s.memcacheAddr)
	req := make([]byte, 24)
	req[0], req[1] = 0x80, 0x08
	_ = bm.c.SetDeadline(time.Now().Add(ioTimeout))
	_, err = bm.c.Write(req)
	require.NoError(t, err)
	resp := make([]byte, 24)
	_, err = ioReadFull(bm.r, resp)
	require.NoError(t, err)
	assert.Equal(t, byte(0x81), resp[0])
	status := int(resp[6])<<8 | int(resp[7])
	assert.NotZero(t, status, "binary flush answered success")
	body := make([]byte, int(resp[8])<<24|int(resp[9])<<16|int(resp[10])<<8|int(resp[11]))
	_, err = ioReadFull(bm.r, body)
	require.NoError(t, err)

	v, ok, err := m.get("kept")
	require.NoError(t, err)
	assert.True(t, ok, "a refused flush_all removed items")
	assert.Equal(t, "value", v)
	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, &old, nil))
}

var reTTL = regexp.MustCompile(`^HD t(-?\d+)$`)

// TestPersistGracefulRestart: SIGTERM, then a start on the same data dir:
// items come back with their flags and time to live; an item that expired
// while the server was down is not served; a row-API table comes back with
// its rows even when the configuration no longer declares it.
func TestPersistGracefulRestart(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	cfg := writeFile(t, "ndbgate.yaml", typesConfig)
	s := startServer(t, "--data-dir", dir, "--config", cfg)
	m := mustDialMC(t, s.memcacheAddr)
	for i := range 200 {
		reply, err := m.do(fmt.Sprintf("set k%d %d 0 %d\r\nvalue-%d\r\n", i, i, len(fmt.Sprint("value-", i)), i))
		require.NoError(t, err)
		require.Equal(t, "STORED", reply)
	}
	reply, err := m.set("long", "stays", 1000)
	require.NoError(t, err)
	require.Equal(t, "STORED", reply)
	short := time.Now()
	reply, err = m.set("short", "goes", 2)
	require.NoError(t, err)
	require.Equal(t, "STORED", reply)
	for _, cmd := range []string{"incr counter 1\r\n", "delete k7\r\n", "append k8 0 0 5\r\n-more\r\n", "touch k9 500\r\n"} {
		_, err := m.do(cmd)
		require.NoError(t, err)
	}
	reply, err = m.do("set counter 0 0 2\r\n40\r\n")
	require.NoError(t, err)
	require.Equal(t, "STORED", reply)
	reply, err = m.do("incr counter 2\r\n")
	require.NoError(t, err)
	require.Equal(t, "42", reply)
	c := newSpecClient(t, s)
	r := c.post("/0.1.0/shop/types/pk-insert", `{"filters":`+keyFilters(1, "eu")+`,"values":`+valuesJSON(boundaryRow)+`}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	require.Equal(t, 0, s.stop(t))
	assert.Contains(t, s.output.String(), "snapshot written")

	// Let the short item expire while the server is down.
	time.Sleep(time.Until(short.Add(3 * time.Second)))
	// No config: the row-API table comes from the data dir. Rows: 200 k,
	// less k7, plus long, counter and the row-API row.
	s2 := startServer(t, "--data-dir", dir)
	assert.Regexp(t, `data dir loaded.*tables=2 rows=202 `, s2.output.String())
	m = mustDialMC(t, s2.memcacheAddr)
	for i := range 200 {
		line, err := m.do(fmt.Sprintf("mg k%d v f\r\n", i))
		require.NoError(t, err)
		switch i {
		case 7:
			assert.Equal(t, "EN", line, "k7 was deleted")
			continue
		case 8:
			assert.Equal(t, fmt.Sprintf("VA %d f8", len("value-8-more")), line)
		default:
			assert.Equal(t, fmt.Sprintf("VA %d f%d", len(fmt.Sprint("value-", i)), i), line)
		}
		v, err := m.r.ReadString('\n')
		require.NoError(t, err)
		want := fmt.Sprint("value-", i)
		if i == 8 {
			want += "-more"
		}
		assert.Equal(t, want+"\r\n", v)
	}
	v, ok, err := m.get("counter")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "42", v)
	_, ok, err = m.get("short")
	require.NoError(t, err)
	assert.False(t, ok, "an item that expired while the server was down is served")
	for key, ttl := range map[string]int{"long": 1000, "k9": 500} {
		line, err := m.do("mg " + key + " t\r\n")
		require.NoError(t, err)
		mt := reTTL.FindStringSubmatch(line)
		require.NotNil(t, mt, "mg %s t: %q", key, line)
		left, _ := strconv.Atoi(mt[1])
		assert.LessOrEqual(t, left, ttl, key)
		assert.Greater(t, left, ttl-60, "%s: the time to live did not survive the restart", key)
	}
	r = newSpecClient(t, s2).post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(1, "eu")+`}`)
	require.Equal(t, 200, r.status, "%s", r.body)
	var got struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &got))
	for col, want := range boundaryRow {
		assert.Equal(t, want, string(got.Data[col]), col)
	}

	// A second server on the same data dir is refused.
	code, _, stderr := runCLI(t, "serve", "--data-dir", dir, "--memcache", freePort(t), "--rest", freePort(t), "--grpc", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "embedded.data_dir (--data-dir)")
	assert.Contains(t, stderr, "in use by another ndbgate")

	// The same data dir, a changed table: a clear start-up error.
	require.Equal(t, 0, s2.stop(t))
	code, _, stderr = runCLI(t, "serve", "--data-dir", dir, "--item-size-max", "2m", "--memcache", freePort(t), "--rest", freePort(t), "--grpc", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "ndbmemcache.demo_table in data dir "+dir+" has another shape")
	assert.Contains(t, stderr, "item_size_max")
}

// writeSequential sets keys k0..k(n-1) one after another with --fsync
// always, and returns the log file and its length after each acknowledgement:
// where each key's record ends, as the file says, not as a decoder would.
func writeSequential(t *testing.T, s *server, dir string, n int) (string, []int64) {
	m := mustDialMC(t, s.memcacheAddr)
	logPath := currentLog(t, dir)
	var ends []int64
	for i := range n {
		reply, err := m.set(fmt.Sprint("k", i), seqValue(i), 0)
		require.NoError(t, err)
		require.Equal(t, "STORED", reply)
		ends = append(ends, fileLen(t, logPath))
	}
	return logPath, ends
}

func seqValue(i int) string { return fmt.Sprintf("v%d:%s", i, strings.Repeat("abcdefgh", 10+i%7)) }

// TestPersistDamagedLog: a log cut at an arbitrary byte, or with a byte
// flipped, is cut at the last good record on start-up, with a log line
// naming the file, the offset and the bytes dropped; every key before the
// damage is served, none after it.
func TestPersistDamagedLog(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	for _, damage := range []string{"truncated", "flipped byte"} {
		t.Run(strings.ReplaceAll(damage, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"--data-dir", dir, "--fsync", "always", "--snapshot-interval", "0", "--snapshot-log-size", "0"}
			s := startServer(t, args...)
			const n = 40
			logPath, ends := writeSequential(t, s, dir, n)
			s.kill()
			data, err := os.ReadFile(logPath)
			require.NoError(t, err)
			require.EqualValues(t, ends[n-1], len(data))
			// An arbitrary byte inside key 23's record.
			pos := ends[22] + (ends[23]-ends[22])*2/3
			if damage == "truncated" {
				data = data[:pos]
			} else {
				data[pos] ^= 0x5a
			}
			require.NoError(t, os.WriteFile(logPath, data, 0o600))

			s2 := startServer(t, args...)
			out := s2.output.String()
			assert.Contains(t, out, "the log has a torn or corrupt tail; cutting it after the last good record")
			assert.Contains(t, out, "file="+logPath)
			assert.Contains(t, out, fmt.Sprintf("offset=%d dropped_bytes=%d", ends[22], int64(len(data))-ends[22]))
			m := mustDialMC(t, s2.memcacheAddr)
			for i := range n {
				v, ok, err := m.get(fmt.Sprint("k", i))
				require.NoError(t, err)
				if i < 23 {
					assert.True(t, ok, "k%d, before the damage, is gone", i)
					assert.Equal(t, seqValue(i), v)
				} else {
					assert.False(t, ok, "k%d, at or after the damage, is served", i)
				}
			}
			// Writes go on, and the cut is for good.
			reply, err := m.set("after", "x", 0)
			require.NoError(t, err)
			assert.Equal(t, "STORED", reply)
			s2.kill()
			s3 := startServer(t, args...)
			assert.NotContains(t, s3.output.String(), "cutting")
			v, ok, err := mustDialMC(t, s3.memcacheAddr).get("after")
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, "x", v)
		})
	}
}

// TestPersistCorruptSnapshot: a snapshot with a flipped byte stops start-up
// with an error naming it; ndbgate does not start empty.
func TestPersistCorruptSnapshot(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	s := startServer(t, "--data-dir", dir)
	m := mustDialMC(t, s.memcacheAddr)
	for i := range 50 {
		_, err := m.set(fmt.Sprint("k", i), seqValue(i), 0)
		require.NoError(t, err)
	}
	require.Equal(t, 0, s.stop(t))
	snaps, err := filepath.Glob(filepath.Join(dir, "snap-*"))
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	data, err := os.ReadFile(snaps[0])
	require.NoError(t, err)
	data[len(data)/2] ^= 1
	require.NoError(t, os.WriteFile(snaps[0], data, 0o600))
	code, _, stderr := runCLI(t, "serve", "--data-dir", dir, "--memcache", freePort(t), "--rest", freePort(t), "--grpc", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "snapshot "+snaps[0]+" is corrupt at offset")
	assert.Contains(t, stderr, "move the data dir away to start empty")

	code, _, stderr = runCLI(t, "serve", "--data-dir", filepath.Join(snaps[0], "sub"), "--memcache", freePort(t), "--rest", freePort(t), "--grpc", "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "embedded.data_dir (--data-dir)")
	assert.Contains(t, stderr, "not a directory")
}

// TestPersistFullDisk lowers the running server's file size limit
// (RLIMIT_FSIZE, through prlimit(2): no privileges, the same user) to just
// past its log, so that the log's next writes fail as on a full disk. Go
// ignores the SIGXFSZ that comes with it. Writes get a clear SERVER_ERROR and
// are not applied; everything stored before stays; once the limit is back,
// writes work again, and after a crash the log holds exactly what was
// acknowledged.
func TestPersistFullDisk(t *testing.T) {
	embeddedOnly(t, "--data-dir is the embedded engine's")
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--fsync", "always", "--snapshot-interval", "0", "--snapshot-log-size", "0"}
	s := startServer(t, args...)
	m := mustDialMC(t, s.memcacheAddr)
	stored := map[string]string{}
	for i := range 20 {
		k := fmt.Sprint("before", i)
		reply, err := m.set(k, seqValue(i), 0)
		require.NoError(t, err)
		require.Equal(t, "STORED", reply)
		stored[k] = seqValue(i)
	}
	var old unix.Rlimit
	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, nil, &old))
	limit := unix.Rlimit{Cur: uint64(fileLen(t, currentLog(t, dir))) + 2000, Max: old.Max}
	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, &limit, nil), "prlimit on our own child")

	var refused []string
	for i := 0; len(refused) < 3; i++ {
		require.Less(t, i, 50, "no write was refused past the file size limit")
		k := fmt.Sprint("during", i)
		reply, err := m.set(k, strings.Repeat("z", 700), 0)
		require.NoError(t, err)
		switch reply {
		case "STORED":
			stored[k] = strings.Repeat("z", 700)
		case "SERVER_ERROR cannot write to the data dir (disk full or failing), not stored":
			refused = append(refused, k)
		default:
			t.Fatalf("%s: unexpected reply %q", k, reply)
		}
	}
	reply, err := m.do("delete before0\r\n")
	require.NoError(t, err)
	if reply != "DELETED" { // refused while the log fails: then it stays
		assert.Equal(t, "SERVER_ERROR cannot write to the data dir (disk full or failing), not stored", reply)
	} else {
		delete(stored, "before0")
	}
	check := func(m *mcConn) {
		for k, want := range stored {
			v, ok, err := m.get(k)
			require.NoError(t, err)
			assert.True(t, ok, "%s was stored and is gone", k)
			assert.Equal(t, want, v, k)
		}
		for _, k := range refused {
			_, ok, err := m.get(k)
			require.NoError(t, err)
			assert.False(t, ok, "%s was refused and is there", k)
		}
	}
	check(m)
	assert.True(t, s.alive(), "SIGXFSZ killed the server")
	assert.Contains(t, s.output.String(), "the log cannot be written")

	require.NoError(t, unix.Prlimit(s.pid(), unix.RLIMIT_FSIZE, &old, nil))
	require.Eventually(t, func() bool {
		reply, err := m.set("after", "back", 0)
		return err == nil && reply == "STORED"
	}, 10*time.Second, 50*time.Millisecond, "writes did not work again once the disk had room")
	stored["after"] = "back"
	check(m)
	_, metrics := s.httpGet(t, "/metrics")
	assert.Regexp(t, `(?m)^ndbgate_engine_log_write_errors_total [1-9]`, metrics)

	s.kill()
	s2 := startServer(t, args...)
	assert.NotContains(t, s2.output.String(), "cutting", "a failed write left a torn record in the log")
	check(mustDialMC(t, s2.memcacheAddr))
}
