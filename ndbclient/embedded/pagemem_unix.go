//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package embedded

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapPage maps n bytes of zeroed anonymous memory outside the Go heap, or
// returns nil if the OS refuses. The garbage collector never scans it (rows
// hold no pointers) nor counts it when pacing itself, and unmapPage hands it
// back to the OS at once, so the process's resident memory follows the pages
// the engine holds.
func mapPage(n int) []byte {
	if refuseMaps.Load()&refuseAll != 0 {
		return nil
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// unmapPage returns a page from mapPage to the OS.
func unmapPage(b []byte) {
	if err := unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b))); err != nil {
		panic("embedded: munmap: " + err.Error())
	}
}
