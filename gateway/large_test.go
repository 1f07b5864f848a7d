package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// The large-value tables of these tests: ndbmemcache's demo_table_large and
// external_values, with a row that holds 8 bytes and parts of 10, so that
// a few dozen bytes take several parts.
const (
	largeInline = 8
	largePart   = 10
	largeMax    = 256 * largePart
)

func largeTables() (main, parts *ndbclient.Table) {
	main = &ndbclient.Table{Database: "ndbmemcache", Name: "demo_table_large", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "mkey", Type: ndbclient.TypeVarchar, Length: 250},
			{Name: "flags", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "cas_value", Type: ndbclient.TypeUint64, Nullable: true},
			{Name: "string_value", Type: ndbclient.TypeVarbinary, Length: largeInline, Nullable: true},
			{Name: "ext_id", Type: ndbclient.TypeUint32, Nullable: true},
			{Name: "ext_size", Type: ndbclient.TypeUint32, Nullable: true},
		}}
	parts = gateway.ExternalValuesTable("ndbmemcache", "external_values")
	parts.Columns[2].Length = largePart
	return main, parts
}

type largeHarness struct {
	*harness
	backendDrv ndbclient.Driver
	main       *ndbclient.Table
	parts      *ndbclient.Table
}

// newLargeHarness serves every key from the large container: "c:" keys
// under the caching policy, the others ndb-only.
func newLargeHarness(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver) *largeHarness {
	return newLargeHarnessExpiring(t, wrap, false)
}

// newLargeHarnessExpiring is newLargeHarness, with an expire column in
// the container if expiring, on h.clock.
func newLargeHarnessExpiring(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver, expiring bool) *largeHarness {
	clock := &atomic.Int64{}
	clock.Store(1_700_000_000)
	newEngine := func() *embedded.Engine {
		e := embedded.New(embedded.Config{Partitions: 4, Nodes: 2, Now: func() uint32 { return uint32(clock.Load()) }})
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	be, le := newEngine(), newEngine()
	mainDef, partsDef := largeTables()
	if expiring {
		mainDef.Columns = append(mainDef.Columns, ndbclient.Column{Name: "expire_time", Type: ndbclient.TypeUint32, Nullable: true})
	}
	main, err := be.CreateTable(mainDef)
	require.NoError(t, err)
	parts, err := be.CreateTable(partsDef)
	require.NoError(t, err)
	spec := gateway.ContainerSpec{Name: "demo_ext", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}, FlagsColumn: "flags", CasColumn: "cas_value", LargeValues: true}
	if expiring {
		spec.ExpireColumn = "expire_time"
	}
	backendDrv := wrap(be)
	backend := ndbclient.NewClient(backendDrv)
	c, err := gateway.BindContainer(spec, backend, main)
	require.NoError(t, err)
	require.NoError(t, c.KeepLargeValues(parts))
	_, err = le.CreateTable(gateway.LocalTable(c))
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{
		Backend: backend, Local: ndbclient.NewClient(wrap(le)), ItemSizeMax: itemMax,
		Routes: []gateway.Route{{Prefix: "", Container: c}, {Prefix: "c:", Container: c, Policy: gateway.PolicyCaching}},
		Now:    func() time.Time { return time.Unix(clock.Load(), 0) },
	})
	require.NoError(t, err)
	h := &harness{svc: svc, backend: backend, clock: clock, done: make(chan struct{}, 1)}
	h.req = svc.NewRequest()
	h.req.Done = func(*gateway.Request) { h.done <- struct{}{} }
	return &largeHarness{harness: h, backendDrv: be, main: main, parts: parts}
}

// expiring sets a request's exptime.
func expiring(exptime int64) func(r *gateway.Request) {
	return func(r *gateway.Request) { r.Exptime = exptime }
}

// setExpiring stores v under key with memcached's exptime.
func (h *largeHarness) setExpiring(t *testing.T, key, v string, exptime int64) {
	t.Helper()
	require.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbSet, v, expiring(exptime), key).Outcome)
}

// partRows counts the rows of the parts table once the frees that writes
// left running after their replies are done.
func (h *largeHarness) partRows(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, h.svc.Drain(ctx))
	return h.partRowsNow(t)
}

// partRowsNow counts the rows of the parts table now.
func (h *largeHarness) partRowsNow(t *testing.T) int {
	t.Helper()
	rows, err := h.backendDrv.(ndbclient.RowScanner).ScanRows(context.Background(), h.parts, []int{0}, 1<<20)
	require.NoError(t, err)
	return len(rows)
}

