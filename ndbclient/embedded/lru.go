package embedded

// Each partition of an eviction table keeps its rows on a doubly linked LRU
// list threaded through the slots (int32 links, no pointers). Writes move a row
// to the front; reads move it only if it was not bumped in the same second, as
// memcached does, to keep hot reads from rewriting links all the time.

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
}

// lruTouch records a read of s.
func (p *partition) lruTouch(s int32, now uint32) {
	if p.slots[s].used != now {
		p.lruFront(s, now)
	}
}
