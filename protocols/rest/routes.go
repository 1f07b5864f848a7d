package rest

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ndbgate/ndbgate/internal/procs"
)

// Routing is done here, on the path as sent, not by http.ServeMux, for two
// reasons:
//   - ServeMux cleans paths: it answers a path holding "//", "/./" or "/../"
//     with a redirect to the cleaned path. Those are legal in a memcached key
//     (PUT /v1/kv/default/http://r.example/p), and a client that followed the
//     redirect would write another key (http:/r.example/p). Here a KV key is
//     everything after /v1/kv/{container}/, percent-decoded, and no request is
//     ever redirected.
//   - ServeMux's 404 and 405 are plain text; here they are the API's JSON
//     error, and a 405 names the allowed methods in Allow.

// pathVars are the variables of a route's path, percent-decoded.
type pathVars struct {
	db, table, op  string // /0.1.0/{db}/{table}/{op}
	container, key string // /v1/kv/{container}/{key}
}

// routeFunc serves one method of one path.
type routeFunc func(w http.ResponseWriter, r *http.Request, v pathVars)

// endpoint is a routeFunc and the metrics it is counted in.
type endpoint struct {
	fn routeFunc
	m  *routeMetrics
}

// resource is a path's endpoints by method; nil where a method is not served.
type resource struct {
	get, put, post, delete *endpoint
	allow                  string // the Allow header of a 405
}

func newResource(get, put, post, delete *endpoint) *resource {
	rs := &resource{get: get, put: put, post: post, delete: delete}
	var allow []string
	for _, m := range []struct {
		e     *endpoint
		names []string
	}{{get, []string{http.MethodGet, http.MethodHead}}, {put, []string{http.MethodPut}},
		{post, []string{http.MethodPost}}, {delete, []string{http.MethodDelete}}} {
		if m.e != nil {
			allow = append(allow, m.names...)
		}
	}
	slices.Sort(allow)
	rs.allow = strings.Join(allow, ", ")
	return rs
}

func (rs *resource) method(m string) *endpoint {
	switch m {
	case http.MethodGet, http.MethodHead:
		return rs.get
	case http.MethodPut:
		return rs.put
	case http.MethodPost:
		return rs.post
	case http.MethodDelete:
		return rs.delete
	}
	return nil
}

// routes are the resources; nil when their API is off.
type routes struct {
	openapi                       *resource
	ping, stat, batch, batchWrite *resource
	batchDelete, pk               *resource
	kvItem, kvMget                *resource
	extra                         map[string]*resource // Options.Extra
}

const (
	rowPrefix = "/" + apiVersion + "/"
	kvPrefix  = "/v1/kv/"
)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	procs.RequestBegan()
	defer procs.RequestEnded()
	var v pathVars
	rs, err := h.match(r.URL, &v)
	if err != nil {
		h.fail(w, err)
		return
	}
	if rs == nil {
		h.fail(w, &routeError{status: http.StatusNotFound,
			msg: "no route for " + r.Method + " " + strconv.Quote(r.URL.EscapedPath()) + "; the routes are in /openapi.yaml"})
		return
	}
	e := rs.method(r.Method)
	if e == nil {
		w.Header().Set("Allow", rs.allow)
		h.fail(w, &routeError{status: http.StatusMethodNotAllowed,
			msg: "method " + r.Method + " is not allowed on " + strconv.Quote(r.URL.EscapedPath()) + "; allowed: " + rs.allow})
		return
	}
	e.serve(w, r, v)
}

// match finds the resource of u's path and fills v; nil when no route has
// that path.
func (h *Handler) match(u *url.URL, v *pathVars) (*resource, error) {
	// With no RawPath, Path is the path as sent, every '/' a separator, and
	// needs no decoding. Otherwise (a %2F in a key, say) split the escaped
	// path and decode each variable.
	path, escaped := u.Path, false
	if u.RawPath != "" {
		path, escaped = u.EscapedPath(), true
	}
	dec := func(s string) (string, error) {
		if !escaped || strings.IndexByte(s, '%') < 0 {
			return s, nil
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", badf("path %q: %v; percent-encode the key, '/' as %%2F", path, err)
		}
		return d, nil
	}
	rt := &h.routes
	switch {
	case path == "/openapi.yaml":
		return rt.openapi, nil
	case rt.kvItem != nil && strings.HasPrefix(path, kvPrefix):
		// The key is the rest of the path, whatever it holds: "//", "/./"
		// and "/../" are part of it.
		rest := path[len(kvPrefix):]
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return nil, nil
		}
		var err error
		if v.container, err = dec(rest[:i]); err != nil {
			return nil, err
		}
		if v.key, err = dec(rest[i+1:]); err != nil {
			return nil, err
		}
		if v.key == "_mget" {
			return rt.kvMget, nil
		}
		return rt.kvItem, nil
	case rt.pk != nil && strings.HasPrefix(path, rowPrefix):
		rest := path[len(rowPrefix):]
		switch rest {
		case "ping":
			return rt.ping, nil
		case "stat":
			return rt.stat, nil
		case "batch":
			return rt.batch, nil
		case "batchwrite":
			return rt.batchWrite, nil
		case "batchdelete":
			return rt.batchDelete, nil
		}
		// {db}/{table}/{op}: three segments, none empty.
		i := strings.IndexByte(rest, '/')
		if i <= 0 {
			return nil, nil
		}
		j := strings.IndexByte(rest[i+1:], '/') + i + 1
		if j <= i+1 || j == len(rest)-1 || strings.IndexByte(rest[j+1:], '/') >= 0 {
			return nil, nil
		}
		var err error
		if v.db, err = dec(rest[:i]); err != nil {
			return nil, err
		}
		if v.table, err = dec(rest[i+1 : j]); err != nil {
			return nil, err
		}
		if v.op, err = dec(rest[j+1:]); err != nil {
			return nil, err
		}
		return rt.pk, nil
	}
	return rt.extra[path], nil
}
