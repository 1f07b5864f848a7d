package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
)

// The request bodies of RonDB's REST API. Values stay raw JSON: their meaning
// depends on the column type, which rowapi knows.

type fieldJSON struct {
	Column *string         `json:"column"`
	Value  json.RawMessage `json:"value"` // empty when missing; null arrives as "null"
}

type readColumnJSON struct {
	Column         *string `json:"column"`
	DataReturnType string  `json:"dataReturnType"`
}

type pkBodyJSON struct {
	Filters     []fieldJSON      `json:"filters"`
	ReadColumns []readColumnJSON `json:"readColumns"`
	Values      []fieldJSON      `json:"values"`
	OperationID *json.RawMessage `json:"operationId"`
}

type subOpJSON struct {
	Method      string          `json:"method"`
	RelativeURL string          `json:"relative-url"`
	Body        json.RawMessage `json:"body"`
}

type batchJSON struct {
	Operations []subOpJSON `json:"operations"`
}

// badRequest is a whole-request decoding error (400).
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// decodeStrict decodes one JSON value into v, refusing unknown fields (a typo
// such as "filter" must not read as "no filters") and trailing data.
func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badf("%s: %s", what, jsonProblem(err))
	}
	if dec.More() {
		return badf("%s: unexpected data after the JSON object", what)
	}
	return nil
}

// jsonProblem words a decoding error for a client.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Sprintf("wants %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends in the middle of a value"
	case errors.Is(err, io.EOF):
		return "empty body; a JSON object is required"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		return "unknown field " + strings.TrimPrefix(msg, "json: unknown field ")
	}
	return strings.TrimPrefix(msg, "json: ")
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "string", "ptr":
		return "a string"
	}
	return k
}

// decodePK turns a pk-* body into an Op for db.table.
func decodePK(body []byte, method rowapi.Method, db, table string) (rowapi.Op, error) {
	if op, ok := fastPK(body, method, db, table); ok {
		return op, nil
	}
	return decodePKReference(body, method, db, table)
}

// decodePKReference is decodePK through encoding/json: every body the fast
// path does not take, with a worded error for the bad ones.
func decodePKReference(body []byte, method rowapi.Method, db, table string) (rowapi.Op, error) {
	var b pkBodyJSON
	if err := decodeStrict(body, &b, method.String()+" body"); err != nil {
		return rowapi.Op{}, err
	}
	op := rowapi.Op{Method: method, DB: db, Table: table}
	if b.OperationID != nil {
		id, err := operationID(*b.OperationID)
		if err != nil {
			return op, err
		}
		op.OperationID = id
	}
	var err error
	if op.Filters, err = fields(b.Filters, "filters"); err != nil {
		return op, err
	}
	if len(op.Filters) == 0 && method != 0 {
		return op, badf("%s: filters are required: one {\"column\",\"value\"} per primary key column", method)
	}
	if op.Values, err = fields(b.Values, "values"); err != nil {
		return op, err
	}
	for i, rc := range b.ReadColumns {
		if rc.Column == nil {
			return op, badf("readColumns[%d]: \"column\" is required", i)
		}
		op.ReadColumns = append(op.ReadColumns, *rc.Column)
		op.ReturnTypes = append(op.ReturnTypes, rc.DataReturnType)
	}
	return op, nil
}

// operationID accepts a string, as RonDB documents, or a number, as some
// clients send it; it comes back as a string.
func operationID(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if len(s) > 256 {
			return "", badf("operationId is longer than 256 bytes")
		}
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		return n.String(), nil
	}
	return "", badf("operationId must be a string")
}

func fields(in []fieldJSON, what string) ([]rowapi.Field, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]rowapi.Field, len(in))
	for i, f := range in {
		if f.Column == nil {
			return nil, badf("%s[%d]: \"column\" is required", what, i)
		}
		if len(f.Value) == 0 {
			return nil, badf("%s[%d] (%s): \"value\" is required (null for NULL)", what, i, *f.Column)
		}
		out[i] = rowapi.Field{Column: *f.Column, Value: f.Value}
	}
	return out, nil
}

// decodeBatch turns a batch body into ops. A sub-operation that cannot be
// understood fails on its own (its error is in errs[i]); only a body that is
// not a batch at all fails the request.
func decodeBatch(body []byte, maxOps int, onlyMethod rowapi.Method) (ops []rowapi.Op, errs []error, err error) {
	if ops, ok := fastBatch(body, maxOps, onlyMethod); ok {
		return ops, make([]error, len(ops)), nil
	}
	return decodeBatchReference(body, maxOps, onlyMethod)
}

func decodeBatchReference(body []byte, maxOps int, onlyMethod rowapi.Method) (ops []rowapi.Op, errs []error, err error) {
	var b batchJSON
	if err := decodeStrict(body, &b, "batch body"); err != nil {
		return nil, nil, err
	}
	if len(b.Operations) == 0 {
		return nil, nil, badf("batch: \"operations\" must list at least one operation")
	}
	if len(b.Operations) > maxOps {
		return nil, nil, badf("batch: %d operations is more than the limit of %d", len(b.Operations), maxOps)
	}
	ops = make([]rowapi.Op, len(b.Operations))
	errs = make([]error, len(b.Operations))
	for i, so := range b.Operations {
		if so.Method != "" && so.Method != "POST" {
			errs[i] = badf("operations[%d]: method %q is not supported (use POST)", i, so.Method)
			continue
		}
		db, table, m, ok := splitRelativeURL(so.RelativeURL)
		if !ok {
			errs[i] = badf("operations[%d]: relative-url %q is not {db}/{table}/{pk-read|pk-write|pk-insert|pk-update|pk-delete}", i, so.RelativeURL)
			continue
		}
		if onlyMethod != 0 && m != onlyMethod {
			errs[i] = badf("operations[%d]: this endpoint runs %s operations only", i, onlyMethod)
			continue
		}
		if len(so.Body) == 0 {
			errs[i] = badf("operations[%d]: \"body\" is required", i)
			continue
		}
		ops[i], errs[i] = decodePKReference(so.Body, m, db, table)
	}
	return ops, errs, nil
}

// splitRelativeURL reads "db/table/pk-read", with or without a leading "/"
// or the API version.
func splitRelativeURL(u string) (db, table string, m rowapi.Method, ok bool) {
	u = strings.TrimPrefix(u, "/")
	u = strings.TrimPrefix(u, apiVersion+"/")
	parts := strings.Split(u, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", 0, false
	}
	m, ok = rowapi.ParseMethod(parts[2])
	return parts[0], parts[1], m, ok
}
