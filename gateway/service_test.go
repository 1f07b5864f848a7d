package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
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

// With rows that outlive the process (a data dir), the counter starts above
// the clock and above every cas the rows hold: a counter that ran ahead of
// the clock before a restart must not hand out its values again.
func TestCasSequenceStartsAboveStoredCas(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	e, err := embedded.Open(embedded.Config{DataDir: t.TempDir(), Partitions: 4})
	require.NoError(t, err)
	defer e.Close()
	assert.False(t, e.Volatile(), "a data dir keeps the rows")
	tbl, err := e.CreateTable(gateway.DemoTable(1024))
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	ahead := uint64(now.UnixMicro()) + 5_000_000
	op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String("k")},
		Set: []ndbclient.ColumnValue{{Column: c.ValueColumns[0], Value: ndbclient.String("v")}, {Column: c.CasColumn, Value: ndbclient.Uint(ahead)}}}
	require.NoError(t, e.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
	require.NoError(t, op.Err)
	svc, err := gateway.New(gateway.Options{Backend: ndbclient.NewClient(e), Routes: []gateway.Route{{Prefix: "", Container: c}},
		ItemSizeMax: 1024, Now: func() time.Time { return now }})
	require.NoError(t, err)
	h := &harness{svc: svc, done: make(chan struct{}, 1)}
	h.req = svc.NewRequest()
	h.req.Done = func(*gateway.Request) { h.done <- struct{}{} }
	r := h.set(t, "other", "v")
	require.Equal(t, gateway.OutcomeStored, r.Outcome)
	assert.Greater(t, r.NewCas, ahead)
}
