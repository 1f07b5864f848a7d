package ndbclient

import (
	"fmt"
	"testing"
)

func TestCodeOf(t *testing.T) {
	wrapped := fmt.Errorf("context: %w", ErrNotFound)
	for _, tc := range []struct {
		err  error
		want Code
	}{
		{nil, CodeOK},
		{ErrNotFound, CodeNotFound},
		{wrapped, CodeNotFound},
		{fmt.Errorf("plain"), CodeInternal},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestCodeOfDoesNotAllocate: every miss of a multi-get asks CodeOf of its
// op's error; errors.As allocated each time.
func TestCodeOfDoesNotAllocate(t *testing.T) {
	var err error = ErrNotFound
	if n := testing.AllocsPerRun(100, func() { _ = CodeOf(err) }); n != 0 {
		t.Fatalf("CodeOf allocates %v times a call", n)
	}
}
