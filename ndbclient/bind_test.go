package ndbclient_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// On a driver that reads the expire column from each op's Table (NDB's),
// BindExpireColumn sets it in the table the driver described, once; a
// second container naming another column is refused. The embedded engine
// stands in for such a driver behind a wrapper that hides its
// ExpiryBinder (its own binding: embedded's TestBindExpireColumn).
func TestBindExpireColumnSetsItInTheTable(t *testing.T) {
	e := embedded.New(embedded.Config{})
	t.Cleanup(func() { _ = e.Close() })
	c := ndbclient.NewClient(struct{ ndbclient.Driver }{e})
	tbl, err := c.Driver().CreateTable(&ndbclient.Table{Database: "test", Name: "t", PrimaryKey: []int{0}, ExpireColumn: -1,
		Columns: []ndbclient.Column{{Name: "k", Type: ndbclient.TypeVarchar, Length: 10}, {Name: "a", Type: ndbclient.TypeUint32}, {Name: "b", Type: ndbclient.TypeUint32}}})
	require.NoError(t, err)

	got, err := c.BindExpireColumn(tbl, -1, false)
	require.NoError(t, err)
	assert.Same(t, tbl, got)
	assert.Equal(t, -1, tbl.ExpireColumn, "a container without expiry binds nothing")

	got, err = c.BindExpireColumn(tbl, 1, false)
	require.NoError(t, err)
	assert.Same(t, tbl, got)
	assert.Equal(t, 1, tbl.ExpireColumn)
	_, err = c.BindExpireColumn(tbl, 1, false)
	require.NoError(t, err, "the same column again")

	_, err = c.BindExpireColumn(tbl, 2, false)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, `table test.t keeps expiry in column "a", not "b"`)
	_, err = c.BindExpireColumn(tbl, 3, false)
	assert.ErrorContains(t, err, "no column 3")
	assert.Equal(t, 1, tbl.ExpireColumn)
}
