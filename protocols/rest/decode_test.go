package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestDecodePK(t *testing.T) {
	op, err := decodePK([]byte(`{"filters":[{"column":"id","value":1},{"column":"n","value":null}],
		"readColumns":[{"column":"a","dataReturnType":"default"},{"column":"b"}],"operationId":12}`), rowapi.MethodRead, "db", "t")
	require.NoError(t, err)
	assert.Equal(t, rowapi.Op{Method: rowapi.MethodRead, DB: "db", Table: "t",
		Filters:     []rowapi.Field{{Column: "id", Value: []byte("1")}, {Column: "n", Value: []byte("null")}},
		ReadColumns: []string{"a", "b"}, ReturnTypes: []string{"default", ""}, OperationID: "12"}, op)
}

func TestDecodeBatch(t *testing.T) {
	ops, errs, err := decodeBatch([]byte(`{"operations":[
		{"method":"POST","relative-url":"db/t/pk-read","body":{"filters":[{"column":"id","value":1}]}},
		{"method":"GET","relative-url":"db/t/pk-read","body":{}},
		{"relative-url":"/0.1.0/db/t/pk-delete","body":{"filters":[{"column":"id","value":2}]}},
		{"relative-url":"db/t","body":{}},
		{"relative-url":"db/t/pk-read"}]}`), 10, 0)
	require.NoError(t, err)
	require.Len(t, ops, 5)
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], `method "GET" is not supported`)
	assert.NoError(t, errs[2])
	assert.Equal(t, rowapi.MethodDelete, ops[2].Method)
	assert.ErrorContains(t, errs[3], "relative-url")
	assert.ErrorContains(t, errs[4], `"body" is required`)
	_, _, err = decodeBatch([]byte(`{"operations":[{},{}]}`), 1, 0)
	assert.ErrorContains(t, err, "2 operations is more than the limit of 1")
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{badf("x"), 400, "BadRequest"},
		{&http.MaxBytesError{Limit: 1}, 413, "BodyTooLarge"},
		{&routeError{status: 404, msg: "no route"}, 404, "NotFound"},
		{&routeError{status: 405, msg: "wrong method"}, 405, "MethodNotAllowed"},
		{auth.ErrNoKey, 401, "Unauthenticated"},
		{auth.ErrBadKey, 401, "Unauthenticated"},
		{auth.ErrDenied, 403, "PermissionDenied"},
		{ndbclient.ErrNotFound, 404, "NotFound"},
		{ndbclient.Errorf(ndbclient.CodeSchemaError, "x"), 404, "SchemaError"},
		{ndbclient.Errorf(ndbclient.CodeInvalidArgument, "x"), 400, "InvalidArgument"},
		{ndbclient.ErrTooLarge, 400, "TooLarge"},
		{ndbclient.ErrDuplicate, 409, "Duplicate"},
		{ndbclient.ErrConditionFailed, 412, "ConditionFailed"},
		{ndbclient.ErrOverloaded, 429, "Overloaded"},
		{ndbclient.ErrOutOfMemory, 503, "OutOfMemory"},
		{ndbclient.ErrUnavailable, 503, "Unavailable"},
		{ndbclient.Errorf(ndbclient.CodeUnknownResult, "x"), 504, "UnknownResult"},
		{errors.New("boom"), 500, "Internal"},
		{context.Canceled, 499, "Canceled"},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), 503, "DeadlineExceeded"},
	} {
		status, code := statusOf(tc.err)
		assert.Equal(t, tc.status, status, "%v", tc.err)
		assert.Equal(t, tc.code, code, "%v", tc.err)
	}
}

// normalize makes empty and nil slices compare equal.
func normalize(op rowapi.Op) rowapi.Op {
	if len(op.Filters) == 0 {
		op.Filters = nil
	}
	if len(op.Values) == 0 {
		op.Values = nil
	}
	if len(op.ReadColumns) == 0 {
		op.ReadColumns, op.ReturnTypes = nil, nil
	}
	return op
}

