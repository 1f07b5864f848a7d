package embedded

import (
	"context"
	"testing"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// TestNextAutoIncrementCountsAboveTheRowsHeld: the first value is one above
// the largest id already stored, and each call takes a new one.
func TestNextAutoIncrementCountsAboveTheRowsHeld(t *testing.T) {
	e := newEngine(t, Config{})
	s, err := e.CreateTable(&ndbclient.Table{Database: "d", Name: "parts", ExpireColumn: -1, PrimaryKey: []int{0, 1},
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint32, AutoIncrement: true}, {Name: "part", Type: ndbclient.TypeInt16}, {Name: "content", Type: ndbclient.TypeVarbinary, Length: 16}}})
	if err != nil {
		t.Fatal(err)
	}
	w := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: s, Key: []ndbclient.Value{ndbclient.Uint(41), ndbclient.Int(0)},
		Set: []ndbclient.ColumnValue{{Column: 2, Value: ndbclient.Bytes([]byte("x"))}}}
	if err := e.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{w}}); err != nil || w.Err != nil {
		t.Fatal(err, w.Err)
	}
	for want := uint64(42); want < 45; want++ {
		got, err := e.NextAutoIncrement(context.Background(), s)
		if err != nil || got != want {
			t.Fatalf("NextAutoIncrement = %d, %v; want %d", got, err, want)
		}
	}
	if _, err := e.NextAutoIncrement(context.Background(), &ndbclient.Table{Database: "d", Name: "missing"}); ndbclient.CodeOf(err) != ndbclient.CodeSchemaError {
		t.Fatalf("a missing table: %v", err)
	}
}
