package ndbmemcache

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// The tables ndb_memcache_metadata.sql makes for its containers, with the
// types mysqld gives them, and one of this test's own: a two-column key, two
// value columns and constant flags.
func dataTables() []*ndbclient.Table {
	col := func(name string, t ndbclient.ColumnType, n int, nullable bool) ndbclient.Column {
		return ndbclient.Column{Name: name, Type: t, Length: n, Nullable: nullable}
	}
	return []*ndbclient.Table{
		{Database: DB, Name: "demo_table", PrimaryKey: []int{0}, ExpireColumn: -1, Columns: []ndbclient.Column{
			col("mkey", ndbclient.TypeVarchar, 250, false), col("math_value", ndbclient.TypeUint64, 0, true),
			col("flags", ndbclient.TypeUint32, 0, true), col("cas_value", ndbclient.TypeUint64, 0, true),
			col("string_value", ndbclient.TypeVarbinary, 13500, true)}},
		// Made without an expire column, as NDB's dictionary describes every
		// table: demo_tabs' container binds expire_time.
		{Database: DB, Name: "demo_table_tabs", PrimaryKey: []int{0}, ExpireColumn: -1, Columns: []ndbclient.Column{
			col("mkey", ndbclient.TypeInt32, 0, false), col("val1", ndbclient.TypeVarchar, 60, true),
			col("val2", ndbclient.TypeVarchar, 10, true), col("val3", ndbclient.TypeInt32, 0, true),
			col("flags", ndbclient.TypeUint32, 0, true), col("expire_time", ndbclient.TypeTimestamp, 0, true)}},
		{Database: DB, Name: "demo_table_large", PrimaryKey: []int{0}, ExpireColumn: -1, Columns: []ndbclient.Column{
			col("mkey", ndbclient.TypeVarchar, 250, false), col("flags", ndbclient.TypeUint32, 0, true),
			col("cas_value", ndbclient.TypeUint64, 0, true), col("string_value", ndbclient.TypeVarbinary, 2000, true),
			col("ext_id", ndbclient.TypeUint32, 0, true), col("ext_size", ndbclient.TypeUint32, 0, true)}},
		gateway.ExternalValuesTable(DB, "external_values"),
		{Database: "app", Name: "pairs", PrimaryKey: []int{0, 1}, ExpireColumn: -1, Columns: []ndbclient.Column{
			col("region", ndbclient.TypeVarchar, 20, false), col("id", ndbclient.TypeInt32, 0, false),
			col("name", ndbclient.TypeVarchar, 40, true), col("city", ndbclient.TypeVarchar, 40, true)}},
	}
}

// scriptRows are the rows ndb_memcache_metadata.sql inserts beyond
// DemoRows, and this test's own container and prefixes.
func scriptRows() map[string][][]any {
	const cacheOnly, ndbOnly, caching, disabled = 1, 2, 3, 4
	pol := func(name string, g, s, d byte) []any { return []any{name, g, s, d, byte(1)} }
	return map[string][][]any{
		"memcache_server_roles": {{"large", uint64(4), uint64(100000), "2026-01-01 00:00:00"}},
		"cache_policies": {
			pol("caching-with-local-deletes", caching, caching, cacheOnly),
			pol("ndb-read-only", ndbOnly, disabled, disabled),
		},
		"containers": {
			{"demo_ext", DB, "demo_table_large", "mkey", "string_value", "flags", nil, "cas_value", nil, "ndbmemcache.external_values"},
			{"pairs", "app", "pairs", "region, id", "name,city", "17", nil, nil, nil, nil},
		},
		"key_prefixes": {
			{uint64(0), "mc:", uint64(0), "memcache-only", nil},
			{uint64(0), "b:", uint64(0), "ndb-test", "demo_ext"},
			{uint64(0), "p:", uint64(0), "ndb-test", "pairs"},
			{uint64(0), "ro:", uint64(0), "ndb-read-only", "demo_table"},
			{uint64(0), "cld:", uint64(0), "caching-with-local-deletes", "demo_table"},
			{uint64(4), "", uint64(0), "ndb-test", "demo_ext"},
		},
	}
}

