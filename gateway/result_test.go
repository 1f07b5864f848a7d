package gateway_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// The classes the REST and gRPC front ends translate: each outcome that is
// not a success gets one, with a canonical error naming the key.
func TestResultClasses(t *testing.T) {
	h := newHarness(t, drivers[0].wrap)
	cas := h.set(t, "k", "text").NewCas
	for _, tc := range []struct {
		name  string
		verb  gateway.Verb
		key   string
		set   func(r *gateway.Request)
		class gateway.Class
		code  ndbclient.Code
		msg   string
	}{
		{"set", gateway.VerbSet, "s", nil, gateway.ClassOK, ndbclient.CodeOK, ""},
		{"add of an existing key", gateway.VerbAdd, "k", nil, gateway.ClassExists, ndbclient.CodeDuplicate, `key "k" exists in container "default"`},
		{"replace of a missing key", gateway.VerbReplace, "nope", nil, gateway.ClassNotFound, ndbclient.CodeNotFound, `key "nope" not found in container "default"`},
		{"append to a missing key", gateway.VerbAppend, "nope", nil, gateway.ClassNotFound, ndbclient.CodeNotFound, `key "nope" not found`},
		{"cas of another version", gateway.VerbCas, "k", func(r *gateway.Request) { r.Cas = cas + 1 }, gateway.ClassChanged, ndbclient.CodeConditionFailed, "cas mismatch"},
		{"cas of a missing key", gateway.VerbCas, "nope", func(r *gateway.Request) { r.Cas = cas }, gateway.ClassNotFound, ndbclient.CodeNotFound, `"nope" not found`},
		{"delete of a missing key", gateway.VerbDelete, "nope", nil, gateway.ClassNotFound, ndbclient.CodeNotFound, `"nope" not found`},
		{"incr of text", gateway.VerbIncr, "k", func(r *gateway.Request) { r.Delta = 1 }, gateway.ClassError, ndbclient.CodeNotNumeric, `key "k": the value is not a decimal number`},
		{"get of a missing key", gateway.VerbGet, "nope", nil, gateway.ClassOK, ndbclient.CodeOK, ""},
	} {
		r := h.do(t, tc.verb, "v", tc.set, tc.key)
		class, err := r.Result()
		assert.Equal(t, tc.class, class, tc.name)
		assert.Equal(t, tc.code, ndbclient.CodeOf(err), tc.name)
		if tc.msg != "" {
			require.Error(t, err, tc.name)
			assert.Contains(t, err.Error(), tc.msg, tc.name)
		}
	}

	// A get's keys answer each for itself.
	r := h.do(t, gateway.VerbGet, "", nil, "k", "nope")
	class, err := r.Result()
	require.NoError(t, err)
	assert.Equal(t, gateway.ClassOK, class)
	class, err = r.ItemResult(0)
	assert.Equal(t, gateway.ClassOK, class)
	assert.NoError(t, err)
	class, err = r.ItemResult(1)
	assert.Equal(t, gateway.ClassNotFound, class)
	assert.ErrorIs(t, err, ndbclient.ErrNotFound)
	assert.ErrorContains(t, err, `key "nope" not found in container "default"`)
}
