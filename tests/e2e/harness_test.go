// Package e2e holds the end-to-end tests of ndbgate: they build the real binary,
// start it on free loopback ports and talk to it with real clients (gomemcache,
// pymemcache, libmemcached's memccapable) and raw sockets.
//
// Where memcached is on PATH, the raw protocol tests also run every case against
// a real memcached, so that each expected byte string is checked against the
// reference implementation in the same run; without memcached that comparison is
// skipped and only ndbgate is tested.
//
// Environment:
//
//	NDBGATE_BIN   use this prebuilt binary instead of building ./cmd/ndbgate
//	CI=true       a missing tool (python3, pymemcache, memccapable) fails instead of skipping
//	NDBGATE_TEST_CONNECTSTRING
//	              live mode: every server runs on this NDB cluster
//	              (--ndb-connectstring), built with -tags ndbapi unless
//	              NDBGATE_BIN is given (CGO_CPPFLAGS/CGO_LDFLAGS name the NDB
//	              install). Tables missing from the cluster are created first
//	              (ndbgate ndb-create-tables). Tests of what only the embedded
//	              engine has (memory limit, simulated nodes) skip, saying why.
//	NDBGATE_TEST_LIVE_FLAGS
//	              live mode: flags every server also gets, split on spaces
//	              (before each test's own), e.g. "--ndb-busy-poll 200us
//	              --memcache-busy-poll 50us" to run the suite with lone
//	              requests polling; a gnet server, which refuses
//	              --memcache-busy-poll, runs without that one
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/tests/internal/harness"
)

const (
	startTimeout = 20 * time.Second // from exec to memcache port accepting and /readyz 200
	stopTimeout  = 15 * time.Second // the server's own shutdown grace is 10s
	ioTimeout    = 5 * time.Second  // any single expected reply
)

var (
	// underTest is the ndbgate under test, or why there is none;
	// ndbgateBin is its path.
	underTest  *harness.Binary
	ndbgateBin string
	// repoRoot is the repository (the directory holding cmd/ndbgate).
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	repoRoot = root
	if bin := os.Getenv("NDBGATE_BIN"); bin != "" {
		underTest = &harness.Binary{}
		underTest.Path, underTest.Err = filepath.Abs(bin)
		ndbgateBin = underTest.Path
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ndbgate-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var args []string
	if liveCluster() != "" {
		args = []string{"-tags", "ndbapi"}
	}
	underTest = harness.Build("e2e", repoRoot, dir, nil, args...)
	ndbgateBin = underTest.Path
	return m.Run()
}

// requireBinary fails the test when the ndbgate binary is not available.
func requireBinary(t testing.TB) {
	t.Helper()
	underTest.Require(t)
}

// liveCluster is the NDB connectstring of live mode, or "".
func liveCluster() string { return os.Getenv("NDBGATE_TEST_CONNECTSTRING") }

// valueMax is the largest value the ndbgate servers under test store:
// memcached's 1 MiB item on the embedded engine; on a live cluster the
// default container's VARBINARY(13500) (ndbmemcache's demo_table, within
// NDB's row size limit), since the driver does not drive NdbBlob.
func valueMax() int {
	if liveCluster() != "" {
		return ndbValueMax
	}
	return 1 << 20
}

const ndbValueMax = 13500

// onNDB: tg is an ndbgate server running on a live cluster.
func onNDB(tg *target) bool { return liveCluster() != "" && !tg.isReference() }

// toolEnv tells the Python and Node suites what the server they test
// stores, and on what.
func toolEnv(ndb bool, extra ...string) []string {
	backend, max := "embedded", 1<<20
	if ndb {
		backend, max = "ndb", ndbValueMax
	}
	return cleanEnv(append(extra, "NDBGATE_TEST_BACKEND="+backend, "NDBGATE_TEST_VALUE_MAX="+strconv.Itoa(max))...)
}

// embeddedOnly skips a test of a feature only the embedded engine has when
// the servers run on a live cluster.
func embeddedOnly(t testing.TB, why string) {
	t.Helper()
	if liveCluster() != "" {
		t.Skipf("live NDB cluster: %s", why)
	}
}

// createLiveTables runs ndbgate ndb-create-tables --recreate --item-state,
// so the server about to start finds every table it needs, empty, as a
// fresh embedded engine would be, and keeps the meta protocol's item state
// as the engine does.
func createLiveTables(args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ndbgateBin, append([]string{"ndb-create-tables", "--recreate", "--item-state"}, args...)...)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ndbgate ndb-create-tables %q: %v\n%s", args, err, out)
	}
	return nil
}

