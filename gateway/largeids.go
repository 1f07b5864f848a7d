package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Ids of a parts table's sequence drawn ahead.
//
// A value in parts takes a new id from the parts table's sequence
// (ndbclient.Sequencer), a call that may wait for the cluster, so it runs
// off the event loop: a goroutine, and then a write that leaves its loop's
// turn for the lanes, thread hand-offs that on a VM cost about as much as a
// round trip. So a container keeps a few ids drawn ahead: a set takes one
// on its loop and goes on at once, and the stock is drawn again, off the
// loop, as it runs low. Ids are unique whoever draws them (the sequence
// hands each Ndb object ranges of its own), and one never used is a gap,
// as in any AUTO_INCREMENT. Ids older than idStockFresh are dropped: the
// table may since have been dropped and made again, with a sequence that
// starts afresh.

// idStockSize is how many ids a draw takes.
const idStockSize = 8

// idStockFresh is how long drawn ids may be used.
const idStockFresh = time.Second

// idStock is a container's ids drawn ahead. mu guards every field.
type idStock struct {
	mu      sync.Mutex
	ids     []uint64
	drawn   int64 // Unix nanoseconds of the draw that gave ids
	drawing bool
}

// take returns an id drawn less than idStockFresh before now, if any.
func (s *idStock) take(now int64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.drawn >= int64(idStockFresh) {
		s.ids = s.ids[:0]
	}
	if len(s.ids) == 0 {
		return 0, false
	}
	id := s.ids[len(s.ids)-1]
	s.ids = s.ids[:len(s.ids)-1]
	return id, true
}

// refill draws idStockSize ids of t's sequence off the loop, unless a draw
// is under way or half the stock is left. A draw that fails keeps what it
// drew; the next write draws again.
func (s *idStock) refill(seq ndbclient.Sequencer, t *ndbclient.Table, now func() time.Time) {
	s.mu.Lock()
	if s.drawing || len(s.ids) > idStockSize/2 {
		s.mu.Unlock()
		return
	}
	s.drawing = true
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), largeSequenceWait)
		defer cancel()
		ids := make([]uint64, 0, idStockSize)
		for len(ids) < idStockSize {
			id, err := seq.NextAutoIncrement(ctx, t)
			if err != nil {
				break
			}
			ids = append(ids, id)
		}
		s.mu.Lock()
		s.ids, s.drawn, s.drawing = ids, now().UnixNano(), false
		s.mu.Unlock()
	}()
}
