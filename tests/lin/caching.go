package lin

import (
	"hash/fnv"
	"strconv"
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

// version is one value the key has held, newest first.
type version struct {
	state
	n    int // 0 for the initial absent version
	prev *version
}

// maxGateways is how many gateways a caching history may span.
const maxGateways = 4

// cstate is the backend's version history and each gateway's bound: the
// number of the last version it wrote.
type cstate struct {
	head  *version
	floor [maxGateways]int
}

// versions interns versions, so that two orders of the same writes that
// reach the same history share one *version and states compare by pointer.
var versions = struct {
	sync.Mutex
	m map[versionKey]*version
}{m: map[versionKey]*version{}}

type versionKey struct {
	prev *version
	st   state
}

func intern(prev *version, st state) *version {
	versions.Lock()
	defer versions.Unlock()
	k := versionKey{prev, st}
	if v, ok := versions.m[k]; ok {
		return v
	}
	v := &version{state: st, n: prev.n + 1, prev: prev}
	versions.m[k] = v
	return v
}

// initial is the history of a key never written.
var initial = &version{}

func (s cstate) write(in Input, next state, raise bool) cstate {
	out := s
	out.head = intern(s.head, next)
	if raise {
		out.floor[in.Gateway] = out.head.n
	}
	return out
}

// readable reports whether a get through gateway g could return out.
func (s cstate) readable(g int, out Output) bool {
	for v := s.head; v != nil && v.n >= s.floor[g]; v = v.prev {
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
		if s.readable(in.Gateway, out) {
			return []cstate{s}
		}
		return nil
	}
	if out.Result == Ambiguous {
		res := []cstate{s}
		for _, n := range applied(s.head.state, in) {
			res = append(res, s.write(in, n, false))
		}
		return res
	}
	var res []cstate
	for _, n := range step(s.head.state, in, out) {
		if n == s.head.state && out.Result != Ok {
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
		Init: func() []interface{} { return []interface{}{cstate{head: initial}} },
		Step: func(st, in, out interface{}) []interface{} {
			next := cachingStep(st.(cstate), in.(Input), out.(Output))
			res := make([]interface{}, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		// Versions are interned: equal histories are one pointer.
		Equal: func(a, b interface{}) bool { return a.(cstate) == b.(cstate) },
		Hash: func(st interface{}) uint64 {
			s := st.(cstate)
			h := fnv.New64a()
			_, _ = h.Write([]byte(s.head.value))
			_, _ = h.Write([]byte(strconv.Itoa(s.head.n)))
			for _, f := range s.floor {
				_, _ = h.Write([]byte{byte(f), byte(f >> 8)})
			}
			return h.Sum64() ^ s.head.cas
		},
		DescribeOperation: func(in, out interface{}) string {
			i := in.(Input)
			return "g" + strconv.Itoa(i.Gateway) + " " + describe(i, out.(Output))
		},
		DescribeState: func(st interface{}) string {
			s := st.(cstate)
			return "v" + strconv.Itoa(s.head.n) + " " + Model.DescribeState([]interface{}{s.head.state})
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
