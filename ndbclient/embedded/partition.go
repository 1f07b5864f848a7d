package embedded

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// slot describes one stored row. Slots live in one pointer-free array per
// partition, indexed by int32, so they cost the GC nothing.
type slot struct {
	tag    uint32 // low 32 bits of the key hash: the index entry's tag
	page   uint32 // arena chunk
	off    uint32
	size   uint32 // row bytes; 0 marks a free slot
	expire uint32 // cached expiry time, 0 = never
	used   uint32 // last LRU bump, unix seconds
	prev   int32  // LRU links (eviction tables); next also chains free slots
	next   int32
	class  uint16 // arena size class
	state  uint8  // stFetched | stStale | stToken
}

// Row state bits (memcached's ITEM_FETCHED, ITEM_STALE, ITEM_TOKEN_SENT).
const (
	stFetched uint8 = 1 << iota
	stStale
	stToken
)

// rowOverhead is what a row costs besides its arena chunk: its slot and about
// two index entries (the index runs between 3/8 and 3/4 full).
const rowOverhead = int64(unsafe.Sizeof(slot{})) + 2*int64(unsafe.Sizeof(ixEntry{}))

// partition is one slice of a table with its own lock. Everything below mu is
// guarded by it, except items, which Stats reads without the lock.
type partition struct {
	mu  sync.Mutex
	e   *Engine
	t   *table
	num int    // partition number within the table
	gid uint32 // engine-wide lock order: partitions are locked in ascending gid

	idx      index
	slots    []slot
	freeSlot int32 // head of the free-slot chain, -1 for none
	lruHead  int32 // most recently used; -1 when empty
	lruTail  int32
	arena    arena
	charged  int64  // bytes charged against the limit for rows here
	build    []byte // scratch: the row being written
	cat      []byte // scratch: append's concatenated value

	items atomic.Int64
	_     [64]byte // keep the next partition's mutex off this cache line
}

func newPartition(e *Engine, t *table, num int, gid uint32) *partition {
	p := &partition{e: e, t: t, num: num, gid: gid}
	p.reset()
	return p
}

// reset empties the partition, dropping all its memory.
func (p *partition) reset() {
	p.idx.init()
	p.slots = nil
	p.freeSlot, p.lruHead, p.lruTail = -1, -1, -1
	p.arena.init()
	p.charged = 0
	p.items.Store(0)
}

// row returns slot s's row bytes, which live in the arena.
func (p *partition) row(s int32) []byte {
	sl := &p.slots[s]
	return p.arena.bytes(sl.page, sl.off, sl.size)
}

// lookup returns the slot holding key, or -1. Expired rows are found too.
func (p *partition) lookup(tag uint32, key []byte) int32 {
	ix := &p.idx
	for i := tag & ix.mask; ; i = (i + 1) & ix.mask {
		e := &ix.e[i]
		if e.empty() {
			return -1
		}
		if e.tag == tag && bytes.Equal(rowKey(p.arena.pages[e.page][e.off:]), key) {
			return int32(e.slot - 1)
		}
	}
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

func (p *partition) expired(s int32, now uint32) bool {
	x := p.slots[s].expire
	return x != 0 && x <= now
}

// Mutations. put, del and reset are the only ways a partition's rows change;
// a redo log (durability, later) records at these three points.

// put stores row under slot s (s < 0: a new row with index tag tag) and returns
// the slot. It reserves memory first, evicting if the table allows, and
// changes nothing if that fails. force skips the limit (rollback restores rows
// that fitted before). row must not alias the arena.
func (p *partition) put(s int32, tag uint32, row []byte, now uint32, force bool) (int32, error) {
	if int64(len(row)) > p.t.largest.Load() {
		p.t.noteRow(len(row))
	}
	cls, size := classOf(len(row))
	delta := int64(size) + rowOverhead
	if s >= 0 {
		sl := &p.slots[s]
		delta -= int64(chunkSize(sl.class, sl.size)) + rowOverhead
	}
	switch {
	case delta <= 0 || force:
		p.e.used.Add(delta)
	case !p.reserve(delta, s, now):
		p.e.oom.Add(1)
		return s, errOutOfMemory
	}
	p.charged += delta
	if s < 0 {
		s = p.newSlot()
		sl := &p.slots[s]
		sl.tag, sl.class = tag, cls
		sl.page, sl.off = p.arena.alloc(cls, size)
		p.idx.insert(tag, s, sl.page, sl.off)
		p.items.Add(1)
	} else if sl := &p.slots[s]; sl.class != cls || chunkSize(sl.class, sl.size) != size {
		page, off := p.arena.alloc(cls, size)
		p.arena.release(sl.class, sl.page, sl.off)
		sl.page, sl.off, sl.class = page, off, cls
		p.idx.move(sl.tag, s, page, off)
	}
	sl := &p.slots[s]
	sl.size = uint32(len(row))
	copy(p.arena.bytes(sl.page, sl.off, sl.size), row)
	sl.expire = p.t.expireOf(row)
	sl.used = now
	if p.t.eviction {
		p.lruFront(s, now)
	}
	return s, nil
}

// del frees slot s's row.
func (p *partition) del(s int32) {
	sl := &p.slots[s]
	p.idx.remove(sl.tag, s)
	if p.t.eviction {
		p.lruUnlink(s)
	}
	charge := int64(chunkSize(sl.class, sl.size)) + rowOverhead
	p.arena.release(sl.class, sl.page, sl.off)
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
	p.e.used.Add(-p.charged)
	p.e.expired.Add(expired)
	p.reset()
	return live
}

func (p *partition) newSlot() int32 {
	if s := p.freeSlot; s >= 0 {
		p.freeSlot = p.slots[s].next
		p.slots[s] = slot{prev: -1, next: -1}
		return s
	}
	p.slots = append(p.slots, slot{prev: -1, next: -1})
	return int32(len(p.slots) - 1)
}

var errOutOfMemory = &ndbclient.Error{Code: ndbclient.CodeOutOfMemory, Message: "embedded engine memory limit reached"}

// reserve charges n more bytes to the engine. Over the limit, an eviction table
// evicts least recently used rows (never slot protect) from this partition,
// then from the table's other partitions, which it only try-locks: it never
// waits for a lock while holding one, so eviction cannot deadlock.
func (p *partition) reserve(n int64, protect int32, now uint32) bool {
	e := p.e
	if e.tryReserve(n) {
		return true
	}
	if !p.t.eviction || n > e.limit {
		return false // no eviction can help: keep the rows
	}
	for p.evictOne(protect, now) {
		if e.tryReserve(n) {
			return true
		}
	}
	parts := p.t.parts
	for i := 1; i < len(parts); i++ {
		q := parts[(p.num+i)%len(parts)]
		if !q.mu.TryLock() {
			continue
		}
		ok := false
		for !ok && q.evictOne(-1, now) {
			ok = e.tryReserve(n)
		}
		q.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// evictOne frees the least recently used row other than protect.
func (p *partition) evictOne(protect int32, now uint32) bool {
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
