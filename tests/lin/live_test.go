package lin

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ndbgate/ndbgate/tests/internal/ndbproc"
)

// Live scenarios run several gateways on the NDB cluster named by
// NDBGATE_TEST_CONNECTSTRING. The fault scenarios also need
// NDBGATE_TEST_FAULTS=1, ndb_mgm on PATH and the cluster's processes on this
// machine (see tests/internal/ndbproc). Every gateway serves the default
// container with the ndb-only policy, so the combined history of all of them
// must be linearizable.

const liveOpTimeout = 10 * time.Second

func liveOnly(t *testing.T) string {
	cs := liveCluster()
	if cs == "" {
		t.Skip("needs a live cluster: NDBGATE_TEST_CONNECTSTRING")
	}
	return cs
}

func liveFaults(t *testing.T) string {
	cs := liveOnly(t)
	if os.Getenv("NDBGATE_TEST_FAULTS") != "1" {
		t.Skip("fault scenarios need NDBGATE_TEST_FAULTS=1")
	}
	if _, err := exec.LookPath("ndb_mgm"); err != nil {
		t.Fatal("ndb_mgm must be on PATH")
	}
	return cs
}

// createLiveTables makes the default container's table where it is missing.
func createLiveTables(t *testing.T, cs string) {
	out, err := exec.Command(ndbgateBin, "ndb-create-tables", "--ndb-connectstring", cs).CombinedOutput()
	if err != nil {
		t.Fatalf("ndbgate ndb-create-tables: %v\n%s", err, out)
	}
}

// scenario is one live run: n gateways, the clients spread over them, a
// fault at about half time.
type scenario struct {
	gateways   int
	meta, rest int
	before     time.Duration // load before the fault
	after      time.Duration // load after the fault has healed
	// fault breaks something and returns once it has healed; its argument
	// is the gateways, for the scenarios that break one.
	fault func(t *testing.T, gws []*gateway)
	// caching serves every key under the caching policy, and checks the
	// history with CachingModel.
	caching bool
	// keys is how many keys the clients share (4 when 0). CachingModel's
	// search grows fast with a key's history: 4 keys gave it about 7,000
	// operations each in 10 s, more than the checker's bound could decide.
	keys int
	// large serves every key from a container with large values in parts
	// (large_test.go), with values of about 33 KB.
	large bool
	// polling is how many of the gateways (the first ones) run with both
	// busy polls on; the others run with both off, so that one history
	// holds lone requests that poll for their answer and ones that sleep for
	// it. Each polling one must have polled by the end.
	polling int
}

// pollingArgs turn on both busy polls, the front end's and the driver's,
// as auto does; quietArgs turn them off.
var (
	pollingArgs = []string{"--memcache-busy-poll", "50us", "--ndb-busy-poll", "200us"}
	quietArgs   = []string{"--memcache-busy-poll", "0", "--ndb-busy-poll", "0"}
)

func (sc scenario) run(t *testing.T) {
	cs := liveOnly(t)
	createLiveTables(t, cs)
	var args []string
	if sc.caching {
		cfg := filepath.Join(t.TempDir(), "caching.yaml")
		yaml := "key_prefixes:\n  - {prefix: \"\", container: default, policy: caching}\n"
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		args = []string{"--config", cfg}
	}
	if sc.large {
		cfg := largeConfigFile(t)
		createLargeTables(t, cs, cfg)
		args = []string{"--config", cfg}
	}
	var gws []*gateway
	for i := 0; i < sc.gateways; i++ {
		a := args
		switch {
		case i < sc.polling:
			a = append(slices.Clone(args), pollingArgs...)
		case sc.polling > 0:
			a = append(slices.Clone(args), quietArgs...)
		}
		gws = append(gws, startGateway(t, a...))
	}
	rec := NewRecorder()
	n := sc.keys
	if n == 0 {
		n = 4
	}
	w := Workload{Keys: keys(n), Weights: DefaultWeights, Pause: time.Millisecond}
	cs2 := clients(gws, sc.meta, sc.rest, liveOpTimeout)
	if sc.large {
		w.Weights, w.Repeat = LargeWeights, largeRepeat
		cs2 = largeClients(gws, sc.meta, sc.rest, liveOpTimeout)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, rec, 0, cs2); close(done) }()
	time.Sleep(sc.before)
	faultAt := rec.Now()
	var healed int64
	if sc.fault != nil {
		sc.fault(t, gws)
		healed = rec.Now()
	}
	time.Sleep(sc.after)
	cancel()
	<-done
	finalReads(rec, len(cs2), gws, w.Keys, liveOpTimeout)
	if sc.fault != nil {
		t.Logf("fault healed %v after it began; %s", time.Duration(healed-faultAt).Round(time.Millisecond), errorWindow(rec, faultAt))
	}
	for i := 0; i < sc.polling; i++ {
		n, ok := polledFlights(gws[i])
		if !ok || n == 0 {
			t.Errorf("gateway %d runs with the busy polls, yet polled no flight (metrics read: %v)", i, ok)
		}
		t.Logf("gateway %d polled %.0f flights", i, n)
	}
	if sc.caching {
		mustFitCaching(t, rec)
		return
	}
	mustBeLinearizable(t, rec)
}