// row reads key's row as ndbmemcache would find it: value, ext_id, ext_size.
func (h *largeHarness) row(t *testing.T, key string) []ndbclient.Value {
	t.Helper()
	o := &ndbclient.Op{Kind: ndbclient.OpRead, Table: h.main, Key: []ndbclient.Value{ndbclient.Bytes([]byte(key))}, Read: []int{3, 4, 5}}
	require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{o}}))
	require.NoError(t, o.Err)
	return o.Row
}

func parts(n int) int { return (n + largePart - 1) / largePart }

// value is n bytes that say where each of them is, so that a part out of
// place or a byte lost shows.
func value(tag string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s%d.", tag, b.Len())
	}
	return b.String()[:n]
}

// Every verb on a container with large values, against what the rows and
// parts then hold: a value longer than the row's column is in parts, in
// ndbmemcache's layout, and no write leaves parts nobody names.
func TestLargeValues(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newLargeHarness(t, d.wrap)
			short, long, longer := value("s", largeInline), value("l", 35), value("L", 1000)

			r := h.do(t, gateway.VerbSet, short, func(r *gateway.Request) { r.Flags = 7 }, "k")
			require.Equal(t, gateway.OutcomeStored, r.Outcome, "%v", r.Err)
			assert.Equal(t, short, h.get(t, "k"))
			assert.Zero(t, h.partRows(t), "a value the row holds takes no parts")

			r = h.do(t, gateway.VerbSet, long, func(r *gateway.Request) { r.Flags = 9 }, "k")
			require.Equal(t, gateway.OutcomeStored, r.Outcome, "%v", r.Err)
			cas := r.NewCas
			g := h.do(t, gateway.VerbGet, "", nil, "k")
			require.True(t, g.Items[0].Hit)
			assert.Equal(t, long, string(g.Items[0].Value))
			assert.Equal(t, uint32(9), g.Items[0].Flags)
			assert.Equal(t, cas, g.Items[0].Cas)
			assert.Equal(t, parts(35), h.partRows(t))
			row := h.row(t, "k")
			assert.True(t, row[0].IsNull(), "ndbmemcache's layout: no value in the row")
			assert.Equal(t, uint64(35), row[2].Uint(), "ext_size")

			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", longer).Outcome)
			assert.Equal(t, longer, h.get(t, "k"))
			assert.Equal(t, parts(1000), h.partRows(t), "the old value's parts are freed")

			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", short).Outcome)
			assert.Equal(t, short, h.get(t, "k"))
			assert.Zero(t, h.partRows(t))
			row = h.row(t, "k")
			assert.True(t, row[2].IsNull(), "a short value clears ext_size")

			// append and prepend across the row's length, then within parts.
			require.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAppend, long, nil, "k").Outcome)
			assert.Equal(t, short+long, h.get(t, "k"))
			require.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbPrepend, "<", nil, "k").Outcome)
			assert.Equal(t, "<"+short+long, h.get(t, "k"))
			assert.Equal(t, parts(len(short+long)+1), h.partRows(t))

			// cas: a stale one is refused, the item's own stores.
			g = h.do(t, gateway.VerbGet, "", nil, "k")
			cas = g.Items[0].Cas
			r = h.do(t, gateway.VerbCas, longer, func(r *gateway.Request) { r.Cas = cas + 1000 }, "k")
			assert.Equal(t, gateway.OutcomeExists, r.Outcome)
			r = h.do(t, gateway.VerbCas, longer, func(r *gateway.Request) { r.Cas = cas }, "k")
			assert.Equal(t, gateway.OutcomeStored, r.Outcome, "%v", r.Err)
			assert.Equal(t, longer, h.get(t, "k"))
			r = h.do(t, gateway.VerbCas, longer, func(r *gateway.Request) { r.Cas = 5 }, "nokey")
			assert.Equal(t, gateway.OutcomeNotFound, r.Outcome)

			// add, replace, incr.
			assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbAdd, long, nil, "k").Outcome)
			assert.Equal(t, longer, h.get(t, "k"), "a refused add changes nothing")
			assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAdd, long, nil, "k2").Outcome)
			assert.Equal(t, long, h.get(t, "k2"))
			assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbReplace, long, nil, "missing").Outcome)
			assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbReplace, short, nil, "k2").Outcome)
			assert.Equal(t, short, h.get(t, "k2"))
			r = h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = 1 }, "k")
			assert.Equal(t, ndbclient.CodeNotNumeric, ndbclient.CodeOf(r.Err))
			assert.Equal(t, parts(1000), h.partRows(t))

			// A multi-get of long, short and missing keys; gat.
			g = h.do(t, gateway.VerbGet, "", nil, "k", "k2", "missing", "k")
			require.Equal(t, gateway.OutcomeValues, g.Outcome)
			assert.Equal(t, longer, string(g.Items[0].Value))
			assert.Equal(t, short, string(g.Items[1].Value))
			assert.False(t, g.Items[2].Hit)
			assert.Equal(t, longer, string(g.Items[3].Value))
			g = h.do(t, gateway.VerbGat, "", func(r *gateway.Request) { r.Exptime = 100 }, "k")
			assert.Equal(t, longer, string(g.Items[0].Value))

			// A value longer than 256 parts is refused; with
			// DropOnTooLarge (memcache's set) the old item and its parts go.
			tooLong := value("x", largeMax+1)
			r = h.set(t, "k", tooLong)
			assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err))
			assert.Equal(t, longer, h.get(t, "k"))
			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", value("m", largeMax)).Outcome, "256 full parts fit")
			assert.Equal(t, value("m", largeMax), h.get(t, "k"))
			r = h.do(t, gateway.VerbSet, tooLong, func(r *gateway.Request) { r.DropOnTooLarge = true }, "k")
			assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err))
			assert.Equal(t, "<miss>", h.get(t, "k"))
			assert.Zero(t, h.partRows(t))

			// delete, and meta delete x (the value emptied, the item kept).
			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
			r = h.do(t, gateway.VerbDelete, "", func(r *gateway.Request) { r.Meta.ClearValue = true }, "k")
			assert.Equal(t, gateway.OutcomeDeleted, r.Outcome, "%v", r.Err)
			assert.Equal(t, "", h.get(t, "k"))
			assert.Zero(t, h.partRows(t))
			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
			assert.Equal(t, gateway.OutcomeDeleted, h.do(t, gateway.VerbDelete, "", nil, "k").Outcome)
			assert.Equal(t, "<miss>", h.get(t, "k"))
			assert.Equal(t, gateway.OutcomeNotFound, h.do(t, gateway.VerbDelete, "", nil, "k").Outcome)
			assert.Zero(t, h.partRows(t))

			// A caching key: the local cache keeps short values only, and
			// a long one is read from the backend every time.
			require.Equal(t, gateway.OutcomeStored, h.set(t, "c:k", long).Outcome)
			assert.Equal(t, long, h.get(t, "c:k"))
			assert.Equal(t, long, h.get(t, "c:k"))
			require.Equal(t, gateway.OutcomeStored, h.set(t, "c:k", short).Outcome)
			assert.Equal(t, short, h.get(t, "c:k"))

			// flush_all empties the parts table too.
			require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
			require.NoError(t, h.svc.FlushAll(0))
			assert.Equal(t, "<miss>", h.get(t, "k"))
			assert.Zero(t, h.partRows(t))
		})
	}
}

