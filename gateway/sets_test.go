package gateway_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// doSets runs one set of several keys: key i gets value values[i], flags i
// and exptime 0, except where exptimes says otherwise.
func (h *harness) doSets(t *testing.T, keys, values []string, exptimes map[int]int64) *gateway.Request {
	t.Helper()
	r := h.req
	r.Reset()
	r.Verb = gateway.VerbSet
	for i, k := range keys {
		r.AddSet([]byte(k), []byte(values[i]), uint32(i), exptimes[i])
	}
	return h.run(t, r)
}

// A set of several keys stores each with its own value, flags and expiry,
// answers per key, and counts each key as memcached's cmd_set does.
func TestSetOfSeveralKeys(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newHarness(t, d.wrap)
			sets, items := h.svc.Stat(gateway.StatCmdSet), h.svc.Stat(gateway.StatTotalItems)
			r := h.doSets(t, []string{"a", "b", "c"}, []string{"1", "two", "3"}, map[int]int64{2: 100})
			require.Equal(t, gateway.OutcomeValues, r.Outcome, "err %v", r.Err)
			require.Len(t, r.Items, 3)
			seen := map[uint64]bool{}
			for i, it := range r.Items {
				assert.True(t, it.Hit, "item %d stored", i)
				assert.NoError(t, it.Err)
				assert.NotZero(t, it.Cas)
				assert.False(t, seen[it.Cas], "each key is a version of its own")
				seen[it.Cas] = true
			}
			cas := []uint64{r.Items[0].Cas, r.Items[1].Cas, r.Items[2].Cas}
			assert.Equal(t, sets+3, h.svc.Stat(gateway.StatCmdSet))
			assert.Equal(t, items+3, h.svc.Stat(gateway.StatTotalItems))

			g := h.do(t, gateway.VerbGet, "", nil, "a", "b", "c")
			for i, want := range []string{"1", "two", "3"} {
				require.True(t, g.Items[i].Hit)
				assert.Equal(t, want, string(g.Items[i].Value))
				assert.Equal(t, uint32(i), g.Items[i].Flags)
				assert.Equal(t, cas[i], g.Items[i].Cas)
			}
			assert.Zero(t, g.Items[0].Expire)
			assert.Equal(t, uint32(h.clock.Load()+100), g.Items[2].Expire)
			h.clock.Add(101)
			assert.Equal(t, "<miss>", h.get(t, "c"), "its own exptime")
			assert.Equal(t, "1", h.get(t, "a"))
		})
	}
}

// A key of a set of several that cannot be stored fails alone, with the
// error its single set would get; the other keys are stored.
func TestSetOfSeveralKeysFailsPerKey(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	long := strings.Repeat("k", 300) // longer than the key column
	big := strings.Repeat("v", itemMax+1)
	r := h.doSets(t, []string{"ok1", long, "big", "ok2"}, []string{"1", "2", big, "4"}, nil)
	require.Equal(t, gateway.OutcomeValues, r.Outcome)
	assert.True(t, r.Items[0].Hit)
	assert.True(t, r.Items[3].Hit)
	for _, i := range []int{1, 2} {
		assert.False(t, r.Items[i].Hit, "item %d", i)
		assert.Zero(t, r.Items[i].Cas, "item %d", i)
		require.Error(t, r.Items[i].Err, "item %d", i)
	}
	assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Items[2].Err))
	longCode := ndbclient.CodeOf(r.Items[1].Err)
	single := h.do(t, gateway.VerbSet, "2", nil, long) // h.req again
	assert.Equal(t, ndbclient.CodeOf(single.Err), longCode, "as a single set")
	assert.Equal(t, "1", h.get(t, "ok1"))
	assert.Equal(t, "4", h.get(t, "ok2"))
	assert.Equal(t, "<miss>", h.get(t, "big"))
}

// Routes that write through different clients cannot share a set of
// several keys: the service says so, so a front end sends them apart.
func TestSetsShareABatchOnlyOnOneWritePath(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	assert.True(t, h.svc.SetsCanShareABatch())
	h = newHarness(t, drivers[0].wrap, gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching})
	assert.True(t, h.svc.SetsCanShareABatch(), "caching writes go to the backend")
	h = newHarness(t, drivers[0].wrap, gateway.Route{Prefix: "loc:", Policy: gateway.PolicyLocal})
	require.False(t, h.svc.SetsCanShareABatch())
	r := h.doSets(t, []string{"a", "loc:b"}, []string{"1", "2"}, nil)
	assert.True(t, r.Items[0].Hit)
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(r.Items[1].Err))
}

// A caching key stored by a set of several drops its stale local copy, as
// its single set does.
func TestSetOfSeveralKeysInvalidatesTheLocalCache(t *testing.T) {
	h := newHarness(t, drivers[1].wrap,
		gateway.Route{Prefix: "loc:", Policy: gateway.PolicyCaching},
		gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching})
	h.set(t, "z", "old")
	assert.Equal(t, "old", h.get(t, "c:z"), "read through: now cached")
	r := h.doSets(t, []string{"c:z", "y"}, []string{"new", "1"}, nil)
	require.True(t, r.Items[0].Hit)
	assert.Equal(t, "new", h.get(t, "c:z"))
}
