package gateway_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// ndbmemcache's policies, as its metadata script defines them, each under a
// prefix of one table: "" is the backend's own view of the rows.
var ndbmemcachePolicies = []gateway.Route{
	{Prefix: "mc:", Policy: gateway.Policy{Get: gateway.AccessLocal, Set: gateway.AccessLocal, Delete: gateway.AccessLocal, KeepOnFlush: true}},
	{Prefix: "ndb:", Policy: gateway.Policy{Get: gateway.AccessNDB, Set: gateway.AccessNDB, Delete: gateway.AccessNDB, KeepOnFlush: true}},
	{Prefix: "test:", Policy: gateway.Policy{Get: gateway.AccessNDB, Set: gateway.AccessNDB, Delete: gateway.AccessNDB}},
	{Prefix: "c:", Policy: gateway.Policy{Get: gateway.AccessCaching, Set: gateway.AccessCaching, Delete: gateway.AccessCaching, KeepOnFlush: true}},
	{Prefix: "cld:", Policy: gateway.Policy{Get: gateway.AccessCaching, Set: gateway.AccessCaching, Delete: gateway.AccessLocal, KeepOnFlush: true}},
	{Prefix: "ro:", Policy: gateway.Policy{Get: gateway.AccessNDB, Set: gateway.AccessDisabled, Delete: gateway.AccessDisabled, KeepOnFlush: true}},
}

func TestNdbmemcachePolicies(t *testing.T) {
	outcome := func(h *harness, verb gateway.Verb, key, value string) gateway.Outcome {
		return h.do(t, verb, value, nil, key).Outcome
	}
	t.Run("ndb-read-only refuses writes as ndbmemcache does", func(t *testing.T) {
		h := newHarness(t, same, ndbmemcachePolicies...)
		h.set(t, "k", "v")
		assert.Equal(t, "v", h.get(t, "ro:k"))
		assert.Equal(t, gateway.OutcomeNotStored, outcome(h, gateway.VerbSet, "ro:k", "x"))
		assert.Equal(t, gateway.OutcomeNotStored, outcome(h, gateway.VerbAppend, "ro:k", "x"))
		assert.Equal(t, gateway.OutcomeNotStored, outcome(h, gateway.VerbIncr, "ro:k", ""), "incr needs gets and sets on NDB")
		assert.Equal(t, gateway.OutcomeNotFound, outcome(h, gateway.VerbDelete, "ro:k", ""))
		assert.Equal(t, "v", h.get(t, "k"), "nothing changed")
		assert.False(t, h.svc.SetsCanShareABatch(), "a run of sets would not be refused")
	})
	t.Run("a disabled get misses", func(t *testing.T) {
		h := newHarness(t, same, gateway.Route{Prefix: "wo:", Policy: gateway.Policy{Get: gateway.AccessDisabled}})
		assert.Equal(t, gateway.OutcomeStored, outcome(h, gateway.VerbSet, "wo:k", "v"))
		assert.Equal(t, "<miss>", h.get(t, "wo:k"))
		assert.Equal(t, "v", h.get(t, "k"))
	})
	t.Run("caching-with-local-deletes deletes only the local copy", func(t *testing.T) {
		h := newHarness(t, same, ndbmemcachePolicies...)
		h.set(t, "cld:k", "v")
		assert.Equal(t, "v", h.get(t, "cld:k"), "read through, and cached")
		assert.Equal(t, "v", h.get(t, "mc:k"), "the local copy")
		assert.Equal(t, gateway.OutcomeDeleted, outcome(h, gateway.VerbDelete, "cld:k", ""))
		assert.Equal(t, "<miss>", h.get(t, "mc:k"), "the local copy is gone")
		assert.Equal(t, "v", h.get(t, "k"), "the backend row stays")
		assert.Equal(t, "v", h.get(t, "cld:k"), "and is read through again")
		assert.Equal(t, gateway.OutcomeDeleted, outcome(h, gateway.VerbDelete, "c:k", ""), "caching deletes both")
		assert.Equal(t, "<miss>", h.get(t, "k"))
		assert.Equal(t, "<miss>", h.get(t, "mc:k"))
		assert.Equal(t, gateway.OutcomeNotFound, outcome(h, gateway.VerbDelete, "cld:k", ""), "no local copy")
	})
	t.Run("incr goes local without NDB, to NDB with it", func(t *testing.T) {
		h := newHarness(t, same, ndbmemcachePolicies...)
		h.set(t, "mc:n", "5")
		assert.Equal(t, uint64(6), h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = 1 }, "mc:n").Number)
		assert.Equal(t, "<miss>", h.get(t, "n"), "memcache-only is not in the backend")
		h.set(t, "ndb:n", "7")
		assert.Equal(t, uint64(9), h.do(t, gateway.VerbIncr, "", func(r *gateway.Request) { r.Delta = 2 }, "c:n").Number)
		assert.Equal(t, "9", h.get(t, "n"))
	})
	t.Run("flush_all keeps rows where flush_from_db is false", func(t *testing.T) {
		h := newHarness(t, same)
		h.set(t, "k", "v")
		// Without the catch-all "" route, which flushes from the backend.
		require.NoError(t, h.svc.SetRoutes(withContainer(h, ndbmemcachePolicies[1], ndbmemcachePolicies[0])))
		assert.Equal(t, "v", h.get(t, "ndb:k"))
		h.set(t, "mc:k", "local")
		require.NoError(t, h.svc.FlushAll(0))
		assert.Equal(t, "v", h.get(t, "ndb:k"), "ndb-only does not flush from the database")
		assert.Equal(t, "<miss>", h.get(t, "mc:k"), "the local cache is always flushed")
		require.NoError(t, h.svc.SetRoutes(withContainer(h, ndbmemcachePolicies[2])))
		require.NoError(t, h.svc.FlushAll(0))
		assert.Equal(t, "<miss>", h.get(t, "test:k"), "ndb-test flushes from the database")
	})
}

