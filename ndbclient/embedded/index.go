package embedded

// index is an open-addressing hash table with linear probing and backward-shift
// deletion (no tombstones), mapping a key hash to a slot and to the row's place
// in the arena. tag is the low 32 bits of the key hash, so an entry's home
// position (tag & mask) is known without touching the slot array. The row's
// place lets a lookup compare the key without reading the slot first: the slot
// and the row are then two independent cache misses rather than a chain of
// three. The whole table is one pointer-free allocation.
type index struct {
	e    []ixEntry
	mask uint32
	n    int
}

// ixEntry is one 16-byte entry; slot 0 marks an empty entry.
type ixEntry struct {
	tag  uint32
	slot uint32 // slot number + 1
	page uint32 // the row's arena page and offset
	off  uint32
}

func (x ixEntry) empty() bool { return x.slot == 0 }

func (x ixEntry) is(tag uint32, s int32) bool { return x.tag == tag && x.slot == uint32(s)+1 }

const (
	indexMinSize = 16
	// Grow at 3/4 load: linear probing degrades quickly above that.
	indexLoadNum, indexLoadDen = 3, 4
)

func (ix *index) init() {
	ix.e = make([]ixEntry, indexMinSize)
	ix.mask = indexMinSize - 1
	ix.n = 0
}

// insert adds tag -> s, whose row is at page, off. The caller has checked that
// the key is absent.
func (ix *index) insert(tag uint32, s int32, page, off uint32) {
	if (ix.n+1)*indexLoadDen > len(ix.e)*indexLoadNum {
		ix.grow()
	}
	i := tag & ix.mask
	for !ix.e[i].empty() {
		i = (i + 1) & ix.mask
	}
	ix.e[i] = ixEntry{tag: tag, slot: uint32(s) + 1, page: page, off: off}
	ix.n++
}

func (ix *index) grow() {
	old := ix.e
	ix.e = make([]ixEntry, 2*len(old))
	ix.mask = uint32(len(ix.e) - 1)
	for _, e := range old {
		if e.empty() {
			continue
		}
		i := e.tag & ix.mask
		for !ix.e[i].empty() {
			i = (i + 1) & ix.mask
		}
		ix.e[i] = e
	}
}

// find returns the position of slot s's entry; s must be indexed under tag.
func (ix *index) find(tag uint32, s int32) uint32 {
	i := tag & ix.mask
	for !ix.e[i].is(tag, s) {
		i = (i + 1) & ix.mask
	}
	return i
}

// slotAt returns the slot whose row is at page, off (its index tag is tag),
// or -1.
func (ix *index) slotAt(tag, page, off uint32) int32 {
	for i := tag & ix.mask; ; i = (i + 1) & ix.mask {
		e := &ix.e[i]
		if e.empty() {
			return -1
		}
		if e.tag == tag && e.page == page && e.off == off {
			return int32(e.slot - 1)
		}
	}
}

// move records that slot s's row is now at page, off.
func (ix *index) move(tag uint32, s int32, page, off uint32) {
	e := &ix.e[ix.find(tag, s)]
	e.page, e.off = page, off
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
		j = (j + 1) & ix.mask
		e := ix.e[j]
		if e.empty() {
			break
		}
		home := e.tag & ix.mask
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
