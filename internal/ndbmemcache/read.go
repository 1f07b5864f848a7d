package ndbmemcache

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Config is what one server role of ndbmemcache's configuration says, as
// its engine reads it (Config_v1.cc): the role, its key prefixes with their
// policies and clusters, and the containers they name.
type Config struct {
	Role    string
	RoleID  uint32
	MaxTPS  uint32
	Version string // metadata_version of the meta table
	// Updated is the role's update_timestamp as the driver reads it; a
	// change of it is what reloads the configuration.
	Updated    string
	Prefixes   []Prefix              // by prefix
	Containers map[string]*Container // the containers the prefixes name
}

// Prefix is a row of key_prefixes for the role.
type Prefix struct {
	Prefix     string
	ClusterID  int64
	PolicyName string
	Policy     gateway.Policy
	Container  string // "" for none: a cache-only prefix
	// Refused is why ndbgate cannot serve this prefix ("" when it can). The
	// start-up log names it, and its keys fail with it.
	Refused string
}

// Container is a row of containers.
type Container struct {
	Name, Database, Table    string
	KeyColumns, ValueColumns []string
	// FlagsColumn is the flags column's name; when the row's flags field is
	// a number instead, there is none and every item has StaticFlags.
	FlagsColumn                              string
	StaticFlags                              uint32
	IncrementColumn, CasColumn, ExpireColumn string
	LargeValuesTable                         string
}

// Reader reads the configuration through a client of the cluster that holds
// it. Connectstring is the cluster ndbgate serves: a prefix whose
// ndb_clusters row names another cluster is refused. Empty (the embedded
// engine standing in for the cluster) serves every cluster's prefixes.
type Reader struct {
	Client        *ndbclient.Client
	Connectstring string
	Metrics       *Metrics // nil: none
}

// maxRows bounds what a scan of a configuration table may return.
const maxRows = 100000

// versions are the metadata versions ndbmemcache 7.5 reads, newest first.
var versions = []string{"1.2", "1.1", "1.0"}

// Read reads role's configuration. An error says what is missing or wrong
// in the configuration tables and what to fix; a prefix that is valid for
// ndbmemcache but that ndbgate cannot serve is not an error but Refused.
func (rd Reader) Read(ctx context.Context, role string) (*Config, error) {
	cfg := &Config{Role: role, Containers: map[string]*Container{}}
	meta, err := rd.table("meta")
	if err != nil {
		return nil, err
	}
	for _, v := range versions {
		row, err := rd.read(ctx, meta, nil, ndbclient.String("ndbmemcache"), ndbclient.String(v))
		if err != nil {
			return nil, err
		}
		if row != nil {
			cfg.Version = v
			break
		}
	}
	if cfg.Version == "" {
		return nil, fmt.Errorf("%s.meta has no ('ndbmemcache', '1.2') row, nor 1.1 or 1.0: load ndb_memcache_metadata.sql", DB)
	}

	roles, err := rd.table("memcache_server_roles")
	if err != nil {
		return nil, err
	}
	cols := columnsOf(roles, "role_id", "max_tps", "update_timestamp")
	row, err := rd.read(ctx, roles, cols, ndbclient.String(role))
	if err != nil {
		return nil, err
	}
	if row == nil {
		known, _ := rd.scan(ctx, roles, columnsOf(roles, "role_name"))
		var names []string
		for _, r := range known {
			names = append(names, text(r[0]))
		}
		slices.Sort(names)
		return nil, fmt.Errorf("server role %q is not in %s.memcache_server_roles (roles there: %s)", role, DB, strings.Join(names, ", "))
	}
	cfg.RoleID, cfg.MaxTPS, cfg.Updated = uint32(row[0].Uint()), uint32(row[1].Uint()), text(row[2])

	policies, err := rd.policies(ctx)
	if err != nil {
		return nil, err
	}
	clusters, err := rd.clusters(ctx)
	if err != nil {
		return nil, err
	}

	prefixes, err := rd.table("key_prefixes")
	if err != nil {
		return nil, err
	}
	rows, err := rd.scan(ctx, prefixes, columnsOf(prefixes, "server_role_id", "key_prefix", "cluster_id", "policy", "container"))
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if uint32(r[0].Uint()) != cfg.RoleID {
			continue
		}
		p := Prefix{Prefix: text(r[1]), ClusterID: r[2].Int(), PolicyName: text(r[3])}
		if !r[4].IsNull() {
			p.Container = text(r[4])
		}
		where := fmt.Sprintf("%s.key_prefixes (role %q, prefix %q)", DB, role, p.Prefix)
		pol, ok := policies[p.PolicyName]
		if !ok {
			return nil, fmt.Errorf("%s: policy %q is not in %s.cache_policies", where, p.PolicyName, DB)
		}
		p.Policy = pol
		if !pol.UsesBackend() {
			if p.Container != "" {
				return nil, fmt.Errorf("%s: policy %q does not use NDB, so container must be NULL (it is %q)", where, p.PolicyName, p.Container)
			}
			cfg.Prefixes = append(cfg.Prefixes, p)
			continue
		}
		if p.Container == "" {
			return nil, fmt.Errorf("%s: policy %q uses NDB, so it needs a container", where, p.PolicyName)
		}
		cs, known := clusters[p.ClusterID]
		if !known {
			return nil, fmt.Errorf("%s: cluster_id %d is not in %s.ndb_clusters", where, p.ClusterID, DB)
		}
		if cs != "" && rd.Connectstring != "" && cs != rd.Connectstring {
			p.Refused = fmt.Sprintf("its cluster %d (%s) is not the one ndbgate serves (%s); run an ndbgate per cluster", p.ClusterID, cs, rd.Connectstring)
		}
		c, ok := cfg.Containers[p.Container]
		if !ok {
			if c, err = rd.container(ctx, p.Container); err != nil {
				return nil, err
			}
			if c == nil {
				return nil, fmt.Errorf("%s: container %q is not in %s.containers", where, p.Container, DB)
			}
			cfg.Containers[p.Container] = c
		}
		if p.Refused == "" {
			p.Refused = c.unserved()
		}
		cfg.Prefixes = append(cfg.Prefixes, p)
	}
	slices.SortFunc(cfg.Prefixes, func(a, b Prefix) int { return strings.Compare(a.Prefix, b.Prefix) })
	return cfg, nil
}

