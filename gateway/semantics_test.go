package gateway_test

import (
	"context"
	"fmt"
	"maps"
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
	"github.com/ndbgate/ndbgate/ndbclient/ndbclienttest"
)

// The memcached-semantics suite runs against every driver this build has, each
// completing inline and completing later on another goroutine.
var drivers = []struct {
	name string
	wrap func(ndbclient.Driver) ndbclient.Driver
}{
	{"embedded", func(d ndbclient.Driver) ndbclient.Driver { return d }},
	{"embedded-later", func(d ndbclient.Driver) ndbclient.Driver { return ndbclienttest.Later(d, 500*time.Microsecond) }},
}

const itemMax = 4096

type harness struct {
	svc     *gateway.Service
	backend *ndbclient.Client
	clock   *atomic.Int64 // unix seconds
	req     *gateway.Request
	done    chan struct{}
}

func newHarness(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver, extra ...gateway.Route) *harness {
	return newHarnessOn(t, wrap, gateway.DemoTable(itemMax), extra...)
}

// newHarnessOn is newHarness with the container on a table of def's shape.
func newHarnessOn(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver, def *ndbclient.Table, extra ...gateway.Route) *harness {
	clock := &atomic.Int64{}
	clock.Store(1_700_000_000)
	newEngine := func() ndbclient.Driver {
		e := embedded.New(embedded.Config{Partitions: 4, Nodes: 2, Now: func() uint32 { return uint32(clock.Load()) }})
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	backendDrv, localDrv := wrap(newEngine()), wrap(newEngine())
	tbl, err := backendDrv.CreateTable(def)
	require.NoError(t, err)
	_, err = localDrv.CreateTable(def)
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	routes := append([]gateway.Route{{Prefix: "", Container: c}}, extra...)
	for i := range routes[1:] {
		routes[i+1].Container = c
	}
	backend := ndbclient.NewClient(backendDrv)
	svc, err := gateway.New(gateway.Options{
		Backend: backend, Local: ndbclient.NewClient(localDrv),
		Routes: routes, ItemSizeMax: itemMax,
		Now: func() time.Time { return time.Unix(clock.Load(), 0) },
	})
	require.NoError(t, err)
	h := &harness{svc: svc, backend: backend, clock: clock, done: make(chan struct{}, 1)}
	h.req = svc.NewRequest()
	h.req.Done = func(*gateway.Request) { h.done <- struct{}{} }
	return h
}

// do runs one request, reusing the same Request each time as a front end does.
func (h *harness) do(t *testing.T, verb gateway.Verb, value string, set func(r *gateway.Request), keys ...string) *gateway.Request {
	t.Helper()
	r := h.req
	r.Reset()
	r.Verb = verb
	for _, k := range keys {
		r.AddKey([]byte(k))
	}
	r.SetValue([]byte(value))
	if set != nil {
		set(r)
	}
	return h.run(t, r)
}

// run does r, which the caller has filled, and waits for it.
func (h *harness) run(t *testing.T, r *gateway.Request) *gateway.Request {
	t.Helper()
	h.svc.Do(r)
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		t.Fatal("request never completed")
	}
	return r
}

func (h *harness) set(t *testing.T, key, value string) *gateway.Request {
	return h.do(t, gateway.VerbSet, value, nil, key)
}

// get returns the value of key, or "<miss>".
func (h *harness) get(t *testing.T, key string) string {
	t.Helper()
	r := h.do(t, gateway.VerbGet, "", nil, key)
	require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
	if !r.Items[0].Hit {
		return "<miss>"
	}
	return string(r.Items[0].Value)
}

// expiryShapes are the demo table with each kind of expire column: ndbgate's
// INT UNSIGNED, and the TIMESTAMP of ndbmemcache's demo_table_tabs, NULL and
// NOT NULL (never is then its zero value).
var expiryShapes = []struct {
	name  string
	table func() *ndbclient.Table
}{
	{"INT UNSIGNED expiry", func() *ndbclient.Table { return gateway.DemoTable(itemMax) }},
	{"TIMESTAMP NULL expiry", func() *ndbclient.Table { return timestampDemo(true) }},
	{"TIMESTAMP expiry", func() *ndbclient.Table { return timestampDemo(false) }},
}

