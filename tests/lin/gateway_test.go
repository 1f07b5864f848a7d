package lin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The gateways under test are the real binary: NDBGATE_BIN, or one built
// here from ./cmd/ndbgate (with -tags ndbapi when NDBGATE_TEST_CONNECTSTRING
// names a live cluster).
var ndbgateBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("NDBGATE_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lin:", err)
			return 1
		}
		ndbgateBin = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "ndbgate-lin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lin:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ndbgateBin = filepath.Join(dir, "ndbgate")
	args := []string{"build", "-o", ndbgateBin}
	if liveCluster() != "" {
		args = append(args, "-tags", "ndbapi")
	}
	cmd := exec.Command("go", append(args, "./cmd/ndbgate")...)
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "lin: go build ./cmd/ndbgate: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

func liveCluster() string { return os.Getenv("NDBGATE_TEST_CONNECTSTRING") }

// gateway is one ndbgate process, restartable on the same ports.
type gateway struct {
	t              testing.TB
	args           []string
	memcache, rest string
	mu             sync.Mutex
	cmd            *exec.Cmd
	done           chan struct{}
	log            *os.File
	// launcher runs the binary (ip netns exec <ns>, say); hc asks /readyz
	// (from where the clients are). Both are nil for a gateway on loopback.
	launcher []string
	hc       *http.Client
	// dial reaches the gateway from where the clients are; nil on loopback.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// startGateway starts ndbgate serve with args on free loopback ports and
// waits until it is ready; the test's end stops it.
func startGateway(t testing.TB, args ...string) *gateway {
	t.Helper()
	return launch(t, &gateway{t: t, args: args, memcache: freePort(t), rest: freePort(t)})
}

// launch starts g and registers its stop at the test's end.
func launch(t testing.TB, g *gateway) *gateway {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "ndbgate-*.log")
	if err != nil {
		t.Fatal(err)
	}
	g.log = f
	g.start()
	t.Cleanup(func() {
		g.stop()
		out, _ := os.ReadFile(f.Name())
		if strings.Contains(string(out), "panic") {
			t.Errorf("ndbgate panicked:\n%s", out)
		} else if t.Failed() {
			t.Logf("ndbgate log (last 4 KiB):\n%s", tail(out, 4096))
		}
	})
	return g
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (g *gateway) start() {
	g.t.Helper()
	args := append([]string{"serve", "--memcache", g.memcache, "--rest", g.rest, "--grpc", ""}, g.args...)
	if cs := liveCluster(); cs != "" && g.launcher == nil {
		args = append(args, "--ndb-connectstring", cs)
	}
	name := ndbgateBin
	if g.launcher != nil {
		name, args = g.launcher[0], append(append(slices.Clone(g.launcher[1:]), ndbgateBin), args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = g.log, g.log
	if err := cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	g.mu.Lock()
	g.cmd, g.done = cmd, done
	g.mu.Unlock()
	deadline := time.Now().Add(120 * time.Second)
	for !g.ready() {
		select {
		case <-done:
			g.t.Fatalf("ndbgate exited at start-up (%s)", g.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("ndbgate not ready after 120s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether /readyz answers 200.
func (g *gateway) ready() bool {
	hc := g.hc
	if hc == nil {
		hc = &http.Client{Timeout: time.Second}
	}
	resp, err := hc.Get("http://" + g.rest + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill9 ends the process as a crash would.
func (g *gateway) kill9() {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop ends the process with SIGTERM (SIGKILL after 15 s).
func (g *gateway) stop() {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// clients are meta clients and REST clients of the gateways, spread over
// them in turn.
func clients(gws []*gateway, meta, rest int, timeout time.Duration) []Client {
	var cs []Client
	for i := 0; i < meta; i++ {
		g := gws[i%len(gws)]
		cs = append(cs, &MetaClient{Addr: g.memcache, Timeout: timeout, Via: i % len(gws), Dial: g.dial})
	}
	for i := 0; i < rest; i++ {
		g := gws[i%len(gws)]
		c := NewRESTClient(g.rest, "default", timeout)
		c.Via = i % len(gws)
		if g.dial != nil {
			c.HTTP.Transport = &http.Transport{DialContext: g.dial, MaxIdleConnsPerHost: 1}
		}
		cs = append(cs, c)
	}
	return cs
}

// finalReads reads every key once through each gateway after the load, so
// that the history ends with what each one serves.
func finalReads(rec *Recorder, first int, gws []*gateway, keys []string, timeout time.Duration) {
	for i, g := range gws {
		c := &MetaClient{Addr: g.memcache, Timeout: timeout, Via: i, Dial: g.dial}
		for _, k := range keys {
			in := Input{Kind: Get, Key: k, Gateway: i}
			call := rec.Now()
			out, attempted, unexpected := c.Do(in)
			if unexpected != "" {
				rec.Unexpected(unexpected)
			}
			if attempted {
				rec.Add(first+i, in, call, out, rec.Now())
			}
		}
		c.Close()
	}
}

// runFor runs w with cs for d.
func runFor(rec *Recorder, w Workload, cs []Client, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	w.Run(ctx, rec, 0, cs)
}