// mustFitCaching checks a caching history against CachingModel, and says
// whether it is linearizable as well (the stale reads the policy allows
// make it not, when they happen).
func mustFitCaching(t *testing.T, rec *Recorder) {
	t.Helper()
	h := rec.History()
	if errs := rec.Errors(); len(errs) > 0 {
		t.Errorf("%d replies fitted no outcome, the first: %s", len(errs), errs[0])
	}
	s := Summarize(h)
	v := CheckCaching(h, checkTimeout)
	lin := Check(h, checkTimeout).Result
	t.Logf("caching history: %d operations (%s), %d ambiguous; the caching model: %v; linearizable: %v",
		s.Ops, kinds(s), s.Ambiguous, v.Result, lin)
	if v.Result != porcupine.Ok {
		path := filepath.Join(t.TempDir(), "caching.html")
		if dir := os.Getenv("NDBGATE_LIN_REPORT"); dir != "" {
			path = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".html")
		}
		_ = porcupine.VisualizePath(CachingModel, v.Info, path)
		explain(t, h, CachingModel)
		t.Fatalf("the history does not fit the caching policy (%v); visualization: %s", v.Result, path)
	}
}

// TestLiveCaching: two gateways serve every key under the caching policy.
// Their combined history must fit CachingModel: writes linearizable, reads
// possibly stale, never invented, and never older than the reader's own
// gateway's last write.
func TestLiveCaching(t *testing.T) {
	scenario{gateways: 2, meta: 6, rest: 2, before: 10 * time.Second, caching: true, keys: 16}.run(t)
}

// polledFlights is g's ndbgate_backend_flights_polled_total; false when its
// metrics could not be read.
func polledFlights(g *gateway) (float64, bool) {
	var n float64
	ok := scrapeMetrics(g, func(name, _ string, v float64) {
		if name == "ndbgate_backend_flights_polled_total" {
			n += v
		}
	})
	return n, ok
}

// errorWindow describes the failed operations from the fault on.
func errorWindow(rec *Recorder, from int64) string {
	f := rec.Failures()
	n := 0
	var first, last int64
	for _, at := range f {
		if at < from {
			continue
		}
		if n == 0 {
			first = at
		}
		last = at
		n++
	}
	if n == 0 {
		return "no operation failed"
	}
	return fmt.Sprintf("%d operations failed, from %v to %v after the fault began (a window of %v); seen: %s", n,
		time.Duration(first-from).Round(time.Millisecond), time.Duration(last-from).Round(time.Millisecond),
		time.Duration(last-first).Round(time.Millisecond), reasons(rec))
}

// TestLiveGateways: two, then three gateways on one cluster, without faults.
func TestLiveGateways(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d gateways", n), func(t *testing.T) {
			scenario{gateways: n, meta: 6, rest: 3, before: 10 * time.Second}.run(t)
		})
	}
}

// TestLiveDataNodeKilled: kill -9 of a data node; its angel starts it again.
// The first gateway runs with the busy polls on, the second without.
func TestLiveDataNodeKilled(t *testing.T) {
	cs := liveFaults(t)
	victim := envInt("NDBGATE_TEST_KILL_NODE", 2)
	if !ndbproc.NodeStarted(cs, victim) {
		t.Fatalf("node %d must be started", victim)
	}
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second, polling: 1,
		fault: func(t *testing.T, _ []*gateway) {
			if err := ndbproc.KillDataNode(cs, victim, 5*time.Minute); err != nil {
				t.Fatal(err)
			}
		}}.run(t)
}

// TestLiveLargeValuesDataNodeKilled: TestLiveDataNodeKilled with every
// value in parts: a large value's row and parts are one transaction, so the
// kill aborts both or neither.
func TestLiveLargeValuesDataNodeKilled(t *testing.T) {
	cs := liveFaults(t)
	victim := envInt("NDBGATE_TEST_KILL_NODE", 2)
	if !ndbproc.NodeStarted(cs, victim) {
		t.Fatalf("node %d must be started", victim)
	}
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second, large: true,
		fault: func(t *testing.T, _ []*gateway) {
			if err := ndbproc.KillDataNode(cs, victim, 5*time.Minute); err != nil {
				t.Fatal(err)
			}
		}}.run(t)
}