// What a container with large values needs is said by name.
func TestKeepLargeValuesSaysWhatIsMissing(t *testing.T) {
	e := embedded.New(embedded.Config{})
	t.Cleanup(func() { _ = e.Close() })
	mainDef, partsDef := largeTables()
	mainDef.Columns = append(mainDef.Columns, ndbclient.Column{Name: "expire_time", Type: ndbclient.TypeUint32})
	main, err := e.CreateTable(mainDef)
	require.NoError(t, err)
	parts, err := e.CreateTable(partsDef)
	require.NoError(t, err)
	for _, x := range []struct {
		change func(*gateway.ContainerSpec)
		want   string
	}{
		{func(s *gateway.ContainerSpec) { s.CasColumn = "" }, "needs a cas column"},
		{func(s *gateway.ContainerSpec) { s.ValueColumns = []string{"string_value", "ext_id"} }, "exactly one value column"},
	} {
		spec := gateway.ContainerSpec{Name: "c", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}, FlagsColumn: "flags", CasColumn: "cas_value"}
		x.change(&spec)
		c, err := gateway.NewContainer(spec, main)
		require.NoError(t, err)
		err = c.KeepLargeValues(parts)
		require.Error(t, err)
		assert.Contains(t, err.Error(), x.want)
	}
	spec := gateway.ContainerSpec{Name: "c", KeyColumns: []string{"mkey"}, ValueColumns: []string{"string_value"}, CasColumn: "cas_value"}
	c, err := gateway.NewContainer(spec, main)
	require.NoError(t, err)
	assert.ErrorContains(t, c.KeepLargeValues(main), "has no column id")

	// The container's expiry is the gateway's to keep: the backend knows
	// the column (a lease's recache reads it) but does not keep it.
	spec.ExpireColumn, spec.LargeValues = "expire_time", true
	c, err = gateway.BindContainer(spec, ndbclient.NewClient(e), main)
	require.NoError(t, err)
	assert.True(t, c.Table.ExpiryByCaller)
	require.NoError(t, c.KeepLargeValues(parts))
	spec.LargeValues = false
	_, err = gateway.BindContainer(spec, ndbclient.NewClient(e), main)
	assert.ErrorContains(t, err, `keeps expiry in column "expire_time" for its caller and for itself alike`)

	// A table whose rows the backend expires, by another container's
	// column, is refused, whichever container came first.
	other := *mainDef
	other.Name = "other_large"
	otherMain, err := e.CreateTable(&other)
	require.NoError(t, err)
	spec.ExpireColumn, spec.LargeValues = "", true
	large, err := gateway.BindContainer(spec, ndbclient.NewClient(e), otherMain)
	require.NoError(t, err)
	require.NoError(t, large.KeepLargeValues(parts))
	spec.ExpireColumn, spec.LargeValues = "expire_time", false
	_, err = gateway.BindContainer(spec, ndbclient.NewClient(e), otherMain)
	require.NoError(t, err)
	_, err = gateway.New(gateway.Options{Backend: ndbclient.NewClient(e), ItemSizeMax: itemMax, Routes: []gateway.Route{{Prefix: "", Container: large}}})
	assert.ErrorContains(t, err, `has the backend expire rows of ndbmemcache.other_large by column "expire_time"`)
	bound, err := e.Table(otherMain.Database, otherMain.Name)
	require.NoError(t, err)
	large.Table = bound
	assert.ErrorContains(t, large.KeepLargeValues(parts), `expires rows by column "expire_time" in the backend`)
}