type fixture struct {
	backend, local *ndbclient.Client
	rd             Reader
	tables         map[string]*ndbclient.Table
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{tables: map[string]*ndbclient.Table{}}
	for _, cl := range []**ndbclient.Client{&f.backend, &f.local} {
		e := embedded.New(embedded.Config{Partitions: 4})
		t.Cleanup(func() { _ = e.Close() })
		*cl = ndbclient.NewClient(e)
	}
	for _, tbl := range append(Tables(), dataTables()...) {
		got, err := f.backend.Driver().CreateTable(tbl)
		require.NoError(t, err, tbl.FullName())
		f.tables[tbl.Name] = got
	}
	f.write(t, DemoRows("127.0.0.1:1186"))
	f.write(t, scriptRows())
	f.rd = Reader{Client: f.backend, Connectstring: "127.0.0.1:1186"}
	return f
}

// write writes rows of configuration tables, as mysqld's INSERTs would.
func (f *fixture) write(t *testing.T, rows map[string][][]any) {
	t.Helper()
	for name, rs := range rows {
		b := &ndbclient.Batch{}
		for _, r := range rs {
			b.Ops = append(b.Ops, RowOp(f.tables[name], r))
		}
		require.NoError(t, f.backend.Execute(context.Background(), b))
		for _, op := range b.Ops {
			require.NoError(t, op.Err, name)
		}
	}
}

func TestReadBuildsTheRolesPrefixesAsNdbmemcacheDoes(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.rd.Read(context.Background(), "default_role")
	require.NoError(t, err)
	assert.Equal(t, "1.2", cfg.Version)
	assert.Equal(t, uint32(0), cfg.RoleID)
	assert.Equal(t, uint32(100000), cfg.MaxTPS)
	var got []string
	for _, p := range cfg.Prefixes {
		got = append(got, p.Prefix+"="+p.PolicyName+"/"+p.Container)
	}
	assert.Equal(t, []string{"=ndb-test/demo_table", "b:=ndb-test/demo_ext", "cld:=caching-with-local-deletes/demo_table",
		"mc:=memcache-only/", "p:=ndb-test/pairs", "ro:=ndb-read-only/demo_table", "t:=ndb-test/demo_tabs"}, got)

	byPrefix := map[string]Prefix{}
	for _, p := range cfg.Prefixes {
		byPrefix[p.Prefix] = p
	}
	assert.Equal(t, gateway.Policy{Get: gateway.AccessNDB, Set: gateway.AccessNDB, Delete: gateway.AccessNDB}, byPrefix[""].Policy, "ndb-test flushes from the database")
	assert.Equal(t, gateway.Policy{Get: gateway.AccessCaching, Set: gateway.AccessCaching, Delete: gateway.AccessLocal, KeepOnFlush: true}, byPrefix["cld:"].Policy)
	assert.Equal(t, gateway.Policy{Get: gateway.AccessNDB, Set: gateway.AccessDisabled, Delete: gateway.AccessDisabled, KeepOnFlush: true}, byPrefix["ro:"].Policy)
	assert.Equal(t, gateway.PolicyLocal, byPrefix["mc:"].Policy)
	assert.Empty(t, byPrefix["b:"].Refused, "large values are served")
	assert.Equal(t, "ndbmemcache.external_values", cfg.Containers["demo_ext"].LargeValuesTable)
	assert.Empty(t, byPrefix["t:"].Refused, "demo_tabs, with its TIMESTAMP expiry")

	pairs := cfg.Containers["pairs"]
	assert.Equal(t, []string{"region", "id"}, pairs.KeyColumns)
	assert.Equal(t, []string{"name", "city"}, pairs.ValueColumns)
	assert.Equal(t, "", pairs.FlagsColumn)
	assert.Equal(t, uint32(17), pairs.StaticFlags, "a number in flags is every item's flags")
	tabs := cfg.Containers["demo_tabs"]
	assert.Equal(t, "flags", tabs.FlagsColumn)
	assert.Equal(t, "expire_time", tabs.ExpireColumn)
	assert.Equal(t, "math_value", cfg.Containers["demo_table"].IncrementColumn)
	assert.Equal(t, "cas_value", cfg.Containers["demo_table"].CasColumn)

	large, err := f.rd.Read(context.Background(), "large")
	require.NoError(t, err)
	require.Len(t, large.Prefixes, 1)
	assert.Empty(t, large.Prefixes[0].Refused)
}

