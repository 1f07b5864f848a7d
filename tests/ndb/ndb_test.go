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
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

func TestDriverSuiteOnNDB(t *testing.T) {
	cs := connectstring(t)
	drivertest.Run(t, "suite:", func(t *testing.T) (ndbclient.Driver, *ndbclient.Table) {
		d := openDriver(t, cs, 2)
		return d, suiteTable(t, d, "suite", false)
	})
}

// TestItemStateOnNDB: the meta protocol's item state, kept in the table's
// state column, answers as the embedded engine does (its CI test runs the
// same suite).
func TestItemStateOnNDB(t *testing.T) {
	cs := connectstring(t)
	drivertest.RunItemState(t, "state:", func(t *testing.T) (ndbclient.Driver, *ndbclient.Table) {
		d := openDriver(t, cs, 8) // one connection per racing reader
		want := drivertest.StateTable("ndbgate_test", "items")
		_, err := d.CreateNDBTable(want)
		require.NoError(t, err)
		tbl, err := d.CreateTable(want)
		require.NoError(t, err, "ndbgate_test.items has another shape: drop it")
		tbl.ExpireColumn, tbl.StateColumn = want.ExpireColumn, want.StateColumn
		return d, tbl
	})
}

// connectstring is the cluster's, or skips the test.
func connectstring(t *testing.T) string {
	cs := os.Getenv("NDBGATE_TEST_CONNECTSTRING")
	if cs == "" {
		t.Skip("NDBGATE_TEST_CONNECTSTRING not set: no cluster to test against")
	}
	return cs
}

// openDriver opens the NDB driver with pool connections, closed when the
// test ends.
func openDriver(t *testing.T, cs string, pool int) *ndbapi.Driver {
	d, err := ndbapi.Open(ndbapi.Config{Connectstring: cs, PoolSize: pool})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// suiteTable makes sure ndbgate_test.<name> exists with the driver suite's
// columns (created through NdbDictionary when missing; dropped first when
// empty is set) and returns the driver's schema of it.
func suiteTable(t *testing.T, d *ndbapi.Driver, name string, empty bool) *ndbclient.Table {
	want := drivertest.Table("ndbgate_test", name)
	if empty {
		_, err := d.DropNDBTable(want.Database, want.Name)
		require.NoError(t, err)
	}
	_, err := d.CreateNDBTable(want)
	require.NoError(t, err)
	tbl, err := d.CreateTable(want)
	require.NoError(t, err, "ndbgate_test.%s has another shape: drop it, or create it with deploy/sql/ndbgate.sql", name)
	return tbl
}

// A table with a BLOB or TEXT column is refused when described, by name:
// the driver does not drive NdbBlob's part tables.
func TestBlobTableRefused(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	want := &ndbclient.Table{Database: "ndbgate_test", Name: "with_blob", ExpireColumn: -1,
		Columns:    []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32}, {Name: "doc", Type: ndbclient.TypeBlob, Nullable: true}},
		PrimaryKey: []int{0}}
	_, err := d.CreateNDBTable(want)
	require.NoError(t, err)
	_, err = d.Table("ndbgate_test", "with_blob")
	require.Error(t, err)
	require.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	require.Contains(t, err.Error(), "doc")
	require.Contains(t, err.Error(), "BLOB")
}

// On a table with an expire column, an expired row is a miss for every op
// but a write, and an insert replaces it, as on the embedded engine.
func TestExpiredRowsAreMisses(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	tbl := suiteTable(t, d, "suite", false)
	tbl.ExpireColumn = drivertest.ColExpire
	c := ndbclient.NewClient(d)
	key := func(k string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String("exp:" + k)} }
	run := func(op *ndbclient.Op) error {
		require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op.Err
	}
	past := uint64(time.Now().Unix() - 10)
	store := func(k string, expire uint64) {
		require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(k), Set: []ndbclient.ColumnValue{
			{Column: drivertest.ColValue, Value: ndbclient.String("old")}, {Column: drivertest.ColExpire, Value: ndbclient.Uint(expire)},
			{Column: drivertest.ColMath, Value: ndbclient.Uint(7)}, {Column: drivertest.ColCas, Value: ndbclient.Uint(1)}}}))
	}
	for _, k := range []string{"read", "update", "cas", "add", "append", "delete", "insert"} {
		store(k, past)
	}
	store("alive", uint64(time.Now().Unix()+3600))
	store("never", 0)

	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("read"), Read: []int{drivertest.ColValue}}), ndbclient.ErrNotFound)
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: key("update"),
		Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("new")}}}), ndbclient.ErrNotFound)
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: tbl, Key: key("cas"), CondColumn: drivertest.ColCas, CondValue: ndbclient.Uint(1),
		Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("new")}}}), ndbclient.ErrNotFound)
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("add"), AddColumn: drivertest.ColMath, Delta: 1, Read: []int{drivertest.ColMath}}), ndbclient.ErrNotFound)
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key("append"), AppendColumn: drivertest.ColValue, Data: []byte("x")}), ndbclient.ErrNotFound)
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: key("delete")}), ndbclient.ErrNotFound)
	ins := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: key("insert"), Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("new")}}}
	require.NoError(t, run(ins), "an insert replaces an expired row")
	rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("insert"), Read: []int{drivertest.ColValue, drivertest.ColMath}}
	require.NoError(t, run(rd))
	assert.Equal(t, "new", string(rd.Row[0].B))
	assert.True(t, rd.Row[1].IsNull(), "the insert made a new row, not an update of the old one")
	assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: key("alive"),
		Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String("new")}}}), ndbclient.ErrDuplicate)
	for _, k := range []string{"alive", "never"} {
		add := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(k), AddColumn: drivertest.ColMath, Delta: 1, Read: []int{drivertest.ColMath}}
		require.NoError(t, run(add), k)
		assert.Equal(t, uint64(8), add.Row[0].Uint(), k)
		require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key(k), AppendColumn: drivertest.ColValue, Data: []byte("+")}), k)
	}
}

