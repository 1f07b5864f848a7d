package lin

import (
	"maps"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// never is the return time of an ambiguous operation: it may take effect at
// any time after its call, so it is concurrent with everything after it.
const never = math.MaxInt64

// Recorder collects the operations of concurrent clients, timed on one
// monotonic clock.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// errors are the replies no outcome could be made of; a run with any is
	// a failed run, whatever the checker says.
	errors []string
	// failures are when operations failed: not sent, or ambiguous; why
	// counts them by what the client saw.
	failures []int64
	why      map[string]int
}

// NewRecorder starts the clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time on the recorder's clock.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records one finished operation. An ambiguous read tells nothing and
// is not recorded; an ambiguous write is recorded as never returning.
func (r *Recorder) Add(client int, in Input, call int64, out Output, ret int64) {
	if out.Result == Ambiguous {
		if in.Kind == Get {
			return
		}
		ret = never
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// Unexpected records a reply that fits no outcome.
func (r *Recorder) Unexpected(msg string) {
	r.mu.Lock()
	r.errors = append(r.errors, msg)
	r.mu.Unlock()
}

// Failure records that an operation failed at time at: it could not be sent,
// or its outcome is not known.
func (r *Recorder) Failure(at int64) { r.FailureWhy(at, "") }

// FailureWhy is Failure with what the client saw (a reply line, an HTTP
// status, a network error).
func (r *Recorder) FailureWhy(at int64, why string) {
	r.mu.Lock()
	r.failures = append(r.failures, at)
	if why != "" {
		if r.why == nil {
			r.why = map[string]int{}
		}
		r.why[why]++
	}
	r.mu.Unlock()
}

// FailureReasons counts the failures by what the clients saw.
func (r *Recorder) FailureReasons() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.why)
}

// Failures are the times of the failures, in order.
func (r *Recorder) Failures() []int64 {
	r.mu.Lock()
	f := append([]int64(nil), r.failures...)
	r.mu.Unlock()
	sort.Slice(f, func(i, j int) bool { return f[i] < f[j] })
	return f
}

// History is a copy of the operations recorded so far, by call time.
func (r *Recorder) History() []porcupine.Operation {
	r.mu.Lock()
	h := append([]porcupine.Operation(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(h, func(i, j int) bool { return h[i].Call < h[j].Call })
	return h
}

// Errors are the unexpected replies.
func (r *Recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// Summary counts a history's operations.
type Summary struct {
	Ops, Ambiguous int
	ByKind         map[Kind]int
	ByResult       map[Result]int
}

// Summarize counts h.
func Summarize(h []porcupine.Operation) Summary {
	s := Summary{ByKind: map[Kind]int{}, ByResult: map[Result]int{}}
	for _, op := range h {
		s.Ops++
		s.ByKind[op.Input.(Input).Kind]++
		res := op.Output.(Output).Result
		s.ByResult[res]++
		if res == Ambiguous {
			s.Ambiguous++
		}
	}
	return s
}