// A value ndbmemcache wrote, in its layout, is read here; and the large
// container takes no set of several keys, whose stores share one batch.
func TestLargeValueWrittenByNdbmemcache(t *testing.T) {
	h := newLargeHarness(t, drivers[0].wrap)
	want := value("n", 25)
	ops := []*ndbclient.Op{{Kind: ndbclient.OpInsert, Table: h.main, Key: []ndbclient.Value{ndbclient.Bytes([]byte("nk"))},
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.Uint(3)}, {Column: 2, Value: ndbclient.Uint(77)},
			{Column: 3, Value: ndbclient.Null()}, {Column: 4, Value: ndbclient.Uint(900)}, {Column: 5, Value: ndbclient.Uint(25)}}}}
	for k := 0; k < 3; k++ {
		ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpInsert, Table: h.parts, Key: []ndbclient.Value{ndbclient.Uint(900), ndbclient.Int(int64(k))},
			Set: []ndbclient.ColumnValue{{Column: 2, Value: ndbclient.Bytes([]byte(want[k*largePart : min(25, (k+1)*largePart)]))}}})
	}
	require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: ops}))
	g := h.do(t, gateway.VerbGet, "", nil, "nk")
	require.True(t, g.Items[0].Hit, "%v", g.Items[0].Err)
	assert.Equal(t, want, string(g.Items[0].Value))
	assert.Equal(t, uint32(3), g.Items[0].Flags)
	assert.Equal(t, uint64(77), g.Items[0].Cas)

	// A part missing: the value is not served cut short.
	ops[0].Set[4].Value = ndbclient.Uint(26)
	ops[0].Kind = ndbclient.OpUpdate
	require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: ops[:1]}))
	g = h.do(t, gateway.VerbGet, "", nil, "nk")
	assert.Error(t, g.Items[0].Err)
	assert.False(t, g.Items[0].Hit)

	// A row naming more than 256 parts is refused, not read.
	ops[0].Set[4].Value = ndbclient.Uint(4_000_000_000)
	require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: ops[:1]}))
	g = h.do(t, gateway.VerbGet, "", nil, "nk")
	assert.ErrorContains(t, g.Items[0].Err, "more than")

	// A multi-get's pieces are sized by the largest value, not by the
	// rows, which hold none of it.
	assert.Equal(t, gateway.MultiGetPieceBytes/largeMax, h.svc.MultiGetPiece())

	// The replacing set frees ndbmemcache's parts.
	require.Equal(t, gateway.OutcomeStored, h.set(t, "nk", "x").Outcome)
	assert.Zero(t, h.partRows(t))
	assert.False(t, h.svc.SetsCanShareABatch())
	// A run of sets begun before the routes changed: the key fails alone.
	r := h.req
	r.Reset()
	r.Verb = gateway.VerbSet
	r.AddSet([]byte("nk"), []byte(value("s", 40)), 0, 0)
	h.run(t, r)
	require.Len(t, r.Items, 1)
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(r.Items[0].Err))
	assert.Equal(t, "x", h.get(t, "nk"))
}

