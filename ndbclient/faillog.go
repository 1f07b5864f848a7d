package ndbclient

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// failureLogEvery is the least time between two failure lines.
const failureLogEvery = time.Second

// failureLog warns of operations that ended failed on the backend's side
// (failedOnBackend), at most once per failureLogEvery, with the count of
// those not logged since. The client's reply says only "temporary failure";
// the line names the backend's own error (NDB's code and message), as
// ndbmemcache's log does, without a line per request when a cluster in
// trouble fails them all.
type failureLog struct {
	log      *slog.Logger // nil: nothing is logged
	next     atomic.Int64 // Unix nanoseconds before which no line is written
	unlogged atomic.Int64 // failures since the last line
}

// note logs err, a backend failure, unless one was logged lately.
func (f *failureLog) note(err error) {
	now := time.Now().UnixNano()
	next := f.next.Load()
	if now < next || !f.next.CompareAndSwap(next, now+int64(failureLogEvery)) {
		f.unlogged.Add(1)
		return
	}
	f.log.LogAttrs(context.Background(), slog.LevelWarn, "backend operation failed",
		slog.Any("error", err), slog.Int64("failures_since_last_line", f.unlogged.Swap(0)))
}

// failedOnBackend: err is the backend's failure after any retries, not an
// answer (a miss, a condition), a refusal of the request itself, load shed
// by the dispatcher, or a client that went away.
func failedOnBackend(err error) bool {
	if err == nil || err == ErrAbandoned {
		return false
	}
	var code Code
	if e, ok := err.(*Error); ok { // every driver's; CodeOf's errors.As costs more
		code = e.Code
	} else {
		code = CodeOf(err)
	}
	switch code {
	case CodeTemporary, CodeUnknownResult, CodeUnavailable, CodeInternal, CodeStorage:
		return true
	}
	return false
}
