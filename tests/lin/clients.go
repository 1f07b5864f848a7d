package lin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client runs one operation at a time against one gateway.
type Client interface {
	// Do runs in. attempted is false when the operation certainly did not
	// take effect: it never left the client (it could not connect), or the
	// gateway refused it with an error that says nothing was done (busy,
	// temporary failure, backend unavailable). unexpected describes a reply
	// that fits no outcome.
	Do(in Input) (out Output, attempted bool, unexpected string)
	// CanIncr reports whether the client's API has incr.
	CanIncr() bool
	// Gateway is the number of the gateway the client speaks to.
	Gateway() int
	Close()
}

// MetaClient speaks memcached's meta protocol, whose replies carry the cas
// token that makes CAS modelable.
type MetaClient struct {
	Addr    string
	Timeout time.Duration
	Via     int // the gateway's number
	// Dial, when set, makes the connection (from another network
	// namespace, say).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	// line is the last reply line read; lastErr what the last failed
	// operation saw (LastError).
	line, lastErr string
}

func (c *MetaClient) CanIncr() bool { return true }

// LastError is what the last operation that failed saw: an error reply, or
// what went wrong with the connection.
func (c *MetaClient) LastError() string { return c.lastErr }

// netReason names a network error without its addresses, so that failures
// count by kind.
func netReason(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	return "network error"
}

func (c *MetaClient) Gateway() int { return c.Via }

func (c *MetaClient) Close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

func (c *MetaClient) Do(in Input) (Output, bool, string) {
	if c.conn == nil {
		dial := c.Dial
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		conn, err := dial(ctx, "tcp", c.Addr)
		cancel()
		if err != nil {
			c.lastErr = "connect: " + netReason(err)
			return Output{}, false, ""
		}
		c.conn, c.r = conn, bufio.NewReader(conn)
	}
	b := c.buf[:0]
	switch in.Kind {
	case Set:
		b = fmt.Appendf(b, "ms %s %d c\r\n%s\r\n", in.Key, len(in.Value), in.Value)
	case Cas:
		b = fmt.Appendf(b, "ms %s %d C%d c\r\n%s\r\n", in.Key, len(in.Value), in.Cas, in.Value)
	case Get:
		b = fmt.Appendf(b, "mg %s v c\r\n", in.Key)
	case Incr:
		b = fmt.Appendf(b, "ma %s v c D%d\r\n", in.Key, in.Delta)
	case Delete:
		b = fmt.Appendf(b, "md %s\r\n", in.Key)
	}
	c.buf = b
	_ = c.conn.SetDeadline(time.Now().Add(c.Timeout))
	if _, err := c.conn.Write(b); err != nil {
		c.Close()
		c.lastErr = "write: " + netReason(err)
		return Output{Result: Ambiguous}, true, ""
	}
	c.line = ""
	out, refused, unexpected, err := c.reply(in)
	if err != nil {
		c.Close()
		c.lastErr = "read: " + netReason(err)
		return Output{Result: Ambiguous}, true, ""
	}
	if refused || out.Result == Ambiguous {
		c.lastErr = c.line
	}
	if unexpected != "" {
		c.Close()
	}
	return out, !refused, unexpected
}

// ndbgate's SERVER_ERROR replies for a request it did not carry out; any
// other SERVER_ERROR leaves a write's outcome unknown ("result unknown, the
// write may have been applied" says so).
var refusals = []string{
	"SERVER_ERROR busy, try again",
	"SERVER_ERROR temporary failure, try again",
	"SERVER_ERROR backend unavailable",
	"SERVER_ERROR out of memory storing object",
	"SERVER_ERROR cannot write to the data dir (disk full or failing), not stored",
}

// reply reads and classifies the reply to in; refused is true for an error
// reply that says the request was not carried out.
func (c *MetaClient) reply(in Input) (out Output, refused bool, unexpected string, err error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return Output{}, false, "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	c.line = line
	if slices.Contains(refusals, line) {
		return Output{}, true, "", nil
	}
	out, unexpected, err = c.classify(in, line)
	return out, false, unexpected, err
}

