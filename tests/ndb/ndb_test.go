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
	"bytes"
	"context"
	"errors"
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
	return openDriverWith(t, ndbapi.Config{Connectstring: cs, PoolSize: pool})
}

// openDriverWith opens the NDB driver with cfg, closed when the test ends.
func openDriverWith(t *testing.T, cfg ndbapi.Config) *ndbapi.Driver {
	t.Helper()
	d, err := ndbapi.Open(cfg)
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

// A table with a BLOB or TEXT column is served; the column is refused, by
// name, in any op that names it (the driver does not drive NdbBlob's part
// tables), and so is a delete of a row (it would leave the parts behind).
func TestBlobColumnRefused(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	want := &ndbclient.Table{Database: "ndbgate_test", Name: "with_blob", ExpireColumn: -1,
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32}, {Name: "v", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "doc", Type: ndbclient.TypeBlob, Nullable: true}},
		PrimaryKey: []int{0}}
	_, err := d.DropNDBTable(want.Database, want.Name) // an older shape, without v
	require.NoError(t, err)
	_, err = d.CreateNDBTable(want)
	require.NoError(t, err)
	tbl, err := d.Table("ndbgate_test", "with_blob")
	require.NoError(t, err)
	require.Len(t, tbl.Columns, 3)
	assert.Equal(t, ndbclient.TypeBlob, tbl.Columns[2].Type)
	assert.Contains(t, tbl.Columns[2].Unsupported, "BLOB")

	key := []ndbclient.Value{ndbclient.Uint(1)}
	run := func(op *ndbclient.Op) error {
		op.Table, op.Key = tbl, key
		require.NoError(t, d.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op.Err
	}
	require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpWrite, Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.Uint(7)}}}))
	read := &ndbclient.Op{Kind: ndbclient.OpRead, Read: []int{1}}
	require.NoError(t, run(read))
	assert.Equal(t, uint64(7), read.Row[0].Uint())
	for _, op := range []*ndbclient.Op{
		{Kind: ndbclient.OpRead, Read: []int{2}},
		{Kind: ndbclient.OpUpdate, Set: []ndbclient.ColumnValue{{Column: 2, Value: ndbclient.String("x")}}},
		{Kind: ndbclient.OpDelete},
	} {
		err := run(op)
		require.Error(t, err, "%s", op.Kind)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
		assert.Contains(t, err.Error(), "doc")
	}
	require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Read: []int{1}}), "the row is still there")
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
	// Each op that meets its row expired counts (memcached's get_expired),
	// the insert whose purge took the row too; no other op does.
	found := func() uint64 {
		st := d.Stats()
		assert.Equal(t, st.ExpiredOnAccess, st.Expired, "NDB has no reaper: every expired row counted was found")
		return st.ExpiredOnAccess
	}
	before := found()

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
	assert.Equal(t, uint64(7), found()-before, "ops that met an expired row: read, update, cas, add, append, delete, insert")
	// A committed read checks expiry once its row arrives (the shim's
	// expiredIn), alone or in a batch of reads; a locking read checks it on
	// the data node. The expire column is read for the check, not returned.
	for _, k := range []string{"alive", "never"} {
		rd := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(k), Read: []int{drivertest.ColValue}}
		require.NoError(t, run(rd), k)
		require.Len(t, rd.Row, 1, k)
		assert.Equal(t, "old", string(rd.Row[0].B), k)
	}
	store("read2", past)
	reads := []*ndbclient.Op{}
	for _, k := range []string{"read", "alive", "read2", "never"} {
		reads = append(reads, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(k), Read: []int{drivertest.ColValue}})
	}
	require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: reads}))
	for i, want := range []bool{false, true, false, true} {
		if want {
			assert.NoError(t, reads[i].Err, "batch read %d", i)
		} else {
			assert.ErrorIs(t, reads[i].Err, ndbclient.ErrNotFound, "batch read %d", i)
		}
	}
	for _, lock := range []ndbclient.LockMode{ndbclient.LockShared, ndbclient.LockExclusive} {
		assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("read"), Lock: lock, Read: []int{drivertest.ColValue}}),
			ndbclient.ErrNotFound, "lock %v", lock)
		assert.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("alive"), Lock: lock, Read: []int{drivertest.ColValue}}),
			"lock %v", lock)
	}
	for _, k := range []string{"alive", "never"} {
		add := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(k), AddColumn: drivertest.ColMath, Delta: 1, Read: []int{drivertest.ColMath}}
		require.NoError(t, run(add), k)
		assert.Equal(t, uint64(8), add.Row[0].Uint(), k)
		require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key(k), AppendColumn: drivertest.ColValue, Data: []byte("+")}), k)
	}
	assert.Equal(t, uint64(11), found()-before, "and two reads in a batch, two locking reads")
}

