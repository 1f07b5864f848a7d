package grpcfront

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

const itemMax = 4096

// newTestServer serves both services over an in-memory connection on the
// embedded engine and returns a client connection.
func newTestServer(t *testing.T, keys *auth.Keys) *grpc.ClientConn {
	e := embedded.New(embedded.Config{Partitions: 4, Nodes: 2})
	t.Cleanup(func() { _ = e.Close() })
	tbl, err := e.CreateTable(gateway.DemoTable(itemMax))
	require.NoError(t, err)
	c, err := gateway.NewContainer(gateway.DefaultContainerSpec(), tbl)
	require.NoError(t, err)
	cl := ndbclient.NewClient(e)
	svc, err := gateway.New(gateway.Options{Backend: cl, Routes: []gateway.Route{{Prefix: "", Container: c}}, ItemSizeMax: itemMax})
	require.NoError(t, err)
	srv := NewServer(Options{KV: svc, Rows: rowapi.New(cl, rowapi.Limits{MaxBatch: 16}), Keys: keys, MaxMultiGet: 8})
	ln := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return ln.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func requireCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, code, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), msg)
}

func TestKV(t *testing.T) {
	kv := kvpb.NewKVClient(newTestServer(t, nil))
	ctx := context.Background()

	set, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Value: []byte("1"), Flags: 9})
	require.NoError(t, err)
	require.NotZero(t, set.Cas)
	got, err := kv.Get(ctx, &kvpb.GetRequest{Container: "default", Key: []byte("a")})
	require.NoError(t, err)
	assert.True(t, proto.Equal(&kvpb.Item{Key: []byte("a"), Value: []byte("1"), Flags: 9, Cas: set.Cas, Found: true}, got.Item), "%v", got.Item)

	_, err = kv.Get(ctx, &kvpb.GetRequest{Key: []byte("missing")})
	requireCode(t, err, codes.NotFound, `"missing" not found`)
	_, err = kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Value: []byte("x"), Mode: kvpb.SetMode_SET_MODE_ADD})
	requireCode(t, err, codes.AlreadyExists, "exists")
	_, err = kv.Set(ctx, &kvpb.SetRequest{Key: []byte("b"), Value: []byte("x"), Mode: kvpb.SetMode_SET_MODE_REPLACE})
	requireCode(t, err, codes.NotFound, "not found")
	_, err = kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Value: []byte("2"), Cas: set.Cas + 100})
	requireCode(t, err, codes.Aborted, "cas mismatch")
	_, err = kv.Set(ctx, &kvpb.SetRequest{Key: []byte("nope"), Value: []byte("2"), Cas: 5})
	requireCode(t, err, codes.NotFound, "not found")
	set2, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Value: []byte("2"), Cas: set.Cas})
	require.NoError(t, err)
	assert.NotEqual(t, set.Cas, set2.Cas)

	inc, err := kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("a"), Delta: 40})
	require.NoError(t, err)
	assert.Equal(t, uint64(42), inc.Value)
	dec, err := kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("a"), Delta: 100, Decrement: true})
	require.NoError(t, err)
	assert.Equal(t, uint64(0), dec.Value, "decr clamps at 0")
	_, err = kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("n"), Delta: 1})
	requireCode(t, err, codes.NotFound, "not found")
	created, err := kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("n"), Delta: 1, Initial: proto.Uint64(7)})
	require.NoError(t, err)
	assert.Equal(t, uint64(7), created.Value)
	_, err = kv.Set(ctx, &kvpb.SetRequest{Key: []byte("s"), Value: []byte("text")})
	require.NoError(t, err)
	_, err = kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("s"), Delta: 1})
	requireCode(t, err, codes.InvalidArgument, "not a decimal number")

	mg, err := kv.MultiGet(ctx, &kvpb.MultiGetRequest{Keys: [][]byte{[]byte("a"), []byte("zz"), []byte("n")}})
	require.NoError(t, err)
	require.Len(t, mg.Items, 3)
	assert.Equal(t, "0", string(mg.Items[0].Value))
	assert.False(t, mg.Items[1].Found)
	assert.Equal(t, "7", string(mg.Items[2].Value))

	_, err = kv.Delete(ctx, &kvpb.DeleteRequest{Key: []byte("a")})
	require.NoError(t, err)
	_, err = kv.Delete(ctx, &kvpb.DeleteRequest{Key: []byte("a")})
	requireCode(t, err, codes.NotFound, "not found")

	// Bad input: a clear InvalidArgument or NotFound, nothing stored lost.
	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{func() error { _, err := kv.Get(ctx, &kvpb.GetRequest{}); return err }(), codes.InvalidArgument, "key is empty"},
		{func() error {
			_, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte(strings.Repeat("k", 251))})
			return err
		}(), codes.InvalidArgument, "at most 250"},
		{func() error { _, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte("a b")}); return err }(), codes.InvalidArgument, "space or control"},
		{func() error { _, err := kv.Get(ctx, &kvpb.GetRequest{Container: "nope", Key: []byte("a")}); return err }(), codes.NotFound, `container "nope" does not exist`},
		{func() error {
			_, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("big"), Value: make([]byte, itemMax+1)})
			return err
		}(), codes.InvalidArgument, "larger than the item size limit"},
		{func() error {
			_, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Mode: kvpb.SetMode_SET_MODE_ADD, Cas: 1})
			return err
		}(), codes.InvalidArgument, "cas with SET_MODE_ADD"},
		{func() error { _, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("a"), Mode: 9}); return err }(), codes.InvalidArgument, "not a SetMode"},
		{func() error { _, err := kv.MultiGet(ctx, &kvpb.MultiGetRequest{}); return err }(), codes.InvalidArgument, "at least one key"},
		{func() error {
			_, err := kv.MultiGet(ctx, &kvpb.MultiGetRequest{Keys: make([][]byte, 9)})
			return err
		}(), codes.InvalidArgument, "9 keys is more than the limit of 8"},
		{func() error {
			_, err := kv.MultiGet(ctx, &kvpb.MultiGetRequest{Keys: [][]byte{[]byte("ok"), {}}})
			return err
		}(), codes.InvalidArgument, "keys[1]: key is empty"},
	} {
		requireCode(t, tc.err, tc.code, tc.msg)
	}
	got, err = kv.Get(ctx, &kvpb.GetRequest{Key: []byte("n")})
	require.NoError(t, err)
	assert.Equal(t, "7", string(got.Item.Value))
}

