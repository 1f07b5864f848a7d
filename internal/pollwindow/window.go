// Package pollwindow sizes a busy poll by what the last waits took, as KVM's
// halt polling sizes a vCPU's (Documentation/virt/kvm/halt-polling.rst:
// grow by 2 from 10 µs, shrink by 2). A poll pays only where the awaited
// event comes within it; a fixed one spends its whole length on every wait
// that runs longer, such as a client that pauses between requests or data
// nodes farther away than the poll. The window grows while waits end within
// the maximum but after the window, and shrinks after a wait longer than
// the maximum, so that it settles at 0 where polling would not pay.
package pollwindow

import "time"

// growStart is the first window after 0 (KVM's halt_poll_ns_grow_start).
const growStart = int64(10 * time.Microsecond)

// Window is one poller's window. It is not safe for concurrent use: each
// poller (an epoll loop, an NDB executor) keeps its own.
type Window struct {
	max, cur int64 // nanoseconds
}

// New returns a window that starts at 0 and never exceeds limit; a limit
// of 0 makes a window that never polls.
func New(limit time.Duration) Window {
	return Window{max: max(int64(limit), 0)}
}

// Nanos is how long the next wait should poll before it sleeps.
func (w *Window) Nanos() int64 { return w.cur }

// Observe takes how long a wait took from its start (poll and sleep both)
// to the event it waited for.
func (w *Window) Observe(waited int64) {
	switch {
	case w.max == 0 || waited <= w.cur:
		// The poll found it: the window is long enough.
	case waited > w.max:
		// No poll allowed would have found it: polling spent CPU for nothing.
		w.cur /= 2
		if w.cur < growStart {
			w.cur = 0
		}
	default:
		// A longer poll, within the maximum, would have found it.
		w.cur = min(max(w.cur*2, growStart), w.max)
	}
}
