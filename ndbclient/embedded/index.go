package embedded

// index is an open-addressing hash table with linear probing and backward-shift
// deletion (no tombstones), mapping a key hash to a slot. An entry is 8 bytes:
// tag, the low 32 bits of the key hash (a fingerprint: a lookup reads a row
// only when its tag matches, 1 in 2^32 for another key), and the slot number.
// The row's place is in the slot, not here, so a move touches no entry. An
// entry's home position is tag scaled to the table's size (Lemire's
// multiply-shift), so the size need not be a power of two: the table grows by
// a quarter at 4/5 load, so it runs between 16/25 and 4/5 full (a miss then
// probes about 7 entries on average, 13 at the fullest: one or two cache
// lines). It shrinks to half full when under a quarter full (partition.settle),
// so growing and shrinking cannot alternate. Its memory is a region
// (offheap.go).
type index struct {
	e    []ixEntry
	reg  *region    // in the partition's mappings, for its cleanup
	hint *indexHint // in the table, for prefetching (prefetch.go)
	n    int
}

// ixEntry is one entry; slot 0 marks an empty one.
type ixEntry struct {
	tag  uint32
	slot uint32 // slot number + 1
}

func (x ixEntry) empty() bool { return x.slot == 0 }

func (x ixEntry) is(tag uint32, s int32) bool { return x.tag == tag && x.slot == uint32(s)+1 }

const (
	indexMinSize = 16
	// Grow at 4/5 load: linear probing degrades quickly above that.
	indexLoadNum, indexLoadDen = 4, 5
)

func (ix *index) init() {
	ix.reg.free()
	r, _ := newRegion(indexMinSize * 8) // on the heap: never refused
	*ix.reg = r
	ix.e = arrayOf[ixEntry](r)[:indexMinSize]
	ix.n = 0
	ix.publish()
}

// full reports whether one more entry needs a bigger table.
func (ix *index) full() bool { return (ix.n+1)*indexLoadDen > len(ix.e)*indexLoadNum }

// grownSize is the size grow gives the table.
func (ix *index) grownSize() int { return len(ix.e) + len(ix.e)/4 }

// sparse reports whether the table is under a quarter full; shrunkSize is
// then its size at half full.
func (ix *index) sparse() bool    { return len(ix.e) > indexMinSize && ix.n*4 < len(ix.e) }
func (ix *index) shrunkSize() int { return max(2*ix.n, indexMinSize) }

// home is tag's first position.
func (ix *index) home(tag uint32) uint32 {
	return uint32(uint64(tag) * uint64(len(ix.e)) >> 32)
}

// next is the position after i, wrapping.
func (ix *index) next(i uint32) uint32 {
	if i++; int(i) == len(ix.e) {
		return 0
	}
	return i
}

// insert adds tag -> s. The caller has checked that the key is absent, and
// grown the table if it was full (partition.roomForRow).
func (ix *index) insert(tag uint32, s int32) {
	if ix.full() && !ix.resize(ix.grownSize()) {
		panic("embedded: index full") // roomForRow grows it first
	}
	i := ix.home(tag)
	for !ix.e[i].empty() {
		i = ix.next(i)
	}
	ix.e[i] = ixEntry{tag: tag, slot: uint32(s) + 1}
	ix.n++
}

// resize moves the entries to a table of n; false if the OS refuses it.
func (ix *index) resize(n int) bool {
	r, ok := newRegion(n * 8)
	if !ok {
		return false
	}
	old, oldReg := ix.e, *ix.reg
	*ix.reg = r
	ix.e = arrayOf[ixEntry](r)[:n]
	for _, e := range old {
		if e.empty() {
			continue
		}
		i := ix.home(e.tag)
		for !ix.e[i].empty() {
			i = ix.next(i)
		}
		ix.e[i] = e
	}
	ix.publish()
	oldReg.free()
	return true
}

// find returns the position of slot s's entry; s must be indexed under tag.
func (ix *index) find(tag uint32, s int32) uint32 {
	i := ix.home(tag)
	for !ix.e[i].is(tag, s) {
		i = ix.next(i)
	}
	return i
}

// remove deletes the entry for slot s, whose tag is tag.
func (ix *index) remove(tag uint32, s int32) {
	ix.removeAt(ix.find(tag, s))
	ix.n--
}

// removeAt empties position i and shifts later entries of the probe run back,
// so every entry stays reachable from its home position.
func (ix *index) removeAt(i uint32) {
	j := i
	for {
		j = ix.next(j)
		e := ix.e[j]
		if e.empty() {
			break
		}
		home := ix.home(e.tag)
		// An entry whose home lies cyclically in (i, j] must stay where it is.
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		ix.e[i] = e
		i = j
	}
	ix.e[i] = ixEntry{}
}