func timestampDemo(nullable bool) *ndbclient.Table {
	t := gateway.DemoTable(itemMax)
	t.Columns[t.ExpireColumn].Type, t.Columns[t.ExpireColumn].Nullable = ndbclient.TypeTimestamp, nullable
	return t
}

func TestSemantics(t *testing.T) {
	for _, shape := range expiryShapes {
		t.Run(shape.name, func(t *testing.T) { testSemantics(t, shape.table) })
	}
}

func testSemantics(t *testing.T, table func() *ndbclient.Table) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Run("set get flags cas", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				r := h.do(t, gateway.VerbSet, "hello", func(r *gateway.Request) { r.Flags = 42 }, "k")
				require.Equal(t, gateway.OutcomeStored, r.Outcome)
				cas1 := r.NewCas
				require.NotZero(t, cas1)
				r = h.do(t, gateway.VerbGet, "", nil, "k")
				require.True(t, r.Items[0].Hit)
				assert.Equal(t, "hello", string(r.Items[0].Value))
				assert.Equal(t, uint32(42), r.Items[0].Flags)
				assert.Equal(t, cas1, r.Items[0].Cas)
				r = h.set(t, "k", "again")
				assert.Greater(t, r.NewCas, cas1, "every write gets a new, larger cas")
				assert.Equal(t, "again", h.get(t, "k"))
			})
			t.Run("add replace", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbReplace, "x", nil, "k").Outcome)
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAdd, "a", nil, "k").Outcome)
				assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbAdd, "b", nil, "k").Outcome)
				assert.Equal(t, "a", h.get(t, "k"))
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbReplace, "c", nil, "k").Outcome)
				assert.Equal(t, "c", h.get(t, "k"))
			})
			t.Run("cas", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				assert.Equal(t, gateway.OutcomeNotFound, h.do(t, gateway.VerbCas, "x", func(r *gateway.Request) { r.Cas = 1 }, "k").Outcome)
				cas := h.set(t, "k", "v1").NewCas
				assert.Equal(t, gateway.OutcomeExists, h.do(t, gateway.VerbCas, "x", func(r *gateway.Request) { r.Cas = cas + 1000 }, "k").Outcome)
				assert.Equal(t, "v1", h.get(t, "k"))
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbCas, "v2", func(r *gateway.Request) { r.Cas = cas }, "k").Outcome)
				assert.Equal(t, "v2", h.get(t, "k"))
				assert.Equal(t, gateway.OutcomeExists, h.do(t, gateway.VerbCas, "v3", func(r *gateway.Request) { r.Cas = cas }, "k").Outcome, "a used cas is stale")
			})
			t.Run("append prepend", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				assert.Equal(t, gateway.OutcomeNotStored, h.do(t, gateway.VerbAppend, "x", nil, "k").Outcome)
				h.set(t, "k", "mid")
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAppend, "-end", nil, "k").Outcome)
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbPrepend, "start-", nil, "k").Outcome)
				assert.Equal(t, "start-mid-end", h.get(t, "k"))
				// A number changed by incr lives in the math column: append must see it.
				h.set(t, "n", "10")
				h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = 1 }, "n")
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAppend, "x", nil, "n").Outcome)
				assert.Equal(t, "11x", h.get(t, "n"))
				// Growing past the item size is refused and loses nothing.
				h.set(t, "big", strings.Repeat("a", itemMax-2))
				r := h.do(t, gateway.VerbAppend, "xyz", nil, "big")
				require.Equal(t, gateway.OutcomeError, r.Outcome)
				assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err))
				assert.Equal(t, strings.Repeat("a", itemMax-2), h.get(t, "big"))
			})
			t.Run("incr decr", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				incr := func(key string, delta uint64) *gateway.Request {
					return h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = delta }, key)
				}
				decr := func(key string, delta uint64) *gateway.Request {
					return h.do(t, gateway.VerbDecr, "", func(r *gateway.Request) { r.Delta = delta }, key)
				}
				assert.Equal(t, gateway.OutcomeNotFound, incr("n", 1).Outcome)
				h.set(t, "n", "10")
				r := incr("n", 5)
				require.Equal(t, gateway.OutcomeNumber, r.Outcome)
				assert.Equal(t, uint64(15), r.Number)
				assert.Equal(t, "15", h.get(t, "n"))
				assert.Equal(t, uint64(0), decr("n", 100).Number, "decr clamps at 0")
				h.set(t, "max", "18446744073709551615")
				assert.Equal(t, uint64(0), incr("max", 1).Number, "incr wraps at 2^64")
				h.set(t, "z", "007") // not canonical: the read-modify-write path
				assert.Equal(t, uint64(8), incr("z", 1).Number)
				assert.Equal(t, "8", h.get(t, "z"))
				h.set(t, "s", "abc")
				r = incr("s", 1)
				require.Equal(t, gateway.OutcomeError, r.Outcome)
				assert.Equal(t, ndbclient.CodeNotNumeric, ndbclient.CodeOf(r.Err))
				assert.Equal(t, "abc", h.get(t, "s"), "a failed incr changes nothing")
				h.set(t, "a", "1")
				h.do(t, gateway.VerbAppend, "2", nil, "a")
				assert.Equal(t, uint64(13), incr("a", 1).Number, "append made it 12")
			})
			t.Run("delete touch", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				assert.Equal(t, gateway.OutcomeNotFound, h.do(t, gateway.VerbDelete, "", nil, "k").Outcome)
				assert.Equal(t, gateway.OutcomeNotFound, h.do(t, gateway.VerbTouch, "", nil, "k").Outcome)
				h.set(t, "k", "v")
				assert.Equal(t, gateway.OutcomeTouched, h.do(t, gateway.VerbTouch, "", func(r *gateway.Request) { r.Exptime = 10 }, "k").Outcome)
				h.clock.Add(5)
				assert.Equal(t, "v", h.get(t, "k"))
				h.clock.Add(6)
				assert.Equal(t, "<miss>", h.get(t, "k"), "touch set a 10s expiry")
				h.set(t, "d", "v")
				assert.Equal(t, gateway.OutcomeDeleted, h.do(t, gateway.VerbDelete, "", nil, "d").Outcome)
				assert.Equal(t, "<miss>", h.get(t, "d"))
			})
			t.Run("expiry rules", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				now := h.clock.Load()
				for _, tc := range []struct {
					key     string
					exptime int64
					at      int64   // the item's expiry as a get reports it (unix seconds, 0 never)
					alive   []int64 // seconds from now when it must be alive
					dead    []int64
				}{
					{"never", 0, 0, []int64{0, 1 << 20}, nil},
					{"relative", 100, now + 100, []int64{0, 99}, []int64{100, 1000}},
					{"negative", -1, 0, nil, []int64{0}},
					{"absolute", now + 50, now + 50, []int64{0, 49}, []int64{50}},
					{"absolute-past", now - 3600*24*365, 0, nil, []int64{0}},
				} {
					h.clock.Store(now)
					h.do(t, gateway.VerbSet, "v", func(r *gateway.Request) { r.Exptime = tc.exptime }, tc.key)
					if tc.alive != nil {
						r := h.do(t, gateway.VerbGet, "", nil, tc.key)
						require.True(t, r.Items[0].Hit, tc.key)
						assert.Equal(t, uint32(tc.at), r.Items[0].Expire, "%s reads back its expiry", tc.key)
					}
					for _, s := range tc.alive {
						h.clock.Store(now + s)
						assert.Equal(t, "v", h.get(t, tc.key), "%s alive at +%d", tc.key, s)
					}
					for _, s := range tc.dead {
						h.clock.Store(now + s)
						assert.Equal(t, "<miss>", h.get(t, tc.key), "%s dead at +%d", tc.key, s)
					}
				}
				h.clock.Store(now)
				h.do(t, gateway.VerbSet, "v", func(r *gateway.Request) { r.Exptime = 5 }, "x")
				h.clock.Add(10)
				assert.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbAdd, "new", nil, "x").Outcome, "add over an expired item")
			})
			t.Run("gat", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				h.set(t, "k", "v")
				r := h.do(t, gateway.VerbGat, "", func(r *gateway.Request) { r.Exptime = 10 }, "k", "missing")
				require.Equal(t, gateway.OutcomeValues, r.Outcome)
				require.Len(t, r.Items, 2)
				assert.True(t, r.Items[0].Hit)
				assert.Equal(t, "v", string(r.Items[0].Value))
				assert.False(t, r.Items[1].Hit)
				h.clock.Add(11)
				assert.Equal(t, "<miss>", h.get(t, "k"))
			})
			t.Run("multi get", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				var keys []string
				for i := 0; i < 100; i++ {
					keys = append(keys, fmt.Sprintf("key-%d", i))
					if i%3 != 0 {
						h.set(t, keys[i], fmt.Sprintf("value-%d", i))
					}
				}
				r := h.do(t, gateway.VerbGet, "", nil, keys...)
				require.Len(t, r.Items, 100)
				for i, it := range r.Items {
					assert.Equal(t, keys[i], string(it.Key))
					if i%3 == 0 {
						assert.False(t, it.Hit, keys[i])
					} else {
						assert.True(t, it.Hit, keys[i])
						assert.Equal(t, fmt.Sprintf("value-%d", i), string(it.Value))
					}
				}
				assert.Equal(t, uint64(100), h.svc.Stat(gateway.StatCmdGet))
				assert.Equal(t, uint64(66), h.svc.Stat(gateway.StatGetHits))
			})
			t.Run("flush_all", func(t *testing.T) {
				h := newHarnessOn(t, d.wrap, table())
				h.set(t, "a", "1")
				h.set(t, "b", "2")
				h.svc.FlushAll(0)
				assert.Equal(t, "<miss>", h.get(t, "a"))
				assert.Equal(t, "<miss>", h.get(t, "b"))
				h.set(t, "c", "3")
				h.svc.FlushAll(1)
				assert.Equal(t, "3", h.get(t, "c"), "a delayed flush has not happened yet")
				require.Eventually(t, func() bool { return h.get(t, "c") == "<miss>" }, 5*time.Second, 50*time.Millisecond)
			})
		})
	}
}

