package ndbmemcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// ndbmemcache's configuration, as ndb-create-tables --ndbmemcache-config
// writes it: valid tables, and rows that fit them. (Run live against
// ndbmemcache's own memcached: docs/RUNNING-ON-NDB.md, "Beside ndbmemcache".)
func TestNdbmemcacheConfig(t *testing.T) {
	rows := DemoRows("127.0.0.1:1186")
	seen := map[string]bool{}
	for _, tbl := range Tables() {
		require.NoError(t, tbl.Validate(), tbl.Name)
		assert.True(t, tbl.OrderedPrimaryKey, "%s: mysqld gives its primary key an ordered index", tbl.Name)
		seen[tbl.Name] = true
		for i, row := range rows[tbl.Name] {
			require.Len(t, row, len(tbl.Columns), "%s row %d", tbl.Name, i)
			op := RowOp(tbl, row)
			assert.Len(t, op.Key, len(tbl.PrimaryKey), "%s row %d", tbl.Name, i)
			for _, cv := range op.Set {
				col := tbl.Columns[cv.Column]
				if cv.Value.IsNull() {
					assert.True(t, col.Nullable, "%s.%s is NOT NULL", tbl.Name, col.Name)
				}
				if col.Type == ndbclient.TypeChar && col.Length == 1 {
					require.Len(t, cv.Value.B, 1, "%s.%s: an ENUM's index byte", tbl.Name, col.Name)
					assert.NotZero(t, cv.Value.B[0], "ENUM indexes count from 1")
				}
			}
		}
	}
	for name := range rows {
		assert.True(t, seen[name], "rows for a table that is not made: %s", name)
	}
	assert.Equal(t, []any{uint64(1), "", uint64(0), "ndb-only", "demo_table"}, rows["key_prefixes"][1], "role db-only serves demo_table from NDB")
}
