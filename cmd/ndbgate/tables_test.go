package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// ndb-create-tables makes each table once: a container on a declared table
// gets the declared shape (as serve binds it), and the others the memcache
// shape.
func TestTablesToCreateKeepTheDeclaredShape(t *testing.T) {
	cfg := config.Config{
		Tables: []config.Table{{Database: "app", Name: "small", PrimaryKey: []string{"mkey"}, Columns: []config.TableColumn{
			{Name: "mkey", Type: "VARCHAR(250)"}, {Name: "string_value", Type: "VARBINARY(16)"},
		}}},
		Containers: []config.Container{
			{Name: "a", Database: "app", Table: "small", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}},
			{Name: "b", Database: "app", Table: "other", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}},
			{Name: "c", Database: "app", Table: "other", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}},
		},
	}
	tables, err := tablesToCreate(cfg, false)
	require.NoError(t, err)
	byName := map[string]*ndbclient.Table{}
	for _, tb := range tables {
		require.Nil(t, byName[tb.FullName()], "%s listed twice", tb.FullName())
		byName[tb.FullName()] = tb
	}
	require.Len(t, byName, 3)
	require.NotNil(t, byName["ndbmemcache.demo_table"])
	assert.Equal(t, ndbValueLength, byName["app.other"].Columns[1].Length, "a container's own table: the memcache shape")
	assert.Equal(t, 16, byName["app.small"].Columns[1].Length, "a declared table keeps its shape")
}
