package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

func dialGRPC(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// One item, three front ends: written over memcache, read over gRPC and REST,
// and the other way round.
func TestGRPCEndToEnd(t *testing.T) {
	grpcAddr := freePort(t)
	s := startServer(t, "--grpc", grpcAddr)
	conn := dialGRPC(t, grpcAddr, nil)
	kv := kvpb.NewKVClient(conn)
	rd := rdrspb.NewRonDBRESTClient(conn)
	mc := newClient(t, s.memcacheAddr)
	rc := newSpecClient(t, s)
	ctx := context.Background()

	require.NoError(t, mc.Set(&memcache.Item{Key: "from-mc", Value: []byte("memcache wrote this"), Flags: 5}))
	got, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte("from-mc")})
	require.NoError(t, err)
	assert.Equal(t, "memcache wrote this", string(got.Item.Value))
	assert.Equal(t, uint32(5), got.Item.Flags)

	set, err := kv.Set(ctx, &kvpb.SetRequest{Container: "default", Key: []byte("from-grpc"), Value: []byte("grpc wrote this"), Flags: 8})
	require.NoError(t, err)
	it := requireItem(t, mc, "from-grpc", "grpc wrote this", 8)
	assert.Equal(t, set.Cas, it.CasID, "one cas across front ends")
	r := rc.do(http.MethodGet, "/v1/kv/default/from-grpc", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "grpc wrote this", string(r.body))

	r = rc.do(http.MethodPut, "/v1/kv/default/from-rest", []byte("rest wrote this"))
	require.Equal(t, http.StatusNoContent, r.status)
	mg, err := kv.MultiGet(ctx, &kvpb.MultiGetRequest{Keys: [][]byte{[]byte("from-rest"), []byte("from-mc"), []byte("absent")}})
	require.NoError(t, err)
	assert.Equal(t, "rest wrote this", string(mg.Items[0].Value))
	assert.Equal(t, "memcache wrote this", string(mg.Items[1].Value))
	assert.False(t, mg.Items[2].Found)

	// The same row through RonDB's gRPC API: JSON-text values.
	pk, err := rd.PKRead(ctx, &rdrspb.PKReadRequestProto{DB: proto.String("ndbmemcache"), Table: proto.String("demo_table"),
		Filters:     []*rdrspb.FilterProto{{Column: proto.String("mkey"), Value: proto.String(`"from-mc"`)}},
		ReadColumns: []*rdrspb.ReadColumnProto{{Column: proto.String("flags")}}})
	require.NoError(t, err)
	assert.Equal(t, "5", pk.Data["flags"].GetName())

	_, err = kv.Incr(ctx, &kvpb.IncrRequest{Key: []byte("from-mc"), Delta: 1})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	_, err = kv.Get(ctx, &kvpb.GetRequest{Key: []byte("bad key")})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	// Reflection lists the services (what grpcurl list does), health says serving.
	info, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, info.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	resp, err := info.Recv()
	require.NoError(t, err)
	var names []string
	for _, svc := range resp.GetListServicesResponse().GetService() {
		names = append(names, svc.Name)
	}
	assert.Subset(t, names, []string{"ndbgate.v1.KV", "grpcserver.v1.RonDBREST", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"})
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.Status)

	// gRPC calls are counted like every other request.
	_, body := s.httpGet(t, "/metrics")
	m := parseMetrics(t, body)
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "grpc", "command": "MultiGet", "outcome": "ok"}))
	assert.Equal(t, 1.0, metricSum(m, "ndbgate_requests_total", map[string]string{"protocol": "grpc", "command": "rondb_PKRead", "outcome": "ok"}))
}

// gRPC over mutual TLS with API keys.
func TestGRPCAuthAndTLS(t *testing.T) {
	keys := writeFile(t, "keys.yaml", `
keys:
  - {name: cache-app, key: "cache-key-00000000001", grants: [default]}
`)
	pki := newTestPKI(t)
	grpcAddr := freePort(t)
	s := startServer(t, "--grpc", grpcAddr, "--api-keys", keys, "--api-tls", "--tls-cert", pki.certFile, "--tls-key", pki.keyFile, "--tls-client-ca", pki.caFile)
	creds := credentials.NewTLS(&tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.clientCert}})
	kv := kvpb.NewKVClient(dialGRPC(t, grpcAddr, creds))
	ctx := context.Background()
	_, err := kv.Get(ctx, &kvpb.GetRequest{Key: []byte("k")})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	authed := metadata.AppendToOutgoingContext(ctx, "x-api-key", "cache-key-00000000001")
	_, err = kv.Set(authed, &kvpb.SetRequest{Key: []byte("k"), Value: []byte("v")})
	require.NoError(t, err)
	_, err = kv.Get(authed, &kvpb.GetRequest{Container: "other", Key: []byte("k")})
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	rd := rdrspb.NewRonDBRESTClient(dialGRPC(t, grpcAddr, creds))
	_, err = rd.PKRead(authed, &rdrspb.PKReadRequestProto{DB: proto.String("ndbmemcache"), Table: proto.String("demo_table"),
		Filters: []*rdrspb.FilterProto{{Column: proto.String("mkey"), Value: proto.String(`"k"`)}}})
	assert.Equal(t, codes.PermissionDenied, status.Code(err), "granted the container, not the database")

	// No client certificate: no session.
	plainTLS := kvpb.NewKVClient(dialGRPC(t, grpcAddr, credentials.NewTLS(&tls.Config{RootCAs: pki.roots})))
	_, err = plainTLS.Get(authed, &kvpb.GetRequest{Key: []byte("k")})
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	insecureConn := kvpb.NewKVClient(dialGRPC(t, grpcAddr, nil))
	_, err = insecureConn.Get(authed, &kvpb.GetRequest{Key: []byte("k")})
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.NotContains(t, s.output.String(), "cache-key-00000000001")
}