// A driver refuses to change the schema of a table it has described: the
// change would invalidate the dictionary objects its own rounds use. Column
// types it cannot size are refused before the dictionary is asked.
func TestSchemaChangesRefusedOnADescribedTable(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	tbl := suiteTable(t, d, "suite", false)
	err := d.AddNDBColumn(tbl.Database, tbl.Name, "extra", ndbclient.TypeUint64)
	require.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	require.Contains(t, err.Error(), "another")
	_, err = d.DropNDBTable(tbl.Database, tbl.Name)
	require.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))

	other := openDriver(t, connectstring(t), 1)
	err = other.AddNDBColumn(tbl.Database, tbl.Name, "extra", ndbclient.TypeVarchar)
	require.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	require.Contains(t, err.Error(), "only integer")
	got, err := d.Table(tbl.Database, tbl.Name)
	require.NoError(t, err)
	require.Equal(t, -1, got.ColumnIndex("extra"), "nothing was added")
}

// The dispatcher asks the partition of every key: NDB's own hash, computed
// without an allocation, the same for the same key, and within the table's
// partitions (every key lands on a data node of the cluster).
func TestPartitionOfAKey(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	tbl := suiteTable(t, d, "suite", false)
	key := []ndbclient.Value{ndbclient.Bytes([]byte("partition:key"))}
	p := d.Partition(tbl, key)
	seen := map[int]bool{}
	for i := range 64 {
		k := []ndbclient.Value{ndbclient.Bytes(fmt.Appendf(nil, "partition:%d", i))}
		seen[d.Partition(tbl, k)] = true
	}
	assert.Greater(t, len(seen), 1, "64 keys all hashed to one partition")
	for q := range seen {
		assert.GreaterOrEqual(t, q, 0)
		assert.Less(t, d.NodeOf(tbl, q), d.Stats().Nodes, "partition %d's node", q)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if d.Partition(tbl, key) != p {
			t.Error("the same key hashed to another partition")
		}
	})
	assert.Zero(t, allocs, "allocations per Partition")

	// The driver remembers the partitions of keys it routed: a second
	// asking, answered from memory, agrees with NDB's hash the first time.
	first := make([]int, 2000)
	for i := range first {
		first[i] = d.Partition(tbl, []ndbclient.Value{ndbclient.Bytes(fmt.Appendf(nil, "memo:%d", i))})
	}
	for i := range first {
		assert.Equal(t, first[i], d.Partition(tbl, []ndbclient.Value{ndbclient.Bytes(fmt.Appendf(nil, "memo:%d", i))}), "key memo:%d", i)
	}

	// A batch's partitions, computed together (keys the memo knows and keys
	// it does not), agree with NDB's hash as a driver with an empty memo
	// computes it; the op after a TxnWithNext is not its own run and gets none.
	ops := make([]*ndbclient.Op, 200)
	for i := range ops {
		name := fmt.Sprintf("batch:%d", i)
		if i%2 == 0 {
			name = fmt.Sprintf("memo:%d", i)
		}
		ops[i] = &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.Bytes([]byte(name))}}
	}
	ops[10].TxnWithNext = true
	d.Partitions(ops)
	fresh := openDriver(t, connectstring(t), 1)
	freshTbl, err := fresh.Table(tbl.Database, tbl.Name)
	require.NoError(t, err)
	for i, op := range ops {
		p, ok := op.KeyPartition()
		if i == 11 {
			assert.False(t, ok, "the op after a TxnWithNext")
			continue
		}
		require.True(t, ok, "op %d placed", i)
		assert.Equal(t, fresh.Partition(freshTbl, op.Key), p, "op %d", i)
	}
	allocs = testing.AllocsPerRun(20, func() { d.Partitions(ops) })
	assert.Zero(t, allocs, "allocations per Partitions")
}
