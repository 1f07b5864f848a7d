//go:build !amd64 && !arm64

// Package prefetch asks the CPU for a cache line before it is needed, so
// that independent misses (the keys of one batch) overlap instead of
// waiting for each other.
package prefetch

// Line does nothing on this architecture.
func Line(uintptr) {}

// Lines does nothing on this architecture.
func Lines(uintptr, int) {}