// A signed expire column compares signed, on the data node and after a
// committed read alike: a negative time has passed, as for the embedded
// engine's rule (NULL and 0 never expire).
func TestSignedExpireColumn(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	want := &ndbclient.Table{Database: "ndbgate_test", Name: "signed_expiry", ExpireColumn: -1,
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32}, {Name: "v", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "expire", Type: ndbclient.TypeInt64, Nullable: true}},
		PrimaryKey: []int{0}}
	tbl := freshTable(t, d, d, want)
	tbl.ExpireColumn = 2
	c := ndbclient.NewClient(d)
	run := func(op *ndbclient.Op) error {
		require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op.Err
	}
	now := time.Now().Unix()
	for id, exp := range map[uint64]ndbclient.Value{1: ndbclient.Int(-5), 2: ndbclient.Int(now + 3600), 3: ndbclient.Null(), 4: ndbclient.Int(0), 5: ndbclient.Int(now - 10)} {
		require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(id)},
			Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.Uint(id)}, {Column: 2, Value: exp}}}))
	}
	for id, alive := range map[uint64]bool{1: false, 2: true, 3: true, 4: true, 5: false} {
		for _, lock := range []ndbclient.LockMode{ndbclient.LockCommitted, ndbclient.LockShared} {
			err := run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(id)}, Lock: lock, Read: []int{1}})
			if alive {
				assert.NoError(t, err, "row %d, lock %v", id, lock)
			} else {
				assert.ErrorIs(t, err, ndbclient.ErrNotFound, "row %d, lock %v", id, lock)
			}
		}
	}
}

// A TIMESTAMP expire column (ndbmemcache's demo_table_tabs): NDB keeps it
// as TIMESTAMP2, whole seconds big endian, then the fraction. The same
// checks as the embedded engine's TestTimestampExpirySuite.
func TestTimestampExpireColumn(t *testing.T) {
	d := openDriver(t, connectstring(t), 1)
	for _, fsp := range []int{0, 3} {
		t.Run(fmt.Sprintf("fsp %d", fsp), func(t *testing.T) {
			want := drivertest.TimestampTable("ndbgate_test", fmt.Sprintf("timestamp_expiry%d", fsp), fsp)
			tbl := freshTable(t, d, d, want)
			tbl.ExpireColumn = want.ExpireColumn
			drivertest.RunTimestampExpiry(t, d, tbl)
		})
	}
}

// A driver refuses to change the schema of a table it has described: the
// change would invalidate the dictionary objects its own flights use. Column
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

