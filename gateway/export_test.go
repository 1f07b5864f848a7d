package gateway

import "testing"

// SetMaxFreesInFlight bounds the frees of old parts after replies (for
// Services made after it) until the test ends.
func SetMaxFreesInFlight(t testing.TB, n int) {
	old := maxFreesInFlight
	maxFreesInFlight = n
	t.Cleanup(func() { maxFreesInFlight = old })
}
