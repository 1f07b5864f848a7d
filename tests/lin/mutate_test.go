package lin

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The mutation tests take a real history that checked as linearizable and
// change one reply in it, as a broken gateway would have sent it. The checker
// must then refuse the history: otherwise it could not catch that bug.

// written is the value a successful write left, and whether op is one.
func written(op porcupine.Operation) (string, bool) {
	in, out := op.Input.(Input), op.Output.(Output)
	if out.Result != Ok {
		return "", false
	}
	switch in.Kind {
	case Set, Cas:
		return in.Value, true
	case Incr:
		return out.Value, true
	case Delete:
		return "", true
	}
	return "", false
}

// byKeyIndex groups h's indexes by key, leaving out keys with an ambiguous
// operation (whose effect the mutations could not reason about).
func byKeyIndex(h []porcupine.Operation) map[string][]int {
	m := map[string][]int{}
	spoiled := map[string]bool{}
	for i, op := range h {
		k := op.Input.(Input).Key
		m[k] = append(m[k], i)
		if op.Output.(Output).Result == Ambiguous {
			spoiled[k] = true
		}
	}
	for k := range spoiled {
		delete(m, k)
	}
	return m
}

// between reports whether a write of the key completed strictly after a
// returned and before b was called.
func writeBetween(h []porcupine.Operation, idx []int, a, b porcupine.Operation) bool {
	for _, j := range idx {
		w := h[j]
		if _, ok := written(w); ok && w.Call > a.Return && w.Return < b.Call {
			return true
		}
	}
	return false
}

// staleReads are copies of h, each with one read changed to return a value
// that a later, completed write had replaced before the read began.
func staleReads(h []porcupine.Operation, limit int) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	for _, idx := range byKeyIndex(h) {
		writers := map[string]int{} // value -> how many writes wrote it
		for _, i := range idx {
			if v, ok := written(h[i]); ok && h[i].Input.(Input).Kind != Delete {
				writers[v]++
			}
		}
		for _, gi := range idx {
			g := h[gi]
			if g.Input.(Input).Kind != Get || g.Output.(Output).Result != Ok {
				continue
			}
			for _, si := range idx {
				s := h[si]
				v, ok := written(s)
				if !ok || s.Input.(Input).Kind == Delete || writers[v] != 1 || v == g.Output.(Output).Value ||
					s.Return >= g.Call || !writeBetween(h, idx, s, g) {
					continue
				}
				m := append([]porcupine.Operation(nil), h...)
				m[gi].Output = Output{Result: Ok, Value: v, Cas: s.Output.(Output).Cas}
				out = append(out, m)
				break
			}
			if len(out) >= limit {
				return out
			}
		}
	}
	return out
}

// acceptedStaleCas are copies of h, each with one CAS that was refused
// changed to stored, where its token was one a completed write had since
// replaced.
func acceptedStaleCas(h []porcupine.Operation, limit int) [][]porcupine.Operation {
	var out [][]porcupine.Operation
	var top uint64
	for _, op := range h {
		top = max(top, op.Output.(Output).Cas)
	}
	for _, idx := range byKeyIndex(h) {
		issuer := map[uint64][]int{} // token -> the writes that returned it
		for _, i := range idx {
			if _, ok := written(h[i]); ok && h[i].Output.(Output).Cas != 0 {
				issuer[h[i].Output.(Output).Cas] = append(issuer[h[i].Output.(Output).Cas], i)
			}
		}
		for _, ci := range idx {
			c := h[ci]
			in := c.Input.(Input)
			if in.Kind != Cas || c.Output.(Output).Result != Exists || len(issuer[in.Cas]) != 1 {
				continue
			}
			p := h[issuer[in.Cas][0]]
			if p.Return >= c.Call || !writeBetween(h, idx, p, c) {
				continue
			}
			m := append([]porcupine.Operation(nil), h...)
			top++
			m[ci].Output = Output{Result: Ok, Cas: top}
			out = append(out, m)
			if len(out) >= limit {
				return out
			}
		}
	}
	return out
}

// checkMutations fails t unless the checker refuses every mutated history,
// and there was at least one of each kind.
func checkMutations(t *testing.T, h []porcupine.Operation) {
	t.Helper()
	for _, m := range []struct {
		name string
		hs   [][]porcupine.Operation
	}{
		{"stale read", staleReads(h, 3)},
		{"wrongly accepted CAS", acceptedStaleCas(h, 3)},
	} {
		if len(m.hs) == 0 {
			t.Errorf("the history has no place for a %s mutation", m.name)
		}
		for i, mh := range m.hs {
			if got := Check(mh, checkTimeout).Result; got != porcupine.Illegal {
				t.Errorf("%s mutation %d: the checker says %v, want Illegal", m.name, i, got)
			}
		}
		t.Logf("%s: %d mutated histories, each refused by the checker", m.name, len(m.hs))
	}
}