// TestLiveEveryDataNodeRestarted: every data node restarted at once (ndb_mgm
// "all restart"); the cluster is down until they are back. The first gateway
// runs with the busy polls on, the second without.
func TestLiveEveryDataNodeRestarted(t *testing.T) {
	cs := liveFaults(t)
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second, polling: 1,
		fault: func(t *testing.T, _ []*gateway) {
			ndbproc.Mgm(cs, "all restart")
			time.Sleep(time.Second)
			deadline := time.Now().Add(5 * time.Minute)
			for !ndbproc.AllStarted(cs, 2) {
				if time.Now().After(deadline) {
					t.Fatal("the data nodes did not come back within 5 minutes")
				}
				time.Sleep(200 * time.Millisecond)
			}
		}}.run(t)
}

// TestLiveDataNodeStopped: a data node stopped (SIGSTOP) for 2 s, less
// than the cluster takes to declare it failed, then continued. Requests it
// had when it stopped complete when it answers, later ones for it are
// refused unsent (ndb.flight_wait) and tried again for up to a second,
// then fail Temporary, and the history stays
// linearizable. Meanwhile the other node's keys are still read: of 64 gets
// on distinct keys sent while it is stopped, those on the other node
// (about half) must be answered within half a second. Before flights left
// a stopped node's share to complete later, every event loop waited for
// it, and none was.
func TestLiveDataNodeStopped(t *testing.T) {
	cs := liveFaults(t)
	victim := envInt("NDBGATE_TEST_KILL_NODE", 2)
	if !ndbproc.NodeStarted(cs, victim) {
		t.Fatalf("node %d must be started", victim)
	}
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second, polling: 1,
		fault: func(t *testing.T, gws []*gateway) {
			worker, _, err := ndbproc.DataNode(victim)
			if err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			if err := syscall.Kill(worker.PID, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = syscall.Kill(worker.PID, syscall.SIGCONT) }()
			time.Sleep(200 * time.Millisecond) // every loop has met the stopped node by now
			answered := probeGets(t, gws[0], 64, 500*time.Millisecond)
			time.Sleep(2*time.Second - time.Since(stopped))
			if err := syscall.Kill(worker.PID, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			t.Logf("with node %d stopped, %d of 64 gets on distinct keys were answered within 500ms", victim, answered)
			if answered == 0 {
				t.Errorf("no get was answered while node %d was stopped: a stopped node holds up the other node's keys", victim)
			}
			if answered == 64 {
				t.Errorf("every get was answered while node %d was stopped: was it stopped?", victim)
			}
		}}.run(t)
}

// probeGets sends n memcache gets at once, each on a key of its own
// connection to gw, and returns how many were answered within wait.
func probeGets(t *testing.T, gw *gateway, n int, wait time.Duration) int {
	t.Helper()
	var answered atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(wait)
	dial := gw.dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial(context.Background(), "tcp", gw.memcache)
			if err != nil {
				t.Errorf("probe %d: %v", i, err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(deadline)
			if _, err := fmt.Fprintf(c, "mg probe-%d v\r\n", i); err != nil {
				return
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil && (strings.HasPrefix(line, "EN") || strings.HasPrefix(line, "VA")) {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(answered.Load())
}

// TestLiveGatewayKilled: kill -9 of one of two gateways, then it starts
// again; the clients of the other one never stop.
func TestLiveGatewayKilled(t *testing.T) {
	liveFaults(t)
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second,
		fault: func(t *testing.T, gws []*gateway) {
			gws[0].kill9()
			time.Sleep(time.Second)
			gws[0].start()
		}}.run(t)
}

// TestLiveManagementServerDown: ndb_mgmd killed for 10 s while the
// gateways serve.
func TestLiveManagementServerDown(t *testing.T) {
	cs := liveFaults(t)
	scenario{gateways: 2, meta: 6, rest: 2, before: 5 * time.Second, after: 5 * time.Second,
		fault: func(t *testing.T, _ []*gateway) {
			m, err := ndbproc.Management()
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Second)
			if err := ndbproc.StartLike(m); err != nil {
				t.Fatal(err)
			}
			if err := ndbproc.WaitManagement(cs, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}}.run(t)
}

// reasons lists what the failed operations saw, most frequent first (over
// the whole run).
func reasons(rec *Recorder) string {
	why := rec.FailureReasons()
	keys := slices.Collect(maps.Keys(why))
	slices.SortFunc(keys, func(a, b string) int { return why[b] - why[a] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %q", why[k], k))
	}
	if len(parts) == 0 {
		return "no reason recorded"
	}
	return strings.Join(parts, ", ")
}
