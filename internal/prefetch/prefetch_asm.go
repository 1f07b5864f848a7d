//go:build amd64 || arm64

// Package prefetch asks the CPU for a cache line before it is needed, so
// that independent misses (the keys of one batch) overlap instead of
// waiting for each other.
package prefetch

// Line asks the CPU to bring addr's cache line in. A prefetch never faults,
// so addr may be stale or wrong: it then only wastes the fetch.
func Line(addr uintptr)

// Lines asks for the n cache lines from addr's on (64 bytes each), in one
// call: a call per line costs more than the prefetch itself.
func Lines(addr uintptr, n int)
