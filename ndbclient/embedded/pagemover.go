// The page mover: allocating a row's chunk under the page cap, and emptying
// pages (moving or evicting their rows) so that another class or partition
// can have them.

package embedded

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// Pages. With a memory limit, the pages of all partitions together stay within
// Engine.pageCap. A partition that needs a page beyond it empties pages
// (makeRoom, evacuate), its own or other partitions' (try-locked): their free
// chunks leave the free lists, and their rows move to free chunks of their
// class on other pages of their partition; a row of an eviction table that
// finds none is evicted, and one of another table leaves its page in place
// (copyCompact then moves such rows to a page of their own size). The emptied
// page goes to the engine's pool, and from there to whichever partition needs
// a page next, for whichever class: memory that one class freed serves
// another, in any partition of any table (memcached's slab page mover).

// alloc finds a chunk of class cls and size bytes: a free one, room in the
// current page, or a new page. It may move rows of this partition (slot
// protect included) and evict others; force ignores the page cap.
func (p *partition) alloc(cls uint8, size int, protect int32, now uint32, force bool) (page, off uint32, ok bool) {
	a := &p.arena
	e := p.e
	if cls == classBig {
		n := int64(size)
		if !a.roomForPage() {
			return 0, 0, false
		}
		for try := 0; !e.takePages(n, force); try++ {
			if try < 8 && e.pool.bytes.Load() > 0 {
				// Pooled pages count against the cap and fit no big row:
				// give them up first (an emptied page lands there too).
				e.pageBytes.Add(-e.pool.drain())
				continue
			}
			if try >= 3 || !p.makeRoom(n, protect, now) {
				return 0, 0, false
			}
		}
		mem := mapPage(size)
		if mem == nil {
			e.pageBytes.Add(-n)
			return 0, 0, false
		}
		return a.addPage(mem, uint32(size)), 0, true
	}
	for try := 0; ; try++ {
		if page, off, ok = a.take(cls); ok {
			return page, off, true
		}
		if page, off, ok = a.bump(size); ok {
			return page, off, true
		}
		need := (size + pageAlign - 1) &^ (pageAlign - 1)
		if !a.roomForPage() {
			return 0, 0, false
		}
		if mem := e.newRegularPage(need, a.nextPage(size), force); mem != nil {
			a.startPage(a.addPage(mem, 0))
			page, off, _ = a.bump(size)
			return page, off, true
		}
		// Emptying pages may also free a chunk of this class here, or
		// leave room in the current page: look again.
		if try == 3 || !p.makeRoom(int64(need), protect, now) {
			return 0, 0, false
		}
	}
}

// allocFree finds a chunk of class cls and size bytes without mapping a
// page: a free one, or room in the current page.
func (p *partition) allocFree(cls uint8, size int) (page, off uint32, ok bool) {
	if cls == classBig {
		return 0, 0, false
	}
	if page, off, ok = p.arena.take(cls); ok {
		return page, off, true
	}
	return p.arena.bump(size)
}

// freeChunk frees a row's chunk; a dedicated page goes back to the OS.
func (p *partition) freeChunk(cls uint8, page, off uint32) {
	if cls == classBig {
		p.dropPage(page, false)
		return
	}
	p.arena.release(cls, page, off)
}

// dropPage gives up page v, which holds no live chunk and no listed free
// chunk: to the engine's pool if pool is set and it has room, else to the OS.
func (p *partition) dropPage(v uint32, pool bool) {
	mem := p.arena.dropPage(v)
	if c := p.e.pageCap(); pool && (c == 0 || p.e.pageBytes.Load() <= c) && p.e.pool.put(mem, p.e.poolLimit()) {
		return // (not past the cap: a compaction's page has just been mapped)
	}
	p.e.pageBytes.Add(-int64(len(mem)))
	unmapPage(mem)
}

