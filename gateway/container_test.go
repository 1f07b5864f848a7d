package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A container cannot use a BLOB/TEXT column its backend does not drive
// (the NDB driver serves such a table, but never reads or writes the
// column); it says which.
func TestContainerRefusesAnUnsupportedColumn(t *testing.T) {
	tbl := &ndbclient.Table{Database: "d", Name: "t", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "k", Type: ndbclient.TypeVarchar, Length: 250},
			{Name: "v", Type: ndbclient.TypeText, Nullable: true, Unsupported: "a TEXT column: ndbgate does not read or write BLOB/TEXT"},
			{Name: "w", Type: ndbclient.TypeVarbinary, Length: 100, Nullable: true},
		}}
	c := &Container{Name: "c", Table: tbl, KeyColumns: []int{0}, ValueColumns: []int{1}, FlagsColumn: -1, CasColumn: -1, ExpireColumn: -1, MathColumn: -1}
	require.ErrorContains(t, c.Prepare(), `container "c": value column "v" is a TEXT column`)
	c.ValueColumns = []int{2}
	require.NoError(t, c.Prepare())
}

// An expire column is an unsigned integer (Unix seconds) or a TIMESTAMP, as
// ndbmemcache's demo_table_tabs has; other roles and types are refused.
func TestContainerExpireColumnTypes(t *testing.T) {
	for _, tc := range []struct {
		typ  ndbclient.ColumnType
		role string // the role the column takes
		err  string // "" for none
	}{
		{ndbclient.TypeUint32, "expire", ""},
		{ndbclient.TypeTimestamp, "expire", ""},
		{ndbclient.TypeDatetime, "expire", `container "c": expire column "x" must be an unsigned integer, not DATETIME`},
		{ndbclient.TypeInt32, "expire", `container "c": expire column "x" must be an unsigned integer, not INT`},
		{ndbclient.TypeTimestamp, "flags", `container "c": flags column "x" must be an unsigned integer, not TIMESTAMP`},
	} {
		tbl := &ndbclient.Table{Database: "d", Name: "t", ExpireColumn: -1, PrimaryKey: []int{0},
			Columns: []ndbclient.Column{
				{Name: "k", Type: ndbclient.TypeVarchar, Length: 250},
				{Name: "v", Type: ndbclient.TypeVarbinary, Length: 100, Nullable: true},
				{Name: "x", Type: tc.typ, Nullable: true},
			}}
		c := &Container{Name: "c", Table: tbl, KeyColumns: []int{0}, ValueColumns: []int{1}, FlagsColumn: -1, CasColumn: -1, ExpireColumn: -1, MathColumn: -1}
		if tc.role == "expire" {
			c.ExpireColumn = 2
		} else {
			c.FlagsColumn = 2
		}
		if tc.err == "" {
			require.NoError(t, c.Prepare(), "%s %s", tc.role, tc.typ)
		} else {
			require.EqualError(t, c.Prepare(), tc.err)
		}
	}
}