// classify makes an outcome of a reply line (reading a value that follows).
func (c *MetaClient) classify(in Input, line string) (Output, string, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Output{Result: Ambiguous}, fmt.Sprintf("%s: empty reply", in.Kind), nil
	}
	switch {
	case f[0] == "HD" && in.Kind != Get && in.Kind != Incr:
		return Output{Result: Ok, Cas: casFlag(f[1:])}, "", nil
	case f[0] == "VA" && (in.Kind == Get || in.Kind == Incr) && len(f) >= 2:
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return Output{Result: Ambiguous}, "bad VA line " + strconv.Quote(line), nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, data); err != nil {
			return Output{}, "", err
		}
		return Output{Result: Ok, Value: string(data[:n]), Cas: casFlag(f[2:])}, "", nil
	case f[0] == "EN" && in.Kind == Get, f[0] == "NF" && in.Kind != Get && in.Kind != Set:
		return Output{Result: NotFound}, "", nil
	case f[0] == "EX" && in.Kind == Cas:
		return Output{Result: Exists}, "", nil
	case in.Kind == Incr && line == "CLIENT_ERROR cannot increment or decrement non-numeric value":
		return Output{Result: NonNumeric}, "", nil
	case f[0] == "SERVER_ERROR":
		return Output{Result: Ambiguous}, "", nil
	}
	return Output{Result: Ambiguous}, fmt.Sprintf("%s %s: unexpected reply %q", in.Kind, in.Key, line), nil
}

// casFlag is the value of a meta reply's c flag, 0 when absent.
func casFlag(flags []string) uint64 {
	for _, f := range flags {
		if strings.HasPrefix(f, "c") {
			n, _ := strconv.ParseUint(f[1:], 10, 64)
			return n
		}
	}
	return 0
}

// RESTClient speaks the REST KV API: ETag is the cas token, If-Match a CAS.
type RESTClient struct {
	Base string // http://host:port/v1/kv/<container>/
	HTTP *http.Client
	Via  int // the gateway's number
	// lastErr is what the last failed operation saw (LastError).
	lastErr string
}

// LastError is what the last operation that failed saw.
func (c *RESTClient) LastError() string { return c.lastErr }

// restReason names an error reply: its status and error code.
func restReason(status int, body []byte) string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return fmt.Sprintf("HTTP %d %s", status, e.Error.Code)
}

// NewRESTClient is a client of addr's KV API on container, with its own
// connection.
func NewRESTClient(addr, container string, timeout time.Duration) *RESTClient {
	return &RESTClient{
		Base: "http://" + addr + "/v1/kv/" + url.PathEscape(container) + "/",
		HTTP: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
	}
}

func (c *RESTClient) CanIncr() bool { return false }

func (c *RESTClient) Gateway() int { return c.Via }

func (c *RESTClient) Close() { c.HTTP.CloseIdleConnections() }

func (c *RESTClient) Do(in Input) (Output, bool, string) {
	u := c.Base + url.PathEscape(in.Key)
	var req *http.Request
	switch in.Kind {
	case Get:
		req, _ = http.NewRequest(http.MethodGet, u, nil)
	case Set, Cas:
		req, _ = http.NewRequest(http.MethodPut, u, bytes.NewReader([]byte(in.Value)))
		if in.Kind == Cas {
			req.Header.Set("If-Match", `"`+strconv.FormatUint(in.Cas, 10)+`"`)
		}
	case Delete:
		req, _ = http.NewRequest(http.MethodDelete, u, nil)
	default:
		return Output{}, false, "the REST KV API has no " + in.Kind.String()
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			c.lastErr = "connect: " + netReason(err)
			return Output{}, false, ""
		}
		c.lastErr = "HTTP: " + netReason(err)
		return Output{Result: Ambiguous}, true, ""
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		c.lastErr = "HTTP body: " + netReason(err)
		return Output{Result: Ambiguous}, true, ""
	}
	if restRefused(resp.StatusCode, body) {
		c.lastErr = restReason(resp.StatusCode, body)
		return Output{}, false, ""
	}
	cas, _ := strconv.ParseUint(strings.Trim(resp.Header.Get("ETag"), `"`), 10, 64)
	switch {
	case resp.StatusCode == http.StatusOK && in.Kind == Get:
		return Output{Result: Ok, Value: string(body), Cas: cas}, true, ""
	case resp.StatusCode == http.StatusNoContent:
		return Output{Result: Ok, Cas: cas}, true, ""
	case resp.StatusCode == http.StatusNotFound && in.Kind != Set:
		return Output{Result: NotFound}, true, ""
	case resp.StatusCode == http.StatusPreconditionFailed && in.Kind == Cas:
		return Output{Result: Exists}, true, ""
	case resp.StatusCode >= 500:
		c.lastErr = restReason(resp.StatusCode, body)
		return Output{Result: Ambiguous}, true, ""
	}
	return Output{Result: Ambiguous}, true, fmt.Sprintf("%s %s: unexpected %s %q", in.Kind, in.Key, resp.Status, body)
}

// restRefused reports whether an error reply says the request was not
// carried out: 429 Overloaded, 507 Storage, and a 503 of Temporary,
// Unavailable or OutOfMemory. A 504 UnknownResult and a 503
// DeadlineExceeded leave it open.
func restRefused(status int, body []byte) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return true
	case http.StatusServiceUnavailable:
	default:
		return false
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	switch e.Error.Code {
	case "Temporary", "Unavailable", "OutOfMemory":
		return true
	}
	return false
}
