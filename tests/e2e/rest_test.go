package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// typesConfig declares a table with every column type the row API maps.
const typesConfig = `
tables:
  - database: shop
    name: types
    primary_key: [id, region]
    columns:
      - {name: id, type: BIGINT UNSIGNED}
      - {name: region, type: VARCHAR(8)}
      - {name: i8, type: TINYINT, nullable: true}
      - {name: u8, type: TINYINT UNSIGNED, nullable: true}
      - {name: i16, type: SMALLINT, nullable: true}
      - {name: u16, type: SMALLINT UNSIGNED, nullable: true}
      - {name: i24, type: MEDIUMINT, nullable: true}
      - {name: u24, type: MEDIUMINT UNSIGNED, nullable: true}
      - {name: i32, type: INT, nullable: true}
      - {name: u32, type: INT UNSIGNED, nullable: true}
      - {name: i64, type: BIGINT, nullable: true}
      - {name: u64, type: BIGINT UNSIGNED, nullable: true}
      - {name: f, type: FLOAT, nullable: true}
      - {name: d, type: DOUBLE, nullable: true}
      - {name: money, type: "DECIMAL(10,2)", nullable: true}
      - {name: big, type: "DECIMAL(30,5)", nullable: true}
      - {name: c, type: CHAR(4), nullable: true}
      - {name: vc, type: VARCHAR(16), nullable: true}
      - {name: bin, type: BINARY(4), nullable: true}
      - {name: vb, type: VARBINARY(16), nullable: true}
      - {name: bits, type: BIT(12), nullable: true}
      - {name: day, type: DATE, nullable: true}
      - {name: at, type: DATETIME(6), nullable: true}
      - {name: ts, type: TIMESTAMP, nullable: true}
      - {name: dur, type: TIME, nullable: true}
      - {name: yr, type: YEAR, nullable: true}
api:
  limits:
    max_batch: 16
    max_body: 64k
`

// specClient sends requests to a running ndbgate and checks every request
// and response against the committed OpenAPI spec.
type specClient struct {
	t      *testing.T
	base   string
	hc     *http.Client
	router routers.Router
	apiKey string
}

var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func loadSpec(t *testing.T) routers.Router {
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join(repoRoot, "protocols", "rest", "openapi.yaml"))
		if err != nil {
			specErr = err
			return
		}
		if err = doc.Validate(context.Background()); err != nil {
			specErr = err
			return
		}
		doc.Servers = nil // match any host:port
		specRouter, specErr = gorillamux.NewRouter(doc)
	})
	require.NoError(t, specErr, "openapi.yaml")
	return specRouter
}

func newSpecClient(t *testing.T, s *server) *specClient {
	return &specClient{t: t, base: "http://" + s.restAddr, hc: &http.Client{}, router: loadSpec(t)}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as a JSON object.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body %s", r.body)
	return m
}

// errorMessage is the message of an {"error":{...}} body.
func (r response) errorMessage(t *testing.T) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	require.True(t, ok, "no error object in %s", r.body)
	return fmt.Sprint(e["code"]) + ": " + fmt.Sprint(e["message"])
}

func (c *specClient) do(method, path string, body []byte, hdr ...string) response {
	t := c.t
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil && !strings.HasPrefix(path, "/v1/kv/") || strings.HasSuffix(path, "/_mget") {
		req.Header.Set("Content-Type", "application/json")
	} else if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	if c.apiKey != "" {
		req.Header.Set("X-API-KEY", c.apiKey)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	c.checkSpec(req, body, resp, rb)
	return response{status: resp.StatusCode, header: resp.Header, body: rb}
}

// checkSpec validates a response against the spec, and the request too when
// it is one a client following the spec could send (bad-input tests send
// requests the spec forbids on purpose; their responses must still conform).
func (c *specClient) checkSpec(req *http.Request, body []byte, resp *http.Response, rb []byte) {
	t := c.t
	t.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return // a route the spec does not have, refused
		}
		t.Errorf("%s %s: not in the OpenAPI spec: %v", req.Method, req.URL.Path, err)
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(rb)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s %s -> %d %s: response does not match the OpenAPI spec: %v", req.Method, req.URL.Path, resp.StatusCode, abbrev(string(rb)), err)
	}
}

