package embedded

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestScanRowsReadsEveryRowAndBoundsTheCount(t *testing.T) {
	e := New(Config{Partitions: 4})
	defer e.Close()
	tbl, err := e.CreateTable(&ndbclient.Table{Database: "d", Name: "scan", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{{Name: "k", Type: ndbclient.TypeVarchar, Length: 10}, {Name: "v", Type: ndbclient.TypeUint32, Nullable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	b := &ndbclient.Batch{}
	for i := range 10 {
		v := ndbclient.Uint(uint64(i))
		if i == 3 {
			v = ndbclient.Null()
		}
		b.Ops = append(b.Ops, &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: []ndbclient.Value{ndbclient.String(fmt.Sprint("k", i))},
			Set: []ndbclient.ColumnValue{{Column: 1, Value: v}}})
	}
	if err := e.Execute(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	rows, err := e.ScanRows(context.Background(), tbl, []int{1, 0}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r[1].Str()+"="+r[0].String())
	}
	sort.Strings(got)
	want := "[k0=0 k1=1 k2=2 k3=NULL k4=4 k5=5 k6=6 k7=7 k8=8 k9=9]"
	if fmt.Sprint(got) != want {
		t.Fatalf("rows %v, want %s", got, want)
	}
	if _, err := e.ScanRows(context.Background(), tbl, []int{0}, 9); !errors.Is(err, &ndbclient.Error{Code: ndbclient.CodeTooLarge}) {
		t.Fatalf("10 rows with a limit of 9: %v, want TooLarge", err)
	}
	if _, err := e.ScanRows(context.Background(), tbl, []int{2}, 10); ndbclient.CodeOf(err) != ndbclient.CodeInvalidArgument {
		t.Fatalf("column out of range: %v", err)
	}
}
