package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// A batch's sub-operations each carry their own status and body: a hit, a
// miss beside its operationId, and one that did not decode.
func TestBatchReplyCodes(t *testing.T) {
	h := newTestHandler(t)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/v1/kv/default/there", strings.NewReader("v")))
	require.Equal(t, http.StatusNoContent, w.Code, "%s", w.Body)

	read := func(key, id string) string {
		return `{"relative-url":"ndbmemcache/demo_table/pk-read","body":{"filters":[{"column":"mkey","value":"` + key + `"}],"readColumns":[{"column":"string_value"}]` + id + `}}`
	}
	w = do(t, h, http.MethodPost, "/0.1.0/batch", `{"operations":[`+read("there", "")+`,`+read("gone", `,"operationId":"m"`)+
		`,{"relative-url":"ndbmemcache/demo_table/pk-read","body":{"filters":[]}}]}`)
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	var out struct {
		Result []struct {
			Code int             `json:"code"`
			Body json.RawMessage `json:"body"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out), "%s", w.Body)
	require.Len(t, out.Result, 3)
	assert.Equal(t, http.StatusOK, out.Result[0].Code)
	assert.JSONEq(t, `{"data":{"string_value":"dg=="}}`, string(out.Result[0].Body)) // varbinary: base64
	assert.Equal(t, http.StatusNotFound, out.Result[1].Code)
	var miss struct {
		OperationID string            `json:"operationId"`
		Error       map[string]string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(out.Result[1].Body, &miss))
	assert.Equal(t, "m", miss.OperationID)
	assert.Equal(t, "NotFound", miss.Error["code"])
	assert.Equal(t, http.StatusBadRequest, out.Result[2].Code)
	assert.Contains(t, string(out.Result[2].Body), `"error":{"code":"BadRequest"`)
}

// An _mget item whose key failed holds the error member beside its key.
func TestMgetItemError(t *testing.T) {
	out := appendItems(nil, []gateway.Item{{Key: []byte("a"), Err: ndbclient.Errorf(ndbclient.CodeUnavailable, "cluster gone")}, {Key: []byte("b")}}, false)
	assert.JSONEq(t, `[{"key":"a","found":false,"error":{"code":"Unavailable","message":"cluster gone"}},{"key":"b","found":false}]`,
		"["+string(out)+"]")
}

// RonDB's /stat shape.
func TestStatReply(t *testing.T) {
	w := do(t, newTestHandler(t), http.MethodGet, "/0.1.0/stat", "")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var st map[string]map[string]int64
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &st), "%s", w.Body)
	assert.ElementsMatch(t, []string{"AllocationsCount", "DeallocationsCount", "BuffersCount", "FreeBuffers"}, keys(st["MemoryStats"]))
	assert.ElementsMatch(t, []string{"NdbObjectsCreationCount", "NdbObjectsDeletionCount", "NdbObjectsTotalCount", "NdbObjectsFreeCount"}, keys(st["RonDBStats"]))
	assert.Len(t, st, 2)
}

func keys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The KV API answers each gateway class: a miss 404, a failed If-None-Match
// or If-Match 412.
func TestKVClasses(t *testing.T) {
	h := newTestHandler(t)
	put := func(key string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPut, "/v1/kv/default/"+key, strings.NewReader("v"))
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	require.Equal(t, http.StatusNoContent, put("k").Code)
	e := requireJSONError(t, put("k", "If-None-Match", "*"), http.StatusPreconditionFailed, "ConditionFailed")
	assert.Contains(t, e["message"], `key "k" exists`)
	e = requireJSONError(t, put("k", "If-Match", `"999"`), http.StatusPreconditionFailed, "ConditionFailed")
	assert.Contains(t, e["message"], "cas differs")
	requireJSONError(t, put("absent", "If-Match", `"1"`), http.StatusNotFound, "NotFound")
	e = requireJSONError(t, do(t, h, http.MethodGet, "/v1/kv/default/absent", ""), http.StatusNotFound, "NotFound")
	assert.Contains(t, e["message"], `key "absent" not found in container "default"`)
	requireJSONError(t, do(t, h, http.MethodDelete, "/v1/kv/default/absent", ""), http.StatusNotFound, "NotFound")
}