func TestReadSaysWhatIsWrong(t *testing.T) {
	f := newFixture(t)
	_, err := f.rd.Read(context.Background(), "no-such-role")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `server role "no-such-role" is not in ndbmemcache.memcache_server_roles (roles there: db-only, default_role, large, mc-only, ndb-caching)`)

	f.write(t, map[string][][]any{"key_prefixes": {{uint64(1), "bad:", uint64(0), "no-such-policy", "demo_table"}}})
	_, err = f.rd.Read(context.Background(), "db-only")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `prefix "bad:"): policy "no-such-policy" is not in ndbmemcache.cache_policies`)

	f.write(t, map[string][][]any{"key_prefixes": {{uint64(1), "bad:", uint64(7), "ndb-only", "demo_table"}}})
	_, err = f.rd.Read(context.Background(), "db-only")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster_id 7 is not in ndbmemcache.ndb_clusters")

	f.write(t, map[string][][]any{"key_prefixes": {{uint64(1), "bad:", uint64(0), "memcache-only", "demo_table"}}})
	_, err = f.rd.Read(context.Background(), "db-only")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `policy "memcache-only" does not use NDB, so container must be NULL`)

	f.write(t, map[string][][]any{"key_prefixes": {{uint64(1), "bad:", uint64(0), "ndb-only", "nothing"}}})
	_, err = f.rd.Read(context.Background(), "db-only")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `container "nothing" is not in ndbmemcache.containers`)

	other := Reader{Client: f.backend, Connectstring: "10.0.0.9:1186"}
	cfg, err := other.Read(context.Background(), "default_role")
	require.NoError(t, err)
	assert.Contains(t, cfg.Prefixes[0].Refused, "is not the one ndbgate serves", "a prefix of another cluster is refused")
}

// A table's rows expire by one column: a container that names another
// than the one a container bound before it is refused, on NDB (where the
// container's column goes in the table every op carries) and on the
// embedded engine (BindExpireColumn) alike.
func TestContainersOfATableShareItsExpireColumn(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.rd.Read(context.Background(), "default_role")
	require.NoError(t, err)
	svc := f.service(t, cfg) // binds demo_table_tabs.expire_time (demo_tabs)
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "t:1", "a\tb\t1", nil).Outcome)

	f.write(t, map[string][][]any{
		"containers":   {{"tabs_by_flags", DB, "demo_table_tabs", "mkey", "val1", "0", nil, nil, "flags", nil}},
		"key_prefixes": {{uint64(1), "tf:", uint64(0), "ndb-only", "tabs_by_flags"}},
	})
	cfg, err = f.rd.Read(context.Background(), "db-only")
	require.NoError(t, err)
	var refused error
	for _, rt := range cfg.Routes(f.backend, f.local, 1<<20) {
		if rt.Prefix == "tf:" {
			refused = rt.Refused
		}
	}
	require.Error(t, refused)
	assert.Contains(t, refused.Error(), `key prefix "tf:" is not served: container "tabs_by_flags": SchemaError: table ndbmemcache.demo_table_tabs keeps expiry in column "expire_time", not "flags": every container of a table must name the same expire column`)
}

// service serves cfg's routes as ndbgate serve does.
func (f *fixture) service(t *testing.T, cfg *Config) *gateway.Service {
	svc, err := gateway.New(gateway.Options{Backend: f.backend, Local: f.local, Routes: cfg.Routes(f.backend, f.local, 1<<20)})
	require.NoError(t, err)
	return svc
}

