// Package rest is the HTTP front end: RonDB's REST API (pk-read, batch and the
// pk writes, ping, stat) over gateway/rowapi, and a plain KV API over the
// memcache containers (kv.go). Every request is one backend batch.
package rest

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
)

// apiVersion prefixes RonDB's routes.
const apiVersion = "0.1.0"

// OpenAPI is the spec of every route, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Options wires the handlers.
type Options struct {
	Rows    *rowapi.Service  // RonDB row API; nil turns its routes off
	KV      *gateway.Service // KV API; nil turns its routes off
	Keys    *auth.Keys       // nil: no API keys required
	MaxBody int64            // request body limit, bytes
	// MaxMultiGet bounds the keys of one _mget.
	MaxMultiGet int
	Logger      *slog.Logger
	// Extra are more GET routes at exact paths (/metrics, /healthz,
	// /readyz), served as they are, uncounted. Routed with the API's, they
	// need no http.ServeMux in front, which would redirect paths holding "//",
	// "/./" or "/../" (legal in KV keys) and answer 404 and 405 in plain text.
	Extra map[string]http.Handler
}

// Handler serves the REST routes.
type Handler struct {
	o      Options
	routes routes
	bufs   sync.Pool           // *[]byte
	reqs   *gateway.KVRequests // KV API requests (routeKV)
}

// New builds the handler. It routes on the path as sent (see routes.go): make
// it the server's handler, with Options.Extra for routes beside the API, not
// a route of an http.ServeMux, which cleans paths and redirects.
func New(o Options) *Handler {
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	if o.MaxMultiGet <= 0 {
		o.MaxMultiGet = 256
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Handler{o: o}
	h.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	rt := &h.routes
	if o.Rows != nil {
		post := func(route string, fn routeFunc) *resource { return newResource(nil, nil, newEndpoint(route, fn), nil) }
		rt.ping = newResource(newEndpoint("ping", h.ping), nil, nil, nil)
		rt.stat = newResource(newEndpoint("stat", h.stat), nil, nil, nil)
		rt.batch = post("batch", h.batch(0))
		rt.batchWrite = post("batchwrite", h.batch(0))
		rt.batchDelete = post("batchdelete", h.batch(rowapi.MethodDelete))
		rt.pk = post("pk", h.pk)
	}
	if o.KV != nil {
		h.routeKV()
	}
	rt.extra = make(map[string]*resource, len(o.Extra))
	for path, hd := range o.Extra {
		rt.extra[path] = newResource(&endpoint{fn: func(w http.ResponseWriter, r *http.Request, _ pathVars) { hd.ServeHTTP(w, r) }}, nil, nil, nil)
	}
	rt.openapi = newResource(&endpoint{fn: func(w http.ResponseWriter, _ *http.Request, _ pathVars) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(OpenAPI)
	}}, nil, nil, nil)
	return h
}

// Routes lists the patterns served, for the start-up log.
func (h *Handler) Routes() string {
	s := "/openapi.yaml"
	if h.o.Rows != nil {
		s += " /" + apiVersion + "/{ping,stat,batch,{db}/{table}/pk-*}"
	}
	if h.o.KV != nil {
		s += " /v1/kv/{container}/{key}"
	}
	return s
}

// principal authenticates the request's API key.
func (h *Handler) principal(r *http.Request) (*auth.Principal, error) {
	return h.o.Keys.Authenticate(r.Header.Get("X-API-KEY"))
}

// readBody reads the body, at most limit bytes (else *http.MaxBytesError,
// 413), appending to buf.
func readBody(w http.ResponseWriter, r *http.Request, buf []byte, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// authedBody authenticates r and reads its body into buf, a pooled buffer the
// caller hands back with putBuf. When it fails it has replied already, and ok
// is false.
func (h *Handler) authedBody(w http.ResponseWriter, r *http.Request) (who *auth.Principal, body []byte, buf *[]byte, ok bool) {
	who, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return nil, nil, nil, false
	}
	buf = h.getBuf()
	body, err = readBody(w, r, (*buf)[:0], h.o.MaxBody)
	*buf = body
	if err != nil {
		h.putBuf(buf)
		h.fail(w, err)
		return nil, nil, nil, false
	}
	return who, body, buf, true
}

func (h *Handler) getBuf() *[]byte { return h.bufs.Get().(*[]byte) }

