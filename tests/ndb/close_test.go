//go:build ndbapi

package ndb

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

// Close returns while each node's lane still has rounds queued: the
// completion of a lane's flight submits its next, which Close refuses
// (ErrUnavailable) rather than waits for. Before session 50 Close held the
// driver's lock while its executors finished, the next flight's Submit
// waited for that lock, and ndbgate's shutdown after a flood of pipelined
// gets never ended. Every batch still completes, answered or refused.
func TestCloseWithLanesQueued(t *testing.T) {
	for run := range 5 {
		d, err := ndbapi.Open(ndbapi.Config{Connectstring: connectstring(t), PoolSize: 2})
		require.NoError(t, err)
		tbl := suiteTable(t, d, "close", false)
		c := ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
		const batches = 64
		var completed, answered atomic.Int32
		for b := range batches {
			batch := &ndbclient.Batch{}
			for i := range 256 {
				batch.Ops = append(batch.Ops, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl,
					Key: []ndbclient.Value{ndbclient.String(fmt.Sprintf("close-%d-%d", b, i))}, Read: []int{drivertest.ColValue}})
			}
			c.Submit(batch, func(_ *ndbclient.Batch, err error) {
				if err == nil {
					answered.Add(1)
				}
				completed.Add(1)
			})
		}
		closed := make(chan error, 1)
		go func() { closed <- d.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: Close did not return with %d of %d batches completed", run, completed.Load(), batches)
		}
		require.Eventually(t, func() bool { return completed.Load() == batches }, 10*time.Second, 10*time.Millisecond,
			"run %d: every batch completes, answered or refused", run)
		t.Logf("run %d: %d of %d batches answered before Close", run, answered.Load(), batches)
	}
}
