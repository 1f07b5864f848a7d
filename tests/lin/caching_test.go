package lin

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// cachingHistory simulates gateways on a caching route: one key's backend,
// and a copy per gateway that a get may serve (however old) until the
// gateway writes. Operations take effect in order, each within its own
// [call, return] interval, and overlap up to spread neighbours, so the
// checker sees a history as concurrent as a live one. One set in lostIn (none
// for 0) is ambiguous: applied or not, the client never learns.
func cachingHistory(seed uint64, ops, gateways, spread, lostIn int) []porcupine.Operation {
	r := rand.New(rand.NewPCG(seed, 1))
	var (
		backend state
		copies  = make([]*state, gateways)
		nextCas uint64
		h       []porcupine.Operation
	)
	for i := range ops {
		g := r.IntN(gateways)
		in := Input{Key: "k", Gateway: g}
		var out Output
		switch n := r.IntN(10); {
		case n < 6: // get: the copy if there is one, else the backend (then kept)
			in.Kind = Get
			if copies[g] == nil || r.IntN(3) == 0 {
				b := backend
				copies[g] = &b
			}
			if c := copies[g]; c.present {
				out = Output{Result: Ok, Value: c.value, Cas: c.cas}
			} else {
				out = Output{Result: NotFound}
			}
		case n < 9: // set, with a value no other set writes
			in.Kind, in.Value = Set, strconv.Itoa(i)
			prev := backend
			nextCas++
			backend = state{present: true, value: in.Value, cas: nextCas}
			copies[g] = nil
			out = Output{Result: Ok, Cas: nextCas}
			if lostIn > 0 && r.IntN(lostIn) == 0 { // the reply is lost: applied or not
				out = Output{Result: Ambiguous}
				if r.IntN(2) == 0 {
					backend = prev
				}
			}
		default: // delete
			in.Kind = Delete
			if backend.present {
				backend, out = state{}, Output{Result: Ok}
			} else {
				out = Output{Result: NotFound}
			}
			copies[g] = nil
		}
		at := int64(i) * 10
		call := at - int64(r.IntN(spread*10+1))
		ret := at + int64(r.IntN(spread*10+1))
		h = append(h, op(i%8, in, call, out, ret))
	}
	return h
}

// TestCachingModelDecidesLongHistories: histories as long and concurrent as
// TestLiveCaching's per key are decided within the live tests' bound, and a
// get older than its gateway's own write in one of them is caught.
func TestCachingModelDecidesLongHistories(t *testing.T) {
	const ops, gateways, spread = 3000, 2, 6
	for seed := uint64(1); seed <= 3; seed++ {
		h := cachingHistory(seed, ops, gateways, spread, 0)
		start := time.Now()
		if got := CheckCaching(h, checkTimeout).Result; got != porcupine.Ok {
			t.Fatalf("seed %d: a legal history: checker says %v after %v", seed, got, time.Since(start))
		}
		t.Logf("seed %d: %d operations decided in %v", seed, len(h), time.Since(start).Round(time.Millisecond))

		bad, ok := olderThanOwnWrite(h, spread)
		if !ok {
			t.Fatalf("seed %d: no get to make stale", seed)
		}
		if got := CheckCaching(bad, checkTimeout).Result; got != porcupine.Illegal {
			t.Fatalf("seed %d: a get older than its gateway's write: checker says %v", seed, got)
		}
	}
}

// olderThanOwnWrite copies h with one get changed to return a version its
// own gateway's earlier set had replaced, with no overlap to excuse it.
func olderThanOwnWrite(h []porcupine.Operation, spread int) ([]porcupine.Operation, bool) {
	gap := 2*spread + 1
	for i := gap; i < len(h); i++ {
		w := h[i]
		in, out := w.Input.(Input), w.Output.(Output)
		if in.Kind != Set || out.Result != Ok {
			continue
		}
		var older porcupine.Operation // a set that ended before w began
		found := false
		for k := i - gap; k >= 0 && !found; k-- {
			o := h[k]
			if o.Input.(Input).Kind == Set && o.Output.(Output).Result == Ok && o.Return < w.Call {
				older, found = o, true
			}
		}
		if !found {
			continue
		}
		for j := i + gap; j < len(h); j++ {
			g := h[j]
			if gi := g.Input.(Input); gi.Kind == Get && gi.Gateway == in.Gateway && g.Call > w.Return {
				bad := append([]porcupine.Operation(nil), h...)
				bad[j].Output = Output{Result: Ok, Value: older.Input.(Input).Value, Cas: older.Output.(Output).Cas}
				return bad, true
			}
		}
	}
	return nil, false
}
