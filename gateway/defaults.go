package gateway

import (
	"fmt"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// DefaultContainerName names the container that serves every key when no
// configuration says otherwise.
const DefaultContainerName = "default"

// DemoTable is ndbmemcache's demo container table, so rows written through
// memcache are the same rows the row API and an NDB cluster see.
func DemoTable(itemSizeMax int) *ndbclient.Table {
	return MemcacheTable("ndbmemcache", "demo_table", "mkey", "string_value", itemSizeMax)
}

// MemcacheTable is the table shape ndbgate creates on the embedded engine for a
// container whose table is not declared: key, value, flags, cas, expiry, math.
func MemcacheTable(db, name, keyCol, valueCol string, itemSizeMax int) *ndbclient.Table {
	return &ndbclient.Table{
		Database: db,
		Name:     name,
		Columns: []ndbclient.Column{
			{Name: keyCol, Type: ndbclient.TypeVarchar, Length: 250},
			{Name: valueCol, Type: ndbclient.TypeVarbinary, Length: itemSizeMax},
			{Name: "flags", Type: ndbclient.TypeUint32},
			{Name: "cas_value", Type: ndbclient.TypeUint64},
			{Name: "expire_time", Type: ndbclient.TypeUint32},
			{Name: "math_value", Type: ndbclient.TypeUint64, Nullable: true},
		},
		PrimaryKey:   []int{0},
		Eviction:     true,
		ExpireColumn: 4,
	}
}

// ContainerSpec names a container's columns; empty role names mean absent.
type ContainerSpec struct {
	Name                                             string
	KeyColumns, ValueColumns                         []string
	FlagsColumn, CasColumn, ExpireColumn, MathColumn string
	// StaticFlags: every item's flags when there is no FlagsColumn.
	StaticFlags uint32
	// StateColumn is where a backend without item state of its own (NDB)
	// keeps it (ndbclient.Table.StateColumn). StateOptional: use it only if
	// the table has it.
	StateColumn   string
	StateOptional bool
	// ExpireOptional: use ExpireColumn only if the table has it. Without
	// it items never expire, as in ndbmemcache's demo container.
	ExpireOptional bool
	// LargeValues: the container keeps large values in parts
	// (KeepLargeValues), so the gateway keeps its expiry itself
	// (ndbclient.Table.ExpiryByCaller): a backend that kept it would free
	// or replace an expired row without its parts.
	LargeValues bool
}

// StateColumnName is the item state column of ndbgate's own tables (the
// default container's, when its table has it).
const StateColumnName = "item_state"

// DefaultContainerSpec is the column mapping of ndbmemcache's demo container.
func DefaultContainerSpec() ContainerSpec {
	return ContainerSpec{
		Name: DefaultContainerName, KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"},
		FlagsColumn: "flags", CasColumn: "cas_value", ExpireColumn: "expire_time", MathColumn: "math_value",
		// ndbmemcache's demo_table has no such column; ALTER TABLE can add
		// it (deploy/sql).
		StateColumn: StateColumnName, StateOptional: true,
		// ndbmemcache's own demo_table (made by its SQL script) has none.
		ExpireOptional: true,
	}
}

// expireColumnOf is the expire column spec names in t, "" when it is
// optional and t lacks it.
func expireColumnOf(spec ContainerSpec, t *ndbclient.Table) string {
	if spec.ExpireOptional && t.ColumnIndex(spec.ExpireColumn) < 0 {
		return ""
	}
	return spec.ExpireColumn
}

// StateColumnOf is the state column spec names in t ("" for none), or an
// error when a column it requires is missing or of the wrong type.
func StateColumnOf(spec ContainerSpec, t *ndbclient.Table) (string, error) {
	if spec.StateColumn == "" || spec.StateOptional && t.ColumnIndex(spec.StateColumn) < 0 {
		return "", nil
	}
	roles := []string{spec.FlagsColumn, spec.CasColumn, spec.ExpireColumn, spec.MathColumn}
	roles = append(append(roles, spec.KeyColumns...), spec.ValueColumns...)
	for _, name := range roles {
		if name == spec.StateColumn {
			// The driver overwrites the state on every new version and
			// every recorded access: sharing a column corrupts both.
			return "", ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q: state column %q is also the container's key, value, flags, cas, expire or math column; give the item state a column of its own", spec.Name, spec.StateColumn)
		}
	}
	probe := *t
	probe.StateColumn = spec.StateColumn
	if err := probe.Validate(); err != nil {
		return "", fmt.Errorf("container %q: %w", spec.Name, err)
	}
	return spec.StateColumn, nil
}

// BindContainer resolves spec against t, a table as backend described it,
// and gives the table what a dictionary's table lacks: which column holds
// expiry (backend.BindExpireColumn: so that the driver, and a local cache
// made from the container's table, make expired rows misses) and where NDB
// keeps item state (the embedded engine keeps its own and ignores it). A
// table whose rows expire by another column than the container's is
// refused. t is left as it was when spec does not fit it.
func BindContainer(spec ContainerSpec, backend *ndbclient.Client, t *ndbclient.Table) (*Container, error) {
	c, err := NewContainer(spec, t)
	if err != nil {
		return nil, err
	}
	state, err := StateColumnOf(spec, t)
	if err != nil {
		return nil, err
	}
	if c.Table, err = backend.BindExpireColumn(t, c.ExpireColumn, spec.LargeValues); err != nil {
		return nil, fmt.Errorf("container %q: %w", spec.Name, err)
	}
	c.Table.StateColumn = state
	return c, nil
}

// NewContainer resolves a spec's column names against t.
func NewContainer(spec ContainerSpec, t *ndbclient.Table) (*Container, error) {
	c := &Container{Name: spec.Name, Table: t, StaticFlags: spec.StaticFlags}
	resolve := func(role, name string) (int, error) {
		if name == "" {
			return -1, nil
		}
		i := t.ColumnIndex(name)
		if i < 0 {
			return -1, ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q: %s column %q is not a column of %s", spec.Name, role, name, t.FullName())
		}
		return i, nil
	}
	for _, n := range spec.KeyColumns {
		i, err := resolve("key", n)
		if err != nil {
			return nil, err
		}
		c.KeyColumns = append(c.KeyColumns, i)
	}
	for _, n := range spec.ValueColumns {
		i, err := resolve("value", n)
		if err != nil {
			return nil, err
		}
		c.ValueColumns = append(c.ValueColumns, i)
	}
	var err error
	for _, x := range []struct {
		role, name string
		dst        *int
	}{{"flags", spec.FlagsColumn, &c.FlagsColumn}, {"cas", spec.CasColumn, &c.CasColumn},
		{"expire", expireColumnOf(spec, t), &c.ExpireColumn}, {"math", spec.MathColumn, &c.MathColumn}} {
		if *x.dst, err = resolve(x.role, x.name); err != nil {
			return nil, err
		}
	}
	return c, c.Prepare()
}