func do(t *testing.T, svc *gateway.Service, verb gateway.Verb, key, value string, set func(*gateway.Request)) *gateway.Request {
	t.Helper()
	r := svc.NewRequest()
	r.Verb = verb
	r.AddKey([]byte(key))
	r.SetValue([]byte(value))
	if set != nil {
		set(r)
	}
	svc.Run(r)
	return r
}

func TestRoleIsServedWithItsContainersAndPolicies(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.rd.Read(context.Background(), "default_role")
	require.NoError(t, err)
	svc := f.service(t, cfg)

	// A two-column key and two value columns, tab-separated, with constant flags.
	r := do(t, svc, gateway.VerbSet, "p:eu\t42", "Ada\tLondon", func(r *gateway.Request) { r.Flags = 5 })
	require.Equal(t, gateway.OutcomeStored, r.Outcome, "%v", r.Err)
	r = do(t, svc, gateway.VerbGet, "p:eu\t42", "", nil)
	require.True(t, r.Items[0].Hit)
	assert.Equal(t, "Ada\tLondon", string(r.Items[0].Value))
	assert.Equal(t, uint32(17), r.Items[0].Flags, "the container's constant flags, not the store's")
	op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: f.tables["pairs"], Key: []ndbclient.Value{ndbclient.String("eu"), ndbclient.Int(42)}, Read: []int{2, 3}}
	require.NoError(t, f.backend.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
	require.NoError(t, op.Err)
	assert.Equal(t, "Ada", op.Row[0].Str())
	assert.Equal(t, "London", op.Row[1].Str())

	// The catch-all "" is demo_table under ndb-test.
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "k", "v", nil).Outcome)
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "n", "5", nil).Outcome)
	assert.Equal(t, uint64(8), do(t, svc, gateway.VerbIncr, "n", "", func(r *gateway.Request) { r.Delta = 3 }).Number, "in the increment column")
	assert.Equal(t, gateway.OutcomeNotStored, do(t, svc, gateway.VerbSet, "ro:k", "x", nil).Outcome, "ndb-read-only")
	assert.Equal(t, "v", string(do(t, svc, gateway.VerbGet, "ro:k", "", nil).Items[0].Value))
	assert.Equal(t, gateway.OutcomeNotFound, do(t, svc, gateway.VerbDelete, "ro:k", "", nil).Outcome)

	// memcache-only: the local cache alone, and not the demo_table's rows.
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "mc:k", "local", nil).Outcome)
	assert.Equal(t, "local", string(do(t, svc, gateway.VerbGet, "mc:k", "", nil).Items[0].Value))
	assert.Equal(t, "v", string(do(t, svc, gateway.VerbGet, "k", "", nil).Items[0].Value))

	// demo_ext: a value longer than string_value's 2,000 bytes goes in
	// external_values' parts, as ndbmemcache puts it there.
	long := strings.Repeat("0123456789", 3000)
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "b:k", long, nil).Outcome)
	assert.Equal(t, long, string(do(t, svc, gateway.VerbGet, "b:k", "", nil).Items[0].Value))
	rows, err := f.backend.Driver().(ndbclient.RowScanner).ScanRows(context.Background(), f.tables["external_values"], []int{0, 1}, 100)
	require.NoError(t, err)
	assert.Len(t, rows, 3, "30,000 bytes in parts of 13,950")

	// demo_tabs: three value columns joined by tabs, and expiry in
	// `expire_time TIMESTAMP NULL`, as unix seconds there, UTC.
	at := time.Now().Add(time.Hour).Unix()
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "t:1", "hello\tworld\t7", func(r *gateway.Request) { r.Flags, r.Exptime = 5, at }).Outcome)
	r = do(t, svc, gateway.VerbGet, "t:1", "", nil)
	require.True(t, r.Items[0].Hit)
	assert.Equal(t, "hello\tworld\t7", string(r.Items[0].Value))
	assert.Equal(t, uint32(5), r.Items[0].Flags)
	assert.Equal(t, uint32(at), r.Items[0].Expire)
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "t:2", "a\tb\t1", nil).Outcome)
	tabs := f.tables["demo_table_tabs"]
	expiry := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tabs, Key: []ndbclient.Value{ndbclient.Int(1)}, Read: []int{tabs.ColumnIndex("expire_time")}}
	never := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tabs, Key: []ndbclient.Value{ndbclient.Int(2)}, Read: []int{tabs.ColumnIndex("expire_time")}}
	require.NoError(t, f.backend.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{expiry, never}}))
	require.NoError(t, expiry.Err)
	assert.Equal(t, time.Unix(at, 0).UTC().Format(time.DateTime), expiry.Row[0].Str(), "the row holds the expiry as a TIMESTAMP")
	require.NoError(t, never.Err)
	assert.True(t, never.Row[0].IsNull(), "no expiry: NULL")
	for _, exptime := range []int64{-1, time.Now().Unix() - 10} {
		require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "t:3", "x\ty\t3", func(r *gateway.Request) { r.Exptime = exptime }).Outcome)
		assert.False(t, do(t, svc, gateway.VerbGet, "t:3", "", nil).Items[0].Hit, "exptime %d: already expired", exptime)
	}

	// flush_all: ndb-test flushes demo_table; memcache-only's cache goes too.
	require.NoError(t, svc.FlushAll(0))
	assert.False(t, do(t, svc, gateway.VerbGet, "k", "", nil).Items[0].Hit)
	assert.False(t, do(t, svc, gateway.VerbGet, "mc:k", "", nil).Items[0].Hit)
}