// skipOrFailMissing skips the test when a tool is missing, except in CI where
// the test fails: CI installs every tool the suite needs.
func skipOrFailMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if harness.InCI() {
		t.Fatalf("%s (CI=true: required tool missing; run scripts/install-test-deps.sh)", msg)
	}
	t.Skipf("%s; skipping (run scripts/install-test-deps.sh, or set CI=true to make this fail)", msg)
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// cleanEnv is the test process's environment without NDBGATE_* variables, so
// that a developer's settings do not leak into the server under test.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NDBGATE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// server is one running ndbgate process.
type server struct {
	cmd          *exec.Cmd
	memcacheAddr string
	restAddr     string
	restTLS      bool                // --api-tls: /readyz is behind TLS, readiness is a TCP dial
	output       *harness.SyncBuffer // stdout and stderr
	done         chan struct{}
	waitErr      error
	stopped      bool
	killed       bool // ended with SIGKILL on purpose (kill)
}

// startServer starts `ndbgate serve` on free loopback ports with extra args,
// waits until it is ready, and registers a cleanup that stops it with SIGTERM
// and asserts exit code 0 and no panic in its output.
func startServer(t testing.TB, extraArgs ...string) *server {
	t.Helper()
	requireBinary(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := launchServer(t, extraArgs)
		if err == nil {
			t.Cleanup(func() { s.cleanup(t) })
			return s
		}
		lastErr = err
		// A port picked by freePort may have been taken in between: retry with
		// new ports, but only for that reason.
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("ndbgate did not start: %v", lastErr)
	return nil
}

// liveFlags are NDBGATE_TEST_LIVE_FLAGS for a server started with args:
// all of them, but --memcache-busy-poll (and its value) not on a gnet
// loop, whose polls cannot be kept awake and which refuses it.
func liveFlags(args []string) []string {
	flags := strings.Fields(os.Getenv("NDBGATE_TEST_LIVE_FLAGS"))
	gnet := false
	for i, a := range args {
		gnet = gnet || a == "--memcache-event-loop=gnet" || a == "--memcache-event-loop" && i+1 < len(args) && args[i+1] == "gnet"
	}
	if !gnet {
		return flags
	}
	kept := flags[:0:0]
	for i := 0; i < len(flags); i++ {
		switch {
		case flags[i] == "--memcache-busy-poll":
			i++ // and its value
		case strings.HasPrefix(flags[i], "--memcache-busy-poll="):
		default:
			kept = append(kept, flags[i])
		}
	}
	return kept
}

func launchServer(t testing.TB, extraArgs []string) (*server, error) {
	t.Helper()
	s := &server{
		memcacheAddr: freePort(t),
		restAddr:     freePort(t),
		output:       &harness.SyncBuffer{},
		done:         make(chan struct{}),
		restTLS:      containsArg(extraArgs, "--api-tls"),
	}
	if cs := liveCluster(); cs != "" {
		live := append([]string{"--ndb-connectstring", cs}, liveFlags(extraArgs)...)
		extraArgs = append(live, extraArgs...)
		if err := createLiveTables(extraArgs); err != nil {
			return nil, err
		}
	}
	args := append([]string{"serve", "--memcache", s.memcacheAddr, "--rest", s.restAddr, "--grpc", ""}, extraArgs...)
	s.cmd = exec.Command(ndbgateBin, args...)
	s.cmd.Env = cleanEnv()
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(); err != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		return nil, fmt.Errorf("%v\nargs: %q\noutput:\n%s", err, args, s.output.String())
	}
	return s, nil
}

func (s *server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	hc := &http.Client{Timeout: time.Second}
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("exited before becoming ready: %v", s.waitErr)
		default:
		}
		c, err := net.DialTimeout("tcp", s.memcacheAddr, 250*time.Millisecond)
		if err == nil && s.restTLS {
			_ = c.Close()
			if c, err = net.DialTimeout("tcp", s.restAddr, 250*time.Millisecond); err == nil {
				_ = c.Close()
				return nil
			}
		}
		if err == nil {
			_ = c.Close()
			resp, err := hc.Get("http://" + s.restAddr + "/readyz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				last = fmt.Errorf("/readyz: %s", resp.Status)
			} else {
				last = err
			}
		} else {
			last = err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", startTimeout, last)
}

// pid is the server's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

// alive reports whether the process is still running.
func (s *server) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and returns the exit code (-1 if it had to be killed).
func (s *server) stop(t testing.TB) int {
	t.Helper()
	if !s.stopped {
		s.stopped = true
		if s.alive() {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("ndbgate did not exit within %v of SIGTERM; killed", stopTimeout)
		return -1
	}
	return s.cmd.ProcessState.ExitCode()
}

// kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *server) kill() {
	s.stopped, s.killed = true, true
	_ = s.cmd.Process.Kill()
	<-s.done
}