func (c *specClient) post(path string, body string) response {
	c.t.Helper()
	return c.do(http.MethodPost, path, []byte(body))
}

func startRowServer(t *testing.T, extra ...string) *server {
	cfg := writeFile(t, "ndbgate.yaml", typesConfig)
	return startServer(t, append([]string{"--config", cfg}, extra...)...)
}

// A row with the boundary values of every type.
var boundaryRow = map[string]string{
	"i8": "-128", "u8": "255", "i16": "-32768", "u16": "65535", "i24": "-8388608", "u24": "16777215",
	"i32": "-2147483648", "u32": "4294967295", "i64": "-9223372036854775808", "u64": "18446744073709551615",
	"f": "3.4028235e+38", "d": "-1.7976931348623157e+308", "money": "-99999999.99", "big": `"1234567890123456789012345.12345"`,
	"c": `"ñö"`, "vc": `"` + strings.Repeat("z", 16) + `"`, "bin": `"AAECAA=="`, "vb": `""`, "bits": `"D/8="`,
	"day": `"9999-12-31"`, "at": `"1000-01-01 00:00:00.000001"`, "ts": `"2038-01-19 03:14:07"`, "dur": `"-838:59:59"`, "yr": "2155",
}

func valuesJSON(row map[string]string) string {
	var parts []string
	for k, v := range row {
		parts = append(parts, fmt.Sprintf(`{"column":%q,"value":%s}`, k, v))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func keyFilters(id int, region string) string {
	return fmt.Sprintf(`[{"column":"id","value":%d},{"column":"region","value":%q}]`, id, region)
}

func TestRESTRowAPI(t *testing.T) {
	s := startRowServer(t)
	c := newSpecClient(t, s)

	require.Equal(t, http.StatusOK, c.do(http.MethodGet, "/0.1.0/ping", nil).status)
	st := c.do(http.MethodGet, "/0.1.0/stat", nil)
	require.Equal(t, http.StatusOK, st.status)
	assert.Contains(t, st.json(t), "RonDBStats")

	// Insert the boundary row, and a row of NULLs.
	r := c.post("/0.1.0/shop/types/pk-insert", `{"filters":`+keyFilters(1, "eu")+`,"values":`+valuesJSON(boundaryRow)+`,"operationId":"ins"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.JSONEq(t, `{"operationId":"ins"}`, string(r.body))
	r = c.post("/0.1.0/shop/types/pk-write", `{"filters":`+keyFilters(2, "eu")+`,"values":[{"column":"vc","value":null}]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	// Read it back: every value comes back as it went in.
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(1, "eu")+`,"operationId":"7"}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var got struct {
		OperationID string                     `json:"operationId"`
		Data        map[string]json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &got))
	assert.Equal(t, "7", got.OperationID)
	require.Len(t, got.Data, len(boundaryRow), "all non-key columns")
	for col, want := range boundaryRow {
		assert.Equal(t, want, string(got.Data[col]), col)
	}
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(2, "eu")+`,"readColumns":[{"column":"vc","dataReturnType":"default"},{"column":"i8"}]}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, `{"data":{"vc":null,"i8":null}}`, string(r.body), "readColumns order, NULL as null")

	// Missing rows, duplicates, updates and deletes.
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(3, "eu")+`}`)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, r.errorMessage(t), "NotFound")
	r = c.post("/0.1.0/shop/types/pk-insert", `{"filters":`+keyFilters(1, "eu")+`,"values":[]}`)
	assert.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	r = c.post("/0.1.0/shop/types/pk-update", `{"filters":`+keyFilters(9, "eu")+`,"values":[{"column":"i8","value":1}]}`)
	assert.Equal(t, http.StatusNotFound, r.status)
	r = c.post("/0.1.0/shop/types/pk-update", `{"filters":`+keyFilters(2, "eu")+`,"values":[{"column":"i8","value":-5}]}`)
	assert.Equal(t, http.StatusOK, r.status)
	r = c.post("/0.1.0/shop/types/pk-delete", `{"filters":`+keyFilters(2, "eu")+`}`)
	assert.Equal(t, http.StatusOK, r.status)
	r = c.post("/0.1.0/shop/types/pk-delete", `{"filters":`+keyFilters(2, "eu")+`}`)
	assert.Equal(t, http.StatusNotFound, r.status)

	// A batch: each sub-operation has its own code; writes and reads mix.
	r = c.post("/0.1.0/batch", `{"operations":[
		{"method":"POST","relative-url":"shop/types/pk-read","body":{"filters":`+keyFilters(1, "eu")+`,"readColumns":[{"column":"u64"}],"operationId":"a"}},
		{"method":"POST","relative-url":"shop/types/pk-read","body":{"filters":`+keyFilters(404, "eu")+`,"operationId":"b"}},
		{"method":"POST","relative-url":"shop/types/pk-write","body":{"filters":`+keyFilters(5, "us")+`,"values":[{"column":"yr","value":1901}]}},
		{"method":"POST","relative-url":"shop/nope/pk-read","body":{"filters":`+keyFilters(1, "eu")+`}},
		{"method":"POST","relative-url":"shop/types/pk-read","body":{"filters":[{"column":"id","value":"x"},{"column":"region","value":"eu"}]}}
	]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var batch struct {
		Result []struct {
			Code int             `json:"code"`
			Body json.RawMessage `json:"body"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.body, &batch))
	require.Len(t, batch.Result, 5)
	codes := []int{}
	for _, x := range batch.Result {
		codes = append(codes, x.Code)
	}
	assert.Equal(t, []int{200, 404, 200, 404, 400}, codes)
	assert.JSONEq(t, `{"operationId":"a","data":{"u64":18446744073709551615}}`, string(batch.Result[0].Body))
	assert.Contains(t, string(batch.Result[4].Body), `wants an integer, got a string`)
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(5, "us")+`,"readColumns":[{"column":"yr"}]}`)
	assert.Equal(t, `{"data":{"yr":1901}}`, string(r.body), "the batch's write landed")

	// batchwrite (RonDB's later name) takes the same operations.
	r = c.post("/0.1.0/batchwrite", `{"operations":[{"relative-url":"shop/types/pk-write","body":{"filters":`+keyFilters(6, "us")+`,"values":[{"column":"i16","value":-7}]}},
		{"relative-url":"shop/types/pk-insert","body":{"filters":`+keyFilters(1, "eu")+`,"values":[]}}]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `{"code":200,"body":{}}`)
	assert.Contains(t, string(r.body), `{"code":409`)
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(6, "us")+`,"readColumns":[{"column":"i16"}]}`)
	assert.Equal(t, `{"data":{"i16":-7}}`, string(r.body))

	// batchdelete runs deletes only.
	r = c.post("/0.1.0/batchdelete", `{"operations":[{"relative-url":"shop/types/pk-delete","body":{"filters":`+keyFilters(5, "us")+`}},
		{"relative-url":"shop/types/pk-read","body":{"filters":`+keyFilters(1, "eu")+`}}]}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), `{"code":200,"body":{}}`)
	assert.Contains(t, string(r.body), `pk-delete operations only`)

	// The default memcache container's table is there out of the box.
	r = c.post("/0.1.0/ndbmemcache/demo_table/pk-read", `{"filters":[{"column":"mkey","value":"none"}]}`)
	assert.Equal(t, http.StatusNotFound, r.status)
}