func (h *Handler) putBuf(b *[]byte) {
	if cap(*b) <= 1<<20 {
		*b = (*b)[:0]
		h.bufs.Put(b)
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fail replies with err's status and error body.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	h.failAs(w, status, code, err)
}

// failAs replies with the error body of err under the status and code given.
func (h *Handler) failAs(w http.ResponseWriter, status int, code string, err error) {
	if status >= 500 {
		h.o.Logger.LogAttrs(context.Background(), slog.LevelWarn, "rest request failed", slog.Int("status", status), slog.Any("error", err))
	}
	writeJSON(w, status, appendErrorBody(nil, code, err))
}

func (h *Handler) ping(w http.ResponseWriter, _ *http.Request, _ pathVars) {
	if err := h.o.Rows.Ready(); err != nil {
		h.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) stat(w http.ResponseWriter, r *http.Request, _ pathVars) {
	if _, err := h.principal(r); err != nil {
		h.fail(w, err)
		return
	}
	s := h.o.Rows.Stats()
	var out statJSON
	out.MemoryStats.AllocationsCount = s.AllocationsCount
	out.MemoryStats.DeallocationsCount = s.DeallocationsCount
	out.MemoryStats.BuffersCount = s.BuffersCount
	out.MemoryStats.FreeBuffers = s.FreeBuffers
	out.RonDBStats.NdbObjectsCreationCount = s.NdbObjectsCreationCount
	out.RonDBStats.NdbObjectsDeletionCount = s.NdbObjectsDeletionCount
	out.RonDBStats.NdbObjectsTotalCount = s.NdbObjectsTotalCount
	out.RonDBStats.NdbObjectsFreeCount = s.NdbObjectsFreeCount
	b, err := json.Marshal(&out)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// statJSON is RonDB's /stat reply. A cold path: encoding/json writes it.
type statJSON struct {
	MemoryStats struct {
		AllocationsCount, DeallocationsCount, BuffersCount, FreeBuffers int64
	}
	RonDBStats struct {
		NdbObjectsCreationCount, NdbObjectsDeletionCount, NdbObjectsTotalCount, NdbObjectsFreeCount int64
	}
}

// pk serves POST /0.1.0/{db}/{table}/{pk-read|pk-write|pk-insert|pk-update|pk-delete}.
func (h *Handler) pk(w http.ResponseWriter, r *http.Request, v pathVars) {
	m, ok := rowapi.ParseMethod(v.op)
	if !ok {
		h.fail(w, badf("unknown operation %q: use pk-read, pk-write, pk-insert, pk-update or pk-delete", v.op))
		return
	}
	who, body, buf, ok := h.authedBody(w, r)
	if !ok {
		return
	}
	defer h.putBuf(buf)
	op, err := decodePK(body, m, v.db, v.table)
	if err != nil {
		h.fail(w, err)
		return
	}
	res, err := h.o.Rows.Execute(r.Context(), who, []rowapi.Op{op})
	if err != nil {
		h.fail(w, err)
		return
	}
	status, code := resultStatus(&res[0])
	writeJSON(w, status, appendResultBody(body[len(body):], &res[0], code))
}

// resultStatus is one operation's status, and its error's code name when
// it failed.
func resultStatus(res *rowapi.Result) (int, string) {
	if res.Err == nil {
		return http.StatusOK, ""
	}
	return statusOf(res.Err)
}

// appendResultBody appends one operation's response body:
// {"operationId":..,"data":{..}} or, failed, the error member (of code, from
// resultStatus) with the operationId beside it.
func appendResultBody(dst []byte, res *rowapi.Result, code string) []byte {
	dst = append(dst, '{')
	if res.OperationID != "" {
		dst = append(dst, `"operationId":`...)
		dst = rowapi.AppendString(dst, []byte(res.OperationID))
		if res.Err != nil || res.Data != nil {
			dst = append(dst, ',')
		}
	}
	if res.Err != nil {
		dst = appendErrorMember(dst, code, res.Err)
		return append(dst, '}')
	}
	if res.Data == nil {
		return append(dst, '}')
	}
	dst = append(dst, `"data":{`...)
	for i, c := range res.Data {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = rowapi.AppendString(dst, []byte(c.Name))
		dst = append(dst, ':')
		dst = append(dst, c.Value...)
	}
	return append(dst, "}}"...)
}

// batch serves POST /0.1.0/batch (and RonDB's later batchwrite and
// batchdelete): every sub-operation runs in one backend batch and gets its own
// code.
func (h *Handler) batch(only rowapi.Method) routeFunc {
	return func(w http.ResponseWriter, r *http.Request, _ pathVars) {
		who, body, buf, ok := h.authedBody(w, r)
		if !ok {
			return
		}
		defer h.putBuf(buf)
		ops, errs, err := decodeBatch(body, h.o.Rows.Limits().MaxBatch, only)
		if err != nil {
			h.fail(w, err)
			return
		}
		// Ops that failed to decode are left out of the backend batch.
		run := make([]rowapi.Op, 0, len(ops))
		for i := range ops {
			if errs[i] == nil {
				run = append(run, ops[i])
			}
		}
		res, err := h.o.Rows.Execute(r.Context(), who, run)
		if err != nil {
			h.fail(w, err)
			return
		}
		out := append(body[len(body):], `{"result":[`...)
		next := 0
		for i := range ops {
			if i > 0 {
				out = append(out, ',')
			}
			one := rowapi.Result{OperationID: ops[i].OperationID, Err: errs[i]}
			if errs[i] == nil {
				one = res[next]
				next++
			}
			status, code := resultStatus(&one)
			out = append(out, `{"code":`...)
			out = strconv.AppendInt(out, int64(status), 10)
			out = append(out, `,"body":`...)
			out = appendResultBody(out, &one, code)
			out = append(out, '}')
		}
		out = append(out, "]}"...)
		writeJSON(w, http.StatusOK, out)
	}
}
