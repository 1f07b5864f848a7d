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
