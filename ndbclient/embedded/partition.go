package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ndbgate/ndbgate/ndbclient"
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

// A row is charged its arena chunk; the slot array and index are charged as
// they are (metaCharged: what they hold, the resident part of a mapped slot array),
// so eviction makes room for them too, and they shrink when mostly empty
// (settle): a table emptied by another's evictions gives its memory back.

// partition is one slice of a table with its own lock. Everything below mu is
// guarded by it, except items, which Stats reads without the lock.
type partition struct {
	mu  sync.Mutex
	e   *Engine
	t   *table
	num int    // partition number within the table
	gid uint32 // engine-wide lock order: partitions are locked in ascending gid

	idx         index
	slots       []slot // len: slots in use or free-chained; cap: the region's
	freeSlot    int32  // head of the free-slot chain, -1 for none
	lruHead     int32  // most recently used; -1 when empty
	lruTail     int32
	arena       arena
	charged     int64        // bytes charged against the limit here: chunks and meta
	metaCharged int64        // bytes of the slot array and index charged (metaSize as last synced)
	build       []byte       // scratch: the row being written
	cat         []byte       // scratch: append's concatenated value
	evac        []int32      // scratch: the rows of a page being emptied
	cands       []uint32     // scratch: pages worth emptying
	rooms       []*partition // scratch: partitions to empty pages in
	lb          logBatch     // scratch: a single op's log frame (data dir)

	items atomic.Int64
	// tailAge is the last access of the LRU tail as of the last eviction
	// here (MaxUint32: no row), for other tables' eviction to compare with
	// (olderElsewhere). Set when the partition evicts and when its list
	// becomes empty or not, so that it costs no store per access.
	tailAge atomic.Uint32
	_       [64]byte // keep the next partition's mutex off this cache line
}

func newPartition(e *Engine, t *table, num int, gid uint32) *partition {
	p := &partition{e: e, t: t, num: num, gid: gid}
	m := &mappings{}
	p.arena.m = m
	p.idx.reg = &m.index
	p.idx.hint = &t.hints[num]
	p.reset()
	// Pages live outside the Go heap: give them back once nothing can reach
	// the partition (an engine dropped without delete_all, as tests do).
	runtime.AddCleanup(p, (*mappings).unmapAll, m)
	return p
}

// reset empties the partition, dropping all its memory. Its caller has
// uncharged what it held, or taken it (detach).
func (p *partition) reset() {
	p.e.pageBytes.Add(-p.arena.pageBytes)
	p.arena.m.unmapAll() // the pages, the slots and the index
	p.arena.init(p.arena.m)
	p.idx.init()
	p.slots = nil
	p.freeSlot, p.lruHead, p.lruTail = -1, -1, -1
	p.tailAge.Store(math.MaxUint32)
	p.charged, p.metaCharged = 0, 0
	p.items.Store(0)
	p.syncMeta(0) // the empty index
}

// uncharge takes back from the engine what the partition is charged.
func (p *partition) uncharge() {
	p.e.used.Add(-p.charged)
	p.e.metaBytes.Add(-p.metaCharged)
	p.charged, p.metaCharged = 0, 0
}

// metaFree is how much of each partition's slot array and index goes
// uncharged, with its first page (Engine.pageCap): a partition of a few rows
// costs the limit its rows' chunks only.
const metaFree = 4 << 10

// metaCharge is the charge for raw bytes of slot array and index.
func metaCharge(raw int64) int64 { return max(raw-metaFree, 0) }

// metaSize is what the slot array and index are charged: the index whole
// (its entries are spread over it), the slot array as far as it is used if it
// is mapped (pages never touched are not resident), whole if on the heap.
func (p *partition) metaSize() int64 {
	m := p.arena.m
	n := int64(len(m.slots.mem))
	if m.slots.mapped {
		n = int64(len(p.slots)*slotSize+pageAlign-1) &^ (pageAlign - 1)
	}
	return metaCharge(n + int64(len(m.index.mem)))
}

// syncMeta charges what the slot array and index hold now, reserved of it
// having been reserved already (roomForRow).
func (p *partition) syncMeta(reserved int64) {
	d := p.metaSize() - p.metaCharged
	p.metaCharged += d
	p.charged += d
	p.e.metaBytes.Add(d)
	p.e.used.Add(d - reserved)
}

// row returns slot s's row bytes, which live in the arena.
func (p *partition) row(s int32) []byte {
	sl := &p.slots[s]
	return p.arena.bytes(uint32(sl.page), sl.off, sl.size)
}

// lookup returns the slot holding key, or -1. Expired rows are found too.
func (p *partition) lookup(tag uint32, key []byte) int32 {
	ix := &p.idx
	for i := ix.home(tag); ; i = ix.next(i) {
		e := ix.e[i]
		if e.empty() {
			return -1
		}
		if e.tag == tag {
			s := int32(e.slot - 1)
			if sl := &p.slots[s]; bytes.Equal(rowKey(p.arena.pages[sl.page][sl.off:]), key) {
				return s
			}
		}
	}
}

