package embedded

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
)

// TestDriverSuite runs the behaviour suite every driver must pass (the NDB API
// driver runs the same in tests/ndb).
func TestDriverSuite(t *testing.T) {
	drivertest.Run(t, "suite:", func(t *testing.T) (ndbclient.Driver, *ndbclient.Table) {
		e := newEngine(t, Config{Nodes: 2})
		tbl, err := e.CreateTable(drivertest.Table("test", "suite"))
		require.NoError(t, err)
		return e, tbl
	})
}

// TestItemStateSuite: the engine keeps item state itself, and answers as
// the NDB driver does from its state column (tests/ndb runs the same).
func TestItemStateSuite(t *testing.T) {
	drivertest.RunItemState(t, "state:", func(t *testing.T) (ndbclient.Driver, *ndbclient.Table) {
		e := newEngine(t, Config{Nodes: 2})
		tbl, err := e.CreateTable(drivertest.StateTable("test", "items"))
		require.NoError(t, err)
		return e, tbl
	})
}

// TestTimestampExpirySuite: a TIMESTAMP expire column, with and without a
// fraction (tests/ndb runs the same on NDB).
func TestTimestampExpirySuite(t *testing.T) {
	for _, fsp := range []int{0, 3} {
		t.Run(fmt.Sprintf("fsp %d", fsp), func(t *testing.T) {
			e := newEngine(t, Config{Nodes: 2})
			tbl, err := e.CreateTable(drivertest.TimestampTable("test", "tabs", fsp))
			require.NoError(t, err)
			drivertest.RunTimestampExpiry(t, e, tbl)
		})
	}
}