// Writers racing on a few keys with long values of their own: every get
// returns one whole value some writer stored, and once they stop, the
// parts table holds exactly the parts of the values the keys hold.
func TestLargeValuesUnderRacingWriters(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newLargeHarness(t, d.wrap)
			keys := []string{"a", "b", "c"}
			const writers, rounds = 6, 60
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					r := h.svc.NewRequest()
					done := make(chan struct{}, 1)
					r.Done = func(*gateway.Request) { done <- struct{}{} }
					do := func(verb gateway.Verb, key, v string) *gateway.Request {
						r.Reset()
						r.Verb = verb
						r.AddKey([]byte(key))
						r.SetValue([]byte(v))
						h.svc.Do(r)
						select {
						case <-done:
						case <-time.After(10 * time.Second):
							panic("request never completed")
						}
						return r
					}
					for i := 0; i < rounds; i++ {
						key := keys[(w+i)%len(keys)]
						n := largeInline + 1 + (w*31+i*17)%300
						v := value(fmt.Sprintf("w%d-%d:", w, i), n)
						verb := gateway.VerbSet
						if i%5 == 4 {
							verb = gateway.VerbDelete
						}
						if r := do(verb, key, v); r.Outcome == gateway.OutcomeError {
							errs <- fmt.Errorf("%v %s: %v", verb, key, r.Err)
							return
						}
						g := do(gateway.VerbGet, key, "")
						if it := g.Items[0]; it.Err != nil {
							errs <- fmt.Errorf("get %s: %v", key, it.Err)
							return
						} else if it.Hit && !wholeValue(string(it.Value)) {
							errs <- fmt.Errorf("get %s: a value not whole: %q", key, it.Value)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			want := 0
			for _, k := range keys {
				if v := h.get(t, k); v != "<miss>" && len(v) > largeInline {
					want += parts(len(v))
				}
			}
			assert.Equal(t, want, h.partRows(t), "parts nobody names, or names but lacks")
		})
	}
}

// wholeValue checks a value made by value(): every "tagN." piece starts at
// byte N under one tag.
func wholeValue(v string) bool {
	colon := strings.IndexByte(v, ':')
	if colon < 0 {
		return false
	}
	return v == value(v[:colon+1], len(v))
}

// A value whose part is gone (the embedded engine evicted it: it evicts
// any row of an evicting table, the parts of an evicting container's
// values too) is a miss, for a get of it alone or among others, and a set
// over it stores the new value; a part gone from a row no longer naming it
// is no concern of the read. The set frees the parts left, whether it frees
// after its reply or before it (too many frees in flight): their delete in
// one transaction fails on the part gone, and each is deleted on its own.
func TestLargeValueWithAPartGoneIsAMiss(t *testing.T) {
	for _, d := range drivers {
		for _, freeing := range []struct {
			name string
			max  int64
		}{{"free after the reply", 512}, {"free before the reply", 0}} {
			t.Run(d.name+"/"+freeing.name, func(t *testing.T) {
				gateway.SetMaxFreeingParts(t, freeing.max)
				largeValueWithAPartGone(t, d.wrap)
			})
		}
	}
}

func largeValueWithAPartGone(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver) {
	h := newLargeHarness(t, wrap)
	long, other := value("l", 35), value("o", 27)
	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
	require.Equal(t, gateway.OutcomeStored, h.set(t, "o", other).Outcome)
	id := h.row(t, "k")[1].Uint()
	del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: h.parts, Key: []ndbclient.Value{ndbclient.Uint(id), ndbclient.Int(2)}}
	require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{del}}))
	require.NoError(t, del.Err)

	assert.Equal(t, "<miss>", h.get(t, "k"))
	r := h.do(t, gateway.VerbGet, "", nil, "o", "k", "o")
	require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
	require.Len(t, r.Items, 3)
	assert.Equal(t, other, string(r.Items[0].Value))
	assert.False(t, r.Items[1].Hit, "the value with a part gone")
	assert.Equal(t, other, string(r.Items[2].Value))
	assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbAppend, "x", nil, "k").Outcome, "append to a lost item")

	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long+"!").Outcome)
	assert.Equal(t, long+"!", h.get(t, "k"))
	assert.Equal(t, parts(len(long)+1)+parts(len(other)), h.partRows(t), "the set freed what was left of the old parts")
}

