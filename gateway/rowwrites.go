package gateway

import (
	"slices"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// RowInvariants are what a row-API (REST, gRPC) write to c's table keeps,
// so that memcache clients of c see it as another memcache write:
//   - a new CAS on every write: a memcache cas taken before it fails (EXISTS)
//     instead of overwriting it;
//   - the counter coherent with the value. A non-NULL math column is what
//     memcache reads (incr changes only it), so a write that sets the value
//     and not the math column mirrors the value into it, as a memcache set
//     does: its number, or NULL;
//   - the CAS and item state columns are the container's alone, and so
//     are a large-value container's ext_id and ext_size: a write that sets
//     the value clears them, so that the row holds the value it was given
//     (the parts they named are left, unnamed, not freed).
//
// Item state needs nothing more: the NDB driver starts a new version's state
// on every write that does not keep it.
func (s *Service) RowInvariants(c *Container) rowapi.Invariants {
	t := c.Table
	inv := rowapi.Invariants{Container: c.Name}
	if c.CasColumn >= 0 {
		inv.Managed = append(inv.Managed, t.Columns[c.CasColumn].Name)
	}
	if t.StateColumn != "" {
		inv.Managed = append(inv.Managed, t.StateColumn)
	}
	if lv := c.Large; lv != nil {
		inv.Managed = append(inv.Managed, t.Columns[lv.IDColumn].Name, t.Columns[lv.SizeColumn].Name)
	}
	inv.Keep = func(_ *ndbclient.Table, set []ndbclient.ColumnValue) []ndbclient.ColumnValue {
		setsValue, setsMath := false, false
		var value ndbclient.Value
		for _, cv := range set {
			if slices.Contains(c.ValueColumns, cv.Column) {
				setsValue, value = true, cv.Value
			}
			setsMath = setsMath || cv.Column == c.MathColumn
		}
		if c.MathColumn >= 0 && setsValue && !setsMath {
			math := ndbclient.Null()
			if n, ok := parseCanonicalUint(appendValueText(nil, value, ndbclient.TypeUint64)); ok && len(c.ValueColumns) == 1 && !value.IsNull() {
				math = ndbclient.Uint(n)
			}
			set = append(set, ndbclient.ColumnValue{Column: c.MathColumn, Value: math})
		}
		if lv := c.Large; lv != nil && setsValue {
			set = append(set, ndbclient.ColumnValue{Column: lv.IDColumn, Value: ndbclient.Null()},
				ndbclient.ColumnValue{Column: lv.SizeColumn, Value: ndbclient.Null()})
		}
		if c.CasColumn >= 0 {
			set = append(set, ndbclient.ColumnValue{Column: c.CasColumn, Value: ndbclient.Uint(s.nextCas())})
		}
		return set
	}
	return inv
}
