// The slot array: one slot a row, free slots chained, grown before a new row
// needs it (roomForRow) and shrunk when mostly empty (settle).

package embedded

import (
	"unsafe"
)

// slot describes one stored row. Slots live in one pointer-free array per
// partition, indexed by int32, outside the Go heap once large (offheap.go).
// What the row holds is not kept here: its index tag is its key's hash,
// computed again on the rare paths that need it (unindex, evacuate), and its
// expiry is read from the row (expiry), which a lookup has just read anyway.
type slot struct {
	off   uint32 // arena chunk: offset in page
	size  uint32 // row bytes; 0 marks a free slot
	used  uint32 // last LRU bump, unix seconds
	prev  int32  // LRU links (eviction tables); next also chains free slots
	next  int32
	page  uint16 // arena chunk: page number (a partition has at most maxPages)
	class uint8  // arena size class
	state uint8  // stFetched | stStale | stToken
}

// Row state bits (memcached's ITEM_FETCHED, ITEM_STALE, ITEM_TOKEN_SENT).
const (
	stFetched uint8 = 1 << iota
	stStale
	stToken
)

const slotSize = int(unsafe.Sizeof(slot{}))

// newSlot takes a free slot or the next one; roomForRow has made room.
func (p *partition) newSlot() int32 {
	if s := p.freeSlot; s >= 0 {
		p.freeSlot = p.slots[s].next
		p.slots[s] = slot{prev: -1, next: -1}
		return s
	}
	if len(p.slots) == cap(p.slots) {
		panic("embedded: slot array full") // roomForRow grows it first
	}
	p.slots = append(p.slots, slot{prev: -1, next: -1}) // within cap: stays in the region
	return int32(len(p.slots) - 1)
}

// slotsRoom is the room growSlots gives the slot array.
func (p *partition) slotsRoom() int { return max(2*cap(p.slots), minSlots) }

// minSlots is the smallest slot array; settle leaves smaller ones be.
const minSlots = 64

// roomForRow readies the slot array and index for one more row, growing them
// now if they are full, so that newSlot and index.insert never have to, and
// reserves what they will hold more with it, in the limit and off the page
// cap (evicting as put does; force: regardless of the limit), which it
// returns for syncMeta. It fails with out of memory, changing nothing but
// evictions, if the limit or the OS refuses.
func (p *partition) roomForRow(now uint32, force bool) (int64, error) {
	m := p.arena.m
	growSlots := p.freeSlot < 0 && len(p.slots) == cap(p.slots)
	growIndex := p.idx.full()
	sb, mapped := int64(len(m.slots.mem)), m.slots.mapped
	if growSlots {
		n := regionSize(p.slotsRoom() * slotSize)
		sb, mapped = int64(n), n >= offHeapMin
	}
	if mapped {
		n := len(p.slots)
		if p.freeSlot < 0 {
			n++
		}
		sb = int64(n*slotSize+pageAlign-1) &^ (pageAlign - 1)
	}
	xb := int64(len(m.index.mem))
	if growIndex {
		xb = int64(regionSize(p.idx.grownSize() * 8))
	}
	need := max(metaCharge(sb+xb)-p.metaCharged, 0)
	switch {
	case need == 0:
	case force:
		p.e.used.Add(need)
	case !p.reserve(need, -1, now): // (its evictions may have freed a slot)
		p.e.oom.Add(1)
		return 0, errOutOfMemory
	case p.e.limit > 0 && !p.pagesFit(need, now):
		p.e.used.Add(-need)
		p.e.oom.Add(1)
		return 0, errOutOfMemory
	}
	// Held off the page cap from now on, as in the limit: the row's own
	// chunk, mapped before syncMeta, must not take the room it fitted in.
	p.e.metaBytes.Add(need)
	if p.freeSlot < 0 && len(p.slots) == cap(p.slots) && !p.growSlots() ||
		p.idx.full() && !p.idx.resize(p.idx.grownSize()) {
		p.syncMeta(need)
		p.e.oom.Add(1)
		return 0, errOutOfMemory
	}
	return need, nil
}

// pagesFit makes the pages fit the cap less n, which the slot array and
// index are to hold more (they come off it, Engine.pageCap): pooled pages go
// first, then pages are emptied.
func (p *partition) pagesFit(n int64, now uint32) bool {
	e := p.e
	fits := func() bool { return e.pageBytes.Load()+n <= e.pageCap() }
	if fits() {
		return true
	}
	e.pageBytes.Add(-e.pool.drain())
	if fits() {
		return true
	}
	p.makeRoom(n, -1, now)
	e.pageBytes.Add(-e.pool.drain()) // the emptied pages may be there
	return fits()
}

// growSlots doubles the slot array's room, copying it to a new region; false
// if the OS refuses it. No pointer into the old one survives this: callers
// take &p.slots[s] after newSlot.
func (p *partition) growSlots() bool {
	r, ok := newRegion(p.slotsRoom() * slotSize)
	if !ok {
		return false
	}
	slots := arrayOf[slot](r)[:len(p.slots)]
	copy(slots, p.slots)
	m := p.arena.m
	m.slots.free()
	m.slots, p.slots = r, slots
	return true
}

// settle shrinks the slot array and the index when they are mostly empty
// (under a quarter used) to half used, so that alternating writes and
// deletes cannot make them shrink and grow in turn, and each shrink, linear
// in their size, follows at least as many deletes as it copies rows. p.mu is
// held, and nothing may hold a slot number across it: it is called just
// before the lock is let go, by those who take it (the op's caller, eviction
// and emptying pages in other partitions, the reaper), never from a
// partition's own put or del. While a snapshot copies rows by slot number,
// the slot array waits.
func (p *partition) settle() {
	if n := int(p.items.Load()); len(p.slots) > minSlots && n*4 < len(p.slots) && p.e.snapshotting.Load() == 0 {
		p.compactSlots(n)
	} else if !p.idx.sparse() {
		return
	}
	if p.idx.sparse() {
		p.idx.resize(p.idx.shrunkSize()) // refused: it stays as it is
	}
	p.syncMeta(0)
}

// compactSlots moves the n live slots to the front of a new array of twice
// their number, renumbering them: the index entries and LRU links follow,
// and no slot is left free.
func (p *partition) compactSlots(n int) {
	r, ok := newRegion(max(2*n, minSlots) * slotSize)
	if !ok {
		return // refused: it stays as it is
	}
	old := p.slots
	slots := arrayOf[slot](r)
	j := 0
	for i := range old {
		if old[i].size == 0 {
			continue
		}
		slots[j] = old[i]
		old[i].used = uint32(j) // the old array is dropped: keep where the row went
		j++
	}
	slots = slots[:j]
	moved := func(s int32) int32 {
		if s < 0 {
			return s
		}
		return int32(old[s].used)
	}
	for i := range slots {
		slots[i].prev, slots[i].next = moved(slots[i].prev), moved(slots[i].next)
	}
	p.lruHead, p.lruTail = moved(p.lruHead), moved(p.lruTail)
	for i, x := range p.idx.e {
		if !x.empty() {
			p.idx.e[i].slot = uint32(moved(int32(x.slot-1))) + 1
		}
	}
	p.freeSlot = -1
	m := p.arena.m
	m.slots.free()
	m.slots, p.slots = r, slots
}