// Bad input gets a 4xx naming the problem, and changes nothing.
func TestRESTBadInput(t *testing.T) {
	s := startRowServer(t)
	c := newSpecClient(t, s)
	r := c.post("/0.1.0/shop/types/pk-insert", `{"filters":`+keyFilters(1, "eu")+`,"values":[{"column":"vc","value":"keep me"}]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	read := func(f string) string { return `{"filters":` + f + `}` }
	bigBatch := `{"operations":[` + strings.Repeat(`{"relative-url":"shop/types/pk-read","body":{"filters":`+keyFilters(1, "eu")+`}},`, 16) +
		`{"relative-url":"shop/types/pk-read","body":{"filters":` + keyFilters(1, "eu") + `}}]}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"malformed JSON", "/0.1.0/shop/types/pk-read", `{"filters":[`, 400, "malformed JSON"},
		{"empty body", "/0.1.0/shop/types/pk-read", ``, 400, "empty body"},
		{"not an object", "/0.1.0/shop/types/pk-read", `[1]`, 400, "wants an object"},
		{"trailing data", "/0.1.0/shop/types/pk-read", read(keyFilters(1, "eu")) + `{}`, 400, "after the JSON object"},
		{"unknown field", "/0.1.0/shop/types/pk-read", `{"filter":[]}`, 400, `unknown field "filter"`},
		{"filters wrong type", "/0.1.0/shop/types/pk-read", `{"filters":"id=1"}`, 400, `"filters" must be an array`},
		{"no filters", "/0.1.0/shop/types/pk-read", `{}`, 400, "filters are required"},
		{"filter without value", "/0.1.0/shop/types/pk-read", `{"filters":[{"column":"id"}]}`, 400, `"value" is required`},
		{"unknown db", "/0.1.0/nodb/types/pk-read", read(keyFilters(1, "eu")), 404, "table nodb.types does not exist"},
		{"unknown table", "/0.1.0/shop/nope/pk-read", read(keyFilters(1, "eu")), 404, "table shop.nope does not exist"},
		{"unknown op", "/0.1.0/shop/types/pk-upsert", read(keyFilters(1, "eu")), 400, `unknown operation "pk-upsert"`},
		{"unknown column", "/0.1.0/shop/types/pk-read", `{"filters":` + keyFilters(1, "eu") + `,"readColumns":[{"column":"nope"}]}`, 400, `column "nope" does not exist in shop.types`},
		{"missing key column", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":1}]`), 400, `primary key column "region"`},
		{"non-key filter", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":1},{"column":"region","value":"eu"},{"column":"i8","value":1}]`), 400, `"i8" is not part of the primary key`},
		{"wrong type", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":"one"},{"column":"region","value":"eu"}]`), 400, `column "id" (BIGINT UNSIGNED): wants an integer, got a string`},
		{"huge number", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":123456789012345678901234567890},{"column":"region","value":"eu"}]`), 400, "out of range"},
		{"huge exponent", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":1e999999999},{"column":"region","value":"eu"}]`), 400, "out of range"},
		{"negative unsigned", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":-1},{"column":"region","value":"eu"}]`), 400, "out of range 0..18446744073709551615"},
		{"bad base64", "/0.1.0/shop/types/pk-write", `{"filters":` + keyFilters(1, "eu") + `,"values":[{"column":"vb","value":"%%%"}]}`, 400, `column "vb" (VARBINARY(16)): is not valid base64`},
		{"invalid UTF-8", "/0.1.0/shop/types/pk-write", "{\"filters\":" + keyFilters(1, "eu") + ",\"values\":[{\"column\":\"vc\",\"value\":\"\xff\xfe\"}]}", 400, "not valid UTF-8"},
		{"too long", "/0.1.0/shop/types/pk-write", `{"filters":` + keyFilters(1, "eu") + `,"values":[{"column":"vc","value":"` + strings.Repeat("x", 17) + `"}]}`, 400, "17 characters is longer than the column's 16"},
		{"bad date", "/0.1.0/shop/types/pk-write", `{"filters":` + keyFilters(1, "eu") + `,"values":[{"column":"day","value":"2023-02-30"}]}`, 400, "no such date"},
		{"NULL key", "/0.1.0/shop/types/pk-read", read(`[{"column":"id","value":null},{"column":"region","value":"eu"}]`), 400, "NOT NULL"},
		{"long identifier", "/0.1.0/shop/" + strings.Repeat("t", 65) + "/pk-read", read(keyFilters(1, "eu")), 400, "longer than 64"},
		{"over-limit batch", "/0.1.0/batch", bigBatch, 400, "17 operations is more than the limit of 16"},
		{"empty batch", "/0.1.0/batch", `{"operations":[]}`, 400, "at least one operation"},
		{"oversize body", "/0.1.0/shop/types/pk-read", `{"filters":` + keyFilters(1, "eu") + `,"operationId":"` + strings.Repeat("x", 70000) + `"}`, 413, "larger than the limit of 65536 bytes"},
	} {
		r := c.post(tc.path, tc.body)
		assert.Equal(t, tc.status, r.status, "%s: %s", tc.name, r.body)
		assert.Contains(t, r.errorMessage(t), tc.want, tc.name)
	}

	// Nothing stored was lost, and the server is still serving.
	r = c.post("/0.1.0/shop/types/pk-read", `{"filters":`+keyFilters(1, "eu")+`,"readColumns":[{"column":"vc"}]}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, `{"data":{"vc":"keep me"}}`, string(r.body))
	assert.True(t, s.alive())
}

// The KV API and the memcache port see the same items.
func TestRESTKV(t *testing.T) {
	s := startServer(t)
	c := newSpecClient(t, s)
	mc := newClient(t, s.memcacheAddr)

	r := c.do(http.MethodPut, "/v1/kv/default/greeting", []byte("hello"), "X-Ndbgate-Flags", "42", "X-Ndbgate-Ttl", "3600")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	etag := r.header.Get("ETag")
	require.NotEmpty(t, etag)
	it := requireItem(t, mc, "greeting", "hello", 42)

	require.NoError(t, mc.Set(&memcache.Item{Key: "from-mc", Value: []byte{0, 1, 0xff}, Flags: 3}))
	r = c.do(http.MethodGet, "/v1/kv/default/from-mc", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, []byte{0, 1, 0xff}, r.body)
	assert.Equal(t, "3", r.header.Get("X-Ndbgate-Flags"))
	assert.Equal(t, "-1", r.header.Get("X-Ndbgate-Ttl"))

	r = c.do(http.MethodGet, "/v1/kv/default/greeting", nil)
	assert.Equal(t, etag, r.header.Get("ETag"))
	assert.Equal(t, fmt.Sprintf(`"%d"`, it.CasID), etag, "ETag is the memcache cas")

	// Compare-and-set and add.
	r = c.do(http.MethodPut, "/v1/kv/default/greeting", []byte("second"), "If-Match", etag)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = c.do(http.MethodPut, "/v1/kv/default/greeting", []byte("third"), "If-Match", etag)
	assert.Equal(t, http.StatusPreconditionFailed, r.status)
	assert.Contains(t, r.errorMessage(t), "cas differs")
	r = c.do(http.MethodPut, "/v1/kv/default/greeting", []byte("x"), "If-None-Match", "*")
	assert.Equal(t, http.StatusPreconditionFailed, r.status)
	r = c.do(http.MethodPut, "/v1/kv/default/fresh", []byte("x"), "If-None-Match", "*")
	assert.Equal(t, http.StatusNoContent, r.status)
	r = c.do(http.MethodPut, "/v1/kv/default/absent", []byte("x"), "If-Match", `"12"`)
	assert.Equal(t, http.StatusNotFound, r.status)
	requireItem(t, mc, "greeting", "second", 0)

	// Multi-get: one batch; binary values in base64.
	r = c.post("/v1/kv/default/_mget", `{"keys":["greeting","from-mc","missing"]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var mget struct {
		Items []struct {
			Key, Value, Encoding, Cas string
			Found                     bool
			Flags                     uint32
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(r.body, &mget))
	require.Len(t, mget.Items, 3)
	assert.Equal(t, "second", mget.Items[0].Value)
	assert.Equal(t, "utf8", mget.Items[0].Encoding)
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}), mget.Items[1].Value)
	assert.Equal(t, "base64", mget.Items[1].Encoding)
	assert.Equal(t, uint32(3), mget.Items[1].Flags)
	assert.False(t, mget.Items[2].Found)

	// Delete over REST, gone over memcache.
	r = c.do(http.MethodDelete, "/v1/kv/default/greeting", nil)
	assert.Equal(t, http.StatusNoContent, r.status)
	requireMiss(t, mc, "greeting")
	r = c.do(http.MethodDelete, "/v1/kv/default/greeting", nil)
	assert.Equal(t, http.StatusNotFound, r.status)

	// Bad input.
	for _, tc := range []struct {
		method, path string
		body         []byte
		hdr          []string
		status       int
		want         string
	}{
		{http.MethodGet, "/v1/kv/nope/k", nil, nil, 404, `container "nope" does not exist`},
		{http.MethodGet, "/v1/kv/default/" + key251(), nil, nil, 400, "at most 250"},
		{http.MethodGet, "/v1/kv/default/a%20b", nil, nil, 400, "space or control character"},
		{http.MethodPut, "/v1/kv/default/k", []byte("x"), []string{"X-Ndbgate-Flags", "-1"}, 400, "not a 32-bit unsigned number"},
		{http.MethodPut, "/v1/kv/default/k", []byte("x"), []string{"X-Ndbgate-Ttl", "soon"}, 400, "not a number of seconds"},
		{http.MethodPut, "/v1/kv/default/k", []byte("x"), []string{"If-Match", "abc"}, 400, "not an ETag"},
		{http.MethodPut, "/v1/kv/default/k", []byte("x"), []string{"If-None-Match", `"1"`}, 400, "only *"},
		{http.MethodPut, "/v1/kv/default/k", bytes.Repeat([]byte("v"), 1<<20+1), nil, 413, "larger than the limit of 1048576"},
		{http.MethodPost, "/v1/kv/default/_mget", []byte(`{"keys":"a"}`), nil, 400, `"keys" must be an array`},
		{http.MethodPost, "/v1/kv/default/_mget", []byte(`{"keys":[]}`), nil, 400, "at least one key"},
		{http.MethodPost, "/v1/kv/default/_mget", []byte(`{"keys":["` + strings.Repeat(`a","`, 256) + `a"]}`), nil, 400, "257 keys is more than the limit of 256"},
	} {
		r := c.do(tc.method, tc.path, tc.body, tc.hdr...)
		assert.Equal(t, tc.status, r.status, "%s %s: %s", tc.method, abbrev(tc.path), r.body)
		assert.Contains(t, r.errorMessage(t), tc.want)
	}
	requireItem(t, mc, "from-mc", "\x00\x01\xff", 3)
}

func TestRESTAuthAndTLS(t *testing.T) {
	keys := writeFile(t, "keys.yaml", `
keys:
  - {name: shop-app, key: "shop-key-000000000001", grants: [shop]}
  - {name: cache-app, key: "cache-key-00000000001", grants: [default]}
`)
	pki := newTestPKI(t)
	s := startRowServer(t, "--api-keys", keys, "--api-tls", "--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--tls-client-ca", pki.caFile)
	c := newSpecClient(t, s)
	c.base = "https://" + s.restAddr
	c.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.clientCert}}}}

	read := `{"filters":` + keyFilters(1, "eu") + `}`
	r := c.post("/0.1.0/shop/types/pk-read", read)
	assert.Equal(t, http.StatusUnauthorized, r.status)
	assert.Contains(t, r.errorMessage(t), "X-API-KEY")
	c.apiKey = "wrong-key-0000000000"
	assert.Equal(t, http.StatusUnauthorized, c.post("/0.1.0/shop/types/pk-read", read).status)
	c.apiKey = "cache-key-00000000001"
	r = c.post("/0.1.0/shop/types/pk-read", read)
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.Contains(t, r.errorMessage(t), "PermissionDenied")
	assert.Equal(t, http.StatusNoContent, c.do(http.MethodPut, "/v1/kv/default/k", []byte("v")).status)
	c.apiKey = "shop-key-000000000001"
	assert.Equal(t, http.StatusNotFound, c.post("/0.1.0/shop/types/pk-read", read).status, "authorised: the row is just missing")
	assert.Equal(t, http.StatusForbidden, c.do(http.MethodGet, "/v1/kv/default/k", nil).status)
	r = c.post("/0.1.0/batch", `{"operations":[{"relative-url":"shop/types/pk-read","body":`+read+`},{"relative-url":"other/t/pk-read","body":`+read+`}]}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), `{"code":404`)
	assert.Contains(t, string(r.body), `{"code":403`)
	assert.NotContains(t, s.output.String(), "shop-key-000000000001", "keys are never logged")

	// Without a client certificate, or with an untrusted one, no TLS session.
	for _, certs := range [][]tls.Certificate{nil, {pki.otherClient}} {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.roots, Certificates: certs}}}
		_, err := hc.Get("https://" + s.restAddr + "/0.1.0/ping")
		assert.Error(t, err)
	}
	// Plain HTTP to the TLS port is refused too.
	resp, err := http.Get("http://" + s.restAddr + "/0.1.0/ping")
	if err == nil {
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		_ = resp.Body.Close()
	}
}

// REST requests are counted in the shared request metrics.
func TestRESTMetrics(t *testing.T) {
	s := startServer(t)
	c := newSpecClient(t, s)
	c.do(http.MethodPut, "/v1/kv/default/m", []byte("v"))
	c.do(http.MethodGet, "/v1/kv/default/m", nil)
	c.do(http.MethodGet, "/v1/kv/default/none", nil)
	c.post("/0.1.0/ndbmemcache/demo_table/pk-read", `{"filters":[]}`)
	_, body := s.httpGet(t, "/metrics")
	m := parseMetrics(t, body)
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "rest", "command": "kv_put", "outcome": "ok"}))
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "rest", "command": "kv_get", "outcome": "ok"}))
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "rest", "command": "kv_get", "outcome": "miss"}))
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "rest", "command": "pk", "outcome": "client_error"}))
	assert.Equal(t, 4.0, metricSum(m, "ndbgate_request_duration_seconds_count", map[string]string{"protocol": "rest"}))
}

// A KV key holding "//", "/./" or "/../" is the key as sent. Go's client
// follows redirects: had the server redirected to the cleaned path, the PUT
// would have written http:/r.example/p. Wrong methods and unknown paths get
// the API's JSON error.
func TestRESTKeysAsSent(t *testing.T) {
	s := startServer(t)
	mc := newClient(t, s.memcacheAddr)
	hc := &http.Client{} // follows redirects, as most clients do
	base := "http://" + s.restAddr
	send := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, path, resp.Request.URL.Path, "%s %s was redirected", method, path)
		return resp, string(b)
	}

	for _, key := range []string{"http://r.example/p", "a/./b", "a/../b", "a//b"} {
		resp, body := send(http.MethodPut, "/v1/kv/default/"+key, "v:"+key)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "PUT %q: %s", key, body)
		resp, body = send(http.MethodGet, "/v1/kv/default/"+key, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %q: %s", key, body)
		assert.Equal(t, "v:"+key, body)
		requireItem(t, mc, key, "v:"+key, 0) // the memcache port sees the same key
	}
	for _, cleaned := range []string{"http:/r.example/p", "a/b", "b"} {
		requireMiss(t, mc, cleaned)
	}

	resp, body := send(http.MethodGet, "/0.1.0/ndbmemcache/demo_table/pk-read", "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, response{body: []byte(body)}.errorMessage(t), "MethodNotAllowed")
	resp, body = send(http.MethodGet, "/v2/nothing", "")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, response{body: []byte(body)}.errorMessage(t), "NotFound: no route")
}

// TestRowAPIInsertIntoTheDefaultContainersTable: a pk-insert into the
// default container's table gets the columns the container keeps (its cas)
// from ndbgate, as a pk-write does, on the embedded engine and on NDB; the
// client may not name them. The row is then a memcache item.
func TestRowAPIInsertIntoTheDefaultContainersTable(t *testing.T) {
	s := startServer(t)
	c := newSpecClient(t, s)
	key := fmt.Sprintf("ins-%d", time.Now().UnixNano())
	insert := func(k string, extra string) response {
		return c.post("/0.1.0/ndbmemcache/demo_table/pk-insert", `{"filters":[{"column":"mkey","value":"`+k+`"}],`+
			`"values":[{"column":"string_value","value":"aGk="},{"column":"flags","value":3},{"column":"expire_time","value":0}`+extra+`]}`)
	}
	r := insert(key, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = insert(key, "")
	assert.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	r = insert(key+"-b", `,{"column":"cas_value","value":7}`)
	assert.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), "cas_value")

	mc := dialRaw(t, s.memcacheAddr)
	defer mc.close()
	mc.send("mg " + key + " v c f\r\n")
	m := mc.readLineMatch(regexp.MustCompile(`^VA 2 ([^\r\n]*)`))
	assert.Contains(t, " "+m[1]+" ", " f3 ", "the flags the insert gave")
	assert.Regexp(t, ` c[1-9][0-9]* `, " "+m[1]+" ", "the cas ndbgate gave the row")
	assert.Equal(t, "hi\r\n", mc.readLine())
}
