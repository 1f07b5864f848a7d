//go:build ndbapi

// Package ndb runs the driver behaviour suite against a live NDB cluster:
//
//	NDBGATE_TEST_CONNECTSTRING=mgmd:1186 go test -tags ndbapi ./tests/ndb/
//
// It creates the tables it needs through NdbDictionary when they are missing
// (a cluster with a mysqld can have them from deploy/sql/ndbgate.sql).
// Without NDBGATE_TEST_CONNECTSTRING it skips. Not run by `make test` (CI has
// no cluster).
package ndb

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

func TestDriverSuiteOnNDB(t *testing.T) {
	cs := os.Getenv("NDBGATE_TEST_CONNECTSTRING")
	if cs == "" {
		t.Skip("NDBGATE_TEST_CONNECTSTRING not set: no cluster to test against")
	}
	drivertest.Run(t, "suite:", func(t *testing.T) (ndbclient.Driver, *ndbclient.Table) {
		d, err := ndbapi.Open(ndbapi.Config{Connectstring: cs, PoolSize: 2})
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		want := drivertest.Table("ndbgate_test", "suite")
		_, err = d.CreateNDBTable(want)
		require.NoError(t, err)
		tbl, err := d.CreateTable(want)
		require.NoError(t, err, "the table ndbgate_test.suite has another shape: drop it, or create it with deploy/sql/ndbgate.sql")
		return d, tbl
	})
}