// slotAt returns the slot whose row is at page, off (its index tag is tag),
// or -1.
func (p *partition) slotAt(tag, page, off uint32) int32 {
	ix := &p.idx
	for i := ix.home(tag); ; i = ix.next(i) {
		e := ix.e[i]
		if e.empty() {
			return -1
		}
		if e.tag == tag {
			s := int32(e.slot - 1)
			if sl := &p.slots[s]; uint32(sl.page) == page && sl.off == off {
				return s
			}
		}
	}
}

// tagOf is slot s's index tag, from its row's key.
func (p *partition) tagOf(s int32) uint32 {
	sl := &p.slots[s]
	return uint32(p.e.hash(rowKey(p.arena.pages[sl.page][sl.off:])))
}

// find is lookup for live rows: an expired row is freed here and is a miss.
func (p *partition) find(tag uint32, key []byte, now uint32) int32 {
	s := p.lookup(tag, key)
	if s >= 0 && p.expired(s, now) {
		p.del(s)
		p.e.expired.Add(1)
		p.e.reclaimed.Add(1)
		return -1
	}
	return s
}

// expiry is slot s's expiry time (expireOf), 0 for never.
func (p *partition) expiry(s int32) uint32 {
	if p.t.expireCol < 0 {
		return 0
	}
	return p.t.expireOf(p.row(s))
}

func (p *partition) expired(s int32, now uint32) bool {
	x := p.expiry(s)
	return x != 0 && x <= now
}

// Mutations. put, del and reset are the only ways a partition's rows change.
// The log (wal.go) records what ops do with them (partition.do, deleteAll),
// not these calls: evictions, expiry and rollbacks are not logged. (Emptying
// a page moves rows, which changes where they are, not what they hold, and
// evicts rows through del.)

// put stores row under slot s (s < 0: a new row with index tag tag) and returns
// the slot. It reserves memory first, evicting if the table allows, and
// changes nothing if that fails. force skips the limit (rollback restores rows
// that fitted before). row must not alias the arena.
func (p *partition) put(s int32, tag uint32, row []byte, now uint32, force bool) (int32, error) {
	var reserved int64 // for the slot array and index
	if s < 0 {
		var err error
		if reserved, err = p.roomForRow(now, force); err != nil {
			return s, err
		}
	}
	cls, size := classOf(len(row))
	delta := int64(size)
	if s >= 0 {
		sl := &p.slots[s]
		delta -= int64(chunkSize(sl.class, sl.size))
	}
	switch {
	case delta <= 0 || force:
		if delta != 0 { // a same-size rewrite, the common set, skips the shared counter
			p.e.used.Add(delta)
		}
	case !p.reserve(delta, s, now):
		p.syncMeta(reserved)
		p.e.oom.Add(1)
		return s, errOutOfMemory
	}
	move := s < 0
	if !move {
		sl := &p.slots[s]
		move = sl.class != cls || chunkSize(sl.class, sl.size) != size
	}
	var page, off uint32
	if move {
		var ok bool
		if s >= 0 && delta <= 0 && !force {
			// A row shrinking empties no page and evicts no row for its
			// new chunk: it takes a free one or keeps its own (below). A
			// big one, whose page must go, looks for room as any write
			// does, and at last maps its smaller chunk past the cap.
			page, off, ok = p.allocFree(cls, size)
			if !ok && p.slots[s].class == classBig {
				if page, off, ok = p.alloc(cls, size, s, now, false); !ok {
					page, off, ok = p.alloc(cls, size, s, now, true)
				}
			}
		} else {
			page, off, ok = p.alloc(cls, size, s, now, force)
		}
		switch {
		case ok:
		case s >= 0 && delta <= 0 && p.slots[s].class != classBig:
			// A shrinking row that finds no smaller chunk keeps its own:
			// it is charged what it was, and moves on a later write.
			p.e.used.Add(-delta)
			delta, move = 0, false
		default:
			p.e.used.Add(-delta)
			p.syncMeta(reserved)
			p.e.oom.Add(1)
			return s, errOutOfMemory
		}
	}
	p.charged += delta
	if s < 0 {
		s = p.newSlot()
		sl := &p.slots[s]
		sl.class = cls
		sl.page, sl.off = uint16(page), off
		p.idx.insert(tag, s)
		p.items.Add(1)
		p.syncMeta(reserved)
	} else if move {
		sl := &p.slots[s] // alloc may have moved the row: read its place now
		p.freeChunk(sl.class, uint32(sl.page), sl.off)
		sl.page, sl.off, sl.class = uint16(page), off, cls
	}
	sl := &p.slots[s]
	sl.size = uint32(len(row))
	copy(p.arena.bytes(uint32(sl.page), sl.off, sl.size), row)
	sl.used = now
	if p.t.eviction {
		p.lruFront(s, now)
	}
	if int64(len(row)) > p.t.largest.Load() {
		p.t.noteRow(len(row)) // stored: a refused row does not count
	}
	return s, nil
}