// Batch pipelines 1000 requests on one stream; every reply comes back once,
// with its id, and errors travel per request.
func TestKVBatchStream(t *testing.T) {
	kv := kvpb.NewKVClient(newTestServer(t, nil))
	stream, err := kv.Batch(context.Background())
	require.NoError(t, err)
	const n = 1000
	var sendErr error
	go func() {
		for i := 0; i < n; i++ {
			req := &kvpb.BatchRequest{Id: uint64(i)}
			key := []byte(fmt.Sprintf("k%d", i%100))
			switch i % 4 {
			case 0:
				req.Op = &kvpb.BatchRequest_Set{Set: &kvpb.SetRequest{Key: key, Value: []byte("v")}}
			case 1:
				req.Op = &kvpb.BatchRequest_Get{Get: &kvpb.GetRequest{Key: []byte("never")}}
			case 2:
				req.Op = &kvpb.BatchRequest_MultiGet{MultiGet: &kvpb.MultiGetRequest{Keys: [][]byte{key, []byte("x")}}}
			case 3:
				req.Op = &kvpb.BatchRequest_Incr{Incr: &kvpb.IncrRequest{Key: []byte("counter"), Delta: 1, Initial: proto.Uint64(1)}}
			}
			if sendErr = stream.Send(req); sendErr != nil {
				return
			}
		}
		sendErr = stream.CloseSend()
	}()
	seen := map[uint64]bool{}
	var counters []uint64
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.False(t, seen[resp.Id], "id %d twice", resp.Id)
		seen[resp.Id] = true
		switch resp.Id % 4 {
		case 0:
			assert.Equal(t, int32(codes.OK), resp.Code)
			assert.NotZero(t, resp.GetSet().GetCas())
		case 1:
			assert.Equal(t, int32(codes.NotFound), resp.Code)
			assert.Contains(t, resp.Message, "not found")
		case 2:
			require.Equal(t, int32(codes.OK), resp.Code, resp.Message)
			assert.Len(t, resp.GetMultiGet().Items, 2)
		case 3:
			require.Equal(t, int32(codes.OK), resp.Code, resp.Message)
			counters = append(counters, resp.GetIncr().Value)
		}
	}
	require.NoError(t, sendErr)
	assert.Len(t, seen, n)
	sort.Slice(counters, func(i, j int) bool { return counters[i] < counters[j] })
	for i, v := range counters {
		assert.Equal(t, uint64(i+1), v, "every incr applied once, atomically")
	}
}

