package pollwindow

import (
	"testing"
	"time"
)

const us = int64(time.Microsecond)

// observeN has w observe n waits of the same length.
func observeN(w *Window, waited int64, n int) {
	for range n {
		w.Observe(waited)
	}
}

// requireWindow fails t unless w's window is want µs.
func requireWindow(t *testing.T, w *Window, want int64) {
	t.Helper()
	if w.Nanos() != want*us {
		t.Fatalf("window %d µs, want %d", w.Nanos()/us, want)
	}
}

func TestWindowGrowsToWaitsWithinTheLimit(t *testing.T) {
	w := New(200 * time.Microsecond)
	if w.Nanos() != 0 {
		t.Fatalf("a new window polls %d ns, want 0", w.Nanos())
	}
	// Answers 70 µs after each send: 10, 20, 40, 80, and there it stays.
	want := []int64{10 * us, 20 * us, 40 * us, 80 * us, 80 * us, 80 * us}
	for i, w0 := range want {
		w.Observe(70 * us)
		if w.Nanos() != w0 {
			t.Fatalf("after wait %d the window is %d µs, want %d", i+1, w.Nanos()/us, w0/us)
		}
	}
}

func TestWindowStopsAtTheLimit(t *testing.T) {
	w := New(50 * time.Microsecond)
	observeN(&w, 45*us, 10)
	requireWindow(t, &w, 50) // the limit
}

func TestWindowShrinksToZeroAfterLongWaits(t *testing.T) {
	w := New(200 * time.Microsecond)
	observeN(&w, 150*us, 5)
	requireWindow(t, &w, 160)
	// The client now pauses 1 ms between requests: 160, 80, 40, 20, 10, 0.
	want := []int64{80, 40, 20, 10, 0, 0}
	for i, w0 := range want {
		w.Observe(1000 * us)
		if w.Nanos() != w0*us {
			t.Fatalf("after long wait %d the window is %d µs, want %d", i+1, w.Nanos()/us, w0)
		}
	}
}

func TestWindowKeepsWhatFound(t *testing.T) {
	w := New(200 * time.Microsecond)
	observeN(&w, 150*us, 6)
	// Waits shorter than the window leave it as it is.
	observeN(&w, 5*us, 5)
	requireWindow(t, &w, 160)
}

func TestZeroLimitNeverPolls(t *testing.T) {
	w := New(0)
	for _, waited := range []int64{1, 5 * us, 50 * us, 5000 * us} {
		w.Observe(waited)
		if w.Nanos() != 0 {
			t.Fatalf("a window of limit 0 polls %d ns after a wait of %d", w.Nanos(), waited)
		}
	}
	if n := New(-time.Second); n.Nanos() != 0 {
		t.Fatalf("negative limit: %d", n.Nanos())
	}
}
