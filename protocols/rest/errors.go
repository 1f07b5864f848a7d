package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// statusOf maps an error onto an HTTP status and a code name, once for every
// REST route: canonical ndbclient codes, auth errors and decoding errors.
func statusOf(err error) (int, string) {
	var br *badRequest
	var tooBig *http.MaxBytesError
	var re *routeError
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest, "BadRequest"
	case errors.As(err, &re):
		if re.status == http.StatusMethodNotAllowed {
			return re.status, "MethodNotAllowed"
		}
		return http.StatusNotFound, "NotFound"
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge, "BodyTooLarge"
	// The request's context is the only one that reaches the backend, and
	// net/http cancels it when the client goes away: nginx's 499, a client
	// error, not logged as a failure. A deadline is ours, and the answer may
	// come later: 503, as for Temporary. gRPC reports the two as Canceled and
	// DeadlineExceeded, the codes these names follow.
	case errors.Is(err, context.Canceled):
		return statusClientClosedRequest, "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "DeadlineExceeded"
	}
	return rowapi.HTTPStatus(err)
}

// statusClientClosedRequest is nginx's 499: the client closed the
// connection before the reply. HTTP has no standard status for it.
const statusClientClosedRequest = 499

// routeError is a request no route serves: 404 for its path, 405 for its
// method.
type routeError struct {
	status int
	msg    string
}

func (e *routeError) Error() string { return e.msg }

// appendErrorMember appends "error":{"code":...,"message":...}, the member
// every error reply holds: alone in an error body, or beside an operationId
// (a batch's sub-operation) or a key (an _mget's item).
func appendErrorMember(dst []byte, code string, err error) []byte {
	msg := err.Error()
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		msg = "request body is larger than the limit of " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	}
	var ne *ndbclient.Error
	if errors.As(err, &ne) {
		msg = ne.Message // the code is already in "code"; native codes are for logs
	}
	dst = append(dst, `"error":{"code":`...)
	dst = rowapi.AppendString(dst, []byte(code))
	dst = append(dst, `,"message":`...)
	dst = rowapi.AppendString(dst, []byte(msg))
	return append(dst, '}')
}

// appendErrorBody appends the error reply {"error":{...}}.
func appendErrorBody(dst []byte, code string, err error) []byte {
	dst = append(dst, '{')
	dst = appendErrorMember(dst, code, err)
	return append(dst, '}')
}
