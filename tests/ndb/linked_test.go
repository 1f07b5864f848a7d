//go:build ndbapi

package ndb

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Deletes linked in one transaction on a two-column key (a large value's
// parts, keyed (id, part)) delete their own rows and no other.
func TestLinkedDeletesOfParts(t *testing.T) {
	d := openDriver(t, connectstring(t), 2)
	want := gateway.ExternalValuesTable("ndbgate_test", "linked_parts")
	_, err := d.DropNDBTable(want.Database, want.Name)
	require.NoError(t, err)
	_, err = d.CreateNDBTable(want)
	require.NoError(t, err)
	tbl, err := d.CreateTable(want)
	require.NoError(t, err)
	key := func(id, part int) []ndbclient.Value {
		return []ndbclient.Value{ndbclient.Uint(uint64(id)), ndbclient.Int(int64(part))}
	}
	content := func(id, part int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%d.%d/", id, part)), 900) }
	exec := func(ops ...*ndbclient.Op) {
		t.Helper()
		require.NoError(t, d.Execute(context.Background(), &ndbclient.Batch{Ops: ops}))
	}
	const ids, parts = 40, 3
	var ops []*ndbclient.Op
	for id := 1; id <= ids; id++ {
		for p := 0; p < parts; p++ {
			ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(id, p),
				Set: []ndbclient.ColumnValue{{Column: 2, Value: ndbclient.Bytes(content(id, p))}}})
		}
	}
	exec(ops...)
	for _, o := range ops {
		require.NoError(t, o.Err)
	}
	// The odd ids' parts deleted, each id's in one transaction, all in one batch.
	ops = ops[:0]
	for id := 1; id <= ids; id += 2 {
		for p := 0; p < parts; p++ {
			ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: key(id, p), TxnWithNext: p < parts-1})
		}
	}
	exec(ops...)
	for _, o := range ops {
		require.NoError(t, o.Err, "delete %v", o.Key)
	}
	for id := 1; id <= ids; id++ {
		for p := 0; p < parts; p++ {
			r := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(id, p), Read: []int{2}}
			exec(r)
			if id%2 == 1 {
				require.ErrorIs(t, r.Err, ndbclient.ErrNotFound, "(%d, %d) deleted", id, p)
				continue
			}
			require.NoError(t, r.Err, "(%d, %d) kept", id, p)
			require.Equal(t, content(id, p), r.Row[0].B, "(%d, %d)", id, p)
		}
	}
}
