package embedded

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapHuge maps n bytes (a multiple of hugePage) aligned to hugePage and
// asks for transparent huge pages there, or returns nil. unmapPage frees
// it like any page.
func mapHuge(n int) []byte {
	if refuseMaps.Load()&refuseAll != 0 {
		return nil
	}
	// Map one huge page more than needed, then cut the unaligned ends off.
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(n+hugePage), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	start := (uintptr(raw) + hugePage - 1) &^ (hugePage - 1)
	if head := start - uintptr(raw); head > 0 {
		unmapPage(unsafe.Slice((*byte)(raw), head))
	}
	if tail := uintptr(raw) + uintptr(n+hugePage) - (start + uintptr(n)); tail > 0 {
		unmapPage(unsafe.Slice((*byte)(unsafe.Add(raw, start-uintptr(raw)+uintptr(n))), tail))
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(raw, start-uintptr(raw))), n)
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // only advice: refused, the pages are 4 KiB
	return mem
}
