// Package ndbmemcache is MySQL Cluster's memcached engine's configuration:
// its schema (the tables ndb_memcache_metadata.sql makes), a reader of a
// server role's key prefixes, containers and policies from those tables, its
// sign-on, and the watch of the role's update_timestamp that reloads it.
package ndbmemcache

import (
	"slices"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// ndbmemcache's configuration schema (storage/ndb/memcache/scripts/
// ndb_memcache_metadata.sql, metadata version 1.2), for a cluster without a
// MySQL server: the tables, with the types mysqld gives them in NDB, and the
// rows the script inserts for the demo container.
// ENUM columns are NDB CHAR(1) holding the value's 1-based index, as mysqld
// stores them (ndbmemcache reads a CHAR(1) as an ENUM).

// DB is ndbmemcache's schema.
const DB = "ndbmemcache"

// enum is an ENUM column: NDB's CHAR(1).
func enum(name string) ndbclient.Column {
	return ndbclient.Column{Name: name, Type: ndbclient.TypeChar, Length: 1}
}

func varchar(name string, n int, nullable bool) ndbclient.Column {
	return ndbclient.Column{Name: name, Type: ndbclient.TypeVarchar, Length: n, Nullable: nullable}
}

func column(name string, t ndbclient.ColumnType, nullable bool) ndbclient.Column {
	return ndbclient.Column{Name: name, Type: t, Nullable: nullable}
}

// Tables are ndbmemcache's configuration tables. A primary key
// not declared USING HASH gets the ordered index mysqld gives it:
// ndbmemcache range-scans key_prefixes by it.
func Tables() []*ndbclient.Table {
	table := func(name string, pk []int, cols ...ndbclient.Column) *ndbclient.Table {
		return &ndbclient.Table{Database: DB, Name: name, Columns: cols, PrimaryKey: pk, ExpireColumn: -1, OrderedPrimaryKey: true}
	}
	return []*ndbclient.Table{
		table("meta", []int{0, 1}, varchar("application", 16, false), varchar("metadata_version", 6, false)),
		table("ndb_clusters", []int{0}, column("cluster_id", ndbclient.TypeInt32, false), varchar("ndb_connectstring", 128, true),
			column("microsec_rtt", ndbclient.TypeUint32, false)),
		table("memcache_server_roles", []int{0}, varchar("role_name", 40, false), column("role_id", ndbclient.TypeUint32, false),
			column("max_tps", ndbclient.TypeUint32, false), column("update_timestamp", ndbclient.TypeTimestamp, false)),
		table("cache_policies", []int{0}, varchar("policy_name", 40, false), enum("get_policy"), enum("set_policy"),
			enum("delete_policy"), enum("flush_from_db")),
		table("containers", []int{0}, varchar("name", 50, false), varchar("db_schema", 250, false), varchar("db_table", 250, false),
			varchar("key_columns", 250, false), varchar("value_columns", 250, true), varchar("flags", 250, false),
			varchar("increment_column", 250, true), varchar("cas_column", 250, true), varchar("expire_time_column", 250, true),
			varchar("large_values_table", 250, true)),
		table("key_prefixes", []int{0, 1}, column("server_role_id", ndbclient.TypeUint32, false), varchar("key_prefix", 250, false),
			column("cluster_id", ndbclient.TypeUint32, false), varchar("policy", 40, false), varchar("container", 50, true)),
		table("last_memcached_signon", []int{0}, column("ndb_node_id", ndbclient.TypeUint32, false), varchar("hostname", 255, false),
			varchar("server_role", 40, false), column("signon_time", ndbclient.TypeTimestamp, false)),
	}
}

// DemoDataTables are the script's demo_table_tabs (the demo_tabs container:
// three value columns and a TIMESTAMP expiry), demo_table_large and
// external_values (the demo_ext container's rows and its large values'
// parts).
func DemoDataTables() []*ndbclient.Table {
	tabs := &ndbclient.Table{Database: DB, Name: "demo_table_tabs", PrimaryKey: []int{0}, ExpireColumn: -1, Columns: []ndbclient.Column{
		column("mkey", ndbclient.TypeInt32, false), varchar("val1", 60, true), varchar("val2", 10, true),
		column("val3", ndbclient.TypeInt32, true), column("flags", ndbclient.TypeUint32, true),
		column("expire_time", ndbclient.TypeTimestamp, true),
	}}
	large := &ndbclient.Table{Database: DB, Name: "demo_table_large", PrimaryKey: []int{0}, ExpireColumn: -1, Columns: []ndbclient.Column{
		varchar("mkey", 250, false), column("flags", ndbclient.TypeUint32, true), column("cas_value", ndbclient.TypeUint64, true),
		{Name: "string_value", Type: ndbclient.TypeVarbinary, Length: 2000, Nullable: true},
		column(gateway.LargeIDColumn, ndbclient.TypeUint32, true), column(gateway.LargeSizeColumn, ndbclient.TypeUint32, true),
	}}
	return []*ndbclient.Table{tabs, large, gateway.ExternalValuesTable(DB, "external_values")}
}

// DemoRows are the rows of Tables for the demo containers demo_table,
// demo_tabs and demo_ext (on DemoDataTables): the metadata version, the
// cluster (connectstring), the server roles, the cache policies, the
// containers and their key prefixes.
// Values are in each table's column order; nil is NULL.
func DemoRows(connectstring string) map[string][][]any {
	const (
		cacheOnly, ndbOnly, caching = 1, 2, 3 // get/set/delete_policy's ENUM indexes
		flushFalse, flushTrue       = 1, 2
	)
	const now = "2026-01-01 00:00:00"
	policy := func(name string, p, flush int) []any { return []any{name, byte(p), byte(p), byte(p), byte(flush)} }
	return map[string][][]any{
		"meta":         {{"ndbmemcache", "1.2"}},
		"ndb_clusters": {{int64(0), connectstring, uint64(250)}},
		"memcache_server_roles": {
			{"default_role", uint64(0), uint64(100000), now}, {"db-only", uint64(1), uint64(100000), now},
			{"mc-only", uint64(2), uint64(100000), now}, {"ndb-caching", uint64(3), uint64(100000), now},
			{"large", uint64(4), uint64(100000), now},
		},
		"cache_policies": {
			policy("memcache-only", cacheOnly, flushFalse), policy("ndb-only", ndbOnly, flushFalse),
			policy("ndb-test", ndbOnly, flushTrue), policy("caching", caching, flushFalse),
		},
		"containers": {
			{"demo_table", "ndbmemcache", "demo_table", "mkey", "string_value", "flags", "math_value", "cas_value", nil, nil},
			{"demo_tabs", "ndbmemcache", "demo_table_tabs", "mkey", "val1,val2,val3", "flags", nil, nil, "expire_time", nil},
			{"demo_ext", "ndbmemcache", "demo_table_large", "mkey", "string_value", "flags", nil, "cas_value", nil, "ndbmemcache.external_values"},
		},
		"key_prefixes": {
			{uint64(0), "", uint64(0), "ndb-test", "demo_table"}, {uint64(1), "", uint64(0), "ndb-only", "demo_table"},
			{uint64(2), "", uint64(0), "memcache-only", nil}, {uint64(3), "", uint64(0), "caching", "demo_table"},
			{uint64(0), "t:", uint64(0), "ndb-test", "demo_tabs"}, {uint64(1), "t:", uint64(0), "ndb-only", "demo_tabs"},
			{uint64(3), "t:", uint64(0), "caching", "demo_tabs"},
			{uint64(0), "b:", uint64(0), "ndb-test", "demo_ext"}, {uint64(1), "b:", uint64(0), "ndb-only", "demo_ext"},
			{uint64(3), "b:", uint64(0), "caching", "demo_ext"}, {uint64(4), "", uint64(0), "ndb-test", "demo_ext"},
		},
	}
}

// RowOp is a write of one of DemoRows' rows into t.
func RowOp(t *ndbclient.Table, row []any) *ndbclient.Op {
	op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: t}
	for i, v := range row {
		var val ndbclient.Value
		switch v := v.(type) {
		case nil:
			val = ndbclient.Null()
		case string:
			val = ndbclient.String(v)
		case byte:
			val = ndbclient.Bytes([]byte{v})
		case int64:
			val = ndbclient.Int(v)
		case uint64:
			val = ndbclient.Uint(v)
		}
		if slices.Contains(t.PrimaryKey, i) {
			op.Key = append(op.Key, val)
		} else {
			op.Set = append(op.Set, ndbclient.ColumnValue{Column: i, Value: val})
		}
	}
	return op
}
