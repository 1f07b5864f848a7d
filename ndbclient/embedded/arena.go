package embedded

import "encoding/binary"

// Row bytes live in arenas: large pointer-free []byte pages carved into chunks of
// a few size classes, so a million rows cost a few hundred heap objects, not a
// million. Freed chunks go on a per-class free list kept inside the chunks
// themselves and are reused by the next row of that class (memcached's slabs).

const (
	firstPage   = 64 << 10  // a partition's first page; pages double up to maxPage
	maxPage     = 1 << 20   // regular page size once a partition is busy
	maxChunk    = 128 << 10 // largest class; bigger rows get a page of their own
	bigAlign    = 4 << 10   // dedicated pages are rounded to this
	classBig    = 0xFFFF    // class of a row on a dedicated page
	minChunk    = 16        // room for the free-list link
	smallStep   = 8         // classes step by 8 bytes up to smallLimit...
	smallLimit  = 128       // ...then grow by ~1.25x
	classGrowth = 1.25
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

// classOf returns the class for a row of n bytes and the bytes it occupies.
func classOf(n int) (cls uint16, size int) {
	if n <= smallLimit {
		if n < minChunk {
			n = minChunk
		}
		c := (n+smallStep-1)/smallStep - minChunk/smallStep
		return uint16(c), int(classSizes[c])
	}
	if n > maxChunk {
		return classBig, (n + bigAlign - 1) &^ (bigAlign - 1)
	}
	c := firstClassAtLeast(n)
	return uint16(c), int(classSizes[c])
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

// arena is one partition's row storage; the partition lock guards it.
type arena struct {
	pages     [][]byte
	cur       int      // page being bump-allocated, -1 for none
	used      int      // bump offset in pages[cur]
	nextSize  int      // size of the next regular page
	free      []uint64 // per class: head of the free list, (page+1)<<32|off, 0 = empty
	spare     []uint32 // indexes of released dedicated pages, for reuse
	pageBytes int64    // bytes of all pages held (for tests and diagnostics)
}

func (a *arena) init() {
	*a = arena{cur: -1, nextSize: firstPage, free: make([]uint64, len(classSizes))}
}

// alloc returns the location of a chunk for a row of n bytes in class cls.
func (a *arena) alloc(cls uint16, n int) (page, off uint32) {
	if cls == classBig {
		return a.allocBig(n), 0
	}
	if head := a.free[cls]; head != 0 {
		page, off = uint32(head>>32)-1, uint32(head)
		a.free[cls] = binary.LittleEndian.Uint64(a.pages[page][off:])
		return page, off
	}
	size := int(classSizes[cls])
	if a.cur < 0 || a.used+size > len(a.pages[a.cur]) {
		a.newPage(size)
	}
	page, off = uint32(a.cur), uint32(a.used)
	a.used += size
	return page, off
}

// newPage retires the current page, handing its unused tail to the free lists
// so no byte is lost, and starts a fresh one big enough for size.
func (a *arena) newPage(size int) {
	if a.cur >= 0 {
		for rem := len(a.pages[a.cur]) - a.used; rem >= minChunk; {
			c := firstClassAtLeast(rem+1) - 1 // largest class that fits
			a.release(uint16(c), uint32(a.cur), uint32(a.used))
			a.used += int(classSizes[c])
			rem -= int(classSizes[c])
		}
	}
	n := max(a.nextSize, size)
	a.nextSize = min(a.nextSize*2, maxPage)
	a.cur, a.used = len(a.pages), 0
	a.pages = append(a.pages, make([]byte, n))
	a.pageBytes += int64(n)
}

func (a *arena) allocBig(n int) uint32 {
	p := make([]byte, n)
	a.pageBytes += int64(n)
	if k := len(a.spare); k > 0 {
		i := a.spare[k-1]
		a.spare = a.spare[:k-1]
		a.pages[i] = p
		return i
	}
	a.pages = append(a.pages, p)
	return uint32(len(a.pages) - 1)
}

// release puts a chunk on its class's free list.
func (a *arena) release(cls uint16, page, off uint32) {
	if cls == classBig {
		a.pageBytes -= int64(len(a.pages[page]))
		a.pages[page] = nil
		a.spare = append(a.spare, page)
		return
	}
	binary.LittleEndian.PutUint64(a.pages[page][off:], a.free[cls])
	a.free[cls] = uint64(page+1)<<32 | uint64(off)
}

// bytes returns the n bytes at a chunk.
func (a *arena) bytes(page, off uint32, n uint32) []byte {
	return a.pages[page][off : off+n : off+n]
}

// chunkSize is the size charged for a chunk of class cls holding n bytes.
func chunkSize(cls uint16, n uint32) int {
	if cls == classBig {
		return (int(n) + bigAlign - 1) &^ (bigAlign - 1)
	}
	return int(classSizes[cls])
}
