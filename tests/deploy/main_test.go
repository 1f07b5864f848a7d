// Package deploy tests the deployment artifacts under deploy/ with the tools
// users feed them: podman builds and runs the image, helm lints and renders
// the chart (every object decoded strictly into the k8s.io/api types and
// prometheus-operator's, and the ndbgate container's configuration run by
// the real binary), podman kube play runs the chart's Deployment, the
// Grafana dashboard is decoded strictly by Grafana's own schema types and
// each query parsed by Prometheus's PromQL parser and checked against a
// running ndbgate's /metrics, promtool checks and unit-tests the alert
// rules, a real Prometheus scrapes running ndbgates with those rules (the
// dashboard's queries answered, injected faults alerted), and the READMEs'
// commands are run.
//
// It is a module of its own (k8s.io/api, the PromQL parser and the Grafana
// schema stay out of ndbgate's go.mod); `make test` runs it (make
// deploy-test).
//
// Environment:
//
//	CI=true    a missing tool (podman, helm) fails instead of skipping
//	HELM       the helm binary (default: bin/tools/helm, then PATH)
//	PODMAN     the podman binary (default: PATH)
//	PROMTOOL   promtool (default: bin/tools/promtool, then PATH)
//	PROMETHEUS the Prometheus server (default: bin/tools/prometheus, then PATH)
//	UPDATE=1   rewrite deploy/kubernetes/sidecar.yaml from the chart, and the
//	           chart's files/ndbgate-rules.yaml from deploy/prometheus
//
// Servers started here listen on 127.0.0.1, ports 23000-23999.
package deploy

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndbgate/ndbgate/tests/internal/harness"
)

var (
	// repoRoot is ndbgate's repository (the directory holding cmd/ndbgate).
	repoRoot string
	// underTest is a static (CGO off) ndbgate built from the repository, as
	// the image holds, or why it could not be built; ndbgateBin is its path.
	underTest  *harness.Binary
	ndbgateBin string
	// cleanups run after every test (files several tests share).
	cleanups []func()
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploy: %v\n", err)
		return 1
	}
	repoRoot = root
	dir, err := os.MkdirTemp("", "ndbgate-deploy-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "deploy: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	underTest = harness.Build("deploy", repoRoot, dir, []string{"CGO_ENABLED=0"}, "-trimpath")
	ndbgateBin = underTest.Path
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	return code
}

func requireBinary(t testing.TB) {
	t.Helper()
	underTest.Require(t)
}

// tool finds a tool: the environment variable env, then the candidates
// (relative to the repository), then PATH. A missing tool skips the test,
// or fails it in CI, where scripts/install-test-deps.sh installs it.
func tool(t testing.TB, env, name string, candidates ...string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	for _, c := range candidates {
		p := filepath.Join(repoRoot, c)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found (set %s, or run scripts/install-test-deps.sh)", name, env)
	if harness.InCI() {
		t.Fatalf("%s; CI=true: required tool missing", msg)
	}
	t.Skip(msg)
	return ""
}

func helmBin(t testing.TB) string { return tool(t, "HELM", "helm", "bin/tools/helm") }

func podmanBin(t testing.TB) string { return tool(t, "PODMAN", "podman") }

// run runs a command and returns its combined output.
func run(t testing.TB, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRun(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := run(t, timeout, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

var (
	portsMu sync.Mutex
	taken   = map[int]bool{}
)

// freePort returns a port in 23000-23999 that is free on 127.0.0.1 now and
// that no other test of this run was given.
func freePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	start := 23000 + rand.IntN(1000)
	for i := range 1000 {
		p := 23000 + (start-23000+i)%1000
		if taken[p] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		taken[p] = true
		return p
	}
	t.Fatal("no free port in 23000-23999")
	return 0
}

// server is a running ndbgate process.
type server struct {
	cmd  *exec.Cmd
	log  *harness.SyncBuffer
	done chan error
}

// startServer runs ndbgate with args and exactly env (no inherited
// NDBGATE_* variables), and stops it when the test ends.
func startServer(t testing.TB, env []string, args ...string) *server {
	t.Helper()
	requireBinary(t)
	return startServerWith(t, ndbgateBin, env, nil, args...)
}

// startServerWith runs bin (an ndbgate) with attr (nil: as this process).
func startServerWith(t testing.TB, bin string, env []string, attr *syscall.SysProcAttr, args ...string) *server {
	t.Helper()
	s := &server{log: &harness.SyncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, args...)
	s.cmd.SysProcAttr = attr
	s.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}, env...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start ndbgate: %v", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop sends SIGTERM and waits for the exit; it fails the test if the
// server does not exit 0 within 15 s (its grace is 10 s).
func (s *server) stop(t testing.TB) {
	t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("ndbgate exited with %v after SIGTERM\n%s", err, s.log)
		}
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("ndbgate did not stop within 15 s of SIGTERM\n%s", s.log)
	}
}

// waitHTTP polls url until it answers 200, the server exits, or 20 s pass.
func (s *server) waitHTTP(t testing.TB, client *http.Client, url string) {
	t.Helper()
	exited := func() error {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("ndbgate exited (%v)", err)
		default:
			return nil
		}
	}
	waitOK(t, client, url, s.log.String, exited)
}

// waitOK polls url until it answers 200 or 20 s pass. gone, when not nil,
// says why waiting longer is pointless (the server exited).
func waitOK(t testing.TB, client *http.Client, url string, logs func() string, gone func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if gone != nil {
			if err := gone(); err != nil {
				t.Fatalf("%v before %s answered\n%s", err, url, logs())
			}
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within 20 s (last: %v)\n%s", url, err, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialMemcache connects, with 5 s for the whole conversation.
func dialMemcache(t testing.TB, network, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial memcache %s %s: %v", network, addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

// memcacheRoundTrip stores and reads back one item over a memcache
// connection (network "tcp" or "unix").
func memcacheRoundTrip(t testing.TB, network, addr, key, value string) {
	t.Helper()
	c := dialMemcache(t, network, addr)
	defer c.Close()
	fmt.Fprintf(c, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(value), value, key)
	r := bufio.NewReader(c)
	want := []string{"STORED", fmt.Sprintf("VALUE %s 0 %d", key, len(value)), value, "END"}
	for _, w := range want {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("memcache %s %s: reading %q: %v", network, addr, w, err)
		}
		if got := strings.TrimRight(line, "\r\n"); got != w {
			t.Fatalf("memcache %s %s: got %q, want %q", network, addr, got, w)
		}
	}
}

// memcacheGet reads one item ("" when it is missing).
func memcacheGet(t testing.TB, network, addr, key string) string {
	t.Helper()
	c := dialMemcache(t, network, addr)
	defer c.Close()
	fmt.Fprintf(c, "get %s\r\n", key)
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("memcache get %s: %v", key, err)
	}
	if strings.TrimSpace(line) == "END" {
		return ""
	}
	value, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("memcache get %s: %v", key, err)
	}
	return strings.TrimRight(value, "\r\n")
}
