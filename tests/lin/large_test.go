package lin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Large values: every key is served by a container that keeps values over
// 2,000 bytes in parts of 13,950 (ndbmemcache's demo_table_large and
// external_values shapes), and every value written is about 33 KB: three
// parts, each naming the write it belongs to. A read that put a value
// together from two writes, or saw a write half done, fits no linearization.

const largeConfig = `
containers:
  - name: large
    database: lin
    table: large_items
    key_columns: [mkey]
    value_columns: [string_value]
    flags_column: flags
    cas_column: cas_value
    large_values_table: lin.large_parts
key_prefixes:
  - {prefix: "", container: large, policy: ndb-only}
`

// largeRepeat makes values of about 33 KB: a number of 10 digits and a dot,
// 3,000 times.
const largeRepeat = 3000

func largeConfigFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "large.yaml")
	if err := os.WriteFile(path, []byte(largeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// largeClients are clients of the large container: meta, and REST on it.
func largeClients(gws []*gateway, meta, rest int, timeout time.Duration) []Client {
	cs := clients(gws, meta, 0, timeout)
	for i := 0; i < rest; i++ {
		c := NewRESTClient(gws[i%len(gws)].rest, "large", timeout)
		c.Via = i % len(gws)
		cs = append(cs, c)
	}
	return cs
}

// TestLinearizableLargeValues: the mixed workload on large values through
// one gateway, on the embedded engine (or a live cluster).
func TestLinearizableLargeValues(t *testing.T) {
	cfg := largeConfigFile(t)
	if cs := liveCluster(); cs != "" {
		createLargeTables(t, cs, cfg)
	}
	g := startGateway(t, "--config", cfg)
	rec := NewRecorder()
	w := Workload{Keys: keys(4), Weights: LargeWeights, Repeat: largeRepeat}
	cs := largeClients([]*gateway{g}, 6, 2, opTimeout)
	runFor(rec, w, cs, time.Duration(envInt("NDBGATE_LIN_SECONDS", 3))*time.Second)
	finalReads(rec, len(cs), []*gateway{g}, w.Keys, opTimeout)
	h := mustBeLinearizable(t, rec)
	s := Summarize(h)
	if s.Ambiguous != 0 {
		t.Errorf("%d operations were ambiguous without a fault", s.Ambiguous)
	}
	t.Logf("%d operations (%s)", s.Ops, kinds(s))
}

// TestLinearizableLargeValuesAcrossCrashes: the embedded engine killed and
// started again on its data directory while clients write large values: a
// value's row and parts are one transaction in its log, so no read after a
// crash finds a row naming parts that are not there.
func TestLinearizableLargeValuesAcrossCrashes(t *testing.T) {
	if liveCluster() != "" {
		t.Skip("the embedded engine's data directory")
	}
	g := startGateway(t, "--config", largeConfigFile(t), "--data-dir", t.TempDir(), "--fsync", "always")
	rec := NewRecorder()
	w := Workload{Keys: keys(4), Weights: LargeWeights, Repeat: largeRepeat}
	cs := largeClients([]*gateway{g}, 6, 2, opTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, rec, 0, cs); close(done) }()
	for i := 0; i < envInt("NDBGATE_LIN_CRASHES", 3); i++ {
		time.Sleep(1500 * time.Millisecond)
		g.kill9()
		g.start()
	}
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	finalReads(rec, len(cs), []*gateway{g}, w.Keys, opTimeout)
	mustBeLinearizable(t, rec)
}

// createLargeTables makes the large container's tables on a live cluster.
func createLargeTables(t *testing.T, cs, cfg string) {
	out, err := exec.Command(ndbgateBin, "ndb-create-tables", "--ndb-connectstring", cs, "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("ndbgate ndb-create-tables: %v\n%s", err, out)
	}
}