// makeRoom empties pages until need more bytes of pages fit under the cap.
// Pages of eviction tables go first, in the partition whose least recently
// used row is oldest first (here if it is as old as any): their rows move to
// free chunks of their class, or are evicted. Then pages of tables without
// eviction, here first: at least a quarter free, then any, their rows moved
// to free chunks and, if that cannot empty any, copied to a page of their own
// size (copyCompact). Other partitions are only try-locked.
func (p *partition) makeRoom(need int64, protect int32, now uint32) bool {
	e := p.e
	fits := func() bool { return e.pageBytes.Load()-e.pool.bytes.Load()+need <= e.pageCap() }
	compact := func(q *partition, frac int) bool {
		if q == p {
			for p.compactOnce(protect, now, frac) {
				if fits() {
					return true
				}
			}
			return false
		}
		if !q.mu.TryLock() {
			return false
		}
		defer q.mu.Unlock()
		defer q.settle()
		for q.compactOnce(-1, now, frac) {
			if fits() {
				return true
			}
		}
		return false
	}
	tables := *e.tables.Load()
	// Eviction tables: by the age of their least recently used rows.
	evicting := p.rooms[:0]
	for _, t := range tables {
		if t.eviction {
			evicting = append(evicting, t.parts...)
		}
	}
	defer func() { clear(evicting); p.rooms = evicting[:0] }()
	if len(evicting) > 0 {
		age := func(q *partition) uint32 {
			if q == p && p.lruTail >= 0 {
				return p.slots[p.lruTail].used
			}
			return q.tailAge.Load()
		}
		slices.SortStableFunc(evicting, func(x, y *partition) int {
			if c := cmp.Compare(age(x), age(y)); c != 0 {
				return c
			}
			switch p {
			case x:
				return -1
			case y:
				return 1
			}
			return 0
		})
		for _, q := range evicting {
			if compact(q, 0) {
				return true
			}
		}
	}
	// Tables without eviction: moves only.
	for _, frac := range [...]int{4, 0} {
		if !p.t.eviction && compact(p, frac) {
			return true
		}
		for _, t := range tables {
			if t.eviction {
				continue
			}
			for i := range t.parts {
				if q := t.parts[(p.num+i)%len(t.parts)]; q != p && compact(q, frac) {
					return true
				}
			}
		}
	}
	return fits()
}

// compactOnce empties and unmaps one or more of the partition's pages,
// trying first the pages with the most free bytes, among those at least
// 1/frac free (frac 0: any free byte), and emptying each into free chunks
// elsewhere (evacuate; rows of an eviction table that find none are
// evicted). With frac 0, if none of them can be emptied so, it
// copies the rows of the emptiest ones into one new page of their size
// (copyCompact). It reports whether it released pages.
func (p *partition) compactOnce(protect int32, now uint32, frac int) bool {
	a := &p.arena
	p.cands = p.cands[:0]
	for v, pg := range a.pages {
		if pg == nil {
			continue
		}
		free := len(pg) - int(a.live[v])
		if free > 0 && (frac == 0 || free*frac >= len(pg)) {
			p.cands = append(p.cands, uint32(v))
		}
	}
	slices.SortFunc(p.cands, func(x, y uint32) int {
		return cmp.Compare(len(a.pages[y])-int(a.live[y]), len(a.pages[x])-int(a.live[x]))
	})
	for i, v := range p.cands {
		if i == evacuateTries {
			break
		}
		if p.evacuate(v, protect, now, true) {
			return true
		}
	}
	return frac == 0 && p.copyCompact(protect, now)
}

// evacuateTries bounds the pages compactOnce tries to empty into free chunks.
const evacuateTries = 8