// ScanRows reads every row of a table with a committed-read scan: the
// columns asked for in the order asked, NULLs as NULL, however many bytes
// the rows take (past the first buffer the scan runs again into a larger
// one). More rows than the limit is TooLarge, a dropped table a schema
// error. NodeID is the API node id the driver's first connection took.
func TestScanRowsAndNodeID(t *testing.T) {
	cs := connectstring(t)
	d := openDriver(t, cs, 2)
	other := openDriver(t, cs, 1) // changes the schema, describes nothing
	id := d.NodeID()
	assert.Positive(t, id, "node id")
	assert.NotEqual(t, id, other.NodeID(), "each connection takes an API slot of its own")

	want := &ndbclient.Table{Database: "ndbgate_test", Name: "scan_rows", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "id", Type: ndbclient.TypeUint32},
			{Name: "name", Type: ndbclient.TypeVarchar, Length: 32, Nullable: true},
			{Name: "n", Type: ndbclient.TypeInt64, Nullable: true},
			{Name: "code", Type: ndbclient.TypeChar, Length: 4, Nullable: true},
			{Name: "pad", Type: ndbclient.TypeVarbinary, Length: 2000, Nullable: true},
		}}
	tbl := freshTable(t, other, d, want)
	ctx := context.Background()
	write := func(ops []*ndbclient.Op) {
		t.Helper()
		require.NoError(t, d.Execute(ctx, &ndbclient.Batch{Ops: ops}))
		for _, op := range ops {
			require.NoError(t, op.Err)
		}
	}

	rows, err := d.ScanRows(ctx, tbl, []int{0}, 10)
	require.NoError(t, err)
	assert.Empty(t, rows, "a new table")

	// 20 rows; name, n and code are NULL in some.
	written := map[uint64][]ndbclient.Value{} // id -> name, n, code
	var ops []*ndbclient.Op
	for i := range 20 {
		name, n, code := ndbclient.String(fmt.Sprintf("row-%02d", i)), ndbclient.Int(int64(i*1000-7000)), ndbclient.String(fmt.Sprint("c", i))
		if i%5 == 0 {
			name = ndbclient.Null()
		}
		if i%4 == 3 {
			n = ndbclient.Null()
		}
		if i%3 == 1 {
			code = ndbclient.Null()
		}
		written[uint64(i)] = []ndbclient.Value{name, n, code}
		ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(uint64(i))},
			Set: []ndbclient.ColumnValue{{Column: 1, Value: name}, {Column: 2, Value: n}, {Column: 3, Value: code}}})
	}
	write(ops)

	// A subset of the columns, out of table order.
	rows, err = d.ScanRows(ctx, tbl, []int{3, 0, 2, 1}, 20)
	require.NoError(t, err)
	require.Len(t, rows, 20)
	seen := map[uint64]bool{}
	for _, r := range rows {
		require.Len(t, r, 4)
		require.Equal(t, ndbclient.KindUint, r[1].Kind)
		k := r[1].Uint()
		w, ok := written[k]
		require.True(t, ok, "row %d was never written", k)
		require.False(t, seen[k], "row %d twice", k)
		seen[k] = true
		assert.True(t, w[2].Equal(r[0]), "row %d code: %v, want %v", k, r[0], w[2])
		assert.True(t, w[1].Equal(r[2]), "row %d n: %v, want %v", k, r[2], w[1])
		assert.True(t, w[0].Equal(r[3]), "row %d name: %v, want %v", k, r[3], w[0])
	}

	_, err = d.ScanRows(ctx, tbl, []int{0}, 19)
	require.ErrorIs(t, err, ndbclient.ErrTooLarge, "20 rows with a limit of 19")
	assert.Contains(t, err.Error(), "more than 19 rows")
	_, err = d.ScanRows(ctx, tbl, []int{0, 5}, 20)
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err), "no column 5")
	rows, err = d.ScanRows(ctx, tbl, nil, 20)
	require.NoError(t, err)
	assert.Len(t, rows, 20, "rows of no columns are counted")
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.ScanRows(canceled, tbl, []int{0}, 20)
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err), "a canceled context")

	// Rows of more bytes than the first buffer (1 MiB): 600 of 2,000 bytes
	// and no limit.
	pad := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 2000) }
	for start := 20; start < 600; start += 100 {
		ops = ops[:0]
		for i := start; i < start+100 && i < 600; i++ {
			ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(uint64(i))},
				Set: []ndbclient.ColumnValue{{Column: 4, Value: ndbclient.Bytes(pad(i))}}})
		}
		write(ops)
	}
	rows, err = d.ScanRows(ctx, tbl, []int{4, 0}, -1)
	require.NoError(t, err)
	require.Len(t, rows, 600)
	for _, r := range rows {
		i := int(r[1].Uint())
		if i < 20 {
			assert.True(t, r[0].IsNull(), "row %d pad", i)
		} else {
			assert.Equal(t, pad(i), r[0].B, "row %d pad", i)
		}
	}

	// A table gone from the dictionary is a schema error (at first NDB may
	// say the table object is outdated: Temporary, while the driver looks
	// the table up again).
	_, err = other.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err = d.ScanRows(ctx, tbl, []int{0}, 1000)
		if ndbclient.CodeOf(err) == ndbclient.CodeSchemaError {
			break
		}
		require.True(t, err == nil || ndbclient.CodeOf(err) == ndbclient.CodeTemporary, "scan of a dropped table: %v", err)
		require.True(t, time.Now().Before(deadline), "scans of a dropped table did not fail with a schema error: %v", err)
		time.Sleep(100 * time.Millisecond)
	}
	assert.Contains(t, err.Error(), "scan_rows")
	var e *ndbclient.Error
	if errors.As(err, &e) {
		t.Logf("scan of a dropped table: %v (NDB %d)", err, e.NativeCode)
	}
}

// TestExistenceReadCompletes: a read with an empty projection (an existence
// check, as memcache touch on a container without an expiry column, or
// ndbmemcache's meta row) completes with no values: hit or NotFound. NDB
// answers a committed read with its row, so one that read no column used to
// wait forever.
func TestExistenceReadCompletes(t *testing.T) {
	cs := connectstring(t)
	d := openDriver(t, cs, 1)
	other := openDriver(t, cs, 1)
	want := &ndbclient.Table{Database: "ndbgate_test", Name: "exists_two_keys", ExpireColumn: -1, PrimaryKey: []int{0, 1},
		Columns: []ndbclient.Column{
			{Name: "a", Type: ndbclient.TypeVarchar, Length: 16},
			{Name: "b", Type: ndbclient.TypeVarchar, Length: 6},
			{Name: "v", Type: ndbclient.TypeUint32, Nullable: true},
		}}
	tbl := freshTable(t, other, d, want)
	key := func(a, b string) []ndbclient.Value {
		return []ndbclient.Value{ndbclient.String(a), ndbclient.String(b)}
	}
	ins := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: key("ndbmemcache", "1.2")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, d.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{ins}}))
	require.NoError(t, ins.Err)
	hit := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("ndbmemcache", "1.2")}
	miss := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key("ndbmemcache", "1.1")}
	require.NoError(t, d.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{hit, miss}}), "the reads completed")
	require.NoError(t, hit.Err)
	assert.Empty(t, hit.Row, "an existence check returns no values")
	assert.Equal(t, ndbclient.CodeNotFound, ndbclient.CodeOf(miss.Err))
}

// freshTable makes want anew through other (NdbDictionary, as a second
// client would) and returns d's description of it.
func freshTable(t *testing.T, other, d *ndbapi.Driver, want *ndbclient.Table) *ndbclient.Table {
	t.Helper()
	_, err := other.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	_, err = other.CreateNDBTable(want)
	require.NoError(t, err)
	tbl, err := d.CreateTable(want)
	require.NoError(t, err)
	return tbl
}
