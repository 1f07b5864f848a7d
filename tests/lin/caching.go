package lin

import (
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The caching policy's model. Writes (set, CAS, incr, delete) go to the
// backend, so they are linearizable among themselves, as in Model. A get
// may be served from the local copy of the gateway it went through, which
// another gateway's write does not touch: so a get may return any version
// the key has held, however old (a stale read, until the copy is evicted
// or expires), with two bounds:
//   - never a version no write made (nothing invented, nothing lost);
//   - never one older than the last write through the same gateway (a
//     gateway's write drops its own copy, so it reads its own writes).
// An ambiguous write does not raise that gateway's bound.

// The model's state keeps, for each gateway, the set of versions a get
// through it may still return, rather than the key's whole history: a
// write adds its version to every gateway's set, and the writer's set
// becomes that version alone. Two orders of the same writes that leave the
// same backend state and the same sets are then one state, as they are for
// every later operation; with whole histories they stayed apart for good,
// and the checker's search grew past its time bound on live histories
// (TestLiveCaching).

// maxGateways is how many gateways a caching history may span.
const maxGateways = 4

// cstate is the backend's state and what each gateway may read. Sets are
// interned, so states compare with ==.
type cstate struct {
	head     state
	readable [maxGateways]*vset
}

// vset is a set of versions (states), sorted, interned; id numbers it for
// hashing.
type vset struct {
	id      uint64
	members []state
}

// vsets interns sets: by their members, and the results of adding a
// version to a set.
var vsets = struct {
	sync.Mutex
	byKey map[string]*vset
	added map[addKey]*vset
}{byKey: map[string]*vset{}, added: map[addKey]*vset{}}

type addKey struct {
	s *vset
	v state
}

// setOf interns the set of members (sorted, no duplicates); vsets is held.
func setOf(members []state) *vset {
	var b strings.Builder
	for _, m := range members {
		if m.present {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
		b.WriteString(strconv.FormatUint(m.cas, 36))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(len(m.value)))
		b.WriteByte(':')
		b.WriteString(m.value)
	}
	k := b.String()
	if s, ok := vsets.byKey[k]; ok {
		return s
	}
	s := &vset{id: uint64(len(vsets.byKey)) + 1, members: members}
	vsets.byKey[k] = s
	return s
}

func lessState(a, b state) bool {
	if a.present != b.present {
		return !a.present
	}
	if a.value != b.value {
		return a.value < b.value
	}
	return a.cas < b.cas
}

// with returns s with v added.
func (s *vset) with(v state) *vset {
	vsets.Lock()
	defer vsets.Unlock()
	k := addKey{s, v}
	if r, ok := vsets.added[k]; ok {
		return r
	}
	i := sort.Search(len(s.members), func(i int) bool { return !lessState(s.members[i], v) })
	r := s
	if i == len(s.members) || s.members[i] != v {
		m := make([]state, 0, len(s.members)+1)
		m = append(append(append(m, s.members[:i]...), v), s.members[i:]...)
		r = setOf(m)
	}
	vsets.added[k] = r
	return r
}

// only returns the set {v}.
func only(v state) *vset {
	vsets.Lock()
	defer vsets.Unlock()
	return setOf([]state{v})
}

// initialCaching is a key never written: every gateway may read it absent.
var initialCaching = func() cstate {
	s := cstate{head: absent}
	for g := range s.readable {
		s.readable[g] = only(absent)
	}
	return s
}()

// write makes next the backend's state; raise says the writer's own set
// becomes next alone (an ambiguous write does not raise it).
func (s cstate) write(in Input, next state, raise bool) cstate {
	out := s
	out.head = next
	for g, r := range s.readable {
		out.readable[g] = r.with(next)
	}
	if raise {
		out.readable[in.Gateway] = only(next)
	}
	return out
}

// mayRead reports whether a get through gateway g could return out.
func (s cstate) mayRead(g int, out Output) bool {
	for _, v := range s.readable[g].members {
		switch {
		case out.Result == NotFound && !v.present:
			return true
		case out.Result == Ok && v.present && v.value == out.Value && (v.cas == 0 || v.cas == out.Cas):
			return true
		}
	}
	return false
}

func cachingStep(s cstate, in Input, out Output) []cstate {
	if in.Kind == Get {
		if s.mayRead(in.Gateway, out) {
			return []cstate{s}
		}
		return nil
	}
	if out.Result == Ambiguous {
		res := []cstate{s}
		for _, n := range applied(s.head, in) {
			res = append(res, s.write(in, n, false))
		}
		return res
	}
	var res []cstate
	for _, n := range step(s.head, in, out) {
		if n == s.head && out.Result != Ok {
			res = append(res, s) // refused: nothing written
		} else {
			res = append(res, s.write(in, n, true))
		}
	}
	return res
}

// CachingModel checks histories of gateways on a caching route.
var CachingModel = func() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{initialCaching} },
		Step: func(st, in, out interface{}) []interface{} {
			next := cachingStep(st.(cstate), in.(Input), out.(Output))
			res := make([]interface{}, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		// Sets are interned: equal sets are one pointer.
		Equal: func(a, b interface{}) bool { return a.(cstate) == b.(cstate) },
		Hash: func(st interface{}) uint64 {
			s := st.(cstate)
			h := fnv.New64a()
			_, _ = h.Write([]byte(s.head.value))
			for _, r := range s.readable {
				_, _ = h.Write([]byte{byte(r.id), byte(r.id >> 8), byte(r.id >> 16), byte(r.id >> 24)})
			}
			return h.Sum64() ^ s.head.cas
		},
		DescribeOperation: func(in, out interface{}) string {
			i := in.(Input)
			return "g" + strconv.Itoa(i.Gateway) + " " + describe(i, out.(Output))
		},
		DescribeState: func(st interface{}) string {
			s := st.(cstate)
			d := Model.DescribeState([]interface{}{s.head}) + "; readable:"
			for g, r := range s.readable {
				d += " g" + strconv.Itoa(g) + " " + strconv.Itoa(len(r.members))
			}
			return d
		},
	}
	m := nm.ToModel()
	m.Partition = byKey
	return m
}()

// CheckCaching checks a caching history within the time bound.
func CheckCaching(h []porcupine.Operation, timeout time.Duration) Verdict {
	res, info := porcupine.CheckOperationsVerbose(CachingModel, h, timeout)
	return Verdict{Result: res, Info: info}
}
