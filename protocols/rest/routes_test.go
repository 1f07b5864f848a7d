package rest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// newTestHandler serves both APIs, the row API and the KV API's "default"
// container, on the embedded engine.
func newTestHandler(t testing.TB) *Handler {
	e := embedded.New(embedded.Config{Partitions: 4})
	t.Cleanup(func() { _ = e.Close() })
	tbl, err := e.CreateTable(gateway.DemoTable(4096))
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	cl := ndbclient.NewClient(e)
	svc, err := gateway.New(gateway.Options{Backend: cl, Routes: []gateway.Route{{Prefix: "", Container: c}}, ItemSizeMax: 4096})
	require.NoError(t, err)
	return New(Options{Rows: rowapi.New(cl, rowapi.Limits{MaxBatch: 16}), KV: svc, MaxMultiGet: 8})
}

// do serves one request and fails the test on any redirect: no request is
// ever answered with a 3xx.
func do(t *testing.T, h http.Handler, method, target string, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, target, rd))
	require.False(t, w.Code >= 300 && w.Code < 400, "%s %s: %d, Location %q", method, target, w.Code, w.Header().Get("Location"))
	return w
}

// requireJSONError checks an {"error":{"code","message"}} body and returns
// the error object.
func requireJSONError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) map[string]string {
	t.Helper()
	require.Equal(t, status, w.Code, "%s", w.Body)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var body struct {
		Error map[string]string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), "%s", w.Body)
	require.NotNil(t, body.Error, "%s", w.Body)
	assert.Equal(t, code, body.Error["code"])
	assert.NotEmpty(t, body.Error["message"])
	return body.Error
}

// Every 404 and 405 is the API's JSON error, and a 405 says what is allowed.
func TestRouteErrorsAreJSON(t *testing.T) {
	h := newTestHandler(t)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/", 404, ""},
		{http.MethodGet, "/nope", 404, ""},
		{http.MethodPost, "/0.1.0/nope", 404, ""},
		{http.MethodPost, "/0.1.0/db/t", 404, ""},
		{http.MethodPost, "/0.1.0/db/t/pk-read/more", 404, ""},
		{http.MethodPost, "/0.1.0/db//pk-read", 404, ""},
		{http.MethodGet, "/v1/kv", 404, ""},
		{http.MethodGet, "/v1/kv/default", 404, ""},
		{http.MethodGet, "/0.1.0/ndbmemcache/demo_table/pk-read", 405, "POST"},
		{http.MethodPut, "/0.1.0/ping", 405, "GET, HEAD"},
		{http.MethodPost, "/0.1.0/stat", 405, "GET, HEAD"},
		{http.MethodGet, "/0.1.0/batch", 405, "POST"},
		{http.MethodDelete, "/0.1.0/batchwrite", 405, "POST"},
		{http.MethodPost, "/v1/kv/default/k", 405, "DELETE, GET, HEAD, PUT"},
		{http.MethodPatch, "/v1/kv/default/_mget", 405, "DELETE, GET, HEAD, POST, PUT"},
		{http.MethodPost, "/openapi.yaml", 405, "GET, HEAD"},
	} {
		w := do(t, h, tc.method, tc.path, "")
		code := "NotFound"
		if tc.status == http.StatusMethodNotAllowed {
			code = "MethodNotAllowed"
		}
		e := requireJSONError(t, w, tc.status, code)
		assert.Contains(t, e["message"], tc.path, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.allow, w.Header().Get("Allow"), "%s %s", tc.method, tc.path)
	}

	// The routes that are there are served.
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/0.1.0/ping", "").Code)
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodHead, "/0.1.0/ping", "").Code)
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/openapi.yaml", "").Code)
	w := do(t, h, http.MethodPost, "/0.1.0/ndbmemcache/demo_table/pk-upsert", `{}`)
	requireJSONError(t, w, http.StatusBadRequest, "BadRequest")

	// With an API off its routes are not found.
	rowsOnly := New(Options{Rows: h.o.Rows})
	requireJSONError(t, do(t, rowsOnly, http.MethodGet, "/v1/kv/default/k", ""), http.StatusNotFound, "NotFound")
	kvOnly := New(Options{KV: h.o.KV})
	requireJSONError(t, do(t, kvOnly, http.MethodGet, "/0.1.0/ping", ""), http.StatusNotFound, "NotFound")
}