func TestRonDBREST(t *testing.T) {
	conn := newTestServer(t, nil)
	kv := kvpb.NewKVClient(conn)
	rd := rdrspb.NewRonDBRESTClient(conn)
	ctx := context.Background()
	_, err := kv.Set(ctx, &kvpb.SetRequest{Key: []byte("row1"), Value: []byte("hello"), Flags: 3})
	require.NoError(t, err)

	pk := func(key string) *rdrspb.PKReadRequestProto {
		return &rdrspb.PKReadRequestProto{DB: proto.String("ndbmemcache"), Table: proto.String("demo_table"),
			Filters:     []*rdrspb.FilterProto{{Column: proto.String("mkey"), Value: proto.String(`"` + key + `"`)}},
			ReadColumns: []*rdrspb.ReadColumnProto{{Column: proto.String("string_value")}, {Column: proto.String("flags")}},
			OperationID: proto.String("op-" + key)}
	}
	resp, err := rd.PKRead(ctx, pk("row1"))
	require.NoError(t, err)
	assert.Equal(t, int32(200), resp.GetCode())
	assert.Equal(t, "op-row1", resp.GetOperationID())
	assert.Equal(t, `"aGVsbG8="`, resp.Data["string_value"].GetName(), "VARBINARY as base64 JSON")
	assert.Equal(t, `3`, resp.Data["flags"].GetName())
	withNull := pk("row1")
	withNull.ReadColumns = []*rdrspb.ReadColumnProto{{Column: proto.String("math_value")}}
	resp, err = rd.PKRead(ctx, withNull)
	require.NoError(t, err)
	require.Contains(t, resp.Data, "math_value")
	assert.Nil(t, resp.Data["math_value"].Name, "NULL leaves the value unset")

	_, err = rd.PKRead(ctx, pk("none"))
	requireCode(t, err, codes.NotFound, "no row")
	bad := pk("row1")
	bad.Filters[0].Value = proto.String("row1") // not JSON text
	_, err = rd.PKRead(ctx, bad)
	requireCode(t, err, codes.InvalidArgument, "wants a string")
	noTable := pk("row1")
	noTable.Table = proto.String("nope")
	_, err = rd.PKRead(ctx, noTable)
	requireCode(t, err, codes.NotFound, "does not exist")

	batch, err := rd.Batch(ctx, &rdrspb.BatchRequestProto{Operations: []*rdrspb.PKReadRequestProto{pk("row1"), pk("none"), bad}})
	require.NoError(t, err)
	require.Len(t, batch.Responses, 3)
	assert.Equal(t, []int32{200, 404, 400}, []int32{batch.Responses[0].GetCode(), batch.Responses[1].GetCode(), batch.Responses[2].GetCode()})
	assert.Equal(t, "op-none", batch.Responses[1].GetOperationID())
	var many []*rdrspb.PKReadRequestProto
	for i := 0; i < 17; i++ {
		many = append(many, pk(fmt.Sprint(i)))
	}
	_, err = rd.Batch(ctx, &rdrspb.BatchRequestProto{Operations: many})
	requireCode(t, err, codes.InvalidArgument, "17 operations is more than the limit of 16")

	st, err := rd.Stat(ctx, &rdrspb.StatRequestProto{})
	require.NoError(t, err)
	assert.NotNil(t, st.RonDBStats)
	_, err = rd.Ping(ctx, &rdrspb.PingRequestProto{})
	require.NoError(t, err)
}

