//go:build !linux

package embedded

// mapHuge has no huge pages to ask for outside Linux: the caller maps an
// ordinary page.
func mapHuge(int) []byte { return nil }