// unserved is why ndbgate cannot serve c, or "".
func (c *Container) unserved() string {
	switch {
	case len(c.ValueColumns) == 0:
		return fmt.Sprintf("container %q has no value columns (only an increment column), which ndbgate does not serve", c.Name)
	}
	return ""
}

// policies reads cache_policies: ENUM('cache_only','ndb_only','caching',
// 'disabled') columns, which NDB holds as the value's index from 1, and
// flush_from_db ENUM('false','true').
func (rd Reader) policies(ctx context.Context) (map[string]gateway.Policy, error) {
	t, err := rd.table("cache_policies")
	if err != nil {
		return nil, err
	}
	rows, err := rd.scan(ctx, t, columnsOf(t, "policy_name", "get_policy", "set_policy", "delete_policy", "flush_from_db"))
	if err != nil {
		return nil, err
	}
	byIndex := [...]gateway.Access{1: gateway.AccessLocal, 2: gateway.AccessNDB, 3: gateway.AccessCaching, 4: gateway.AccessDisabled}
	out := map[string]gateway.Policy{}
	for _, r := range rows {
		name := text(r[0])
		var acc [3]gateway.Access
		for i := range acc {
			n := enumIndex(r[1+i])
			if n < 1 || n >= len(byIndex) {
				return nil, fmt.Errorf("%s.cache_policies (%q): %s holds ENUM index %d, not 1..4", DB, name, t.Columns[columnsOf(t, "get_policy", "set_policy", "delete_policy")[i]].Name, n)
			}
			acc[i] = byIndex[n]
		}
		out[name] = gateway.Policy{Get: acc[0], Set: acc[1], Delete: acc[2], KeepOnFlush: enumIndex(r[4]) != 2}
	}
	return out, nil
}

// clusters reads ndb_clusters: cluster_id to connectstring ("" for NULL).
func (rd Reader) clusters(ctx context.Context) (map[int64]string, error) {
	t, err := rd.table("ndb_clusters")
	if err != nil {
		return nil, err
	}
	rows, err := rd.scan(ctx, t, columnsOf(t, "cluster_id", "ndb_connectstring"))
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for _, r := range rows {
		id := r[0].Int()
		if r[0].Kind == ndbclient.KindUint {
			id = int64(r[0].Uint())
		}
		out[id] = ""
		if !r[1].IsNull() {
			out[id] = text(r[1])
		}
	}
	return out, nil
}