func TestPolicies(t *testing.T) {
	h := newHarness(t, func(d ndbclient.Driver) ndbclient.Driver { return d },
		gateway.Route{Prefix: "loc:", Policy: gateway.PolicyLocal},
		gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching},
		gateway.Route{Prefix: "p:", Policy: gateway.PolicyNDB},
	)
	// The prefix is stripped: "p:x" and "x" are the same row of the same table.
	h.set(t, "p:x", "via-prefix")
	assert.Equal(t, "via-prefix", h.get(t, "x"))
	// local-only data is not in the backend.
	h.set(t, "loc:y", "local")
	assert.Equal(t, "local", h.get(t, "loc:y"))
	assert.Equal(t, "<miss>", h.get(t, "y"))
	// caching: a backend row is read through and then served from the local cache.
	h.set(t, "z", "backend")
	assert.Equal(t, "backend", h.get(t, "c:z"))
	assert.Equal(t, "backend", h.get(t, "loc:z"), "the read filled the local cache")
	// a caching write goes to the backend and drops the stale local copy.
	h.set(t, "c:z", "new")
	assert.Equal(t, "new", h.get(t, "z"))
	assert.Equal(t, "<miss>", h.get(t, "loc:z"))
	assert.Equal(t, "new", h.get(t, "c:z"))
}