// A container with large values and an expire column: the gateway keeps
// the expiry, so an expired item is a miss to every command, and a write
// over it frees its parts (a backend that knew the column would have
// replaced or freed the row and left them).
func TestLargeValuesExpire(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newLargeHarnessExpiring(t, d.wrap, true)
			long, other := value("l", 35), value("o", 27)
			set := func(key, v string, exptime int64) { t.Helper(); h.setExpiring(t, key, v, exptime) }
			expire := func() { h.clock.Add(11) }
			np := parts(len(long))

			set("k", long, 10)
			assert.Equal(t, long, h.get(t, "k"))
			expire()
			assert.Equal(t, "<miss>", h.get(t, "k"))
			assert.Equal(t, np, h.partRows(t), "kept until a write replaces it")
			set("k", other, 0)
			assert.Equal(t, other, h.get(t, "k"))
			assert.Equal(t, parts(len(other)), h.partRows(t), "the set freed the expired item's parts")

			// Over an expired item: add stores, the others find nothing.
			set("k", long, 10)
			expire()
			for _, x := range []struct {
				verb gateway.Verb
				set  func(r *gateway.Request)
				want gateway.Outcome
			}{
				{gateway.VerbReplace, nil, gateway.OutcomeNotStored},
				{gateway.VerbAppend, nil, gateway.OutcomeNotStored},
				{gateway.VerbPrepend, nil, gateway.OutcomeNotStored},
				{gateway.VerbCas, func(r *gateway.Request) { r.Cas = 1 }, gateway.OutcomeNotFound},
				{gateway.VerbTouch, expiring(100), gateway.OutcomeNotFound},
				{gateway.VerbIncr, func(r *gateway.Request) { r.Delta = 1 }, gateway.OutcomeNotFound},
			} {
				assert.Equal(t, x.want, h.do(t, x.verb, "x", x.set, "k").Outcome, "%v", x.verb)
			}
			assert.Equal(t, np, h.partRows(t))
			r := h.do(t, gateway.VerbGat, "", expiring(100), "k")
			require.Equal(t, gateway.OutcomeValues, r.Outcome)
			assert.False(t, r.Items[0].Hit, "gat of an expired item")
			assert.Equal(t, "<miss>", h.get(t, "k"), "the gat did not bring it back")
			assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAdd, other, nil, "k").Outcome, "add over an expired item")
			assert.Equal(t, other, h.get(t, "k"))
			assert.Equal(t, parts(len(other)), h.partRows(t))
			assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbAdd, long, nil, "k").Outcome, "add over a live item")

			// delete of an expired item: not found, and gone with its parts.
			set("k", long, 10)
			expire()
			assert.Equal(t, gateway.OutcomeNotFound, h.do(t, gateway.VerbDelete, "", nil, "k").Outcome)
			assert.Zero(t, h.partRows(t))
			assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbReplace, "x", nil, "k").Outcome)

			// touch and gat of a live item change its expiry, not its value.
			set("k", long, 10)
			assert.Equal(t, gateway.OutcomeTouched, h.do(t, gateway.VerbTouch, "", expiring(100), "k").Outcome)
			expire()
			assert.Equal(t, long, h.get(t, "k"), "touched to 100 s")
			r = h.do(t, gateway.VerbGat, "", expiring(10), "k", "k")
			require.Equal(t, gateway.OutcomeValues, r.Outcome)
			for _, it := range r.Items {
				assert.Equal(t, long, string(it.Value))
				assert.Equal(t, uint32(h.clock.Load()+10), it.Expire)
			}
			assert.Equal(t, np, h.partRows(t), "touch and gat keep the parts")
			expire()
			assert.Equal(t, "<miss>", h.get(t, "k"), "gat set 10 s")

			// A multi-get sees each item as it stands.
			set("a", long, 0)
			set("b", other, 10)
			set("c", "short", 10)
			expire()
			r = h.do(t, gateway.VerbGet, "", nil, "a", "b", "c")
			require.Equal(t, gateway.OutcomeValues, r.Outcome)
			assert.Equal(t, long, string(r.Items[0].Value))
			assert.False(t, r.Items[1].Hit)
			assert.False(t, r.Items[2].Hit, "a value the row holds expires too")

			// A caching key's local copy (of a value the row holds) expires
			// with it: the local engine is told the column (LocalTable).
			set("c:s", "short", 10)
			assert.Equal(t, "short", h.get(t, "c:s"))
			assert.Equal(t, "short", h.get(t, "c:s"), "from the local copy")
			expire()
			assert.Equal(t, "<miss>", h.get(t, "c:s"))
		})
	}
}

