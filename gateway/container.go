// Package gateway is ndbgate's protocol-neutral core: containers, key-prefix
// routing, memcached semantics built from ndbclient operations, and counters.
package gateway

import (
	"fmt"
	"sort"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Access policies, containers and key-prefix routes. How a container maps
// memcache keys and values onto its columns is in columns.go.

// Access is where one kind of operation of a key prefix goes: the values
// of ndbmemcache's get_policy, set_policy and delete_policy.
type Access uint8

const (
	// AccessNDB goes to the backend only (ndbmemcache's ndb_only): the NDB
	// cluster, or the embedded engine when no cluster is configured.
	AccessNDB Access = iota
	// AccessCaching puts the local in-process cache in front of the
	// backend: a get reads the cache first and fills it from the backend on
	// a miss; a write or delete goes to the backend and drops the local copy.
	AccessCaching
	// AccessLocal goes to the local cache only (ndbmemcache's cache_only).
	AccessLocal
	// AccessDisabled refuses the operation as ndbmemcache does: a get
	// misses, a store is NOT_STORED, a delete NOT_FOUND.
	AccessDisabled
)

var accessNames = [...]string{"ndb_only", "caching", "cache_only", "disabled"}

func (a Access) String() string { return accessNames[a] }

// ParseAccess maps one of ndbmemcache's policy words to an Access.
func ParseAccess(s string) (Access, error) {
	for i, n := range accessNames {
		if s == n {
			return Access(i), nil
		}
	}
	return 0, fmt.Errorf("unknown access %q: use ndb_only, caching, cache_only or disabled", s)
}

// Policy says where each kind of a key prefix's operations goes, as
// ndbmemcache's cache_policies rows do. The zero Policy is PolicyNDB.
type Policy struct {
	Get, Set, Delete Access
	// KeepOnFlush: flush_all leaves the rows of the prefix's table in the
	// backend (ndbmemcache's flush_from_db = false). The local cache is
	// always flushed.
	KeepOnFlush bool
}

// ndbgate's own policy words, for key_prefixes in its YAML.
var (
	// PolicyNDB keeps data only in the backend.
	PolicyNDB = Policy{Get: AccessNDB, Set: AccessNDB, Delete: AccessNDB}
	// PolicyCaching reads the local cache first and fills it from the backend on a
	// miss; writes go to the backend and invalidate the local copy.
	PolicyCaching = Policy{Get: AccessCaching, Set: AccessCaching, Delete: AccessCaching}
	// PolicyLocal keeps data only in the local in-process cache.
	PolicyLocal = Policy{Get: AccessLocal, Set: AccessLocal, Delete: AccessLocal, KeepOnFlush: true}
)

// ParsePolicy maps a YAML policy word to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "", "ndb-only", "ndb":
		return PolicyNDB, nil
	case "caching":
		return PolicyCaching, nil
	case "local-only", "local":
		return PolicyLocal, nil
	}
	return Policy{}, fmt.Errorf("unknown policy %q: use ndb-only, caching or local-only", s)
}

func (p Policy) String() string {
	switch p {
	case PolicyNDB:
		return "ndb-only"
	case PolicyCaching:
		return "caching"
	case PolicyLocal:
		return "local-only"
	}
	return fmt.Sprintf("get=%s set=%s delete=%s flush_from_db=%t", p.Get, p.Set, p.Delete, !p.KeepOnFlush)
}

// UsesLocal: some operation of the policy reads or writes the local cache.
func (p Policy) UsesLocal() bool {
	for _, a := range [...]Access{p.Get, p.Set, p.Delete} {
		if a == AccessCaching || a == AccessLocal {
			return true
		}
	}
	return false
}

// UsesBackend: some operation of the policy reads or writes the backend
// (ndbmemcache's use_ndb).
func (p Policy) UsesBackend() bool {
	for _, a := range [...]Access{p.Get, p.Set, p.Delete} {
		if a == AccessCaching || a == AccessNDB {
			return true
		}
	}
	return !p.KeepOnFlush
}

// writeAccess is where a write of verb v goes. incr and decr read and write,
// so, as in ndbmemcache, they go to the local cache when the policy never
// uses the backend, to the backend when both its gets and its sets may, and
// are refused (NOT_STORED) otherwise.
func (p Policy) writeAccess(v Verb) Access {
	switch v {
	case VerbDelete, VerbUnlink:
		return p.Delete
	case VerbIncr, VerbDecr:
		backend := func(a Access) bool { return a == AccessNDB || a == AccessCaching }
		switch {
		case !p.UsesBackend():
			return AccessLocal
		case backend(p.Get) && backend(p.Set):
			return AccessNDB
		}
		return AccessDisabled
	}
	return p.Set
}

// Container maps memcached's item fields onto a table's columns, as ndbmemcache's
// containers did. Column fields are indexes into Table.Columns; -1 means absent.
type Container struct {
	Name         string
	Table        *ndbclient.Table
	KeyColumns   []int // several key columns: the key is their values joined by tabs
	ValueColumns []int // several value columns: the value is their values joined by tabs
	FlagsColumn  int
	// StaticFlags are every item's flags when FlagsColumn < 0: ndbmemcache's
	// constant flags. A store's own flags are then not kept.
	StaticFlags  uint32
	CasColumn    int
	ExpireColumn int
	MathColumn   int

	// readProj is what a get reads: value columns, then flags, cas, expire, math.
	readProj []int
	// getProj[o] is readProj without the columns o omits (Request.Omit):
	// what a get reads. getProj[0] is readProj.
	getProj [omitAll + 1][]int
	// simple is the fast path: one bytes key column and one bytes value column.
	simple bool
	// widest is the longest value text the value columns can hold.
	widest int
	// Large, when set, keeps values longer than the value column in parts
	// (KeepLargeValues).
	Large *LargeValues
}

