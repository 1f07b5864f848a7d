package lin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkTimeout bounds the checker per history. A history it cannot decide in
// time fails the test: the runs are sized so that it never should.
const checkTimeout = 2 * time.Minute

// mustBeLinearizable checks rec's history and fails t unless it is
// linearizable and every reply fitted an outcome. On failure the
// checker's visualization is written to NDBGATE_LIN_REPORT (a directory) or
// the test's temporary directory.
func mustBeLinearizable(t *testing.T, rec *Recorder) []porcupine.Operation {
	t.Helper()
	h := rec.History()
	if errs := rec.Errors(); len(errs) > 0 {
		t.Errorf("%d replies fitted no outcome, the first: %s", len(errs), strings.Join(errs[:min(5, len(errs))], "; "))
	}
	s := Summarize(h)
	began := time.Now()
	v := Check(h, checkTimeout)
	t.Logf("history: %d operations (%s), %d ambiguous; results %s; checked in %v: %v",
		s.Ops, kinds(s), s.Ambiguous, results(s), time.Since(began).Round(time.Millisecond), v.Result)
	if v.Result != porcupine.Ok {
		dir := os.Getenv("NDBGATE_LIN_REPORT")
		if dir == "" {
			dir = t.TempDir()
		}
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".html")
		if err := porcupine.VisualizePath(Model, v.Info, path); err != nil {
			t.Logf("visualization: %v", err)
		}
		explain(t, h, Model)
		t.Fatalf("the history is not linearizable (%v); visualization: %s", v.Result, path)
	}
	if s.ByResult[Ok] == 0 {
		t.Fatalf("no operation succeeded")
	}
	return h
}

func kinds(s Summary) string {
	var b strings.Builder
	for k := Set; k <= Delete; k++ {
		fmt.Fprintf(&b, "%s %d ", k, s.ByKind[k])
	}
	return strings.TrimSpace(b.String())
}

func results(s Summary) string {
	var b strings.Builder
	for r := Ok; r <= Ambiguous; r++ {
		fmt.Fprintf(&b, "%s %d ", r, s.ByResult[r])
	}
	return strings.TrimSpace(b.String())
}

// explain logs, for each key whose history is not linearizable, the
// operations around the first that no linearization could take: the
// longest prefix linearized, and the operations called next.
func explain(t *testing.T, h []porcupine.Operation, m porcupine.Model) {
	for _, part := range byKey(h) {
		res, info := porcupine.CheckOperationsVerbose(m, part, checkTimeout)
		v := Verdict{Result: res, Info: info}
		if v.Result == porcupine.Ok {
			continue
		}
		done := map[int]bool{}
		var longest []int
		for _, p := range v.Info.PartialLinearizations() {
			for _, lin := range p {
				if len(lin) > len(longest) {
					longest = lin
				}
			}
		}
		for _, i := range longest {
			done[i] = true
		}
		t.Logf("key %s: %d operations, %d linearized at most; the last linearized and the next not:",
			part[0].Input.(Input).Key, len(part), len(longest))
		for _, i := range longest[max(0, len(longest)-8):] {
			t.Logf("  ok   %s", opLine(part[i]))
		}
		shown := 0
		for i, op := range part {
			if !done[i] && shown < 12 {
				t.Logf("  next %s", opLine(op))
				shown++
			}
		}
	}
}

func opLine(op porcupine.Operation) string {
	ret := "never"
	if op.Return != never {
		ret = time.Duration(op.Return).String()
	}
	return fmt.Sprintf("client %d g%d [%v, %s] %s", op.ClientId, op.Input.(Input).Gateway, time.Duration(op.Call), ret, describe(op.Input.(Input), op.Output.(Output)))
}