// hookDriver runs hook before each batch it is given.
type hookDriver struct {
	ndbclient.Driver
	hook func(b *ndbclient.Batch)
}

func (d *hookDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if d.hook != nil {
		d.hook(b)
	}
	d.Driver.Submit(b, done)
}

func (d *hookDriver) NextAutoIncrement(ctx context.Context, t *ndbclient.Table) (uint64, error) {
	return d.Driver.(ndbclient.Sequencer).NextAutoIncrement(ctx, t)
}

func (d *hookDriver) BindExpireColumn(t *ndbclient.Table, col int, byCaller bool) (*ndbclient.Table, error) {
	return d.Driver.(ndbclient.ExpiryBinder).BindExpireColumn(t, col, byCaller)
}

func (d *hookDriver) Execute(ctx context.Context, b *ndbclient.Batch) error {
	if d.hook != nil {
		d.hook(b)
	}
	return d.Driver.Execute(ctx, b)
}

// The races and retries of a container with large values and expiry: a
// part gone under a caching key, and beside other keys; an add whose
// expired row another client deleted meanwhile; a gat whose read is tried
// again.
func TestLargeValuesExpireRetries(t *testing.T) {
	var backend *hookDriver
	h := newLargeHarnessExpiring(t, func(d ndbclient.Driver) ndbclient.Driver {
		w := &hookDriver{Driver: d}
		if backend == nil {
			backend = w // the first wrapped: the backend's
		}
		return w
	}, true)
	long, other := value("l", 35), value("o", 27)
	set := func(key, v string, exptime int64) { t.Helper(); h.setExpiring(t, key, v, exptime) }
	dropPart := func(key string) {
		t.Helper()
		id := h.row(t, key)[1].Uint()
		del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: h.parts, Key: []ndbclient.Value{ndbclient.Uint(id), ndbclient.Int(1)}}
		require.NoError(t, h.backendDrv.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{del}}))
		require.NoError(t, del.Err)
	}

	// A part gone: a miss through the caching prefix, and beside a caching key.
	set("k", long, 0)
	dropPart("k")
	assert.Equal(t, "<miss>", h.get(t, "c:k"))
	set("x", other, 0)
	r := h.do(t, gateway.VerbGet, "", nil, "k", "c:x")
	require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
	assert.False(t, r.Items[0].Hit)
	assert.Equal(t, other, string(r.Items[1].Value))

	// add over an expired item that another client deletes meanwhile.
	set("a", long, 10)
	h.clock.Add(11)
	armed := true
	backend.hook = func(b *ndbclient.Batch) {
		for _, o := range b.Ops {
			if armed && o.Kind == ndbclient.OpCondUpdate && o.Table.Name == h.main.Name && string(o.Key[0].B) == "a" {
				armed = false
				del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: h.main, Key: []ndbclient.Value{ndbclient.Bytes([]byte("a"))}}
				require.NoError(t, backend.Driver.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{del}}))
				require.NoError(t, del.Err)
			}
		}
	}
	assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAdd, other, nil, "a").Outcome)
	assert.False(t, armed, "the delete ran")
	backend.hook = nil
	assert.Equal(t, other, h.get(t, "a"))

	// gat -1 whose read is tried again (a part of y is gone): g as it was.
	set("g", long, 100)
	set("y", long, 100)
	dropPart("y")
	r = h.do(t, gateway.VerbGat, "", expiring(-1), "g", "y")
	require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
	assert.Equal(t, long, string(r.Items[0].Value), "found before the gat expired it")
	assert.False(t, r.Items[1].Hit)
	assert.Equal(t, "<miss>", h.get(t, "g"), "expired by the gat")
}

// heldFrees holds the batches that delete parts until release: a test
// sees what a write does while its old parts are being freed.
type heldFrees struct {
	ndbclient.Driver
	parts *ndbclient.Table
	mu    sync.Mutex
	held  []func()
	ids   []uint64 // the values whose parts the held batches delete
	// unlinked counts the held batches of more than one delete that were
	// not one transaction.
	unlinked int
}

func (d *heldFrees) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if len(b.Ops) == 0 || b.Ops[0].Kind != ndbclient.OpDelete || b.Ops[0].Table.Name != d.parts.Name {
		d.Driver.Submit(b, done)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = append(d.held, func() { done(b, d.Driver.Execute(context.Background(), b)) })
	for k, o := range b.Ops {
		d.ids = append(d.ids, o.Key[0].Uint())
		if k < len(b.Ops)-1 && !o.TxnWithNext {
			d.unlinked++
			break
		}
	}
}

