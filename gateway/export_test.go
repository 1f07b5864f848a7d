package gateway

import "testing"

// SetMaxFreeingParts bounds the part deletes in flight after replies
// until the test ends.
func SetMaxFreeingParts(t testing.TB, n int64) {
	old := maxFreeingParts
	maxFreeingParts = n
	t.Cleanup(func() { maxFreeingParts = old })
}
