package embedded

import (
	"sync"
	"sync/atomic"
)

// pagePool keeps a few regular pages that partitions gave up, still mapped,
// for the next partition that needs one: a page moved from one size class or
// partition to another is then not unmapped and faulted in afresh. Pooled
// pages count in Engine.pageBytes, so they are within the cap; a partition
// short of room under the cap empties the pool first (drain).
type pagePool struct {
	mu    sync.Mutex
	pages [][]byte
	bytes atomic.Int64 // changed under mu
}

// poolMax bounds the bytes pagePool keeps.
const poolMax = 4 * maxPage

// get returns a pooled page of at least need bytes, the largest up to want
// if there are several, or nil.
func (pp *pagePool) get(need, want int) []byte {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	best := -1
	for i, pg := range pp.pages {
		n := len(pg)
		if n < need {
			continue
		}
		if best < 0 || n <= want && (len(pp.pages[best]) > want || n > len(pp.pages[best])) || n > want && len(pp.pages[best]) > want && n < len(pp.pages[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	pg := pp.pages[best]
	last := len(pp.pages) - 1
	pp.pages[best], pp.pages[last] = pp.pages[last], nil
	pp.pages = pp.pages[:last]
	pp.bytes.Add(-int64(len(pg)))
	return pg
}

// put keeps pg if there is room, and reports whether it did.
func (pp *pagePool) put(pg []byte, limit int64) bool {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.bytes.Load()+int64(len(pg)) > limit {
		return false
	}
	pp.pages = append(pp.pages, pg)
	pp.bytes.Add(int64(len(pg)))
	return true
}

// drain unmaps every pooled page and returns the bytes freed.
func (pp *pagePool) drain() int64 {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := pp.bytes.Load()
	for i, pg := range pp.pages {
		unmapPage(pg)
		pp.pages[i] = nil
	}
	pp.pages = pp.pages[:0]
	pp.bytes.Store(0)
	return n
}

// poolLimit is what the pool may keep: poolMax, or an eighth of the page cap
// if that is less.
func (e *Engine) poolLimit() int64 {
	if c := e.pageCap(); c > 0 {
		return min(poolMax, c/8)
	}
	return poolMax
}

// newRegularPage maps a regular page for a chunk of need bytes, want bytes
// if it can: a pooled page, or a fresh one under the cap (force: regardless).
// It returns nil if the cap leaves no room (or the OS none).
func (e *Engine) newRegularPage(need, want int, force bool) []byte {
	if pg := e.pool.get(need, want); pg != nil {
		return pg // counted already
	}
	n := e.takePagesUpTo(int64(want), int64(need), force)
	if n == 0 && e.pool.bytes.Load() > 0 {
		e.pageBytes.Add(-e.pool.drain())
		n = e.takePagesUpTo(int64(want), int64(need), force)
	}
	if n == 0 {
		return nil
	}
	mem := e.mapRegular(int(n))
	if mem == nil {
		e.pageBytes.Add(-n)
	}
	return mem
}