// Keys holding "//", "/./" or "/../" are the keys as sent: stored and read
// back under exactly that key, never redirected to a cleaned path.
func TestKVKeysAreNotCleaned(t *testing.T) {
	h := newTestHandler(t)
	for _, tc := range []struct {
		key     string
		cleaned string // the key a client following a redirect would write
	}{
		{"http://r.example/p", "http:/r.example/p"},
		{"a/./b", "a/b"},
		{"a/../b", "b"},
		{"a//b", "a/b"},
		{"/lead", "lead"},
		{"trail/", ""},
		{"a/b/./../c", "a/c"},
	} {
		value := "value of " + tc.key
		w := do(t, h, http.MethodPut, "/v1/kv/default/"+tc.key, value)
		require.Equal(t, http.StatusNoContent, w.Code, "PUT %q: %s", tc.key, w.Body)
		w = do(t, h, http.MethodGet, "/v1/kv/default/"+tc.key, "")
		require.Equal(t, http.StatusOK, w.Code, "GET %q: %s", tc.key, w.Body)
		assert.Equal(t, value, w.Body.String(), "GET %q", tc.key)
		// _mget names keys in JSON, so it sees exactly what was stored.
		w = do(t, h, http.MethodPost, "/v1/kv/default/_mget", `{"keys":[`+strconv.Quote(tc.key)+`]}`)
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		assert.Contains(t, w.Body.String(), `"found":true,"value":`+strconv.Quote(value), "_mget %q", tc.key)
		if tc.cleaned != "" {
			w = do(t, h, http.MethodPost, "/v1/kv/default/_mget", `{"keys":[`+strconv.Quote(tc.cleaned)+`]}`)
			assert.Contains(t, w.Body.String(), `"found":false`, "%q: no item under the cleaned key %q", tc.key, tc.cleaned)
		}
	}
	// DELETE too takes the key as sent.
	require.Equal(t, http.StatusNoContent, do(t, h, http.MethodDelete, "/v1/kv/default/a//b", "").Code)
	requireJSONError(t, do(t, h, http.MethodGet, "/v1/kv/default/a//b", ""), http.StatusNotFound, "NotFound")
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodGet, "/v1/kv/default/a/./b", "").Code)
}

// Percent-encoded keys work as before: %2F is a '/' inside the key, and a
// key written encoded is read back plain.
func TestKVPercentEncodedKeys(t *testing.T) {
	h := newTestHandler(t)
	w := do(t, h, http.MethodPut, "/v1/kv/default/http:%2F%2Fr.example%2Fp", "encoded")
	require.Equal(t, http.StatusNoContent, w.Code, "%s", w.Body)
	w = do(t, h, http.MethodGet, "/v1/kv/default/http://r.example/p", "")
	require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
	assert.Equal(t, "encoded", w.Body.String())
	w = do(t, h, http.MethodGet, "/v1/kv/default/"+url.PathEscape("http://r.example/p"), "")
	assert.Equal(t, "encoded", w.Body.String())

	w = do(t, h, http.MethodPut, "/v1/kv/default/a%2F.%2F..%2Fb%25", "dots")
	require.Equal(t, http.StatusNoContent, w.Code, "%s", w.Body)
	w = do(t, h, http.MethodPost, "/v1/kv/default/_mget", `{"keys":["a/./../b%"]}`)
	assert.Contains(t, w.Body.String(), `"found":true,"value":"dots"`)

	// The container is decoded too; "_mget" is a key to GET.
	w = do(t, h, http.MethodPut, "/v1/kv/def%61ult/_mget", "k")
	require.Equal(t, http.StatusNoContent, w.Code, "%s", w.Body)
	assert.Equal(t, "k", do(t, h, http.MethodGet, "/v1/kv/default/_mget", "").Body.String())

	// Key rules still apply to the decoded key.
	requireJSONError(t, do(t, h, http.MethodGet, "/v1/kv/default/a%20b", ""), http.StatusBadRequest, "InvalidArgument")
	requireJSONError(t, do(t, h, http.MethodGet, "/v1/kv/default/", ""), http.StatusBadRequest, "InvalidArgument")
	requireJSONError(t, do(t, h, http.MethodGet, "/v1/kv/nope/k", ""), http.StatusNotFound, "SchemaError")
}

// The row API's path variables are decoded, and its paths are not cleaned
// either: an unclean one is not a route.
func TestRowRoutes(t *testing.T) {
	h := newTestHandler(t)
	w := do(t, h, http.MethodPost, "/0.1.0/ndbmemcache/demo%5Ftable/pk-read", `{"filters":[{"column":"mkey","value":"x"}]}`)
	requireJSONError(t, w, http.StatusNotFound, "NotFound") // the row, not the route
	assert.NotContains(t, w.Body.String(), "no route")
	for _, p := range []string{"/0.1.0//ping", "/0.1.0/./ping", "/x/../0.1.0/ping", "//0.1.0/ping"} {
		e := requireJSONError(t, do(t, h, http.MethodGet, p, ""), http.StatusNotFound, "NotFound")
		assert.Contains(t, e["message"], "no route")
	}
}

// Options.Extra routes are GET routes beside the API's, with its 404 and 405.
func TestExtraRoutes(t *testing.T) {
	h := New(Options{Extra: map[string]http.Handler{"/healthz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}})
	w := do(t, h, http.MethodGet, "/healthz", "")
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "ok", w.Body.String())
	assert.Equal(t, http.StatusOK, do(t, h, http.MethodHead, "/healthz", "").Code)
	w = do(t, h, http.MethodPost, "/healthz", "")
	requireJSONError(t, w, http.StatusMethodNotAllowed, "MethodNotAllowed")
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
	for _, p := range []string{"/healthz/", "//healthz", "/x/../healthz"} {
		requireJSONError(t, do(t, h, http.MethodGet, p, ""), http.StatusNotFound, "NotFound")
	}
}
