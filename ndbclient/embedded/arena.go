package embedded

import (
	"encoding/binary"
	"math/bits"
)

// Row bytes live in arenas: large pointer-free pages carved into chunks of a
// few size classes, so a million rows cost a few hundred pages, not a million
// heap objects. Pages are mapped from the OS outside the Go heap where the
// platform allows (pagemem_unix.go), so releasing one gives its memory back at
// once and the garbage collector neither scans nor paces on them.
//
// A partition's pages are shared by all classes: chunks are bump-allocated
// from the current page whatever their class. A freed chunk goes on its
// class's free list and is reused by the next row of that class (memcached's
// slabs). Free chunks hold their own list links, so no byte is spent on them:
//
//	[2] 0 (a live row's first byte, its key length, is never 0)
//	[2] class
//	[6] next free chunk of the class, as a link (see link)
//	[6] previous one (only meaningful when the chunk is not the list's head)
//
// The lists are doubly linked so that a page can be emptied (pagemover.go,
// evacuate): its free chunks are unlinked, its rows moved to free chunks of
// their class on other pages or evicted, and the page is given back. That is
// how memory freed by one class reaches another (memcached's slab page
// mover), and what keeps the engine's pages within its bound (engine.go).

const (
	firstPage   = 64 << 10  // a partition's first page; pages double up to maxPage
	maxPage     = 1 << 20   // regular page size once a partition is busy
	maxChunk    = 128 << 10 // largest class; bigger rows get a page of their own
	bigAlign    = 4 << 10   // dedicated pages are rounded to this
	pageAlign   = 4 << 10   // so is every page (the OS's page)
	classBig    = 0xFF      // class of a row on a dedicated page
	minChunk    = 16        // room for a free chunk's header
	smallStep   = 8         // classes step by 8 bytes up to smallLimit...
	smallLimit  = 128       // ...then grow by ~1.25x
	classGrowth = 1.25
	offBits     = 20 // a link is (page+1)<<offBits | off: regular pages are at most 1<<offBits
	// maxPages bounds a partition's page numbers (slot.page is 16 bits):
	// 64 GiB of regular pages, or 65,536 rows over maxChunk. Past it a
	// write fails as out of memory.
	maxPages = 1 << 16
)

// classSizes lists the chunk size of each class, ascending.
var classSizes = makeClasses()

func makeClasses() []uint32 {
	var s []uint32
	for n := minChunk; n <= smallLimit; n += smallStep {
		s = append(s, uint32(n))
	}
	for {
		n := int(float64(s[len(s)-1])*classGrowth+15) &^ 15
		if n >= maxChunk {
			return append(s, maxChunk)
		}
		s = append(s, uint32(n))
	}
}

func init() {
	if len(classSizes) > 64 {
		panic("embedded: more size classes than arena.nonEmpty has bits")
	}
}

// classOf returns the class for a row of n bytes and the bytes it occupies.
func classOf(n int) (cls uint8, size int) {
	if n <= smallLimit {
		if n < minChunk {
			n = minChunk
		}
		c := (n+smallStep-1)/smallStep - minChunk/smallStep
		return uint8(c), int(classSizes[c])
	}
	if n > maxChunk {
		return classBig, (n + bigAlign - 1) &^ (bigAlign - 1)
	}
	c := firstClassAtLeast(n)
	return uint8(c), int(classSizes[c])
}