func TestAuth(t *testing.T) {
	keys, err := auth.Parse([]byte(`keys:
  - {name: cache, key: "cache-key-0123456789", grants: [default]}
  - {name: rows, key: "rows-key-01234567890", grants: [ndbmemcache]}`))
	require.NoError(t, err)
	conn := newTestServer(t, keys)
	kv := kvpb.NewKVClient(conn)
	rd := rdrspb.NewRonDBRESTClient(conn)
	with := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
	}
	_, err = kv.Get(context.Background(), &kvpb.GetRequest{Key: []byte("a")})
	requireCode(t, err, codes.Unauthenticated, "API key is required")
	_, err = kv.Get(with("wrong-key-0000000000"), &kvpb.GetRequest{Key: []byte("a")})
	requireCode(t, err, codes.Unauthenticated, "not valid")
	_, err = kv.Get(with("rows-key-01234567890"), &kvpb.GetRequest{Key: []byte("a")})
	requireCode(t, err, codes.PermissionDenied, "not granted")
	_, err = kv.Get(with("cache-key-0123456789"), &kvpb.GetRequest{Key: []byte("a")})
	requireCode(t, err, codes.NotFound, "not found")

	req := &rdrspb.PKReadRequestProto{DB: proto.String("ndbmemcache"), Table: proto.String("demo_table"),
		Filters: []*rdrspb.FilterProto{{Column: proto.String("mkey"), Value: proto.String(`"a"`)}}}
	_, err = rd.PKRead(context.Background(), req)
	requireCode(t, err, codes.Unauthenticated, "required")
	req.APIKey = proto.String("cache-key-0123456789")
	_, err = rd.PKRead(context.Background(), req)
	requireCode(t, err, codes.PermissionDenied, "not granted")
	req.APIKey = proto.String("rows-key-01234567890") // RonDB's field
	_, err = rd.PKRead(context.Background(), req)
	requireCode(t, err, codes.NotFound, "no row")

	stream, err := kv.Batch(context.Background())
	require.NoError(t, err)
	_, err = stream.Recv()
	requireCode(t, err, codes.Unauthenticated, "required")
}

// Reflection lists every service; health says serving.
func TestReflectionAndHealth(t *testing.T) {
	conn := newTestServer(t, nil)
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	require.NoError(t, err)
	require.NoError(t, rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	resp, err := rc.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	assert.Subset(t, names, []string{"ndbgate.v1.KV", "grpcserver.v1.RonDBREST", "grpc.health.v1.Health"})
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ndbgate.v1.KV"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)
}

// Many clients at once, under -race.
func TestKVConcurrent(t *testing.T) {
	kv := kvpb.NewKVClient(newTestServer(t, nil))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				key := []byte(fmt.Sprintf("g%d-%d", g, i))
				if _, err := kv.Set(context.Background(), &kvpb.SetRequest{Key: key, Value: key}); err != nil {
					t.Error(err)
					return
				}
				got, err := kv.Get(context.Background(), &kvpb.GetRequest{Key: key})
				if err != nil || string(got.Item.Value) != string(key) {
					t.Errorf("%s: %v %v", key, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
