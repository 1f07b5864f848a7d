package main

import (
	"fmt"
	"strings"

	"github.com/ndbgate/ndbgate/config"
	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// buildTables turns the config's tables into schemas and makes sure the
// backend has them: the embedded engine creates them; NDB must already have
// them in its dictionary, in a compatible shape. An expire column is not part
// of a declared table's shape: the containers on it bind one (buildRoutes),
// so that a data dir's table made without one gains it, as a table made in
// SQL does.
func buildTables(cfg config.Config, backend *ndbclient.Client) error {
	for i, tc := range cfg.Tables {
		t, err := tableSchema(tc)
		if err != nil {
			return fmt.Errorf("tables[%d] (%s.%s): %w", i, tc.Database, tc.Name, err)
		}
		if _, err := ensureTable(backend, t); err != nil {
			return fmt.Errorf("tables[%d] (%s.%s): %w", i, tc.Database, tc.Name, err)
		}
	}
	return nil
}

func tableSchema(tc config.Table) (*ndbclient.Table, error) {
	t := &ndbclient.Table{Database: tc.Database, Name: tc.Name, Partitions: tc.Partitions, ExpireColumn: -1}
	for _, c := range tc.Columns {
		col := ndbclient.Column{Name: c.Name, Nullable: c.Nullable, AutoIncrement: c.AutoIncrement}
		if err := ndbclient.ParseColumnType(c.Type, &col); err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		t.Columns = append(t.Columns, col)
	}
	for _, names := range []struct {
		in  []string
		out *[]int
	}{{tc.PrimaryKey, &t.PrimaryKey}, {tc.DistributionKey, &t.DistributionKey}} {
		for _, n := range names.in {
			i := t.ColumnIndex(n)
			if i < 0 {
				return nil, fmt.Errorf("key column %q is not among the columns", n)
			}
			*names.out = append(*names.out, i)
		}
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return t, nil
}

// ndbValueLength is the value column length of memcache tables that
// ndb-create-tables makes: ndbmemcache's demo_table (deploy/sql), within
// NDB's row size limit of about 14000 bytes.
const ndbValueLength = 13500

// tableOptions are ndb-create-tables' flags.
type tableOptions struct {
	recreate  bool // drop each table first, so that it starts empty
	itemState bool // give the default container's table an item state column
	// ndbmemcache: also make ndbmemcache's configuration tables, with the
	// rows that let MySQL Cluster's memcached engine serve demo_table
	ndbmemcache bool
}

// tablesToCreate lists every table the configuration needs from the backend:
// each declared table, and each container's other table (memcache-shaped; a
// container on a declared table takes that table's shape, as serve does). With
// itemState, the default container's table has ndbgate's item_state column
// (gateway.DefaultContainerSpec uses it when the table has it). It is not
// there by default: ndbmemcache's shape, and a read then never writes.
func tablesToCreate(cfg config.Config, itemState bool) ([]*ndbclient.Table, error) {
	demo := gateway.DemoTable(ndbValueLength)
	for i := range demo.Columns {
		// As deploy/sql and ndbmemcache's own script make it: a row written
		// by ndbmemcache, or by SQL, need not set flags, cas or expiry.
		demo.Columns[i].Nullable = i != demo.PrimaryKey[0]
	}
	if itemState {
		demo.Columns = append(demo.Columns, ndbclient.Column{Name: gateway.StateColumnName, Type: ndbclient.TypeUint64, Nullable: true})
	}
	var declared []*ndbclient.Table
	names := map[string]bool{}
	for i, tc := range cfg.Tables {
		t, err := tableSchema(tc)
		if err != nil {
			return nil, fmt.Errorf("tables[%d] (%s.%s): %w", i, tc.Database, tc.Name, err)
		}
		declared = append(declared, t)
		names[t.FullName()] = true
	}
	var out []*ndbclient.Table
	add := func(t *ndbclient.Table) {
		if !names[t.FullName()] {
			names[t.FullName()] = true
			out = append(out, t)
		}
	}
	add(demo)
	for _, c := range cfg.Containers {
		add(memcacheShape(c, ndbValueLength))
		if db, name, ok := strings.Cut(c.LargeValuesTable, "."); ok {
			add(gateway.ExternalValuesTable(db, name))
		}
	}
	return append(out, declared...), nil
}
