// A partition: one locked slice of a table, what it is charged for its slot
// array and index, and finding a row by key (lookup, find).

package embedded

import (
	"bytes"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

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
	// logged is the lsn of the last log frame that changed this partition
	// (data dir). With fsync always an op that only saw the partition
	// completes once that frame is durable: a read must not return a change
	// that a crash could still take back.
	logged uint64

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
	p.arena.init(p.arena.m, p.e.firstPageSize(), p.e.regularPageMax())
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
// having been reserved already (roomForRow: in both used and metaBytes).
func (p *partition) syncMeta(reserved int64) {
	d := p.metaSize() - p.metaCharged
	p.metaCharged += d
	p.charged += d
	p.e.metaBytes.Add(d - reserved)
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
		p.e.expiredOnAccess.Add(1)
		return -1
	}
	return s
}

// expiry is slot s's expiry time (expireOf), 0 for never.
func (p *partition) expiry(s int32) uint32 {
	if p.t.expireColumn() < 0 {
		return 0
	}
	return p.t.expireOf(p.row(s))
}

func (p *partition) expired(s int32, now uint32) bool {
	x := p.expiry(s)
	return x != 0 && x <= now && !p.t.byCaller.Load()
}

// seen notes a lock hold's frame (lsn, 0 for none) as the partition's last
// change, and returns the lsn the hold's ops must wait for: theirs, or the
// last change they saw. The caller holds mu.
func (p *partition) seen(lsn uint64) uint64 {
	if lsn != 0 {
		p.logged = lsn
	}
	return p.logged
}