// firstClassAtLeast is a binary search over classSizes.
func firstClassAtLeast(n int) int {
	lo, hi := 0, len(classSizes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(classSizes[m]) < n {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// chunkSize is the size charged for a chunk of class cls holding n bytes.
func chunkSize(cls uint8, n uint32) int {
	if cls == classBig {
		return (int(n) + bigAlign - 1) &^ (bigAlign - 1)
	}
	return int(classSizes[cls])
}

// link names a chunk of a regular page in a free list; 0 is none.
func link(page, off uint32) uint64 { return uint64(page+1)<<offBits | uint64(off) }

func unlinkOf(l uint64) (page, off uint32) {
	return uint32(l>>offBits) - 1, uint32(l & (1<<offBits - 1))
}

func get48(b []byte) uint64 {
	_ = b[5]
	return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint16(b[4:]))<<32
}

func put48(b []byte, v uint64) {
	_ = b[5]
	binary.LittleEndian.PutUint32(b, uint32(v))
	binary.LittleEndian.PutUint16(b[4:], uint16(v>>32))
}

// Offsets in a free chunk's header.
const (
	fcClass = 2
	fcNext  = 4
	fcPrev  = 10
)

// isFree reports whether the chunk at b is free (a live row starts with its
// key length, which is at least 1).
func isFree(b []byte) bool { return b[0] == 0 }

// arena is one partition's row storage; the partition lock guards it. It
// tracks pages and chunks; the partition maps and unmaps pages (it does the
// engine's accounting) and decides what to move when a page is emptied.
type arena struct {
	pages     [][]byte
	live      []uint32 // per page: bytes of its live chunks (a dedicated page: all of it)
	cur       int      // page being bump-allocated, -1 for none
	used      int      // bump offset in pages[cur]
	nextSize  int      // size of the next regular page
	maxSize   int      // regular page size once the partition is busy: maxPage, or hugePage
	free      []uint64 // per class: link to the head of its free list, 0 = empty
	nonEmpty  uint64   // bit c: class c's free list is not empty
	spare     []uint32 // numbers of released pages, for reuse
	pageBytes int64    // bytes of all pages held
	m         *mappings
}

// mappings mirrors an arena's pages, and holds its partition's slot and
// index memory, for the cleanup that unmaps them once their partition is
// unreachable (see newPartition).
type mappings struct {
	pages        [][]byte
	slots, index region
}

func (m *mappings) unmapAll() {
	for i, pg := range m.pages {
		if pg != nil {
			unmapPage(pg)
			m.pages[i] = nil
		}
	}
	m.slots.free()
	m.index.free()
}

// init empties the arena; its regular pages double from first to maxSize.
func (a *arena) init(m *mappings, first, maxSize int) {
	*a = arena{cur: -1, nextSize: first, maxSize: maxSize, free: make([]uint64, len(classSizes)), m: m}
	m.pages = nil
}

// bytes returns the n bytes at a chunk.
func (a *arena) bytes(page, off uint32, n uint32) []byte {
	return a.pages[page][off : off+n : off+n]
}

// pop takes a chunk off class cls's free list.
func (a *arena) pop(cls uint8) (page, off uint32, ok bool) {
	head := a.free[cls]
	if head == 0 {
		return 0, 0, false
	}
	page, off = unlinkOf(head)
	next := get48(a.pages[page][off+fcNext:])
	a.free[cls] = next
	if next == 0 {
		a.nonEmpty &^= 1 << cls
	}
	a.live[page] += classSizes[cls]
	return page, off, true
}

// take finds a free chunk for class cls: one of the class, or else the
// smallest free chunk of a larger class, split (best fit): the row takes its
// start and the rest goes to the free lists as chunks of smaller classes.
// Rows are still charged their own class's size.
func (a *arena) take(cls uint8) (page, off uint32, ok bool) {
	if page, off, ok = a.pop(cls); ok {
		return page, off, true
	}
	size := classSizes[cls]
	for m := a.nonEmpty &^ (2<<cls - 1); m != 0; m &= m - 1 {
		c := uint8(bits.TrailingZeros64(m))
		rem := classSizes[c] - size
		if rem < minChunk {
			continue // 8 bytes over: no chunk to hold the rest
		}
		page, off, _ = a.pop(c)
		a.live[page] -= rem
		a.carve(page, off+size, rem)
		return page, off, true
	}
	return 0, 0, false
}

// carve lists n free bytes at page, off (n a multiple of 8, at least
// minChunk) as chunks of the largest classes that leave no gap.
func (a *arena) carve(page, off, n uint32) {
	for n > 0 {
		var c int
		if n <= smallLimit {
			c = int(n)/smallStep - minChunk/smallStep // every multiple of 8 here is a class
		} else {
			c = firstClassAtLeast(int(n)+1) - 1
			if r := n - classSizes[c]; r != 0 && r < minChunk {
				c = firstClassAtLeast(int(n-minChunk)+1) - 1
			}
		}
		a.pushFree(uint8(c), page, off)
		off += classSizes[c]
		n -= classSizes[c]
	}
}

// bump carves size bytes from the current page, if they fit.
func (a *arena) bump(size int) (page, off uint32, ok bool) {
	if a.cur < 0 || a.used+size > len(a.pages[a.cur]) {
		return 0, 0, false
	}
	page, off = uint32(a.cur), uint32(a.used)
	a.used += size
	a.live[page] += uint32(size)
	return page, off, true
}

// pushFree puts the chunk at page, off on class cls's free list.
func (a *arena) pushFree(cls uint8, page, off uint32) {
	c := a.pages[page][off:]
	c[0], c[1] = 0, 0
	binary.LittleEndian.PutUint16(c[fcClass:], uint16(cls))
	head := a.free[cls]
	put48(c[fcNext:], head)
	put48(c[fcPrev:], 0)
	l := link(page, off)
	if head != 0 {
		hp, ho := unlinkOf(head)
		put48(a.pages[hp][ho+fcPrev:], l)
	}
	a.free[cls] = l
	a.nonEmpty |= 1 << cls
}

// markFree writes a free chunk's header without listing it: evacuate lists
// such chunks again if it cannot empty their page.
func (a *arena) markFree(cls uint8, page, off uint32) {
	c := a.pages[page][off:]
	c[0], c[1] = 0, 0
	binary.LittleEndian.PutUint16(c[fcClass:], uint16(cls))
}

// unlink takes the free chunk at page, off (of class cls) off its list.
func (a *arena) unlink(cls uint8, page, off uint32) {
	c := a.pages[page][off:]
	next := get48(c[fcNext:])
	if l := link(page, off); a.free[cls] == l {
		a.free[cls] = next // the new head's prev link is left stale: heads never read it
		if next == 0 {
			a.nonEmpty &^= 1 << cls
		}
		return
	}
	prev := get48(c[fcPrev:])
	pp, po := unlinkOf(prev)
	put48(a.pages[pp][po+fcNext:], next)
	if next != 0 {
		np, no := unlinkOf(next)
		put48(a.pages[np][no+fcPrev:], prev)
	}
}

// release frees a chunk of a regular page.
func (a *arena) release(cls uint8, page, off uint32) {
	a.pushFree(cls, page, off)
	a.live[page] -= classSizes[cls]
}

// retire ends bump allocation from the current page, handing its unused tail
// to the free lists so that no byte is lost.
func (a *arena) retire() {
	if a.cur < 0 {
		return
	}
	for rem := len(a.pages[a.cur]) - a.used; rem >= minChunk; {
		c := firstClassAtLeast(rem+1) - 1 // largest class that fits
		a.pushFree(uint8(c), uint32(a.cur), uint32(a.used))
		a.used += int(classSizes[c])
		rem -= int(classSizes[c])
	}
	a.cur, a.used = -1, 0
}

// roomForPage reports whether a page number is free for addPage.
func (a *arena) roomForPage() bool { return len(a.spare) > 0 || len(a.pages) < maxPages }

// addPage records a new page; live is what is already allocated in it.
func (a *arena) addPage(mem []byte, live uint32) uint32 {
	a.pageBytes += int64(len(mem))
	if k := len(a.spare); k > 0 {
		i := a.spare[k-1]
		a.spare = a.spare[:k-1]
		a.pages[i], a.live[i] = mem, live
		return i
	}
	a.pages = append(a.pages, mem)
	a.live = append(a.live, live)
	a.m.pages = a.pages
	return uint32(len(a.pages) - 1)
}

// dropPage forgets page v (holding no live chunk and no listed free chunk)
// and returns its memory for the caller to unmap.
func (a *arena) dropPage(v uint32) []byte {
	mem := a.pages[v]
	if int(v) == a.cur {
		a.cur, a.used = -1, 0
	}
	a.pages[v], a.live[v] = nil, 0
	a.spare = append(a.spare, v)
	a.pageBytes -= int64(len(mem))
	return mem
}

// nextPage is the size of the regular page to map for a chunk of size bytes.
func (a *arena) nextPage(size int) int {
	return (max(a.nextSize, size) + pageAlign - 1) &^ (pageAlign - 1)
}

// startPage makes page v, just added, the one bump-allocated from.
func (a *arena) startPage(v uint32) {
	a.retire()
	a.cur, a.used = int(v), 0
	a.nextSize = min(a.nextSize*2, a.maxSize)
}
