package embedded

import "sync"

// A logged delete_all (data dir) must hold every partition of its table while
// its one clear entry goes into the log, so that the entry sits at the same
// place for every key. It does not keep them while the log writes or fsyncs:
// under the locks it swaps each partition's rows out whole (O(1): the slot
// array, index and arena change hands, nothing is copied), appends the entry,
// and lets go. The rows it took are freed once the entry is done (written,
// or with fsync always, fsynced), and put back if it never will be: with
// fsync always that is an undo record, rolled back newest first with the
// writes that followed it.

// partRows is one partition's rows as a clear took them.
type partRows struct {
	p        *partition
	idx      index // its reg is nil: mem.index holds its memory
	slots    []slot
	freeSlot int32
	lruHead  int32
	lruTail  int32
	arena    arena    // its m is nil: the partition's cleanup no longer sees these pages
	mem      mappings // the pages, slot array and index taken, freed with them
	charged  int64    // still in e.used (and the pages in e.pageBytes) until freed
	meta     int64    // of charged, the slot array's and index's (in e.metaBytes until freed)
	items    int64
}

// clearedRows is what one delete_all took out of its table.
type clearedRows struct {
	// mu is held by the clearing goroutine from before its entry is appended
	// until it has counted the rows; the log's writer takes it (holding the
	// partition locks and wal.mu, in a rollback) before it frees or puts back
	// the rows. The writer only reaches them after the append, so the two
	// orders cannot deadlock.
	mu      sync.Mutex
	parts   []partRows
	expired uint64 // expired rows among them, for Stats once they are freed
}

// detach takes p's rows out, leaving it empty. p.mu is held. Every field
// reset() empties moves here (TestDetachMovesEveryRowField keeps the two in
// step).
func (p *partition) detach() partRows {
	m := p.arena.m
	r := partRows{p: p, idx: p.idx, slots: p.slots, freeSlot: p.freeSlot, lruHead: p.lruHead, lruTail: p.lruTail,
		arena: p.arena, mem: *m, charged: p.charged, meta: p.metaCharged, items: p.items.Load()}
	r.arena.m, r.idx.reg, r.idx.hint = nil, nil, nil
	// reset must neither unmap nor uncount the pages, slots and index, which
	// are r's now.
	*m = mappings{}
	p.arena.pageBytes = 0
	p.reset()
	return r
}

// putBack restores rows a clear took, its entry refused by the log. p.mu is
// held. Every change logged after the clear has been rolled back, so p holds
// no row; if it does, those rows stay and r's rows join them, each one whose
// key p does not hold.
func (p *partition) putBack(r *partRows, now uint32) {
	if p.items.Load() == 0 {
		p.uncharge()
		p.reset()
		p.uncharge() // the empty index reset made
		m := p.arena.m
		m.unmapAll()
		reg := p.idx.reg
		p.idx, p.slots, p.freeSlot, p.lruHead, p.lruTail = r.idx, r.slots, r.freeSlot, r.lruHead, r.lruTail
		p.idx.reg, p.idx.hint = reg, &p.t.hints[p.num]
		p.idx.publish()
		p.arena, p.arena.m, *m = r.arena, m, r.mem
		p.charged, p.metaCharged = r.charged, r.meta
		p.items.Store(r.items)
		p.publishTail()
		*r = partRows{}
		return
	}
	for s := range r.slots {
		sl := &r.slots[s]
		if sl.size == 0 {
			continue
		}
		row := r.arena.bytes(uint32(sl.page), sl.off, sl.size)
		key := rowKey(row)
		tag := uint32(p.e.hash(key))
		if p.lookup(tag, key) >= 0 {
			continue
		}
		p.restore(tag, row, sl.state, sl.used, now)
	}
	r.free(p.e)
}

// free gives r's memory back.
func (r *partRows) free(e *Engine) {
	r.mem.unmapAll()
	e.pageBytes.Add(-r.arena.pageBytes)
	e.used.Add(-r.charged)
	e.metaBytes.Add(-r.meta)
	*r = partRows{}
}

// count counts the live and expired rows c took.
func (c *clearedRows) count(now uint32) (live, expired uint64) {
	for i := range c.parts {
		r := &c.parts[i]
		if r.p == nil {
			continue
		}
		t := r.p.t
		for _, sl := range r.slots {
			if sl.size == 0 {
				continue
			}
			if t.expireColumn() >= 0 && !t.byCaller.Load() {
				if x := t.expireOf(r.arena.bytes(uint32(sl.page), sl.off, sl.size)); x != 0 && x <= now {
					expired++
					continue
				}
			}
			live++
		}
	}
	return live, expired
}

// free gives back the rows of a clear the log has taken for good.
func (c *clearedRows) free(e *Engine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.parts {
		c.parts[i].free(e)
	}
	e.expired.Add(c.expired)
	c.expired = 0
}

// putBack restores the rows of a clear the log refused. The table's
// partition locks are held.
func (c *clearedRows) putBack(now uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.parts {
		if r := &c.parts[i]; r.p != nil {
			r.p.putBack(r, now)
		}
	}
	c.expired = 0
}
