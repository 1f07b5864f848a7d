package rest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A request whose context ends before the backend answers: the client went
// away (net/http cancels the context when the connection closes), 499 as
// nginx logs it; a deadline, 503 as for any answer that may come later.
func TestEndedContexts(t *testing.T) {
	h := newTestHandler(t)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancelLate()
	read := `{"filters":[{"column":"mkey","value":"k"}]}`
	batch := `{"operations":[{"relative-url":"ndbmemcache/demo_table/pk-read","body":` + read + `}]}`
	for _, tc := range []struct {
		ctx    context.Context
		status int
		code   string
	}{
		{gone, statusClientClosedRequest, "Canceled"},
		{late, http.StatusServiceUnavailable, "DeadlineExceeded"},
	} {
		for path, body := range map[string]string{"/0.1.0/ndbmemcache/demo_table/pk-read": read, "/0.1.0/batch": batch} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)).WithContext(tc.ctx))
			requireJSONError(t, w, tc.status, tc.code)
		}
	}
}
