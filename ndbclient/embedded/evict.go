// Eviction: reserving memory under the limit, evicting least recently used
// rows of eviction tables to make room.

package embedded

import (
	"math"

	"github.com/ndbgate/ndbgate/ndbclient"
)

var errOutOfMemory = &ndbclient.Error{Code: ndbclient.CodeOutOfMemory, Message: "embedded engine memory limit reached"}

// reserve charges n more bytes to the engine. Over the limit, rows of
// eviction tables make room, least recently used first (never slot protect):
// an eviction table evicts from this partition, then from the table's other
// partitions, then from other eviction tables; a table without eviction evicts
// from the eviction tables. So cache rows never keep out a row that cannot be
// evicted, and one cache container does not starve another. Other partitions
// are only try-locked: reserve never waits for a lock while holding one, so
// eviction cannot deadlock.
func (p *partition) reserve(n int64, protect int32, now uint32) bool {
	e := p.e
	if e.tryReserve(n) {
		return true
	}
	if n > e.limit {
		return false // no eviction can help: keep the rows
	}
	if p.t.eviction {
		for {
			// Another eviction table's row older than this partition's
			// least recently used goes first; otherwise that one.
			if q := p.olderElsewhere(); q != nil && q.mu.TryLock() {
				q.evictOne(-1, now)
				q.settle()
				q.mu.Unlock()
			} else if !p.evictOne(protect, now) {
				break
			}
			if e.tryReserve(n) {
				return true
			}
		}
		if p.evictFrom(p.t.parts, p.num+1, n, now) {
			return true
		}
	}
	for _, t := range *e.tables.Load() {
		if t != p.t && t.eviction && p.evictFrom(t.parts, p.num, n, now) {
			return true
		}
	}
	return false
}

// olderElsewhere returns the partition of another eviction table whose least
// recently used row (as last published, see tailAge) is the oldest, if it is
// older than this partition's; nil if none is.
func (p *partition) olderElsewhere() *partition {
	own := uint32(math.MaxUint32)
	if p.lruTail >= 0 {
		own = p.slots[p.lruTail].used
	}
	var best *partition
	for _, t := range *p.e.tables.Load() {
		if t == p.t || !t.eviction {
			continue
		}
		for _, q := range t.parts {
			if age := q.tailAge.Load(); age < own {
				own, best = age, q
			}
		}
	}
	return best
}

// evictFrom evicts from parts (starting at start, skipping p and partitions
// it cannot lock at once) until n bytes fit.
func (p *partition) evictFrom(parts []*partition, start int, n int64, now uint32) bool {
	e := p.e
	for i := range parts {
		q := parts[(start+i)%len(parts)]
		if q == p || !q.mu.TryLock() {
			continue
		}
		ok := false
		for !ok && q.evictOne(-1, now) {
			ok = e.tryReserve(n)
		}
		q.settle()
		q.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// evictOne frees the least recently used row other than protect.
func (p *partition) evictOne(protect int32, now uint32) bool {
	defer p.publishTail()
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
