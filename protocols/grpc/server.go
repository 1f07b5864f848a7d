// Package grpcfront is the gRPC front end: RonDB's RonDBREST service over
// gateway/rowapi and ndbgate's KV service over the memcache containers, with
// health and reflection. Every RPC, however many keys, is one backend batch.
package grpcfront

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/internal/procs"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

// Options wires the services.
type Options struct {
	KV   *gateway.Service // ndbgate.v1.KV; nil leaves it unregistered
	Rows *rowapi.Service  // grpcserver.v1.RonDBREST; nil leaves it unregistered
	Keys *auth.Keys       // nil: no API keys required
	TLS  *tls.Config      // nil: plaintext; ClientCAs + RequireAndVerifyClientCert: mutual TLS
	// MaxMultiGet bounds the keys of one MultiGet (default 256).
	MaxMultiGet int
	// MaxMessage bounds a received message, bytes (default 4 MiB, gRPC's).
	MaxMessage int
	Logger     *slog.Logger
}

// NewServer builds a gRPC server with every service registered.
func NewServer(o Options) *grpc.Server {
	if o.MaxMultiGet <= 0 {
		o.MaxMultiGet = 256
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := newMetrics()
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxMessage),
		grpc.ChainUnaryInterceptor(m.unary),
		grpc.ChainStreamInterceptor(m.stream),
	}
	if o.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(o.TLS)))
	}
	s := grpc.NewServer(opts...)
	if o.KV != nil {
		kvpb.RegisterKVServer(s, newKVServer(o))
	}
	if o.Rows != nil {
		rdrspb.RegisterRonDBRESTServer(s, &rowServer{o: o})
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, name := range []string{kvpb.KV_ServiceDesc.ServiceName, rdrspb.RonDBREST_ServiceDesc.ServiceName} {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return s
}

// apiKeyHeader is the metadata key of the API key (gRPC lower-cases keys).
const apiKeyHeader = "x-api-key"

// principal authenticates the call: the explicit key (RonDB's APIKey field)
// if given, else the x-api-key metadata.
func principal(ctx context.Context, keys *auth.Keys, explicit string) (*auth.Principal, error) {
	if !keys.Enabled() {
		return nil, nil
	}
	key := explicit
	if key == "" {
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			if v := md.Get(apiKeyHeader); len(v) > 0 {
				key = v[0]
			}
		}
	}
	return keys.Authenticate(key)
}

// statusOf maps an error onto a gRPC status, once for both services.
func statusOf(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, auth.ErrNoKey), errors.Is(err, auth.ErrBadKey):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, auth.ErrDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	msg := err.Error()
	var ne *ndbclient.Error
	if errors.As(err, &ne) && ne.Message != "" {
		msg = ne.Message
	}
	return status.Error(codeOf(ndbclient.CodeOf(err)), msg)
}

func codeOf(c ndbclient.Code) codes.Code {
	switch c {
	case ndbclient.CodeOK:
		return codes.OK
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return codes.InvalidArgument
	case ndbclient.CodeNotFound, ndbclient.CodeSchemaError:
		return codes.NotFound
	case ndbclient.CodeDuplicate:
		return codes.AlreadyExists
	case ndbclient.CodeConditionFailed:
		return codes.Aborted
	case ndbclient.CodeOverloaded, ndbclient.CodeOutOfMemory, ndbclient.CodeStorage:
		return codes.ResourceExhausted
	case ndbclient.CodeTemporary, ndbclient.CodeUnavailable:
		return codes.Unavailable
	case ndbclient.CodeUnknownResult:
		return codes.Unknown
	}
	return codes.Internal
}

func invalid(format string, args ...any) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, format, args...)
}

// metrics counts RPCs in the shared request metrics, per method, with every
// method's children resolved when the server is built.
type metrics struct {
	byMethod map[string]*methodMetrics
}

type methodMetrics struct {
	ok, miss, clientErr, serverErr prometheus.Counter
	duration                       prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{byMethod: map[string]*methodMetrics{}}
	for _, sd := range []grpc.ServiceDesc{kvpb.KV_ServiceDesc, rdrspb.RonDBREST_ServiceDesc} {
		for _, md := range sd.Methods {
			m.add("/" + sd.ServiceName + "/" + md.MethodName)
		}
		for _, st := range sd.Streams {
			m.add("/" + sd.ServiceName + "/" + st.StreamName)
		}
	}
	return m
}

func (m *metrics) add(full string) {
	name := full[strings.LastIndexByte(full, '/')+1:]
	if strings.Contains(full, "RonDBREST") {
		name = "rondb_" + name
	}
	c := func(outcome string) prometheus.Counter {
		return gateway.Requests.WithLabelValues("grpc", name, outcome)
	}
	m.byMethod[full] = &methodMetrics{ok: c("ok"), miss: c("miss"), clientErr: c("client_error"), serverErr: c("server_error"),
		duration: gateway.RequestDuration.WithLabelValues("grpc", name)}
}

func (m *metrics) observe(method string, err error, d time.Duration) {
	mm := m.byMethod[method]
	if mm == nil {
		return // health, reflection
	}
	switch status.Code(err) {
	case codes.OK:
		mm.ok.Inc()
	case codes.NotFound:
		mm.miss.Inc()
	case codes.Internal, codes.Unavailable, codes.Unknown, codes.ResourceExhausted, codes.DataLoss:
		mm.serverErr.Inc()
	default:
		mm.clientErr.Inc()
	}
	mm.duration.Observe(d.Seconds())
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	procs.RequestBegan()
	defer procs.RequestEnded()
	start := time.Now()
	resp, err := handler(ctx, req)
	err = statusOf(err)
	m.observe(info.FullMethod, err, time.Since(start))
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	procs.RequestBegan()
	defer procs.RequestEnded()
	start := time.Now()
	err := statusOf(handler(srv, ss))
	m.observe(info.FullMethod, err, time.Since(start))
	return err
}
