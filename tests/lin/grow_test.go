package lin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndbgate/ndbgate/tests/internal/ndbproc"
)

// TestLiveClusterGrows adds a node group to the live cluster while two
// gateways serve, by hand (NDBGATE_TEST_GROW=1), as the NDB manual's "adding
// data nodes online" does it:
//
//  1. the management server restarted with NDBGATE_TEST_GROW_CONFIG (the
//     same configuration with the new data nodes, NDBGATE_TEST_GROW_NODES,
//     default 3,4) and --reload;
//  2. a rolling restart of the data nodes;
//  3. the API nodes learn the new data nodes: the gateways do it
//     themselves, without a restart; mysqld cannot, and is restarted as the
//     manual says (NDBGATE_TEST_GROW_SQL_RESTART, a shell command);
//  4. the new data nodes started with --initial, CREATE NODEGROUP, and the
//     new nodes restarted once (so that their angels forget --initial);
//  5. the table reorganised onto the new node group through mysqld
//     (NDBGATE_TEST_MYSQL, the mysql client command): ALTER TABLE ...
//     REORGANIZE PARTITION, which MySQL 5.7 runs in place (online) on NDB.
//
// All along the lin clients run on their own keys (their history is checked
// for linearizability: no acknowledged write lost, no stale read) and, when
// memtier_benchmark is on PATH, memtier runs 1:10 against the first
// gateway. Every second the gateways' metrics are sampled into
// NDBGATE_TEST_GROW_CSV: requests and server errors, hinted transactions
// and those on the primary, data nodes and partitions. The run fails unless
// the history is linearizable, both gateways (the same processes) report
// the new data nodes and the reorganised partitions, and the hinted
// transactions of the last 10 s all ran on their primaries.
//
// It leaves the cluster grown: restore the two-node configuration by hand.
func TestLiveClusterGrows(t *testing.T) {
	cs := liveFaults(t)
	if os.Getenv("NDBGATE_TEST_GROW") != "1" {
		t.Skip("growing the cluster runs by hand: NDBGATE_TEST_GROW=1")
	}
	grown := os.Getenv("NDBGATE_TEST_GROW_CONFIG")
	mysql := strings.Fields(os.Getenv("NDBGATE_TEST_MYSQL"))
	sqlRestart := os.Getenv("NDBGATE_TEST_GROW_SQL_RESTART")
	if grown == "" || len(mysql) == 0 || sqlRestart == "" {
		t.Fatal("NDBGATE_TEST_GROW_CONFIG (the grown config.ini), NDBGATE_TEST_MYSQL (the mysql command) and " +
			"NDBGATE_TEST_GROW_SQL_RESTART (a command that restarts mysqld and waits for it) are needed")
	}
	var added []int
	for _, f := range strings.Split(envOr("NDBGATE_TEST_GROW_NODES", "3,4"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("NDBGATE_TEST_GROW_NODES: %v", err)
		}
		added = append(added, n)
	}
	show := ndbproc.Mgm(cs, "show")
	for _, n := range added {
		if strings.Contains(show, fmt.Sprintf("id=%d\t", n)) || strings.Contains(show, fmt.Sprintf("id=%d ", n)) {
			t.Fatalf("node %d is already in the management server's configuration:\n%s", n, show)
		}
	}
	oldNodes := ndbproc.Procs("ndbmtd")
	if len(oldNodes) == 0 {
		oldNodes = ndbproc.Procs("ndbd")
	}
	var old []int
	var like ndbproc.Proc
	for _, p := range oldNodes {
		for _, a := range p.Args {
			if v, ok := strings.CutPrefix(a, "--ndb-nodeid="); ok {
				n, _ := strconv.Atoi(v)
				if !slices.Contains(old, n) {
					old = append(old, n)
				}
				_, angel, err := ndbproc.DataNode(n)
				if err == nil && like.PID == 0 {
					like = angel
				}
			}
		}
	}
	slices.Sort(old)
	if len(old) == 0 || like.PID == 0 {
		t.Fatal("no data node process found (start data nodes with --ndb-nodeid=N)")
	}

	sql := func(stmt string) (time.Duration, error) {
		start := time.Now()
		cmd := exec.Command(mysql[0], append(slices.Clone(mysql[1:]), "-e", stmt)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v\n%s", stmt, err, out)
		}
		return time.Since(start), nil
	}
	if _, err := sql(`DROP DATABASE IF EXISTS ndbgate_grow; CREATE DATABASE ndbgate_grow;
		CREATE TABLE ndbgate_grow.kv (mkey VARCHAR(250) NOT NULL, string_value VARBINARY(13500),
		flags INT UNSIGNED, cas_value BIGINT UNSIGNED, expire_time INT UNSIGNED, math_value BIGINT UNSIGNED,
		PRIMARY KEY (mkey) USING HASH) ENGINE=NDBCLUSTER`); err != nil {
		t.Fatal(err)
	}
	cfg := growConfig(t)
	gws := []*gateway{startGateway(t, "--config", cfg), startGateway(t, "--config", cfg)}
	pids := []int{gws[0].pid(), gws[1].pid()}
	before, _ := gatewayMetrics(gws[0])

	out := os.Getenv("NDBGATE_TEST_GROW_CSV")
	if out == "" {
		out = filepath.Join(t.TempDir(), "grow.csv")
	}
	csv, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer csv.Close()

	rec := NewRecorder()
	load := Workload{Keys: keys(64), Weights: DefaultWeights, Pause: time.Millisecond}
	lc := clients(gws, 6, 2, liveOpTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loadDone := make(chan struct{})
	go func() { load.Run(ctx, rec, 0, lc); close(loadDone) }()

	var memtier *exec.Cmd
	if path, err := exec.LookPath("memtier_benchmark"); err == nil {
		host, port, _ := strings.Cut(gws[0].memcache, ":")
		memtier = exec.CommandContext(ctx, path, "-s", host, "-p", port, "-P", "memcache_text", "--ratio=1:10",
			"-t", "1", "-c", "8", "--test-time=3600", "--key-prefix=grow:", "--key-maximum=20000", "-d", "100",
			"--hide-histogram")
		mlog, _ := os.Create(filepath.Join(t.TempDir(), "memtier.log"))
		memtier.Stdout, memtier.Stderr = mlog, mlog
		if err := memtier.Start(); err != nil {
			t.Fatalf("memtier_benchmark: %v", err)
		}
	} else {
		t.Log("memtier_benchmark is not on PATH: only the lin clients load the gateways")
	}

	// The sampler: one line a second, summed over the gateways.
	var phaseMu sync.Mutex
	phase := "before"
	setPhase := func(p string) {
		phaseMu.Lock()
		phase = p
		phaseMu.Unlock()
		t.Logf("%6.1fs %s", time.Duration(rec.Now()).Seconds(), p)
	}
	var samples []growSample
	var samplesMu sync.Mutex
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		fmt.Fprintln(csv, "seconds,phase,requests_per_s,server_errors,lin_failures,hinted_per_s,on_primary_per_s,on_primary_share,data_nodes,partitions,connections_remade,tables_redescribed")
		prev, _ := sumMetrics(gws)
		prevAt := time.Now()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cur, ok := sumMetrics(gws)
			if !ok {
				continue // a gateway did not answer: the next sample covers this second
			}
			phaseMu.Lock()
			p := phase
			phaseMu.Unlock()
			// Per second, over the time since the last sample that answered.
			secs := time.Since(prevAt).Seconds()
			s := growSample{at: time.Duration(rec.Now()), phase: p,
				requests: (cur.requests - prev.requests) / secs, errors: cur.errors - prev.errors,
				hinted: (cur.hinted - prev.hinted) / secs, onPrimary: (cur.onPrimary - prev.onPrimary) / secs,
				dataNodes: cur.dataNodes, partitions: cur.partitions, remade: cur.remade, redescribed: cur.redescribed}
			n := 0
			for _, at := range rec.Failures() {
				if at >= rec.Now()-int64(time.Second) {
					n++
				}
			}
			s.linFailures = n
			share := 0.0
			if s.hinted > 0 {
				share = s.onPrimary / s.hinted
			}
			fmt.Fprintf(csv, "%.1f,%s,%.0f,%.0f,%d,%.0f,%.0f,%.4f,%.0f,%.0f,%.0f,%.0f\n", s.at.Seconds(), s.phase,
				s.requests, s.errors, s.linFailures, s.hinted, s.onPrimary, share, s.dataNodes, s.partitions, s.remade, s.redescribed)
			samplesMu.Lock()
			samples = append(samples, s)
			samplesMu.Unlock()
			prev, prevAt = cur, time.Now()
		}
	}()

	time.Sleep(20 * time.Second)
	setPhase("mgmd")
	m, err := ndbproc.Management()
	if err != nil {
		t.Fatal(err)
	}
	if err := ndbproc.ReloadManagement(cs, m, grown, time.Minute); err != nil {
		t.Fatal(err)
	}
	setPhase("rolling-restart")
	for _, n := range old {
		if err := ndbproc.RestartDataNode(cs, n, false, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	setPhase("learn")
	want := float64(len(old) + len(added))
	learnStart := time.Now()
	for _, g := range gws {
		for m, _ := gatewayMetrics(g); m.dataNodes < want; m, _ = gatewayMetrics(g) {
			if time.Since(learnStart) > 2*time.Minute {
				t.Fatalf("gateway %s still knows %.0f data nodes, want %.0f", g.rest, m.dataNodes, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("the gateways knew the %.0f data nodes %v after the rolling restart", want, time.Since(learnStart).Round(time.Millisecond))
	setPhase("sql-restart")
	if out, err := exec.Command("sh", "-c", sqlRestart).CombinedOutput(); err != nil {
		t.Fatalf("restarting mysqld (%s): %v\n%s", sqlRestart, err, out)
	}
	setPhase("new-nodes")
	for _, n := range added {
		if err := ndbproc.StartNewDataNode(like, n); err != nil {
			t.Fatalf("starting data node %d: %v", n, err)
		}
	}
	for deadline := time.Now().Add(5 * time.Minute); !ndbproc.AllStarted(cs, len(old)+len(added)); {
		if time.Now().After(deadline) {
			t.Fatalf("the new data nodes did not start:\n%s", ndbproc.Mgm(cs, "show"))
		}
		time.Sleep(time.Second)
	}
	ids := make([]string, len(added))
	for i, n := range added {
		ids[i] = strconv.Itoa(n)
	}
	if out := ndbproc.Mgm(cs, "create nodegroup "+strings.Join(ids, ",")); !strings.Contains(out, "created") {
		t.Fatalf("CREATE NODEGROUP: %s", out)
	}
	// NDB 7.5.0's angel restarts a data node that died of a signal with the
	// options it was first started with: --initial would then wipe the
	// node's file system, and with it a node group's only copies should the
	// whole group go down. A restart through ndb_mgm clears it; in 7.5.0 a
	// node of a new node group never finishes a graceful shutdown (its SUMA
	// handover waits for no node), so these restart at once ("-a").
	setPhase("restart-new")
	for _, n := range added {
		if err := ndbproc.RestartDataNode(cs, n, true, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	setPhase("reorganise")
	reorgAt := rec.Now()
	took, err := sql("ALTER TABLE ndbgate_grow.kv REORGANIZE PARTITION")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("REORGANIZE PARTITION took %v", took.Round(time.Millisecond))
	setPhase("after")
	time.Sleep(30 * time.Second)
	cancel()
	<-loadDone
	<-sampled
	if memtier != nil {
		_ = memtier.Wait()
	}
	finalReads(rec, len(lc), gws, load.Keys, liveOpTimeout)

	// The same processes, and what they now see.
	for i, g := range gws {
		if g.pid() != pids[i] {
			t.Errorf("gateway %d was restarted", i)
		}
		m, _ := gatewayMetrics(g)
		t.Logf("gateway %d: %.0f data nodes, %.0f partitions (%.0f before), %.0f connections remade, %.0f tables described again",
			i, m.dataNodes, m.partitions, before.partitions, m.remade, m.redescribed)
		if m.dataNodes != want || m.partitions <= before.partitions || m.remade == 0 || m.redescribed == 0 {
			t.Errorf("gateway %d does not show the new layout", i)
		}
	}
	for i, g := range gws {
		if b, err := os.ReadFile(g.log.Name()); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "NDB:") {
					t.Logf("gateway %d: %s", i, line)
				}
			}
		}
	}
	samplesMu.Lock()
	defer samplesMu.Unlock()
	summarizeGrowth(t, samples, time.Duration(reorgAt))
	t.Logf("samples: %s; %s", out, errorWindow(rec, 0))
	mustBeLinearizable(t, rec)
}

// growConfig writes a configuration whose default container is
// ndbgate_grow.kv, the table made in SQL that the grow test reorganises.
func growConfig(t *testing.T) string {
	cfg := filepath.Join(t.TempDir(), "grow.yaml")
	yaml := `containers:
  - {name: default, database: ndbgate_grow, table: kv, key_columns: [mkey], value_columns: [string_value],
     flags_column: flags, cas_column: cas_value, expire_column: expire_time, math_column: math_value}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// growSample is one second of the gateways' metrics, summed.
type growSample struct {
	at                                         time.Duration
	phase                                      string
	requests, errors, hinted, onPrimary        float64
	dataNodes, partitions, remade, redescribed float64
	linFailures                                int
}

// summarizeGrowth logs per phase the median requests/s, the server errors
// and lin failures, and the share of hinted transactions on their primary;
// how long after the reorganisation began the share was back at 100 %; and
// fails if the last 10 s are not all on their primaries.
func summarizeGrowth(t *testing.T, samples []growSample, reorgAt time.Duration) {
	t.Helper()
	var order []string
	by := map[string][]growSample{}
	for _, s := range samples {
		if _, ok := by[s.phase]; !ok {
			order = append(order, s.phase)
		}
		by[s.phase] = append(by[s.phase], s)
	}
	for _, p := range order {
		ss := by[p]
		var rates []float64
		var errs, hinted, onPri float64
		lin := 0
		for _, s := range ss {
			rates = append(rates, s.requests)
			errs += s.errors
			hinted += s.hinted
			onPri += s.onPrimary
			lin += s.linFailures
		}
		slices.Sort(rates)
		share := 0.0
		if hinted > 0 {
			share = 100 * onPri / hinted
		}
		t.Logf("%-16s %4d s: requests/s median %.0f (min %.0f, max %.0f); server errors %.0f; lin failures %d; on primary %.2f %%",
			p, len(ss), rates[len(rates)/2], rates[0], rates[len(rates)-1], errs, lin, share)
	}
	var back time.Duration = -1
	for i, s := range samples {
		if s.at < reorgAt || s.hinted == 0 || s.onPrimary < s.hinted {
			back = -1
			continue
		}
		if back < 0 {
			back = samples[i].at - reorgAt
		}
	}
	if back < 0 {
		t.Errorf("the share of hinted transactions on their primary was not back at 100 %% by the end")
	} else {
		t.Logf("on their primaries again (every second since) %v after the reorganisation began", back.Round(time.Second))
	}
	if len(samples) >= 10 {
		var hinted, onPri float64
		for _, s := range samples[len(samples)-10:] {
			hinted += s.hinted
			onPri += s.onPrimary
		}
		if hinted == 0 || onPri < hinted {
			t.Errorf("last 10 s: %.0f of %.0f hinted transactions on their primary", onPri, hinted)
		}
	}
}

// growMetrics are the figures the grow test reads from a gateway.
type growMetrics struct {
	requests, errors, hinted, onPrimary        float64
	dataNodes, partitions, remade, redescribed float64
}

// sumMetrics sums the gateways' metrics; ok is false when one of them did not
// answer.
func sumMetrics(gws []*gateway) (s growMetrics, ok bool) {
	for i, g := range gws {
		m, ok := gatewayMetrics(g)
		if !ok {
			return s, false
		}
		s.requests += m.requests
		s.errors += m.errors
		s.hinted += m.hinted
		s.onPrimary += m.onPrimary
		s.remade += m.remade
		s.redescribed += m.redescribed
		if i == 0 {
			s.dataNodes, s.partitions = m.dataNodes, m.partitions
		}
	}
	return s, true
}

// gatewayMetrics scrapes g's /metrics; ok is false when it did not answer.
func gatewayMetrics(g *gateway) (m growMetrics, ok bool) {
	ok = scrapeMetrics(g, func(name, labels string, v float64) {
		switch name {
		case "ndbgate_requests_total":
			m.requests += v
			if strings.Contains(labels, `outcome="server_error"`) {
				m.errors += v
			}
		case "ndbgate_backend_hinted_transactions_total":
			m.hinted = v
		case "ndbgate_backend_transactions_on_primary_total":
			m.onPrimary = v
		case "ndbgate_backend_data_nodes":
			m.dataNodes = v
		case "ndbgate_backend_partitions":
			m.partitions = v
		case "ndbgate_backend_connections_remade_total":
			m.remade = v
		case "ndbgate_backend_tables_redescribed_total":
			m.redescribed = v
		}
	})
	return m, ok
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// pid is the gateway's current process id.
func (g *gateway) pid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd.Process.Pid
}
