package pollwindow

import (
	"testing"
	"time"
)

const us = int64(time.Microsecond)

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
	for range 10 {
		w.Observe(45 * us)
	}
	if w.Nanos() != 50*us {
		t.Fatalf("window %d µs, want the limit, 50", w.Nanos()/us)
	}
}

func TestWindowShrinksToZeroAfterLongWaits(t *testing.T) {
	w := New(200 * time.Microsecond)
	for range 5 {
		w.Observe(150 * us)
	}
	if w.Nanos() != 160*us {
		t.Fatalf("window %d µs, want 160", w.Nanos()/us)
	}
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
	for range 6 {
		w.Observe(150 * us)
	}
	// Waits shorter than the window leave it as it is.
	for range 5 {
		w.Observe(5 * us)
	}
	if w.Nanos() != 160*us {
		t.Fatalf("window %d µs, want 160", w.Nanos()/us)
	}
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
