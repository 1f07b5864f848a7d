package gateway_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// smallColumn is the value column's length in newSmallHarness: shorter
// than the item size limit, as ndbmemcache's demo_table (13,500 bytes) is
// shorter than memcached's 1 MiB.
const smallColumn = 16

func newSmallHarness(t *testing.T, wrap func(ndbclient.Driver) ndbclient.Driver) *harness {
	def := gateway.MemcacheTable("ndbmemcache", "small_values", "mkey", "string_value", smallColumn)
	return newHarnessOn(t, wrap, def, gateway.Route{Prefix: "c:", Policy: gateway.PolicyCaching})
}

// A store whose value its column cannot hold fails with TooLarge. By
// default it changes nothing, as a failed REST or gRPC write must not; with
// DropOnTooLarge (memcache's set) the key's old item is gone before the
// refusal is answered, from the backend and from the local cache.
func TestStoreTooLongForItsColumn(t *testing.T) {
	fits, long := strings.Repeat("f", smallColumn), strings.Repeat("l", smallColumn+1)
	drop := func(r *gateway.Request) { r.DropOnTooLarge = true }
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newSmallHarness(t, d.wrap)
			for _, key := range []string{"k", "c:k"} {
				require.Equal(t, gateway.OutcomeStored, h.set(t, key, "old").Outcome)
				require.Equal(t, "old", h.get(t, key), "a caching key is now in the local cache too")

				r := h.set(t, key, long)
				require.Equal(t, gateway.OutcomeError, r.Outcome)
				assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err))
				assert.Equal(t, "old", h.get(t, key), "without DropOnTooLarge the refusal changes nothing")

				r = h.do(t, gateway.VerbSet, long, drop, key)
				require.Equal(t, gateway.OutcomeError, r.Outcome)
				assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err))
				assert.Zero(t, r.NewCas)
				assert.Equal(t, "<miss>", h.get(t, key), "the refused set dropped the old item")

				r = h.do(t, gateway.VerbSet, long, drop, key)
				assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err), "refused as well with no item to drop")

				require.Equal(t, gateway.OutcomeStored, h.do(t, gateway.VerbSet, fits, drop, key).Outcome, "a value of the column's length fits")
				assert.Equal(t, fits, h.get(t, key))
			}
			// Every store of a whole value drops (memcached's meta set
			// does in every mode), cas and add included.
			for _, verb := range []gateway.Verb{gateway.VerbAdd, gateway.VerbReplace, gateway.VerbCas} {
				set := h.set(t, "v", "old")
				r := h.do(t, verb, long, func(r *gateway.Request) { r.DropOnTooLarge, r.Cas = true, set.NewCas }, "v")
				assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Err), "verb %v", verb)
				assert.Equal(t, "<miss>", h.get(t, "v"), "verb %v", verb)
			}
		})
	}
}

// In a set of several keys, a value too long for its column fails its key
// alone; with DropOnTooLarge the key's old item is dropped too.
func TestSetOfSeveralKeysTooLongForTheColumn(t *testing.T) {
	long := strings.Repeat("l", smallColumn+1)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			h := newSmallHarness(t, d.wrap)
			keys := []string{"a", "b", "c:b", "missing"}
			values := []string{"1", long, long, long}
			for _, dropping := range []bool{false, true} {
				for _, k := range keys[:3] {
					require.Equal(t, gateway.OutcomeStored, h.set(t, k, "old").Outcome)
					require.Equal(t, "old", h.get(t, k))
				}
				r := h.req
				r.Reset()
				r.Verb, r.DropOnTooLarge = gateway.VerbSet, dropping
				for i, k := range keys {
					r.AddSet([]byte(k), []byte(values[i]), 0, 0)
				}
				h.run(t, r)
				require.Equal(t, gateway.OutcomeValues, r.Outcome)
				assert.True(t, r.Items[0].Hit)
				for i := 1; i < len(keys); i++ {
					assert.False(t, r.Items[i].Hit, "%s", keys[i])
					assert.Zero(t, r.Items[i].Cas, "%s", keys[i])
					assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(r.Items[i].Err), "%s", keys[i])
				}
				assert.Equal(t, "1", h.get(t, "a"))
				want := "old"
				if dropping {
					want = "<miss>"
				}
				assert.Equal(t, want, h.get(t, "b"), "dropping %v", dropping)
				assert.Equal(t, want, h.get(t, "c:b"), "dropping %v: the local cache's copy too", dropping)
				assert.Equal(t, "<miss>", h.get(t, "missing"))
			}
		})
	}
}
