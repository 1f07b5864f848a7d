package ndbmemcache

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env is what the differential test needs from the machine; it skips
// without it.
type env struct {
	cs     string // NDBGATE_TEST_CONNECTSTRING
	gwBin  string // NDBGATE_BIN: ndbgate built with the NDB driver
	nmDir  string // NDBMEMCACHE_DIR: ndb_engine.so and extra/memcached/memcached
	nmBin  string
	engine string
}

func testEnv(t *testing.T) env {
	e := env{cs: os.Getenv("NDBGATE_TEST_CONNECTSTRING"), gwBin: os.Getenv("NDBGATE_BIN"), nmDir: os.Getenv("NDBMEMCACHE_DIR")}
	if e.cs == "" || e.gwBin == "" || e.nmDir == "" {
		t.Skip("set NDBGATE_TEST_CONNECTSTRING, NDBGATE_BIN and NDBMEMCACHE_DIR to run the differential test against ndbmemcache")
	}
	e.nmBin = filepath.Join(e.nmDir, "extra", "memcached", "memcached")
	e.engine = filepath.Join(e.nmDir, "ndb_engine.so")
	for _, f := range []string{e.gwBin, e.nmBin, e.engine} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v", err)
		}
	}
	return e
}

// server is one of the two servers under comparison.
type server struct {
	name string // "ndbmemcache" or "ndbgate"
	addr string // memcache host:port
	cmd  *exec.Cmd
	log  string        // its stdout and stderr
	done chan struct{} // closed when it has exited
	// lost says why the server stopped serving in a sequence (it crashed,
	// or stopped answering); the next sequence starts another.
	lost string
	rest string // ndbgate: its REST host:port
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// logDir keeps the servers' logs: NDBMEMCACHE_DIFF_LOGS, or the test's
// temporary directory.
func logDir(t *testing.T) string {
	if d := os.Getenv("NDBMEMCACHE_DIFF_LOGS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// start runs cmd with its output in a log file, and stops it when the test
// ends.
func start(t *testing.T, name, role string, cmd *exec.Cmd) *server {
	t.Helper()
	s := &server{name: name, cmd: cmd, done: make(chan struct{}),
		log: filepath.Join(logDir(t), fmt.Sprintf("%s-%s-%d.log", name, role, time.Now().UnixNano()))}
	f, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); f.Close(); close(s.done) }()
	t.Cleanup(func() { s.stop(false) })
	return s
}

// stop ends the server: SIGTERM, then SIGKILL after 5 s (at once with kill).
func (s *server) stop(kill bool) {
	if !kill {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
			return
		case <-time.After(5 * time.Second):
		}
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *server) tail() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// startNdbmemcache runs MySQL Cluster's memcached with ndb_engine serving
// role, as bench/live.sh does, and waits until it answers.
func startNdbmemcache(t *testing.T, e env, role string) *server {
	port := freePort(t)
	args := []string{}
	if os.Getuid() == 0 {
		args = append(args, "-u", "root")
	}
	args = append(args, "-E", e.engine, "-e", "connectstring="+e.cs+";role="+role,
		"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-t", "2")
	s := start(t, "ndbmemcache", role, exec.Command(e.nmBin, args...))
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			c.Close()
			return s
		}
		if s.exited() || time.Now().After(deadline) {
			t.Fatalf("ndbmemcache (role %s) did not start:\n%s", role, s.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startNdbgate runs ndbgate serving role and waits for /readyz. When the
// cluster lacks ndbmemcache's configuration tables it makes them (with the
// demo rows) through ndb-create-tables --ndbmemcache-config, once.
func startNdbgate(t *testing.T, e env, role string) *server {
	for try := 0; ; try++ {
		port, rest := freePort(t), freePort(t)
		cmd := exec.Command(e.gwBin, "serve", "--ndb-connectstring", e.cs, "--ndbmemcache-role", role,
			"--ndb-pool-size", "1", "--memcache", fmt.Sprintf("127.0.0.1:%d", port),
			"--rest", fmt.Sprintf("127.0.0.1:%d", rest), "--grpc", "")
		s := start(t, "ndbgate", role, cmd)
		s.addr, s.rest = fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", rest)
		ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", rest)
		deadline := time.Now().Add(90 * time.Second)
		for {
			if r, err := http.Get(ready); err == nil {
				r.Body.Close()
				if r.StatusCode == http.StatusOK {
					return s
				}
			}
			if s.exited() || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		log := s.tail()
		if try == 0 && strings.Contains(log, "ndb-create-tables --ndbmemcache-config") {
			t.Logf("ndbgate: no ndbmemcache configuration in the cluster: making it with ndb-create-tables --ndbmemcache-config")
			out, err := exec.Command(e.gwBin, "ndb-create-tables", "--ndb-connectstring", e.cs, "--ndbmemcache-config").CombinedOutput()
			if err != nil {
				t.Fatalf("ndb-create-tables: %v\n%s", err, out)
			}
			t.Logf("%s", bytes.TrimSpace(out))
			continue
		}
		t.Fatalf("ndbgate (role %s) did not become ready:\n%s", role, log)
	}
}
