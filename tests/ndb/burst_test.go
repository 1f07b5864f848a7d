//go:build ndbapi

package ndb

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

// A connection left idle for longer than the flight wait, then given a
// burst of writes, more transactions on a node than it has connection
// records pooled for it, sends every one: a node that owes the connection
// nothing has not stopped answering, however long ago it last answered
// (shim_execute.cpp, stalled). Before session 49 the writes past the pool
// were refused "not sent: the data node has stopped answering" (4012) on a
// healthy cluster, and memtier's preload at pipeline 16 hung on them.
func TestBurstAfterIdleIsSentWhole(t *testing.T) {
	d := openDriverWith(t, ndbapi.Config{Connectstring: connectstring(t), PoolSize: 1, FlightWait: 10 * time.Millisecond})
	tbl := suiteTable(t, d, "burst", true)
	c := ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	submit := func(ops []*ndbclient.Op) {
		t.Helper()
		done := make(chan error, 1)
		c.Submit(&ndbclient.Batch{Ops: ops}, func(_ *ndbclient.Batch, err error) { done <- err })
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a batch never completed")
		}
	}
	key := func(round, i int) []ndbclient.Value {
		return []ndbclient.Value{ndbclient.String(fmt.Sprintf("burst-%d-%d", round, i))}
	}
	const burst = 120
	for round := range 3 {
		time.Sleep(50 * time.Millisecond) // idle: five flight waits without an answer
		writes := make([]*ndbclient.Op, burst)
		for i := range writes {
			writes[i] = &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(round, i),
				Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String(fmt.Sprintf("v%d", i))}}}
		}
		submit(writes)
		for i, op := range writes {
			require.NoError(t, op.Err, "round %d: write %d of %d after an idle pause", round, i, burst)
		}
		reads := make([]*ndbclient.Op, burst)
		for i := range reads {
			reads[i] = &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(round, i), Read: []int{drivertest.ColValue}}
		}
		submit(reads)
		for i, op := range reads {
			require.NoError(t, op.Err, "round %d: read %d", round, i)
			require.Equal(t, fmt.Sprintf("v%d", i), string(op.Row[0].B), "round %d: read %d", round, i)
		}
	}
}
