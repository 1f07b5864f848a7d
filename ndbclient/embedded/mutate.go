// Put and delete: the only ways a partition's rows change.

package embedded

import (
	"context"
	"log/slog"
)

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