func TestSignOnWritesNdbmemcachesRow(t *testing.T) {
	f := newFixture(t)
	now := time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)
	require.NoError(t, f.rd.SignOn(context.Background(), "default_role", "gw-1", now))
	tbl := f.tables["last_memcached_signon"]
	op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.Uint(0)}, Read: []int{1, 2, 3}}
	require.NoError(t, f.backend.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
	require.NoError(t, op.Err)
	assert.Equal(t, "gw-1 default_role 2026-11-28 12:30:00", op.Row[0].Str()+" "+op.Row[1].Str()+" "+op.Row[2].Str())
}

func TestWatchReloadsWhenTheRolesTimestampChanges(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.rd.Read(context.Background(), "db-only")
	require.NoError(t, err)
	svc := f.service(t, cfg)
	applied := make(chan *Config, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logged := &syncWriter{b: &strings.Builder{}}
	log := slog.New(slog.NewTextHandler(logged, nil))
	go f.rd.Watch(ctx, cfg, 5*time.Millisecond, func(next *Config) error {
		if err := svc.SetRoutes(next.Routes(f.backend, f.local, 1<<20)); err != nil {
			return err
		}
		applied <- next
		return nil
	}, log)

	// A new prefix without a new timestamp is not seen, as in ndbmemcache.
	f.write(t, map[string][][]any{"key_prefixes": {{uint64(1), "new:", uint64(0), "ndb-read-only", "demo_table"}}})
	time.Sleep(50 * time.Millisecond)
	require.Empty(t, applied)
	require.Equal(t, gateway.OutcomeStored, do(t, svc, gateway.VerbSet, "new:k", "v", nil).Outcome, "still the old routes: \"\" serves new:k")

	f.write(t, map[string][][]any{"memcache_server_roles": {{"db-only", uint64(1), uint64(100000), "2026-11-28 12:00:00"}}})
	select {
	case next := <-applied:
		assert.Len(t, next.Prefixes, 4, "\"\", b:, t: and new:")
	case <-time.After(5 * time.Second):
		t.Fatal("no reload after the role's update_timestamp changed")
	}
	assert.Equal(t, gateway.OutcomeNotStored, do(t, svc, gateway.VerbSet, "new:k", "x", nil).Outcome, "new: is ndb-read-only now")
	cancel()
	assert.Eventually(t, func() bool { return strings.Contains(logged.String(), `prefix \"new:\" added: policy ndb-read-only`) }, time.Second, 10*time.Millisecond, logged.String())
}

// syncWriter lets the test read what the watch's goroutine logs.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