// container reads one row of containers, or nil when there is none.
func (rd Reader) container(ctx context.Context, name string) (*Container, error) {
	t, err := rd.table("containers")
	if err != nil {
		return nil, err
	}
	names := []string{"db_schema", "db_table", "key_columns", "value_columns", "flags", "increment_column", "cas_column", "expire_time_column"}
	if t.ColumnIndex("large_values_table") >= 0 { // metadata 1.2
		names = append(names, "large_values_table")
	}
	row, err := rd.read(ctx, t, columnsOf(t, names...), ndbclient.String(name))
	if err != nil || row == nil {
		return nil, err
	}
	opt := func(i int) string {
		if i >= len(row) || row[i].IsNull() {
			return ""
		}
		return text(row[i])
	}
	c := &Container{Name: name, Database: opt(0), Table: opt(1), KeyColumns: list(opt(2)), ValueColumns: list(opt(3)),
		IncrementColumn: opt(5), CasColumn: opt(6), ExpireColumn: opt(7), LargeValuesTable: opt(8)}
	// As ndbmemcache: a number is every item's flags, anything else a column.
	if n, err := strconv.ParseUint(strings.TrimSpace(opt(4)), 10, 32); err == nil {
		c.StaticFlags = uint32(n)
	} else {
		c.FlagsColumn = opt(4)
	}
	return c, nil
}

// list splits a comma-separated column list, as ndbmemcache's TableSpec.
func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RoleUpdated reads the role's update_timestamp: what the watch compares.
func (rd Reader) RoleUpdated(ctx context.Context, role string) (string, error) {
	roles, err := rd.table("memcache_server_roles")
	if err != nil {
		return "", err
	}
	row, err := rd.read(ctx, roles, columnsOf(roles, "update_timestamp"), ndbclient.String(role))
	if err != nil {
		return "", err
	}
	if row == nil {
		return "", fmt.Errorf("server role %q is no longer in %s.memcache_server_roles", role, DB)
	}
	return text(row[0]), nil
}

func (rd Reader) table(name string) (*ndbclient.Table, error) {
	t, err := rd.Client.Table(DB, name)
	if err != nil {
		return nil, fmt.Errorf("ndbmemcache's configuration table %s.%s: %w (load ndb_memcache_metadata.sql through a mysqld, or run ndbgate ndb-create-tables --ndbmemcache-config)", DB, name, err)
	}
	return t, nil
}

// columnsOf maps names to t's column indexes; a missing one is -1, which
// read and scan refuse with the table's name.
func columnsOf(t *ndbclient.Table, names ...string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		out[i] = t.ColumnIndex(n)
	}
	return out
}

func checkColumns(t *ndbclient.Table, cols []int) error {
	if slices.Contains(cols, -1) {
		return fmt.Errorf("%s lacks a column ndbmemcache's schema has: load ndb_memcache_metadata.sql", t.FullName())
	}
	return nil
}

// read is a committed primary-key read of cols (nil: none, an existence
// check); nil, nil when the row does not exist.
func (rd Reader) read(ctx context.Context, t *ndbclient.Table, cols []int, key ...ndbclient.Value) ([]ndbclient.Value, error) {
	if err := checkColumns(t, cols); err != nil {
		return nil, err
	}
	op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: t, Key: key, Read: cols}
	err := rd.Client.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{op}})
	if err == nil {
		err = op.Err
	}
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeOK:
	case ndbclient.CodeNotFound:
		return nil, nil
	default:
		return nil, fmt.Errorf("reading %s: %w", t.FullName(), err)
	}
	row := slices.Clone(op.Row)
	for i := range row {
		if row[i].Kind == ndbclient.KindBytes {
			row[i].B = slices.Clone(row[i].B)
		}
	}
	if row == nil {
		row = []ndbclient.Value{}
	}
	return row, nil
}

func (rd Reader) scan(ctx context.Context, t *ndbclient.Table, cols []int) ([][]ndbclient.Value, error) {
	if err := checkColumns(t, cols); err != nil {
		return nil, err
	}
	s, ok := rd.Client.Driver().(ndbclient.RowScanner)
	if !ok {
		return nil, fmt.Errorf("the %s driver cannot scan %s", rd.Client.Driver().Name(), t.FullName())
	}
	rows, err := s.ScanRows(ctx, t, cols, maxRows)
	if err != nil {
		return nil, fmt.Errorf("scanning %s: %w", t.FullName(), err)
	}
	return rows, nil
}

// text is a string column's value.
func text(v ndbclient.Value) string { return string(v.B) }

// enumIndex is an ENUM's index: NDB holds it in a CHAR(1) (or an integer,
// for a table made otherwise).
func enumIndex(v ndbclient.Value) int {
	switch v.Kind {
	case ndbclient.KindBytes:
		if len(v.B) == 0 {
			return 0
		}
		return int(v.B[0])
	case ndbclient.KindInt, ndbclient.KindUint:
		return int(v.Uint())
	}
	return 0
}