func TestNoRouteIsAClearError(t *testing.T) {
	eng := embedded.New(embedded.Config{})
	defer eng.Close()
	tbl, err := eng.CreateTable(gateway.DemoTable(itemMax))
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Backend: ndbclient.NewClient(eng), Routes: []gateway.Route{{Prefix: "app:", Container: c}}})
	require.NoError(t, err)
	r := svc.NewRequest()
	done := make(chan struct{}, 1)
	r.Done = func(*gateway.Request) { done <- struct{}{} }
	r.Verb = gateway.VerbSet
	r.AddKey([]byte("other:k"))
	svc.Do(r)
	<-done
	require.Equal(t, gateway.OutcomeError, r.Outcome)
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(r.Err))
	_ = context.Background()
}

// A request pinned to a container's route skips prefix matching: the key is
// stored as sent, and the memcache port sees it under the route's prefix.
func TestPinnedRouteAndRun(t *testing.T) {
	h := newHarness(t, drivers[1].wrap, gateway.Route{Prefix: "s:", Policy: gateway.PolicyNDB})
	rt, ok := h.svc.RouteOf(gateway.DefaultContainerName)
	require.True(t, ok)
	_, ok = h.svc.RouteOf("nope")
	assert.False(t, ok)

	r := h.svc.NewRequest()
	r.Verb, r.Route = gateway.VerbSet, rt
	r.AddKey([]byte("s:abc"))
	r.SetValue([]byte("v1"))
	h.svc.Run(r)
	require.Equal(t, gateway.OutcomeStored, r.Outcome, "%v", r.Err)

	// Unpinned, "s:abc" strips to "abc"; pinned, it stays "s:abc".
	got := h.do(t, gateway.VerbGet, "", nil, "s:abc")
	assert.False(t, got.Items[0].Hit)
	got = h.do(t, gateway.VerbGet, "", nil, "s:s:abc")
	require.True(t, got.Items[0].Hit)
	assert.Equal(t, "v1", string(got.Items[0].Value))
}

