package embedded

import (
	"sync/atomic"
	"unsafe"

	"github.com/ndbgate/ndbgate/internal/prefetch"
)

// A multi-key batch hashes every key before it takes any partition lock
// (exec.prepare). That pass also asks the CPU for each key's home index
// entry, so that the lookup under the lock finds it in cache: the index
// entry, the slot and the row are three dependent cache misses, and this
// takes the first off the critical path (perf at 100k keys: the index
// load's share of lookup's samples fell from 22 % to 5 %).
//
// The pass holds no lock, so it cannot read the index itself; it reads an
// indexHint, which the index publishes (atomically) whenever its entries
// move. A stale hint can only prefetch the wrong line.
//
// The slot and the row are the other two misses (perf of binary gets at
// pipeline 16: 38 % and 48 % of lookup's samples). Only the partition lock
// lets a pass read the index and the slots, and a batch's keys spread over
// the partitions, a group of about one op each. So a batch of several ops
// makes two more passes before it runs (exec.warm), each taking every
// group's lock briefly: the first reads each op's index entry and asks for
// its slot, the second reads the slot and asks for its row. A lock that is
// held elsewhere is skipped, not waited for.

// indexHint is where a partition's index entries are, for prefetching.
type indexHint struct {
	base atomic.Uintptr
	n    atomic.Uint32
}

// publish records where ix's entries are now. The partition lock is held.
func (ix *index) publish() {
	if h := ix.hint; h != nil {
		h.base.Store(uintptr(unsafe.Pointer(unsafe.SliceData(ix.e))))
		h.n.Store(uint32(len(ix.e)))
	}
}

// prefetchHome asks for the cache line of tag's home entry.
func (h *indexHint) prefetchHome(tag uint32) {
	if n := h.n.Load(); n > 0 {
		prefetch.Line(h.base.Load() + uintptr(uint64(tag)*uint64(n)>>32)*unsafe.Sizeof(ixEntry{}))
	}
}

// warmRounds is how far likelySlot probes from tag's home: about one cache
// line of entries, where some 95 % of keys are found (TestLikelySlotIsLookups).
// A guess need not be right, only cheap.
const warmRounds = 8

// likelySlot is the slot that lookup for tag most likely reads: the first
// entry from tag's home that has its tag. -1 for none. The caller holds mu.
func (p *partition) likelySlot(tag uint32) int32 {
	ix := &p.idx
	i := ix.home(tag)
	for range warmRounds {
		e := ix.e[i]
		if e.empty() {
			return -1
		}
		if e.tag == tag {
			return int32(e.slot - 1)
		}
		i = ix.next(i)
	}
	return -1
}

// warmSlot asks for the cache line of tag's likely slot. The caller holds mu.
func (p *partition) warmSlot(tag uint32) {
	if s := p.likelySlot(tag); s >= 0 {
		sl := &p.slots[s] // 24 bytes: it may straddle two lines
		prefetch.Line(uintptr(unsafe.Pointer(sl)))
		prefetch.Line(uintptr(unsafe.Pointer(&sl.state)))
	}
}

// warmRow asks for the first cache line of the row in tag's likely slot,
// where lookup compares the key. The caller holds mu.
func (p *partition) warmRow(tag uint32) {
	if s := p.likelySlot(tag); s >= 0 {
		sl := &p.slots[s]
		prefetch.Line(uintptr(unsafe.Pointer(unsafe.SliceData(p.arena.pages[sl.page]))) + uintptr(sl.off))
	}
}