func (s *server) cleanup(t testing.TB) {
	exitedEarly := !s.stopped && !s.alive()
	code := s.stop(t)
	out := s.output.String()
	if exitedEarly {
		t.Errorf("ndbgate exited during the test (%v)", s.waitErr)
	} else if code != 0 && !s.killed {
		t.Errorf("ndbgate exit code after SIGTERM = %d, want 0", code)
	}
	if strings.Contains(strings.ToLower(out), "panic") {
		t.Errorf("ndbgate output mentions a panic")
	}
	if t.Failed() {
		t.Logf("ndbgate output:\n%s", out)
	}
}

// httpGet fetches a path on the server's REST port.
func (s *server) httpGet(t testing.TB, path string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: ioTimeout}
	resp, err := hc.Get("http://" + s.restAddr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// ---------------------------------------------------------------------------
// Reference memcached

// haveMemcached reports whether a real memcached is on PATH.
func haveMemcached() bool {
	_, err := exec.LookPath("memcached")
	return err == nil
}

// startMemcached starts a real memcached (64 MiB, 1 MiB items) on a free port
// and returns its address and pid.
func startMemcached(t testing.TB) (string, int) {
	t.Helper()
	path, err := exec.LookPath("memcached")
	require.NoError(t, err)
	addr := freePort(t)
	_, port, _ := net.SplitHostPort(addr)
	args := []string{"-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64", "-c", "1024", "-t", "2"}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root")
	}
	out := &harness.SyncBuffer{}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			t.Fatalf("memcached exited: %s", out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond); err == nil {
			_ = c.Close()
			return addr, cmd.Process.Pid
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("memcached did not start listening on %s: %s", addr, out.String())
	return "", 0
}

// target is a server that speaks the memcached text protocol: ndbgate under
// test, or the reference memcached.
type target struct {
	name string // "memcached" or "ndbgate"
	addr string
	pid  int
	srv  *server // nil for memcached
}

func (tg *target) isReference() bool { return tg.srv == nil }

// forEachTarget runs fn in a subtest against a fresh memcached (when on PATH)
// and then against a fresh ndbgate started with ndbgateArgs. The memcached run
// proves the test's expectations are memcached's; the ndbgate run is the test.
func forEachTarget(t *testing.T, fn func(t *testing.T, tg *target), ndbgateArgs ...string) {
	t.Helper()
	t.Run("memcached", func(t *testing.T) {
		if !haveMemcached() {
			t.Skip("memcached not on PATH: expectations not cross-checked against the reference")
		}
		addr, pid := startMemcached(t)
		fn(t, &target{name: "memcached", addr: addr, pid: pid})
	})
	t.Run("ndbgate", func(t *testing.T) {
		s := startServer(t, ndbgateArgs...)
		fn(t, &target{name: "ndbgate", addr: s.memcacheAddr, pid: s.pid(), srv: s})
	})
	if runtime.GOOS == "linux" { // the default there is ndbgate's epoll loop batching through io_uring; check the others too
		t.Run("ndbgate-epoll", func(t *testing.T) {
			s := startServer(t, append([]string{"--memcache-io-uring=false"}, ndbgateArgs...)...)
			fn(t, &target{name: "ndbgate-epoll", addr: s.memcacheAddr, pid: s.pid(), srv: s})
		})
		t.Run("ndbgate-gnet", func(t *testing.T) {
			s := startServer(t, append([]string{"--memcache-event-loop", "gnet"}, ndbgateArgs...)...)
			fn(t, &target{name: "ndbgate-gnet", addr: s.memcacheAddr, pid: s.pid(), srv: s})
		})
	}
}

// ---------------------------------------------------------------------------
// Raw protocol connection

// rawConn is a plain TCP connection for byte-exact request/response checks.
// Every read and write has a deadline, so no check can hang.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	require.NoError(t, err, "dial %s", addr)
	return wrapRaw(t, c)
}

