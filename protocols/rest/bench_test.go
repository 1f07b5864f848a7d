package rest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// The handlers' own cost per key, without sockets: a single pk-read against
// one sub-operation of a 100-key batch. Run with
// go test -bench . -benchmem ./protocols/rest
func newBenchHandler(b *testing.B) *Handler {
	e := embedded.New(embedded.Config{Partitions: 16})
	b.Cleanup(func() { _ = e.Close() })
	tbl, err := e.CreateTable(gateway.DemoTable(1 << 20))
	if err != nil {
		b.Fatal(err)
	}
	cl := ndbclient.NewClient(e)
	batch := &ndbclient.Batch{}
	for i := 0; i < 1000; i++ {
		batch.Ops = append(batch.Ops, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl,
			Key: []ndbclient.Value{ndbclient.String(fmt.Sprintf("memtier-%d", i))},
			Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String(strings.Repeat("x", 32))}, {Column: 2, Value: ndbclient.Uint(0)}, {Column: 3, Value: ndbclient.Uint(1)}, {Column: 4, Value: ndbclient.Uint(0)}}})
	}
	if err := cl.Execute(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	for _, o := range batch.Ops {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
	}
	return New(Options{Rows: rowapi.New(cl, rowapi.Limits{})})
}

func pkBody(i int) string {
	return fmt.Sprintf(`{"filters":[{"column":"mkey","value":"memtier-%d"}],"readColumns":[{"column":"string_value"}]}`, i)
}

func serve(b *testing.B, h http.Handler, path, body string) {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
}

func BenchmarkPKReadSingle(b *testing.B) {
	h := newBenchHandler(b)
	body := pkBody(7)
	b.ReportAllocs()
	for b.Loop() {
		serve(b, h, "/0.1.0/ndbmemcache/demo_table/pk-read", body)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}

func BenchmarkPKReadBatch100(b *testing.B) {
	h := newBenchHandler(b)
	var ops []string
	for i := 0; i < 100; i++ {
		ops = append(ops, `{"method":"POST","relative-url":"ndbmemcache/demo_table/pk-read","body":`+pkBody(i)+`}`)
	}
	body := `{"operations":[` + strings.Join(ops, ",") + `]}`
	b.ReportAllocs()
	for b.Loop() {
		serve(b, h, "/0.1.0/batch", body)
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "keys/s")
}

// The KV API's GET and PUT of one key.
func BenchmarkKVGet(b *testing.B) {
	h := newTestHandler(b)
	req := httptest.NewRequest(http.MethodPut, "/v1/kv/default/memtier-7", strings.NewReader(strings.Repeat("x", 32)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent {
		b.Fatalf("%d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, "/v1/kv/default/memtier-7", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

func BenchmarkKVPut(b *testing.B) {
	h := newTestHandler(b)
	body := strings.NewReader(strings.Repeat("x", 32))
	b.ReportAllocs()
	for b.Loop() {
		body.Reset(strings.Repeat("x", 32))
		req := httptest.NewRequest(http.MethodPut, "/v1/kv/default/memtier-7", body)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusNoContent {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