// restore puts back a row that a rolled-back write or a refused clear took
// out, with its item state and last access. It fitted before, so the limit
// is not asked; but the OS may refuse memory for it (a mapping for its page,
// slot array or index). Then it is lost: logged and counted, never a panic,
// since the write that removed it cannot be undone either.
func (p *partition) restore(tag uint32, row []byte, state uint8, used, now uint32) {
	s, err := p.put(-1, tag, row, now, true)
	if err != nil {
		p.e.lostRows.Add(1)
		p.e.log.LogAttrs(context.Background(), slog.LevelError, "embedded: a row could not be put back after a rollback, and is lost",
			slog.String("table", p.t.schema.FullName()), slog.Int("row_bytes", len(row)), slog.String("error", err.Error()))
		return
	}
	p.slots[s].state, p.slots[s].used = state, used
}

// del frees slot s's row.
func (p *partition) del(s int32) {
	sl := &p.slots[s]
	cls, page, off := sl.class, uint32(sl.page), sl.off
	p.unindex(s)
	p.freeChunk(cls, page, off)
}

// unindex removes slot s's row from the index, the LRU list and the charges,
// and frees the slot; its chunk is the caller's to free (the row is still
// there: its key gives the index tag).
func (p *partition) unindex(s int32) {
	p.idx.remove(p.tagOf(s), s)
	sl := &p.slots[s]
	if p.t.eviction {
		p.lruUnlink(s)
	}
	charge := int64(chunkSize(sl.class, sl.size))
	p.charged -= charge
	p.e.used.Add(-charge)
	*sl = slot{next: p.freeSlot}
	p.freeSlot = s
	p.items.Add(-1)
}

// clear removes every row and returns how many were live (not expired).
func (p *partition) clear(now uint32) uint64 {
	var live, expired uint64
	for s := range p.slots {
		if p.slots[s].size == 0 {
			continue
		}
		if p.expired(int32(s), now) {
			expired++
		} else {
			live++
		}
	}
	p.uncharge()
	p.e.expired.Add(expired)
	p.reset()
	return live
}

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
// reserves what they will hold more with it (evicting as put does; force:
// regardless of the limit), which it returns for syncMeta. It fails with out
// of memory, changing nothing but evictions, if the limit or the OS refuses.
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

var errOutOfMemory = &ndbclient.Error{Code: ndbclient.CodeOutOfMemory, Message: "embedded engine memory limit reached"}

// reserve charges n more bytes to the engine. Over the limit, rows of
// eviction tables make room, least recently used first (never slot protect):
// an eviction table evicts from this partition, then from the table's other
// partitions, then from other eviction tables; a table without eviction evicts
// from the eviction tables. So cache rows never keep out a row that cannot be
// evicted, and one cache container does not starve another. Other partitions
// are only try-locked: reserve never waits for a lock while holding one, so
// eviction cannot deadlock.
func (p *partition) reserve(n int64, protect int32, now uint32) bool {
	e := p.e
	if e.tryReserve(n) {
		return true
	}
	if n > e.limit {
		return false // no eviction can help: keep the rows
	}
	if p.t.eviction {
		for {
			// Another eviction table's row older than this partition's
			// least recently used goes first; otherwise that one.
			if q := p.olderElsewhere(); q != nil && q.mu.TryLock() {
				q.evictOne(-1, now)
				q.settle()
				q.mu.Unlock()
			} else if !p.evictOne(protect, now) {
				break
			}
			if e.tryReserve(n) {
				return true
			}
		}
		if p.evictFrom(p.t.parts, p.num+1, n, now) {
			return true
		}
	}
	for _, t := range *e.tables.Load() {
		if t != p.t && t.eviction && p.evictFrom(t.parts, p.num, n, now) {
			return true
		}
	}
	return false
}

// olderElsewhere returns the partition of another eviction table whose least
// recently used row (as last published, see tailAge) is the oldest, if it is
// older than this partition's; nil if none is.
func (p *partition) olderElsewhere() *partition {
	own := uint32(math.MaxUint32)
	if p.lruTail >= 0 {
		own = p.slots[p.lruTail].used
	}
	var best *partition
	for _, t := range *p.e.tables.Load() {
		if t == p.t || !t.eviction {
			continue
		}
		for _, q := range t.parts {
			if age := q.tailAge.Load(); age < own {
				own, best = age, q
			}
		}
	}
	return best
}

// evictFrom evicts from parts (starting at start, skipping p and partitions
// it cannot lock at once) until n bytes fit.
func (p *partition) evictFrom(parts []*partition, start int, n int64, now uint32) bool {
	e := p.e
	for i := range parts {
		q := parts[(start+i)%len(parts)]
		if q == p || !q.mu.TryLock() {
			continue
		}
		ok := false
		for !ok && q.evictOne(-1, now) {
			ok = e.tryReserve(n)
		}
		q.settle()
		q.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// evictOne frees the least recently used row other than protect.
func (p *partition) evictOne(protect int32, now uint32) bool {
	defer p.publishTail()
	s := p.lruTail
	if s >= 0 && s == protect {
		s = p.slots[s].prev
	}
	if s < 0 {
		return false
	}
	if p.expired(s, now) {
		p.e.expired.Add(1)
	} else {
		p.e.evictions.Add(1)
	}
	p.del(s)
	return true
}

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