// wrapRaw makes a rawConn of any connection (unix socket, TLS).
func wrapRaw(t testing.TB, c net.Conn) *rawConn {
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

func (c *rawConn) close() { _ = c.c.Close() }

// send writes s in one write call.
func (c *rawConn) send(s string) {
	c.t.Helper()
	require.NoError(c.t, c.c.SetWriteDeadline(time.Now().Add(ioTimeout)))
	_, err := io.WriteString(c.c, s)
	require.NoError(c.t, err, "write %s", abbrev(s))
}

// expect reads exactly len(want) bytes and requires them to equal want.
func (c *rawConn) expect(want string) {
	c.t.Helper()
	got, err := c.readN(len(want))
	if err != nil {
		c.t.Fatalf("reading a reply of %d bytes: %v\nwant: %s\ngot:  %s", len(want), err, abbrev(want), abbrev(got))
	}
	if got != want {
		c.t.Fatalf("reply mismatch\nwant: %s\ngot:  %s", abbrev(want), abbrev(got))
	}
}

// roundTrip sends req and expects exactly want back.
func (c *rawConn) roundTrip(req, want string) {
	c.t.Helper()
	c.send(req)
	c.expect(want)
}

// roundTripTTL is roundTrip for a reply whose first line holds a remaining
// TTL (t<N>): a second boundary between the write that set it and this read
// makes it t<N-1>, on memcached as on ndbgate.
func (c *rawConn) roundTripTTL(req, want string) {
	c.t.Helper()
	c.send(req)
	head, rest, _ := strings.Cut(want, "\r\n")
	m := reTTLFlag.FindStringSubmatch(head)
	require.NotNil(c.t, m, "no TTL in %q", head)
	n, _ := strconv.Atoi(m[1])
	earlier := strings.Replace(head, " t"+m[1], " t"+strconv.Itoa(n-1), 1)
	if got := c.readLine(); got != head+"\r\n" && got != earlier+"\r\n" {
		c.t.Fatalf("reply mismatch\nwant: %s (or %s)\ngot:  %s", abbrev(head), abbrev(earlier), abbrev(got))
	}
	c.expect(rest)
}

var reTTLFlag = regexp.MustCompile(` t(\d+)\b`)

func (c *rawConn) readN(n int) (string, error) {
	if err := c.c.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		return "", err
	}
	buf := make([]byte, n)
	k, err := io.ReadFull(c.r, buf)
	return string(buf[:k]), err
}

// readLine reads one line including its "\r\n".
func (c *rawConn) readLine() string {
	c.t.Helper()
	require.NoError(c.t, c.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	line, err := c.r.ReadString('\n')
	require.NoError(c.t, err, "reading a line; got so far %q", line)
	return line
}

// readLineMatch reads one line and requires it to match the regexp, returning
// the submatches.
func (c *rawConn) readLineMatch(re *regexp.Regexp) []string {
	c.t.Helper()
	line := c.readLine()
	m := re.FindStringSubmatch(line)
	if m == nil {
		c.t.Fatalf("line %q does not match %s", line, re)
	}
	return m
}

// readUntilEnd reads lines up to and including "END\r\n" (at most max lines).
func (c *rawConn) readUntilEnd(maxLines int) []string {
	c.t.Helper()
	var lines []string
	for i := 0; i < maxLines; i++ {
		line := c.readLine()
		if line == "END\r\n" {
			return lines
		}
		lines = append(lines, line)
	}
	c.t.Fatalf("no END after %d lines; last lines: %q", maxLines, lines[max(0, len(lines)-5):])
	return nil
}

// expectClosed requires the server to close the connection with nothing more sent.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	require.NoError(c.t, c.c.SetReadDeadline(time.Now().Add(ioTimeout)))
	b, err := c.r.ReadByte()
	if err == nil {
		rest, _ := c.r.Peek(c.r.Buffered())
		c.t.Fatalf("expected the connection to be closed, got more bytes: %q", append([]byte{b}, rest...))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("expected the connection to be closed; it is still open after %v", ioTimeout)
	}
	// io.EOF or a reset both mean closed.
}

// expectSentinel checks that nothing unexpected is pending and the connection
// still works: a miss on a reserved key must answer exactly "END".
func (c *rawConn) expectSentinel() {
	c.t.Helper()
	c.roundTrip("get __e2e_sentinel__\r\n", "END\r\n")
}

// stats returns the general `stats` as a map.
func (c *rawConn) stats(args string) map[string]string {
	c.t.Helper()
	cmd := "stats"
	if args != "" {
		cmd += " " + args
	}
	c.send(cmd + "\r\n")
	m := map[string]string{}
	for _, line := range c.readUntilEnd(1000) {
		f := strings.SplitN(strings.TrimSuffix(line, "\r\n"), " ", 3)
		if len(f) != 3 || f[0] != "STAT" {
			c.t.Fatalf("bad stats line %q", line)
		}
		m[f[1]] = f[2]
	}
	return m
}

func statUint(t testing.TB, m map[string]string, name string) uint64 {
	t.Helper()
	v, ok := m[name]
	require.True(t, ok, "stats has no %q", name)
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "stat %s=%q is not an unsigned integer", name, v)
	return n
}

// abbrev quotes s, shortening very long strings in the middle.
func abbrev(s string) string {
	const max = 600
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s ...(%d bytes)... %s", strconv.Quote(s[:max/2]), len(s)-max, strconv.Quote(s[len(s)-max/2:]))
}

// waitFor polls cond every 50ms until it holds or the timeout passes.
func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
