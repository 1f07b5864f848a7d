package gateway_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
)

// A volatile backend counts cas values from 1, as memcached does; any other
// starts at the clock, so values differ across restarts.
func TestCasSequenceStart(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	assert.Equal(t, uint64(1), h.set(t, "k", "v").NewCas, "embedded engine")

	h = newHarness(t, drivers[1].wrap) // a wrapper that does not say it is volatile
	start := uint64(time.Unix(h.clock.Load(), 0).UnixMicro())
	r := h.set(t, "k", "v")
	require.Equal(t, gateway.OutcomeStored, r.Outcome)
	assert.Equal(t, start+1, r.NewCas, "persistent backend: the clock in microseconds")
}
