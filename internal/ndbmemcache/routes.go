package ndbmemcache

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// LocalDB is the local cache's schema for the tables of cache-only prefixes,
// which have no container: one table each, so that two such prefixes never
// share a stripped key, as ndbmemcache's cache holds whole keys.
const LocalDB = "ndbgate_local"

// Routes builds the gateway's routes for cfg: each prefix's container
// resolved against the backend's table, with a table of the same shape in
// the local cache where the policy uses it. A prefix that cannot be served
// (Refused, a missing table, a column ndbgate cannot use) becomes a refused
// route, so its keys fail with the reason instead of reaching another prefix.
// local may be nil only when no prefix uses the local cache (NeedsLocal).
func (cfg *Config) Routes(backend, local *ndbclient.Client, itemMax int) []gateway.Route {
	built := map[string]*gateway.Container{}
	failed := map[string]error{}
	var routes []gateway.Route
	for i, p := range cfg.Prefixes {
		rt := gateway.Route{Prefix: p.Prefix, Policy: p.Policy}
		var err error
		switch {
		case p.Refused != "":
			err = fmt.Errorf("%s", p.Refused)
		case p.Container == "":
			rt.Container, err = cacheOnly(local, fmt.Sprintf("cache_only_%d", i), itemMax)
		default:
			c, seen := built[p.Container]
			if err = failed[p.Container]; !seen && err == nil {
				c, err = cfg.Containers[p.Container].build(backend)
				built[p.Container], failed[p.Container] = c, err
			}
			if err == nil {
				err = c.ServesPolicy(p.Policy)
			}
			if err == nil && p.Policy.UsesLocal() {
				err = mirror(local, gateway.LocalTable(c))
			}
			rt.Container = c
		}
		if err != nil {
			rt.Container = nil
			rt.Refused = ndbclient.Errorf(ndbclient.CodeSchemaError, "key prefix %q is not served: %v", p.Prefix, err)
		}
		routes = append(routes, rt)
	}
	return routes
}

// NeedsLocal reports whether some prefix uses the local cache.
func (cfg *Config) NeedsLocal() bool {
	return slices.ContainsFunc(cfg.Prefixes, func(p Prefix) bool { return p.Policy.UsesLocal() })
}

// build resolves c against the backend's table.
func (c *Container) build(backend *ndbclient.Client) (*gateway.Container, error) {
	t, err := backend.Table(c.Database, c.Table)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", c.Name, err)
	}
	if c.ExpireColumn != "" {
		i := t.ColumnIndex(c.ExpireColumn)
		if i < 0 {
			return nil, fmt.Errorf("container %q: expire_time_column %q is not a column of %s", c.Name, c.ExpireColumn, t.FullName())
		}
		if ct := t.Columns[i].Type; ct != ndbclient.TypeTimestamp && (!ct.IsInteger() || ct.IsSigned()) {
			return nil, fmt.Errorf("container %q: expire_time_column %q is %s; ndbgate keeps expiry in an unsigned integer column (unix seconds) or a TIMESTAMP", c.Name, c.ExpireColumn, ct)
		}
	}
	spec := gateway.ContainerSpec{
		Name: c.Name, KeyColumns: c.KeyColumns, ValueColumns: c.ValueColumns,
		FlagsColumn: c.FlagsColumn, StaticFlags: c.StaticFlags, CasColumn: c.CasColumn,
		ExpireColumn: c.ExpireColumn, MathColumn: c.IncrementColumn,
		StateColumn: gateway.StateColumnName, StateOptional: true, LargeValues: c.LargeValuesTable != "",
	}
	gc, err := gateway.BindContainer(spec, backend, t)
	if err != nil || c.LargeValuesTable == "" {
		return gc, err
	}
	return gc, gc.KeepLargeValuesIn(c.LargeValuesTable, backend, backend.Table)
}

// mirror makes the local cache's table of t's name and shape.
func mirror(local *ndbclient.Client, t *ndbclient.Table) error {
	if local == nil {
		return fmt.Errorf("the local cache is not configured")
	}
	if _, err := local.Table(t.Database, t.Name); err == nil {
		return nil
	}
	_, err := local.Driver().CreateTable(t)
	return err
}

// cacheOnly is the container of a cache-only prefix: a memcache-shaped
// table of the local cache alone.
func cacheOnly(local *ndbclient.Client, name string, itemMax int) (*gateway.Container, error) {
	if local == nil {
		return nil, fmt.Errorf("the local cache is not configured")
	}
	t := gateway.MemcacheTable(LocalDB, name, "mkey", "string_value", itemMax)
	if got, err := local.Table(t.Database, t.Name); err == nil {
		t = got
	} else if t, err = local.Driver().CreateTable(t); err != nil {
		return nil, err
	}
	spec := gateway.DefaultContainerSpec()
	spec.Name, spec.StateColumn = name, ""
	return gateway.NewContainer(spec, t)
}

// Changes lists, one line each, what differs from old to cfg: for the log
// of a reload.
func (cfg *Config) Changes(old *Config) []string {
	var out []string
	before := map[string]Prefix{}
	for _, p := range old.Prefixes {
		before[p.Prefix] = p
	}
	for _, p := range cfg.Prefixes {
		o, had := before[p.Prefix]
		delete(before, p.Prefix)
		switch {
		case !had:
			out = append(out, fmt.Sprintf("prefix %q added: policy %s, container %q", p.Prefix, p.PolicyName, p.Container))
		case o.PolicyName != p.PolicyName || o.Policy != p.Policy || o.Container != p.Container || o.ClusterID != p.ClusterID:
			out = append(out, fmt.Sprintf("prefix %q changed: policy %s -> %s, container %q -> %q", p.Prefix, o.PolicyName, p.PolicyName, o.Container, p.Container))
		case p.Container != "" && !reflect.DeepEqual(old.Containers[p.Container], cfg.Containers[p.Container]):
			out = append(out, fmt.Sprintf("prefix %q: container %q changed", p.Prefix, p.Container))
		}
	}
	for _, o := range old.Prefixes {
		if _, gone := before[o.Prefix]; gone {
			out = append(out, fmt.Sprintf("prefix %q removed", o.Prefix))
		}
	}
	return out
}