// holds reports whether a delete of a part of the value id is held.
func (d *heldFrees) holds(id uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.ids, id)
}

func (d *heldFrees) NextAutoIncrement(ctx context.Context, t *ndbclient.Table) (uint64, error) {
	return d.Driver.(ndbclient.Sequencer).NextAutoIncrement(ctx, t)
}

// release runs the frees held so far.
func (d *heldFrees) release() {
	d.mu.Lock()
	held := d.held
	d.held, d.ids = nil, nil
	d.mu.Unlock()
	for _, run := range held {
		run()
	}
}

// A write that replaces a value in parts answers once its row is written,
// before its old parts are freed: a round trip fewer for the client. At
// most so many part deletes are in flight: past that a write waits for its
// own. Drain waits for them.
func TestLargeWriteFreesAfterTheReply(t *testing.T) {
	long, longer, longest := value("l", 35), value("m", 47), value("n", 52)
	gateway.SetMaxFreeingParts(t, int64(parts(len(long))))
	_, partsDef := largeTables()
	var frees *heldFrees
	h := newLargeHarness(t, func(drv ndbclient.Driver) ndbclient.Driver {
		if frees == nil { // the backend's, made first
			frees = &heldFrees{Driver: drv, parts: partsDef}
			return frees
		}
		return drv
	})
	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", longer).Outcome, "answered with its free held")
	assert.Equal(t, longer, h.get(t, "k"))
	assert.Equal(t, parts(len(long))+parts(len(longer)), h.partRowsNow(t), "the old parts are still there")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, h.svc.Drain(ctx), context.DeadlineExceeded, "a free is in flight")

	// The bound is the first value's parts: the next write frees its own
	// before it answers.
	id := h.row(t, "k")[1].Uint() // the parts the next write replaces
	r := h.svc.NewRequest()
	done := make(chan struct{}, 1)
	r.Done = func(*gateway.Request) { done <- struct{}{} }
	r.Verb = gateway.VerbSet
	r.AddKey([]byte("k"))
	r.SetValue([]byte(longest))
	h.svc.Do(r)
	require.Eventually(t, func() bool { return frees.holds(id) }, 5*time.Second, time.Millisecond, "its free is held too")
	require.Empty(t, done, "a write beyond the bound answered before its free")
	frees.release()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the write never answered after its free")
	}
	assert.Equal(t, gateway.OutcomeStored, r.Outcome)
	require.NoError(t, h.svc.Drain(context.Background()))
	assert.Equal(t, longest, h.get(t, "k"))
	assert.Equal(t, parts(len(longest)), h.partRows(t), "every old part freed")
	assert.Zero(t, frees.unlinked, "a value's parts are freed in one transaction")
}

// refusedFrees fails every batch of part deletes whole, as a backend that
// sheds load refuses a batch.
type refusedFrees struct {
	ndbclient.Driver
	parts *ndbclient.Table
}

func (d *refusedFrees) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if len(b.Ops) > 0 && b.Ops[0].Kind == ndbclient.OpDelete && b.Ops[0].Table.Name == d.parts.Name {
		done(b, ndbclient.ErrOverloaded)
		return
	}
	d.Driver.Submit(b, done)
}

func (d *refusedFrees) NextAutoIncrement(ctx context.Context, t *ndbclient.Table) (uint64, error) {
	return d.Driver.(ndbclient.Sequencer).NextAutoIncrement(ctx, t)
}

// A write that frees its old parts before its reply (too many frees in
// flight) is stored even when that free fails whole: the row was
// written, and only space is lost.
func TestLargeWriteStoredWhenItsFreeFails(t *testing.T) {
	gateway.SetMaxFreeingParts(t, 0)
	_, partsDef := largeTables()
	wrapped := false
	h := newLargeHarness(t, func(drv ndbclient.Driver) ndbclient.Driver {
		if !wrapped { // the backend's, made first
			wrapped = true
			return &refusedFrees{Driver: drv, parts: partsDef}
		}
		return drv
	})
	long, longer := value("l", 35), value("m", 47)
	require.Equal(t, gateway.OutcomeStored, h.set(t, "k", long).Outcome)
	r := h.set(t, "k", longer)
	require.Equal(t, gateway.OutcomeStored, r.Outcome, "err %v", r.Err)
	assert.Equal(t, longer, h.get(t, "k"))
	assert.Equal(t, parts(len(long))+parts(len(longer)), h.partRows(t), "the old parts are left, unnamed")
}
