package lin

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// envInt is an integer setting of the runs, so that a run by hand can be
// longer than CI's.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("lin-%d-%d", time.Now().UnixNano()%1e6, i)
	}
	return ks
}

const opTimeout = 3 * time.Second

// TestLinearizable runs the mixed workload, without faults, through the
// meta protocol and the REST KV API of one gateway, checks the history, and
// then shows that the checker refuses the same history with one stale read or
// one wrongly accepted CAS in it.
func TestLinearizable(t *testing.T) {
	g := startGateway(t)
	rec := NewRecorder()
	w := Workload{Keys: keys(4), Weights: DefaultWeights}
	cs := clients([]*gateway{g}, 6, 2, opTimeout)
	runFor(rec, w, cs, time.Duration(envInt("NDBGATE_LIN_SECONDS", 3))*time.Second)
	finalReads(rec, len(cs), []*gateway{g}, w.Keys, opTimeout)
	h := mustBeLinearizable(t, rec)
	if s := Summarize(h); s.Ambiguous != 0 {
		t.Errorf("%d operations were ambiguous without a fault", s.Ambiguous)
	}
	checkMutations(t, h)
}

// TestLinearizableAcrossCrashes kills the embedded engine with SIGKILL and
// starts it again on the same data directory (--fsync always) several times
// while clients run, and checks the history: every write acknowledged before
// a crash must be what later reads see, and no CAS may take a token from
// before a crash for a later one.
func TestLinearizableAcrossCrashes(t *testing.T) {
	if liveCluster() != "" {
		t.Skip("the embedded engine's data directory; on NDB see TestLiveGatewayKilled")
	}
	dir := t.TempDir()
	g := startGateway(t, "--data-dir", dir, "--fsync", "always")
	rec := NewRecorder()
	w := Workload{Keys: keys(4), Weights: DefaultWeights}
	cs := clients([]*gateway{g}, 6, 2, opTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, rec, 0, cs); close(done) }()
	crashes := envInt("NDBGATE_LIN_CRASHES", 4)
	var down []time.Duration
	for i := 0; i < crashes; i++ {
		time.Sleep(1500 * time.Millisecond)
		at := time.Now()
		g.kill9()
		g.start()
		down = append(down, time.Since(at).Round(time.Millisecond))
	}
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done
	finalReads(rec, len(cs), []*gateway{g}, w.Keys, opTimeout)
	t.Logf("%d crashes; from SIGKILL to ready again: %v", crashes, down)
	h := mustBeLinearizable(t, rec)
	if s := Summarize(h); s.Ambiguous == 0 {
		t.Errorf("no operation was in flight at any crash: the crashes tested nothing")
	}
}
