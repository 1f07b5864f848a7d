package lin

import (
	"context"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ndbgate/ndbgate/tests/internal/ndbproc"
)

// TestLiveNodeGroupLost kills every data node of one node group at once
// (NDBGATE_TEST_GROUP_LOST, say "3,4"; by hand, on the cluster
// TestLiveClusterGrows left with two node groups and ndbgate_grow.kv
// spread over both). It records which keys were served while the group was
// down, waits until the data nodes' angels have brought every node back, and
// checks the whole history for linearizability.
//
// NDB cannot keep serving without a whole node group: the surviving nodes
// hold only part of the data, so they shut down too ("cluster not viable"),
// and the cluster comes back with a system restart once the group's nodes
// start again. The test says what it saw: how many keys were served during
// the outage, when failures began and ended, and how long after every node
// was back the gateway served again.
func TestLiveNodeGroupLost(t *testing.T) {
	cs := liveFaults(t)
	spec := os.Getenv("NDBGATE_TEST_GROUP_LOST")
	if spec == "" {
		t.Skip("losing a node group runs by hand: NDBGATE_TEST_GROUP_LOST=3,4")
	}
	var group []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("NDBGATE_TEST_GROUP_LOST: %v", err)
		}
		group = append(group, n)
	}
	total := strings.Count(ndbproc.Mgm(cs, "all status"), ": started")
	if total <= len(group) {
		t.Fatalf("want more data nodes started than the %d of the group", len(group))
	}
	g := startGateway(t, "--config", growConfig(t))
	rec := NewRecorder()
	load := Workload{Keys: keys(32), Weights: DefaultWeights, Pause: time.Millisecond}
	lc := clients([]*gateway{g}, 4, 2, liveOpTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { load.Run(ctx, rec, 0, lc); close(done) }()
	time.Sleep(5 * time.Second)

	var angels []ndbproc.Proc
	var workers []int
	for _, n := range group {
		worker, angel, err := ndbproc.DataNode(n)
		if err != nil {
			t.Fatal(err)
		}
		workers, angels = append(workers, worker.PID), append(angels, angel)
	}
	killedAt := rec.Now()
	for _, pid := range workers {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("killed data nodes %v", group)
	time.Sleep(3 * time.Second)
	t.Logf("3 s later:\n%s", strings.TrimSpace(ndbproc.Mgm(cs, "all status")))
	// An angel gives up after MaxStartFailRetries (3) exits it counts as
	// failed starts, which a node killed while started is in 7.5.0: then
	// start it as an operator would, as it was started (without --initial).
	for i, a := range angels {
		if !ndbproc.Alive(a.PID) {
			t.Logf("data node %d's angel gave up; starting it again", group[i])
			if err := ndbproc.StartLike(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for !ndbproc.AllStarted(cs, total) {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not come back within 10 minutes:\n%s", ndbproc.Mgm(cs, "all status"))
		}
		// An angel restarts a node killed by a signal with --nostart: tell
		// the ones that wait to start, so that the system restart can.
		if strings.Contains(ndbproc.Mgm(cs, "all status"), "not started") {
			ndbproc.Mgm(cs, "all start")
		}
		time.Sleep(time.Second)
	}
	backAt := rec.Now()
	t.Logf("every data node started again %v after the kill", time.Duration(backAt-killedAt).Round(time.Millisecond))
	time.Sleep(10 * time.Second)
	cancel()
	<-done
	finalReads(rec, len(lc), []*gateway{g}, load.Keys, liveOpTimeout)

	// The outage as the clients saw it: from the first failure after the
	// kill to the last; which keys were served inside it; and when the
	// gateway served again.
	var outFrom, outTo int64 = -1, -1
	for _, at := range rec.Failures() {
		if at >= killedAt {
			if outFrom < 0 {
				outFrom = at
			}
			outTo = at
		}
	}
	served := map[string]bool{}
	var firstAfter int64 = -1
	for _, op := range rec.History() {
		in := op.Input.(Input)
		if op.Return == never {
			continue
		}
		if outFrom >= 0 && op.Call > outFrom && op.Return < outTo {
			served[in.Key] = true
		}
		if op.Call >= backAt && (firstAfter < 0 || op.Return < firstAfter) {
			firstAfter = op.Return
		}
	}
	t.Logf("%s; keys served inside that window: %d of %d", errorWindow(rec, killedAt), len(served), len(load.Keys))
	if firstAfter >= 0 {
		t.Logf("first operation answered after the cluster was back: %v after it", time.Duration(firstAfter-backAt).Round(time.Millisecond))
	}
	checkRestored(t, rec, killedAt, outTo)
}

// checkRestored checks a history in which the cluster went down whole and
// came back from its last global checkpoint, which may be older than the
// last acknowledged writes. Before the outage the history must be
// linearizable. At the restart each key may go back to a version it held
// before (never to one no write made); the first read after the restart
// says which, and from there on the history must be linearizable again. It
// logs how many acknowledged writes the restart took back, and how old the
// oldest restored version was when the outage began.
func checkRestored(t *testing.T, rec *Recorder, killedAt, lastFailure int64) {
	t.Helper()
	// The restart is before every operation that returned after the last
	// failure: split there (ndb_mgm may say the nodes are back a little
	// after the gateway has served again).
	h := rec.History()
	backAt := int64(math.MaxInt64)
	for _, op := range h {
		if op.Return != never && op.Return > lastFailure && op.Call < backAt {
			backAt = op.Call
		}
	}
	var before []porcupine.Operation
	afterByKey := map[string][]porcupine.Operation{}
	for _, op := range h {
		if op.Call < backAt {
			before = append(before, op)
		} else {
			k := op.Input.(Input).Key
			afterByKey[k] = append(afterByKey[k], op)
		}
	}
	if v := Check(before, checkTimeout); v.Result != porcupine.Ok {
		explain(t, before, Model)
		t.Fatalf("the history before the cluster came back is not linearizable (%v)", v.Result)
	}
	// When each value was written on each key (acknowledged writes only:
	// their return; an ambiguous one: its call).
	type write struct {
		value    string
		at       int64
		acked    bool
		deletion bool
	}
	written := map[string][]write{}
	for _, op := range before {
		in, out := op.Input.(Input), op.Output.(Output)
		w := write{at: op.Return, acked: op.Return != never}
		if !w.acked {
			w.at = op.Call
		}
		switch {
		case in.Kind == Set || in.Kind == Cas:
			if out.Result != Ok && out.Result != Ambiguous {
				continue
			}
			w.value = in.Value
		case in.Kind == Incr && out.Result == Ok:
			w.value = out.Value
		case in.Kind == Delete && (out.Result == Ok || out.Result == Ambiguous):
			w.deletion = true
		default:
			continue
		}
		written[in.Key] = append(written[in.Key], w)
	}
	// Per key: the version the restart kept is one of those before it (or
	// none); try those the reads after the restart saw, then every one,
	// newest first, then absence, until the key's history from there is
	// linearizable.
	lost := 0
	var oldest time.Duration
	for key, ops := range afterByKey {
		type cand struct {
			out   Output
			index int // into written[key]; -1: absent from the start
		}
		var cands []cand
		seen := map[string]bool{}
		for _, op := range ops {
			in, out := op.Input.(Input), op.Output.(Output)
			if in.Kind != Get || op.Return == never {
				continue
			}
			id := out.Result.String() + out.Value
			if seen[id] {
				continue
			}
			seen[id] = true
			for i := len(written[key]) - 1; i >= 0; i-- {
				w := written[key][i]
				if (out.Result == NotFound && w.deletion) || (out.Result == Ok && !w.deletion && w.value == out.Value) {
					cands = append(cands, cand{out, i})
					break
				}
			}
		}
		// Then every version, newest first, its token unknown (a read that
		// saw none may not have come first).
		for i := len(written[key]) - 1; i >= 0; i-- {
			if w := written[key][i]; w.deletion {
				cands = append(cands, cand{Output{Result: NotFound}, i})
			} else {
				cands = append(cands, cand{Output{Result: Ok, Value: w.value}, i})
			}
		}
		cands = append(cands, cand{Output{Result: NotFound}, -1})
		kept := -2
		for _, c := range cands {
			h := ops
			if c.out.Result == Ok {
				seed := porcupine.Operation{ClientId: 1 << 20, Input: Input{Kind: Set, Key: key, Value: c.out.Value},
					Call: backAt - 2, Output: Output{Result: Ok, Cas: c.out.Cas}, Return: backAt - 1}
				h = append([]porcupine.Operation{seed}, ops...)
			}
			if Check(h, checkTimeout).Result == porcupine.Ok {
				kept = c.index
				break
			}
		}
		if kept == -2 {
			explain(t, ops, Model)
			t.Fatalf("key %s: no version it held before the outage makes its history after the restart linearizable", key)
		}
		keptAt := int64(0)
		if kept >= 0 {
			keptAt = written[key][kept].at
		}
		for _, w := range written[key][kept+1:] {
			if w.acked {
				lost++
			}
		}
		if d := time.Duration(killedAt - keptAt); kept+1 < len(written[key]) && d > oldest {
			oldest = d
		}
	}
	t.Logf("the restart took back %d acknowledged writes; the oldest version it kept was written %v before the outage began",
		lost, oldest.Round(time.Millisecond))
}