// copyCompact moves the rows of the emptiest pages (p.cands, best first), up
// to maxPage bytes of them, into one new page just big enough, and unmaps the
// pages emptied. This always succeeds, since rows no longer need a free chunk
// of their class, and releases more than it maps. The new page may exceed
// the cap: one compaction at a time in the engine does this, so pages
// overshoot the cap by at most maxPage.
func (p *partition) copyCompact(protect int32, now uint32) bool {
	a := &p.arena
	live, size, k := 0, 0, 0
	for _, v := range p.cands {
		l := int(a.live[v])
		if live+l > maxPage {
			break
		}
		live, size, k = live+l, size+len(a.pages[v]), k+1
	}
	n := (live + pageAlign - 1) &^ (pageAlign - 1)
	if k == 0 || size-n < pageAlign || !a.roomForPage() {
		return false
	}
	e := p.e
	if !e.compacting.CompareAndSwap(false, true) {
		return false
	}
	defer e.compacting.Store(false)
	if n > 0 {
		mem := mapPage(n)
		if mem == nil {
			return false
		}
		e.pageBytes.Add(int64(n))
		a.startPage(a.addPage(mem, 0))
	}
	released := false
	for _, v := range p.cands[:k] {
		if !p.evacuate(v, protect, now, false) {
			break
		}
		released = true
	}
	return released
}

// evacuate empties regular page v and unmaps it: its free chunks leave their
// lists, its rows move to free chunks of their class elsewhere or to the
// current page, and rows that find no room are evicted if evict is set
// (expired rows go anyway, in any table; live ones only from eviction tables,
// never slot protect). If a row
// can neither move nor go, the page stays, with every row it still holds
// intact, and evacuate returns false.
func (p *partition) evacuate(v uint32, protect int32, now uint32, evict bool) bool {
	a := &p.arena
	if int(v) == a.cur {
		a.retire()
	}
	pg := a.pages[v]
	// Pass 1: unlink the free chunks and list the rows.
	p.evac = p.evac[:0]
	for off := 0; off+minChunk <= len(pg); {
		c := pg[off:]
		if isFree(c) {
			cls := uint8(binary.LittleEndian.Uint16(c[fcClass:]))
			a.unlink(cls, v, uint32(off))
			off += int(classSizes[cls])
			continue
		}
		s := p.slotAt(uint32(p.e.hash(rowKey(c))), v, uint32(off))
		if s < 0 {
			panic("embedded: a row in the arena is not in the index")
		}
		p.evac = append(p.evac, s)
		off += int(classSizes[p.slots[s].class])
	}
	// Pass 2: move or evict every row. No chunk of page v is listed now, so
	// every chunk popped is elsewhere.
	for i, s := range p.evac {
		sl := &p.slots[s]
		cls, off := sl.class, sl.off
		size := classSizes[cls]
		switch {
		case p.expired(s, now) && s != protect:
			p.unindex(s)
			p.e.expired.Add(1)
		default:
			dp, do, ok := a.take(cls)
			if !ok {
				dp, do, ok = a.bump(int(size))
			}
			if ok {
				copy(a.pages[dp][do:], pg[off:off+sl.size])
				sl.page, sl.off = uint16(dp), do
				break
			}
			if !evict || !p.t.eviction || s == protect {
				p.evac = p.evac[i:]
				p.relist(v)
				return false
			}
			p.unindex(s)
			p.e.evictions.Add(1)
		}
		a.markFree(cls, v, off)
		a.live[v] -= size
	}
	p.dropPage(v, true)
	return true
}

// relist puts the free chunks of page v back on their lists after evacuate
// gave up; p.evac holds the rows still there, in page order.
func (p *partition) relist(v uint32) {
	a := &p.arena
	pg := a.pages[v]
	rows := p.evac
	for off := 0; off+minChunk <= len(pg); {
		if len(rows) > 0 && uint32(p.slots[rows[0]].page) == v && p.slots[rows[0]].off == uint32(off) {
			off += int(classSizes[p.slots[rows[0]].class])
			rows = rows[1:]
			continue
		}
		cls := uint8(binary.LittleEndian.Uint16(pg[off+fcClass:]))
		a.pushFree(cls, v, uint32(off))
		off += int(classSizes[cls])
	}
}
