package gateway

import "sync"

// What the REST and gRPC KV APIs share: requests pinned to a container's
// route, from a pool, and reading many keys in pieces. Each front end checks
// its input and maps what fails its own way.

// KVRequests hands out reset Requests for a KV API, reused through a pool.
type KVRequests struct {
	pool sync.Pool // *Request
}

// NewKVRequests returns a pool of svc's requests.
func NewKVRequests(svc *Service) *KVRequests {
	k := &KVRequests{}
	k.pool.New = func() any { return svc.NewRequest() }
	return k
}

// Get returns a reset request pinned to rt, a container's route (RouteOf).
// Done gives it back.
func (k *KVRequests) Get(rt *Route) *Request {
	r := k.pool.Get().(*Request)
	r.Reset()
	r.Route = rt
	return r
}

// Done takes back a request Get handed out.
func (k *KVRequests) Done(r *Request) { k.pool.Put(r) }

// RunKey runs r, which has its options set, as verb on key, and returns its
// outcome (Result).
func (s *Service) RunKey(r *Request, verb Verb, key []byte) (Class, error) {
	r.Verb = verb
	r.AddKey(key)
	s.Run(r)
	return r.Result()
}

// GetInPieces reads n keys (key(i) is the i-th) through r, pinned to its
// route, one request and so one backend batch per piece of MultiGetPiece
// keys: what one request holds stays bounded however many keys are asked
// for. After each piece it calls done with the piece's keys [start, end)
// and r holding their outcome (Result not yet checked), and stops at done's
// first error, which it returns.
func (s *Service) GetInPieces(r *Request, n int, key func(i int) []byte, done func(start, end int) error) error {
	piece := n
	if piece > 1 {
		piece = s.MultiGetPiece()
	}
	route := r.Route
	for start := 0; start < n; start += piece {
		end := min(start+piece, n)
		r.Reset()
		r.Route, r.Verb = route, VerbGet
		for i := start; i < end; i++ {
			r.AddKey(key(i))
		}
		s.Run(r)
		if err := done(start, end); err != nil {
			return err
		}
	}
	return nil
}
