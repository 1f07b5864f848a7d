package embedded

import (
	"sync/atomic"
	"unsafe"
)

// Slots and index entries are pointer-free arrays of a partition. Once large
// they are mapped outside the Go heap, as arena pages are: on the heap, the
// collector lets the heap grow to twice what is live (GOGC), so each byte of
// them cost up to two of resident memory. Small ones stay on the heap, where
// they cost no mapping (Linux allows 65,530 per process) and no OS page.

// offHeapMin is the size from which an array is mapped.
const offHeapMin = 64 << 10

// region holds the memory of one such array.
type region struct {
	mem    []byte
	mapped bool
}

// regionSize is the size of the region newRegion(n) returns.
func regionSize(n int) int {
	n = max(n, 16) // past Go's tiny allocator: heap objects of 16 bytes or more are 8-aligned
	if n < offHeapMin {
		return n
	}
	return (n + pageAlign - 1) &^ (pageAlign - 1)
}

// refuseMaps makes the OS refuse mappings, as it does past vm.max_map_count
// (tests): bit refuseRegions those of slot arrays and indexes, refuseAll
// every one (mapPage).
var refuseMaps atomic.Uint32

const (
	refuseRegions = 1 << iota
	refuseAll
)

// newRegion returns at least n zeroed bytes, 8-aligned; ok is false if the OS
// refuses them.
func newRegion(n int) (r region, ok bool) {
	n = regionSize(n)
	if n < offHeapMin {
		return region{mem: make([]byte, n)}, true
	}
	if refuseMaps.Load()&refuseRegions != 0 {
		return region{}, false
	}
	mem := mapPage(n)
	if mem == nil {
		return region{}, false
	}
	return region{mem: mem, mapped: true}, true
}

// free gives the memory back: to the OS at once if it is mapped. Nothing may
// use the array after.
func (r *region) free() {
	if r.mapped {
		unmapPage(r.mem)
	}
	*r = region{}
}

// arrayOf views r as a []T of as many elements as fit. T holds no pointers.
func arrayOf[T any](r region) []T {
	var z T
	n := len(r.mem) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(r.mem))), n)
}