// The fast path takes the common bodies, and gives the same ops.
func TestFastPathAgrees(t *testing.T) {
	pk := `{"filters":[{"column":"id","value":1},{"column":"s","value":"a\"b"}],"readColumns":[{"column":"a","dataReturnType":"default"}],"values":[],"operationId":"x1"}`
	op, ok := fastPK([]byte(pk), rowapi.MethodRead, "db", "t")
	require.True(t, ok)
	ref, err := decodePKReference([]byte(pk), rowapi.MethodRead, "db", "t")
	require.NoError(t, err)
	assert.Equal(t, normalize(ref), normalize(op))
	batch := `{"operations":[{"method":"POST","relative-url":"db/t/pk-read","body":` + pk + `},{"relative-url":"db/t/pk-delete","body":{"filters":[{"column":"id","value":2}]}}]}`
	ops, ok := fastBatch([]byte(batch), 10, 0)
	require.True(t, ok)
	require.Len(t, ops, 2)
	assert.Equal(t, normalize(ref), normalize(ops[0]))
	for _, odd := range []string{`{"Filters":[{"column":"id","value":1}]}`, `{"filters":[{"column":"i\u0064","value":1}]}`,
		`{"filters":[{"column":"id","value":{"a":1}}]}`, `{"filters":[{"column":"id","value":01}]}`, `{"filters":[]}`} {
		_, ok := fastPK([]byte(odd), rowapi.MethodRead, "db", "t")
		assert.False(t, ok, odd)
	}
}

// FuzzDecodeRequest: no body makes the decoders panic, and every refusal is
// a 400 with a message.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"filters":[{"column":"id","value":1}],"readColumns":[{"column":"a"}],"operationId":"x"}`,
		`{"operations":[{"method":"POST","relative-url":"db/t/pk-read","body":{"filters":[{"column":"id","value":"k"}]}}]}`,
		`{"filters":[{"column":"id","value":null}],"values":[{"column":"v","value":"\u00e9"}]}`,
		`{"keys":["a","b"]}`, `[`, `{"operationId":1e400}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			var br *badRequest
			if !errors.As(err, &br) || br.msg == "" {
				t.Fatalf("refusal %v is not a 400 with a message", err)
			}
		}
		_, err := decodePK(body, rowapi.MethodRead, "db", "t")
		check(err)
		// The fast path, when it takes a body, agrees with encoding/json.
		if op, ok := fastPK(body, rowapi.MethodRead, "db", "t"); ok {
			ref, err := decodePKReference(body, rowapi.MethodRead, "db", "t")
			if err != nil {
				t.Fatalf("fast path took %q, encoding/json refused it: %v", body, err)
			}
			if !reflect.DeepEqual(normalize(op), normalize(ref)) {
				t.Fatalf("%q: fast %+v, encoding/json %+v", body, op, ref)
			}
		}
		if fops, ok := fastBatch(body, 256, 0); ok {
			rops, rerrs, err := decodeBatchReference(body, 256, 0)
			if err != nil {
				t.Fatalf("fast path took batch %q, encoding/json refused it: %v", body, err)
			}
			for i := range rops {
				if rerrs[i] != nil {
					t.Fatalf("fast path took batch %q, encoding/json refused op %d: %v", body, i, rerrs[i])
				}
			}
			if len(fops) != len(rops) {
				t.Fatalf("%q: %d vs %d ops", body, len(fops), len(rops))
			}
			for i := range fops {
				if !reflect.DeepEqual(normalize(fops[i]), normalize(rops[i])) {
					t.Fatalf("%q op %d: fast %+v, encoding/json %+v", body, i, fops[i], rops[i])
				}
			}
		}
		ops, errs, err := decodeBatch(body, 256, 0)
		check(err)
		if err == nil && len(ops) != len(errs) {
			t.Fatalf("%d ops, %d errors", len(ops), len(errs))
		}
		for _, e := range errs {
			check(e)
		}
		var m mgetJSON
		check(decodeStrict(body, &m, "_mget body"))
	})
}