// Prepare validates the column roles against the table and precomputes projections.
func (c *Container) Prepare() error {
	t := c.Table
	if t == nil {
		return fmt.Errorf("container %q has no table", c.Name)
	}
	if len(c.KeyColumns) == 0 || len(c.ValueColumns) == 0 {
		return fmt.Errorf("container %q needs key and value columns", c.Name)
	}
	if len(c.KeyColumns) != len(t.PrimaryKey) {
		return fmt.Errorf("container %q: key columns must be the primary key of %s", c.Name, t.FullName())
	}
	for i, k := range c.KeyColumns {
		if t.PrimaryKey[i] != k {
			return fmt.Errorf("container %q: key columns must be the primary key of %s, in order", c.Name, t.FullName())
		}
	}
	check := func(role string, col int, wantUint bool) error {
		if col < 0 {
			return nil
		}
		if col >= len(t.Columns) {
			return fmt.Errorf("container %q: %s column index %d out of range", c.Name, role, col)
		}
		if tc := &t.Columns[col]; (tc.Type == ndbclient.TypeBlob || tc.Type == ndbclient.TypeText) && tc.Unsupported != "" {
			// The backend does not drive it (NDB: BLOB/TEXT parts).
			return fmt.Errorf("container %q: %s column %q is %s", c.Name, role, tc.Name, tc.Unsupported)
		}
		if ct := t.Columns[col].Type; wantUint && (!ct.IsInteger() || ct.IsSigned()) {
			// An expire column may also be a TIMESTAMP, as ndbmemcache's demo_table_tabs has.
			if role == "expire" && ct == ndbclient.TypeTimestamp {
				return nil
			}
			return fmt.Errorf("container %q: %s column %q must be an unsigned integer, not %s", c.Name, role, t.Columns[col].Name, ct)
		}
		return nil
	}
	for _, v := range c.ValueColumns {
		if err := check("value", v, false); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		role string
		col  int
	}{{"flags", c.FlagsColumn}, {"cas", c.CasColumn}, {"expire", c.ExpireColumn}, {"math", c.MathColumn}} {
		if err := check(x.role, x.col, true); err != nil {
			return err
		}
	}
	if c.MathColumn >= 0 && !t.Columns[c.MathColumn].Nullable {
		return fmt.Errorf("container %q: math column %q must be nullable (NULL marks a non-numeric value)", c.Name, t.Columns[c.MathColumn].Name)
	}
	c.readProj = append(c.readProj[:0], c.ValueColumns...)
	for _, col := range []int{c.FlagsColumn, c.CasColumn, c.ExpireColumn, c.MathColumn} {
		if col >= 0 {
			c.readProj = append(c.readProj, col)
		}
	}
	for o := range c.getProj {
		omit := Omit(o)
		c.getProj[o] = c.getProj[o][:0]
		for _, col := range c.readProj {
			if col == c.CasColumn && omit&OmitCas != 0 || col == c.ExpireColumn && omit&OmitExpire != 0 {
				continue
			}
			c.getProj[o] = append(c.getProj[o], col)
		}
	}
	c.simple = len(c.KeyColumns) == 1 && len(c.ValueColumns) == 1 &&
		isBytesColumn(t.Columns[c.KeyColumns[0]].Type) && isBytesColumn(t.Columns[c.ValueColumns[0]].Type)
	c.widest = len(c.ValueColumns) - 1 // the tabs between them
	for _, vc := range c.ValueColumns {
		col := &t.Columns[vc]
		switch col.Type {
		case ndbclient.TypeChar, ndbclient.TypeVarchar, ndbclient.TypeBinary, ndbclient.TypeVarbinary:
			c.widest += col.Length
		case ndbclient.TypeBlob, ndbclient.TypeText:
			c.widest += 1 << 30 // bounded by the item size
		default:
			c.widest += 64 // a number's or a date's text
		}
	}
	if c.Large != nil {
		c.widest = c.Large.max
	}
	return nil
}

func isBytesColumn(t ndbclient.ColumnType) bool {
	switch t {
	case ndbclient.TypeVarchar, ndbclient.TypeVarbinary, ndbclient.TypeChar, ndbclient.TypeBinary:
		return true
	}
	return false
}

// Route maps a key prefix to a container and a policy. The prefix is stripped
// before the key reaches the table, as ndbmemcache did.
type Route struct {
	Prefix    string
	Container *Container
	Policy    Policy
	// Refused, when set, is why ndbgate cannot serve the prefix (such as an
	// ndbmemcache container with large values); its keys fail with it
	// rather than fall through to a shorter prefix. It needs no container.
	Refused error
}

// router picks the longest matching prefix. Routes are few; a sorted slice scanned
// linearly beats a map and allocates nothing.
type router struct {
	routes []Route // longest prefix first; the last may be the "" catch-all
}

func newRouter(routes []Route) (*router, error) {
	seen := map[string]bool{}
	for _, r := range routes {
		if seen[r.Prefix] {
			return nil, fmt.Errorf("key prefix %q is declared twice", r.Prefix)
		}
		seen[r.Prefix] = true
		if r.Container == nil && r.Refused == nil {
			return nil, fmt.Errorf("key prefix %q has no container", r.Prefix)
		}
	}
	sorted := append([]Route(nil), routes...)
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i].Prefix) > len(sorted[j].Prefix) })
	return &router{routes: sorted}, nil
}

// match returns the route for key, and the key with the prefix removed.
func (r *router) match(key []byte) (*Route, []byte) {
	for i := range r.routes {
		p := r.routes[i].Prefix
		if len(key) >= len(p) && string(key[:len(p)]) == p {
			return &r.routes[i], key[len(p):]
		}
	}
	return nil, nil
}
