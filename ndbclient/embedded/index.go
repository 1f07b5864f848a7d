package embedded

// index is an open-addressing hash table with linear probing and backward-shift
// deletion (no tombstones), mapping a key hash to a slot. Each entry is one
// uint64, tag<<32 | slot+1, with 0 meaning empty; tag is the low 32 bits of the
// key hash, so an entry's home position (tag & mask) is known without touching
// the slot array. The whole table is one pointer-free allocation.
type index struct {
	e    []uint64
	mask uint32
	n    int
}

const (
	indexMinSize = 16
	// Grow at 3/4 load: linear probing degrades quickly above that.
	indexLoadNum, indexLoadDen = 3, 4
)

func (ix *index) init() {
	ix.e = make([]uint64, indexMinSize)
	ix.mask = indexMinSize - 1
	ix.n = 0
}

func entry(tag uint32, s int32) uint64 { return uint64(tag)<<32 | uint64(uint32(s)+1) }

func entrySlot(e uint64) int32 { return int32(uint32(e)) - 1 }

// insert adds tag -> s. The caller has checked that the key is absent.
func (ix *index) insert(tag uint32, s int32) {
	if (ix.n+1)*indexLoadDen > len(ix.e)*indexLoadNum {
		ix.grow()
	}
	i := tag & ix.mask
	for ix.e[i] != 0 {
		i = (i + 1) & ix.mask
	}
	ix.e[i] = entry(tag, s)
	ix.n++
}

func (ix *index) grow() {
	old := ix.e
	ix.e = make([]uint64, 2*len(old))
	ix.mask = uint32(len(ix.e) - 1)
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := uint32(e>>32) & ix.mask
		for ix.e[i] != 0 {
			i = (i + 1) & ix.mask
		}
		ix.e[i] = e
	}
}

// remove deletes the entry for slot s, whose tag is tag.
func (ix *index) remove(tag uint32, s int32) {
	want := entry(tag, s)
	i := tag & ix.mask
	for ix.e[i] != want {
		i = (i + 1) & ix.mask
	}
	ix.removeAt(i)
	ix.n--
}

// removeAt empties position i and shifts later entries of the probe run back,
// so every entry stays reachable from its home position.
func (ix *index) removeAt(i uint32) {
	j := i
	for {
		j = (j + 1) & ix.mask
		e := ix.e[j]
		if e == 0 {
			break
		}
		home := uint32(e>>32) & ix.mask
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
	ix.e[i] = 0
}
