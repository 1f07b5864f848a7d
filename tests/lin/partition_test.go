package lin

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPartitions builds an NDB cluster of its own in network namespaces
// (NDBGATE_TEST_PARTITIONS=1, root, ndb_mgmd, ndbd, ndb_mgm and ndb_waiter
// on PATH, NDBGATE_BIN built with -tags ndbapi): the management server, two
// data nodes and two gateways each on a host of its own, every pair joined
// by a veth pair, and the clients on one more host linked to the gateways.
// While the clients run, it cuts links and heals them:
//   - a gateway from one data node;
//   - the data nodes from each other (NDB's arbitration decides which
//     survives; the other restarts once the link is back);
//   - a gateway from the management server.
//
// Each scenario's history is checked, and how long clients saw errors is
// logged.
func TestPartitions(t *testing.T) {
	if os.Getenv("NDBGATE_TEST_PARTITIONS") != "1" {
		t.Skip("the partition scenarios run by hand: NDBGATE_TEST_PARTITIONS=1 (root, NDB tools on PATH)")
	}
	for _, tool := range []string{"ndb_mgmd", "ndbd", "ndb_mgm", "ndb_waiter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s must be on PATH", tool)
		}
	}
	hosts := map[string]int{"mgm": 1, "d1": 2, "d2": 3, "g1": 11, "g2": 12, "cl": 100}
	var links [][2]string
	for _, a := range []string{"mgm", "d1", "d2", "g1", "g2"} {
		for _, b := range []string{"mgm", "d1", "d2", "g1", "g2"} {
			if a < b {
				links = append(links, [2]string{a, b})
			}
		}
	}
	links = append(links, [2]string{"cl", "g1"}, [2]string{"cl", "g2"})
	lab := newNetlab(t, hosts, links)
	dir := t.TempDir()
	cs := lab.IP("mgm") + ":1186"
	startLabCluster(t, lab, dir)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("NDBGATE_LIN_CLUSTER_LOG") != "" {
			log, _ := os.ReadFile(filepath.Join(dir, "ndb_49_cluster.log"))
			t.Logf("cluster log (last 12 KiB):\n%s", tail(log, 12<<10))
		}
	})
	out, err := lab.command("g1", ndbgateBin, "ndb-create-tables", "--ndb-connectstring", cs).CombinedOutput()
	if err != nil {
		t.Fatalf("ndb-create-tables: %v\n%s", err, out)
	}
	dial := lab.dialer("cl")
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: dial}}
	var gws []*gateway
	for _, h := range []string{"g1", "g2"} {
		gws = append(gws, launch(t, &gateway{t: t, memcache: lab.IP(h) + ":11211", rest: lab.IP(h) + ":8080",
			args:     []string{"--ndb-connectstring", cs},
			launcher: []string{"ip", "netns", "exec", lab.ns(h)}, hc: hc, dial: dial}))
	}
	mgm := func(cmd string) string {
		out, _ := lab.command("g1", "ndb_mgm", "-c", cs, "-e", cmd).CombinedOutput()
		return string(out)
	}
	allStarted := func() bool {
		s := mgm("all status")
		return strings.Count(s, ": started") >= 2 && !strings.Contains(s, "starting") && !strings.Contains(s, "not connected")
	}
	for _, sc := range []struct {
		name string
		cut  [2]string
		hold time.Duration
	}{
		{"a gateway cut from one data node", [2]string{"g1", "d2"}, 15 * time.Second},
		{"the data nodes cut from each other", [2]string{"d1", "d2"}, 15 * time.Second},
		{"a gateway cut from the management server", [2]string{"g1", "mgm"}, 15 * time.Second},
	} {
		t.Run(sc.name, func(t *testing.T) {
			rec := NewRecorder()
			w := Workload{Keys: keys(4), Weights: DefaultWeights, Pause: time.Millisecond}
			cs2 := clients(gws, 6, 2, liveOpTimeout)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { w.Run(ctx, rec, 0, cs2); close(done) }()
			time.Sleep(5 * time.Second)
			cutAt := rec.Now()
			lab.cut(sc.cut[0], sc.cut[1])
			time.Sleep(sc.hold)
			lab.heal(sc.cut[0], sc.cut[1])
			healedAt := rec.Now()
			deadline := time.Now().Add(5 * time.Minute)
			for !allStarted() {
				if time.Now().After(deadline) {
					t.Fatalf("the cluster did not recover within 5 minutes: %s", mgm("all status"))
				}
				if strings.Contains(mgm("all status"), "not started") {
					mgm("all start") // an angel restarts a failed node with --nostart
				}
				time.Sleep(time.Second)
			}
			back := rec.Now()
			time.Sleep(5 * time.Second)
			cancel()
			<-done
			finalReads(rec, len(cs2), gws, w.Keys, liveOpTimeout)
			t.Logf("%s-%s cut for %v; every data node started again %v after the heal; %s", sc.cut[0], sc.cut[1],
				time.Duration(healedAt-cutAt).Round(time.Millisecond), time.Duration(back-healedAt).Round(time.Millisecond),
				errorWindow(rec, cutAt))
			mustBeLinearizable(t, rec)
		})
	}
}

// startLabCluster writes the lab cluster's config and starts ndb_mgmd and
// the two data nodes (--initial), waiting until they have started.
func startLabCluster(t *testing.T, lab *netlab, dir string) {
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `[ndbd default]
NoOfReplicas=2
DataMemory=64M
IndexMemory=16M
StopOnError=0
HeartbeatIntervalDbDb=500
HeartbeatIntervalDbApi=500

[ndb_mgmd]
NodeId=49
HostName=%s
DataDir=%s
`, lab.IP("mgm"), dir)
	for i, h := range []string{"d1", "d2"} {
		d := filepath.Join(dir, h)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "\n[ndbd]\nNodeId=%d\nHostName=%s\nDataDir=%s\n", i+1, lab.IP(h), d)
	}
	for _, h := range []string{"g1", "g1", "g1", "g1", "g2", "g2", "g2", "g2"} {
		fmt.Fprintf(&cfg, "\n[api]\nHostName=%s\n", lab.IP(h))
	}
	ini := filepath.Join(dir, "config.ini")
	if err := os.WriteFile(ini, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(h string, name string, args ...string) {
		if out, err := lab.command(h, name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	cs := lab.IP("mgm") + ":1186"
	run("mgm", "ndb_mgmd", "-f", ini, "--configdir="+dir, "--initial")
	for i, h := range []string{"d1", "d2"} {
		run(h, "ndbd", "-c", cs, fmt.Sprintf("--ndb-nodeid=%d", i+1), "--initial")
	}
	began := time.Now()
	run("g1", "ndb_waiter", "-c", cs, "--timeout=300")
	t.Logf("the lab cluster started in %v", time.Since(began).Round(time.Second))
}
