package rest

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndbgate/ndbgate/gateway"
)

// routeMetrics are one route's children of the shared request metrics,
// resolved when the route is registered.
type routeMetrics struct {
	ok, miss, clientErr, serverErr prometheus.Counter
	duration                       prometheus.Observer
}

func newRouteMetrics(route string) *routeMetrics {
	c := func(outcome string) prometheus.Counter {
		return gateway.Requests.WithLabelValues("rest", route, outcome)
	}
	return &routeMetrics{ok: c("ok"), miss: c("miss"), clientErr: c("client_error"), serverErr: c("server_error"),
		duration: gateway.RequestDuration.WithLabelValues("rest", route)}
}

func (m *routeMetrics) observe(status int, d time.Duration) {
	switch {
	case status == http.StatusNotFound:
		m.miss.Inc()
	case status >= 500:
		m.serverErr.Inc()
	case status >= 400:
		m.clientErr.Inc()
	default:
		m.ok.Inc()
	}
	m.duration.Observe(d.Seconds())
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// newEndpoint wraps fn, counted as route.
func newEndpoint(route string, fn routeFunc) *endpoint {
	return &endpoint{fn: fn, m: newRouteMetrics(route)}
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request, v pathVars) {
	if e.m == nil {
		e.fn(w, r, v)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	e.fn(sw, r, v)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	e.m.observe(sw.status, time.Since(start))
}
