package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestStateColumnOf(t *testing.T) {
	demo := gateway.DemoTable(100)
	withState := gateway.DemoTable(100)
	withState.Columns = append(withState.Columns, ndbclient.Column{Name: gateway.StateColumnName, Type: ndbclient.TypeUint64, Nullable: true})

	def := gateway.DefaultContainerSpec()
	name, err := gateway.StateColumnOf(def, demo)
	require.NoError(t, err)
	assert.Empty(t, name, "ndbmemcache's demo_table has none: the default container does without")
	name, err = gateway.StateColumnOf(def, withState)
	require.NoError(t, err)
	assert.Equal(t, gateway.StateColumnName, name, "the default container uses it when the table has it")

	named := gateway.ContainerSpec{Name: "c", StateColumn: "item_state"}
	_, err = gateway.StateColumnOf(named, demo)
	require.Error(t, err, "a container that names one needs it")
	assert.Contains(t, err.Error(), `container "c"`)
	assert.Contains(t, err.Error(), `"item_state"`)

	wrongType := gateway.ContainerSpec{Name: "c", StateColumn: "flags"}
	_, err = gateway.StateColumnOf(wrongType, demo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BIGINT UNSIGNED")

	inKey := gateway.ContainerSpec{Name: "c", StateColumn: "mkey"}
	_, err = gateway.StateColumnOf(inKey, demo)
	require.Error(t, err, "a VARCHAR key column is neither the type nor allowed")

	counters := &ndbclient.Table{Database: "d", Name: "counters", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{{Name: "id", Type: ndbclient.TypeUint64}, {Name: "v", Type: ndbclient.TypeVarbinary, Length: 10}}}
	_, err = gateway.StateColumnOf(gateway.ContainerSpec{Name: "c", StateColumn: "id"}, counters)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "primary key")

	for _, role := range []string{"cas_value", "math_value"} { // both BIGINT UNSIGNED
		shared := gateway.DefaultContainerSpec()
		shared.StateColumn, shared.StateOptional = role, false
		_, err = gateway.StateColumnOf(shared, demo)
		require.Error(t, err, "%s: the state would overwrite it", role)
		assert.Contains(t, err.Error(), "a column of its own")
	}

	none, err := gateway.StateColumnOf(gateway.ContainerSpec{Name: "c"}, demo)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// ndbmemcache's own demo_table, as its SQL script makes it, has no expiry
// column: the default container serves it without one, as ndbmemcache's
// demo container did. A container that names one needs it.
func TestDefaultContainerWithoutExpiryColumn(t *testing.T) {
	sqlDemo := &ndbclient.Table{Database: "ndbmemcache", Name: "demo_table", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "mkey", Type: ndbclient.TypeVarchar, Length: 250},
			{Name: "math_value", Type: ndbclient.TypeUint64, Nullable: true},
			{Name: "flags", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "cas_value", Type: ndbclient.TypeUint64, Nullable: true},
			{Name: "string_value", Type: ndbclient.TypeVarbinary, Length: 13500, Nullable: true},
		}}
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), sqlDemo)
	require.NoError(t, err)
	assert.Equal(t, -1, c.ExpireColumn)
	assert.Equal(t, 2, c.FlagsColumn)

	c, err = gateway.NewContainer(gateway.DefaultContainerSpec(), gateway.DemoTable(100))
	require.NoError(t, err)
	assert.Equal(t, gateway.DemoTable(100).ColumnIndex("expire_time"), c.ExpireColumn, "ndbgate's own demo_table has one")

	named := gateway.DefaultContainerSpec()
	named.ExpireOptional = false
	_, err = gateway.NewContainer(named, sqlDemo)
	assert.ErrorContains(t, err, `expire column "expire_time" is not a column of ndbmemcache.demo_table`)
}