// readProjections records, by key, the columns each read op names.
type readProjections struct {
	ndbclient.Driver
	mu    *sync.Mutex
	reads map[string][][]int
}

func (d readProjections) record(b *ndbclient.Batch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, op := range b.Ops {
		if op.Kind == ndbclient.OpRead {
			k := string(op.Key[0].B)
			d.reads[k] = append(d.reads[k], slices.Clone(op.Read))
		}
	}
}

func (d readProjections) Execute(ctx context.Context, b *ndbclient.Batch) error {
	d.record(b)
	return d.Driver.Execute(ctx, b)
}

func (d readProjections) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.record(b)
	d.Driver.Submit(b, done)
}

// A get's Omit (memcache text get: cas and expiry; gets and binary gets:
// expiry) takes those columns out of its reads, and it answers with the same
// values, flags and whatever it does not omit as a full get, counters
// included; what it omits is 0. A caching key still reads the whole row,
// which its local copy keeps, and gat reads everything.
func TestGetOmits(t *testing.T) {
	for _, drv := range drivers {
		t.Run(drv.name, func(t *testing.T) {
			var mu sync.Mutex
			reads := map[string][][]int{} // both drivers': the local copy's and the backend's
			h := newHarness(t, func(d ndbclient.Driver) ndbclient.Driver {
				return readProjections{Driver: drv.wrap(d), mu: &mu, reads: reads}
			}, gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching})
			take := func() map[string][][]int {
				mu.Lock()
				defer mu.Unlock()
				out := maps.Clone(reads)
				clear(reads)
				return out
			}
			tbl := gateway.DemoTable(itemMax)
			cas, expire := tbl.ColumnIndex("cas_value"), tbl.ColumnIndex("expire_time")
			require.GreaterOrEqual(t, cas, 0)
			require.GreaterOrEqual(t, expire, 0)
			h.do(t, gateway.VerbSet, "hello", func(r *gateway.Request) { r.Flags, r.Exptime = 42, 3600 }, "k")
			h.do(t, gateway.VerbSet, "5", nil, "n")
			h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = 2 }, "n")
			h.do(t, gateway.VerbSet, "cached", func(r *gateway.Request) { r.Flags = 9 }, "c:c")
			take()

			type item struct {
				value string
				flags uint32
				cas   uint64
				exp   uint32
			}
			keys := []string{"k", "n", "c:c", "missing"}
			getAll := func(verb gateway.Verb, omit gateway.Omit) []item {
				r := h.do(t, verb, "", func(r *gateway.Request) { r.Omit, r.Exptime = omit, 3600 }, keys...)
				require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
				var out []item
				for _, it := range r.Items {
					require.NoError(t, it.Err)
					if it.Hit {
						out = append(out, item{string(it.Value), it.Flags, it.Cas, it.Expire})
					} else {
						out = append(out, item{value: "<miss>"})
					}
				}
				return out
			}
			full := getAll(gateway.VerbGet, 0)
			fullReads := take()
			require.Len(t, full, 4)
			assert.Equal(t, []string{"hello", "7", "cached", "<miss>"}, []string{full[0].value, full[1].value, full[2].value, full[3].value})
			assert.Equal(t, uint32(42), full[0].flags)
			assert.NotZero(t, full[0].cas)
			assert.NotZero(t, full[0].exp)
			for _, k := range []string{"k", "n", "c", "missing"} { // the route takes "c:" off
				require.NotEmpty(t, fullReads[k], "key %s read", k)
				for _, rd := range fullReads[k] {
					assert.Contains(t, rd, cas, "a full get of %s", k)
					assert.Contains(t, rd, expire, "a full get of %s", k)
				}
			}

			for _, omit := range []gateway.Omit{gateway.OmitCas | gateway.OmitExpire, gateway.OmitCas, gateway.OmitExpire} {
				lean := getAll(gateway.VerbGet, omit)
				leanReads := take()
				for i := range full {
					assert.Equal(t, full[i].value, lean[i].value, "omit %d, item %d", omit, i)
					assert.Equal(t, full[i].flags, lean[i].flags, "omit %d, item %d", omit, i)
				}
				for _, i := range []int{0, 1} {
					if omit&gateway.OmitCas != 0 {
						assert.Zero(t, lean[i].cas, "omit %d, item %d: not read", omit, i)
					} else {
						assert.Equal(t, full[i].cas, lean[i].cas, "omit %d, item %d", omit, i)
					}
					if omit&gateway.OmitExpire != 0 {
						assert.Zero(t, lean[i].exp, "omit %d, item %d: not read", omit, i)
					} else {
						assert.Equal(t, full[i].exp, lean[i].exp, "omit %d, item %d", omit, i)
					}
				}
				assert.Equal(t, full[2], lean[2], "omit %d: the caching key read its whole row", omit)
				for _, x := range []struct {
					col  int
					omit gateway.Omit
				}{{cas, gateway.OmitCas}, {expire, gateway.OmitExpire}} {
					for _, k := range []string{"k", "n", "c", "missing"} {
						require.NotEmpty(t, leanReads[k], "omit %d, key %s read", omit, k)
						for _, rd := range leanReads[k] {
							if k == "c" || omit&x.omit == 0 {
								assert.Contains(t, rd, x.col, "omit %d, a get of %s", omit, k)
							} else {
								assert.NotContains(t, rd, x.col, "omit %d, a get of %s", omit, k)
							}
						}
					}
				}
			}

			// gat answers with the new expiry and reads the row's cas.
			gat := getAll(gateway.VerbGat, gateway.OmitCas|gateway.OmitExpire)
			gatReads := take()
			assert.Equal(t, full[0].cas, gat[0].cas)
			assert.NotZero(t, gat[0].exp)
			for _, rd := range gatReads["k"] {
				assert.Contains(t, rd, cas, "gat")
			}
		})
	}
}