func TestRefusedPrefixFailsItsKeysOnly(t *testing.T) {
	why := ndbclient.Errorf(ndbclient.CodeSchemaError, "container demo_ext keeps large values in external_values")
	h := newHarness(t, same, gateway.Route{Prefix: "b:", Refused: why})
	h.set(t, "k", "v")
	r := h.do(t, gateway.VerbGet, "", nil, "b:k", "k")
	require.Equal(t, gateway.OutcomeValues, r.Outcome)
	assert.ErrorIs(t, r.Items[0].Err, why, "the refused prefix does not fall through to the catch-all")
	assert.True(t, r.Items[1].Hit)
	r = h.do(t, gateway.VerbSet, "x", nil, "b:k")
	assert.Equal(t, gateway.OutcomeError, r.Outcome)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(r.Err))
	assert.Equal(t, "v", h.get(t, "k"))
}

func TestSetRoutesSwapsWhileServing(t *testing.T) {
	h := newHarness(t, same)
	h.set(t, "k", "v")
	routes := withContainer(h, gateway.Route{Prefix: "new:"})
	require.NoError(t, h.svc.SetRoutes(routes))
	assert.Equal(t, "v", h.get(t, "new:k"))
	r := h.do(t, gateway.VerbGet, "", nil, "k")
	require.Equal(t, gateway.OutcomeValues, r.Outcome)
	assert.False(t, r.Items[0].Hit, "no route for the bare key any more")
	assert.Error(t, h.svc.SetRoutes([]gateway.Route{{Prefix: "x:"}}), "a route without a container is refused")
	assert.Equal(t, "v", h.get(t, "new:k"), "and changes nothing")
}

func same(d ndbclient.Driver) ndbclient.Driver { return d }

// withContainer gives routes the harness's one container.
func withContainer(h *harness, routes ...gateway.Route) []gateway.Route {
	c := h.svc.Containers()[0]
	for i := range routes {
		routes[i].Container = c
	}
	return routes
}

// heldReads is a driver whose batches apply at once but, once armed, the
// next batch holding a read completes only when released: a backend read
// that is slow to answer.
type heldReads struct {
	ndbclient.Driver
	mu      sync.Mutex
	armed   bool
	release chan struct{}
	held    chan struct{}
}

func (d *heldReads) arm() {
	d.mu.Lock()
	d.armed, d.release, d.held = true, make(chan struct{}), make(chan struct{})
	d.mu.Unlock()
}

func (d *heldReads) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	hold := d.armed && len(b.Ops) > 0 && b.Ops[0].Kind == ndbclient.OpRead
	release, held := d.release, d.held
	if hold {
		d.armed = false
	}
	d.mu.Unlock()
	if !hold {
		d.Driver.Submit(b, done)
		return
	}
	d.Driver.Submit(b, func(b *ndbclient.Batch, err error) {
		close(held)
		go func() { <-release; done(b, err) }()
	})
}

// TestCachingFillDoesNotOutliveAWrite: a caching get misses the local copy
// and reads the backend; before its answer comes, a set through the same
// gateway writes the backend and drops the copy. The get's old value must
// not then fill the copy, or the gateway would serve it after its own
// write. (tests/lin's caching model caught this on a live cluster.)
func TestCachingFillDoesNotOutliveAWrite(t *testing.T) {
	var hold *heldReads
	wrap := func(d ndbclient.Driver) ndbclient.Driver {
		if hold == nil { // the backend is wrapped first
			hold = &heldReads{Driver: d}
			return hold
		}
		return d
	}
	h := newHarness(t, wrap, gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching})
	h.set(t, "c:k", "old")
	hold.arm()
	get := h.svc.NewRequest()
	got := make(chan struct{})
	get.Done = func(*gateway.Request) { close(got) }
	get.Verb = gateway.VerbGet
	get.AddKey([]byte("c:k"))
	h.svc.Do(get)
	<-hold.held // the get has read "old" from the backend
	h.set(t, "c:k", "new")
	close(hold.release)
	<-got
	require.True(t, get.Items[0].Hit)
	assert.Equal(t, "old", string(get.Items[0].Value), "the get read before the set")
	assert.Equal(t, "new", h.get(t, "c:k"), "the gateway serves its own write, not the older fill")
}
