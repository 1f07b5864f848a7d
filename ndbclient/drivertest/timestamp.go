package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Columns of TimestampTable.
const (
	TsColID = iota
	TsColValue
	TsColMath
	TsColExpire
)

// TimestampTable has a TIMESTAMP expire column with fsp fractional digits,
// as ndbmemcache's demo_table_tabs has (`expire_time TIMESTAMP NULL`).
func TimestampTable(db, name string, fsp int) *ndbclient.Table {
	return &ndbclient.Table{
		Database: db,
		Name:     name,
		Columns: []ndbclient.Column{
			{Name: "id", Type: ndbclient.TypeUint32},
			{Name: "v", Type: ndbclient.TypeVarbinary, Length: 64, Nullable: true},
			{Name: "math", Type: ndbclient.TypeUint64, Nullable: true},
			{Name: "expire_time", Type: ndbclient.TypeTimestamp, Scale: fsp, Nullable: true},
		},
		PrimaryKey:   []int{TsColID},
		ExpireColumn: TsColExpire,
	}
}

// RunTimestampExpiry checks a TIMESTAMP expire column on an empty
// TimestampTable: a row whose whole seconds are not after now is a miss for
// every op, checked on the data node and after a committed read alike; NULL
// and the zero TIMESTAMP never expire; the value reads back as written.
func RunTimestampExpiry(t *testing.T, d ndbclient.Driver, tbl *ndbclient.Table) {
	c := ndbclient.NewClient(d)
	run := func(op *ndbclient.Op) error {
		t.Helper()
		op.Table = tbl
		require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op.Err
	}
	key := func(id uint64) []ndbclient.Value { return []ndbclient.Value{ndbclient.Uint(id)} }
	col := &tbl.Columns[TsColExpire]
	now := uint64(time.Now().Unix())
	frac := func(at uint64, f string) ndbclient.Value { // at with a fraction, when the column keeps one
		v := ndbclient.ExpiryValue(col, at)
		if col.Scale == 0 {
			return v
		}
		return ndbclient.String(string(v.B) + "." + f[:col.Scale])
	}
	rows := []struct {
		name   string
		expire ndbclient.Value
		alive  bool
	}{
		{"an hour ago", ndbclient.ExpiryValue(col, now-3600), false},
		{"in an hour", ndbclient.ExpiryValue(col, now+3600), true},
		{"NULL", ndbclient.Null(), true},
		{"the zero TIMESTAMP", ndbclient.String("0000-00-00 00:00:00"), true},
		{"its first second", ndbclient.ExpiryValue(col, 1), false},
		{"ten seconds ago, and a fraction", frac(now-10, "999999"), false},
		{"in an hour, and a fraction", frac(now+3600, "500000"), true},
		{"its last second", ndbclient.ExpiryValue(col, 1<<40), true},
	}
	const kinds = 6 // ops tried on each row, each on its own copy
	store := func(id uint64, expire ndbclient.Value) {
		require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpWrite, Key: key(id), Set: []ndbclient.ColumnValue{
			{Column: TsColValue, Value: ndbclient.String("v")}, {Column: TsColMath, Value: ndbclient.Uint(7)},
			{Column: TsColExpire, Value: expire}}}), "store %d", id)
	}
	for i, r := range rows {
		for k := range kinds {
			store(uint64(i*kinds+k), r.expire)
		}
	}
	miss := func(err error, alive bool, what string) {
		t.Helper()
		if alive {
			assert.NoError(t, err, what)
		} else {
			assert.ErrorIs(t, err, ndbclient.ErrNotFound, what)
		}
	}
	var batch []*ndbclient.Op
	for i, r := range rows {
		id := uint64(i * kinds)
		for _, lock := range []ndbclient.LockMode{ndbclient.LockCommitted, ndbclient.LockShared} {
			rd := &ndbclient.Op{Kind: ndbclient.OpRead, Key: key(id), Lock: lock, Read: []int{TsColValue, TsColExpire}}
			miss(run(rd), r.alive, fmt.Sprintf("%s: read, lock %v", r.name, lock))
			if r.alive && rd.Err == nil {
				assert.Equal(t, ndbclient.ExpirySeconds(r.expire), ndbclient.ExpirySeconds(rd.Row[1]), "%s: the expiry reads back", r.name)
			}
		}
		batch = append(batch, &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(id), Read: []int{TsColValue}})
		miss(run(&ndbclient.Op{Kind: ndbclient.OpUpdate, Key: key(id + 1), Set: []ndbclient.ColumnValue{{Column: TsColValue, Value: ndbclient.String("w")}}}),
			r.alive, r.name+": update")
		miss(run(&ndbclient.Op{Kind: ndbclient.OpAppend, Key: key(id + 2), AppendColumn: TsColValue, Data: []byte("+")}), r.alive, r.name+": append")
		miss(run(&ndbclient.Op{Kind: ndbclient.OpAdd, Key: key(id + 3), AddColumn: TsColMath, Delta: 1, Read: []int{TsColMath}}), r.alive, r.name+": add")
		miss(run(&ndbclient.Op{Kind: ndbclient.OpDelete, Key: key(id + 4)}), r.alive, r.name+": delete")
		ins := run(&ndbclient.Op{Kind: ndbclient.OpInsert, Key: key(id + 5), Set: []ndbclient.ColumnValue{{Column: TsColValue, Value: ndbclient.String("new")}}})
		if r.alive {
			assert.ErrorIs(t, ins, ndbclient.ErrDuplicate, r.name+": insert")
		} else {
			assert.NoError(t, ins, r.name+": an insert replaces an expired row")
		}
	}
	require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: batch}))
	for i, r := range rows {
		miss(batch[i].Err, r.alive, r.name+": read in a batch")
	}
}
