//go:build amd64 || arm64

package embedded

// prefetch asks the CPU to bring addr's cache line in. A prefetch never
// faults, so addr may be stale or wrong: it then only wastes the fetch.
func prefetch(addr uintptr)
