package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

type countingSequence struct{ next atomic.Uint64 }

func (s *countingSequence) NextAutoIncrement(context.Context, *ndbclient.Table) (uint64, error) {
	return s.next.Add(1), nil
}

// The stock hands out the ids a draw took, each once, and none drawn
// idStockFresh ago or more.
func TestIDStock(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Unix(1_700_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	seq := &countingSequence{}
	var s idStock
	_, ok := s.take(clock.Load())
	require.False(t, ok, "nothing drawn yet")
	s.refill(seq, nil, now)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.drawing
	}, 5*time.Second, time.Millisecond)
	seen := map[uint64]bool{}
	for range idStockSize {
		id, ok := s.take(clock.Load())
		require.True(t, ok)
		assert.False(t, seen[id], "id %d twice", id)
		seen[id] = true
	}
	_, ok = s.take(clock.Load())
	assert.False(t, ok, "the stock is used up")

	s.refill(seq, nil, now)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.drawing && len(s.ids) == idStockSize
	}, 5*time.Second, time.Millisecond)
	clock.Add(int64(idStockFresh))
	_, ok = s.take(clock.Load())
	assert.False(t, ok, "ids drawn a second ago are dropped")
}
