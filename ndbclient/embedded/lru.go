package embedded

import "math"

// Each partition of an eviction table keeps its rows on a doubly linked LRU
// list threaded through the slots (int32 links, no pointers). Writes move a row
// to the front; a read moves it only if it was last bumped lruBumpInterval or
// more ago (memcached's ITEM_UPDATE_INTERVAL). Relinking touches two other
// rows' slots, cache misses a read would otherwise not pay.

// lruBumpInterval is how stale, in seconds, a row's last bump must be before a
// read moves it to the front again.
const lruBumpInterval = 60

// lruFront makes s the most recently used row (linking it if it is new).
func (p *partition) lruFront(s int32, now uint32) {
	sl := &p.slots[s]
	sl.used = now
	if p.lruHead == s {
		return
	}
	if sl.prev >= 0 || p.lruTail == s {
		p.lruUnlink(s)
	}
	sl.prev, sl.next = -1, p.lruHead
	if p.lruHead >= 0 {
		p.slots[p.lruHead].prev = s
	} else {
		p.lruTail = s
		p.publishTail()
	}
	p.lruHead = s
}

// lruUnlink takes s off the list.
func (p *partition) lruUnlink(s int32) {
	sl := &p.slots[s]
	if sl.prev >= 0 {
		p.slots[sl.prev].next = sl.next
	} else {
		p.lruHead = sl.next
	}
	if sl.next >= 0 {
		p.slots[sl.next].prev = sl.prev
	} else {
		p.lruTail = sl.prev
	}
	sl.prev, sl.next = -1, -1
	if p.lruHead < 0 {
		p.publishTail()
	}
}

// publishTail sets tailAge from the list's tail.
func (p *partition) publishTail() {
	age := uint32(math.MaxUint32)
	if p.lruTail >= 0 {
		age = p.slots[p.lruTail].used
	}
	p.tailAge.Store(age)
}

// lruTouch records a read of s.
func (p *partition) lruTouch(s int32, now uint32) {
	if now-p.slots[s].used >= lruBumpInterval {
		p.lruFront(s, now)
	}
}
