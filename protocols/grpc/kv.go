package grpcfront

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
)

// batchWindow bounds the requests of one Batch stream in flight at once.
const batchWindow = 64

type kvServer struct {
	kvpb.UnimplementedKVServer
	o    Options
	reqs *gateway.KVRequests
}

func newKVServer(o Options) *kvServer {
	return &kvServer{o: o, reqs: gateway.NewKVRequests(o.KV)}
}

// request returns a reset request pinned to container's route, once who may
// use it.
func (s *kvServer) request(who *auth.Principal, container string) (*gateway.Request, error) {
	if container == "" {
		container = gateway.DefaultContainerName
	}
	if err := who.Allow(container); err != nil {
		return nil, err
	}
	rt, ok := s.o.KV.RouteOf(container)
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q does not exist", container)
	}
	return s.reqs.Get(rt), nil
}

// keyRequest is request for a call on one key, which it checks first.
func (s *kvServer) keyRequest(who *auth.Principal, container string, key []byte) (*gateway.Request, error) {
	if err := gateway.ValidKey(key); err != nil {
		return nil, err
	}
	return s.request(who, container)
}

func (s *kvServer) done(r *gateway.Request) { s.reqs.Done(r) }

// authed runs f for the caller the metadata's API key names.
func authed[Req, Resp any](ctx context.Context, keys *auth.Keys, in Req, f func(*auth.Principal, Req) (Resp, error)) (Resp, error) {
	who, err := principal(ctx, keys, "")
	if err != nil {
		var zero Resp
		return zero, err
	}
	return f(who, in)
}

func item(it *gateway.Item) *kvpb.Item {
	return &kvpb.Item{Key: append([]byte(nil), it.Key...), Value: append([]byte(nil), it.Value...),
		Flags: it.Flags, Cas: it.Cas, Expire: it.Expire, Found: it.Hit}
}

func (s *kvServer) Get(ctx context.Context, in *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	return authed(ctx, s.o.Keys, in, s.get)
}

func (s *kvServer) get(who *auth.Principal, in *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	r, err := s.keyRequest(who, in.Container, in.Key)
	if err != nil {
		return nil, err
	}
	defer s.done(r)
	if _, err := s.o.KV.RunKey(r, gateway.VerbGet, in.Key); err != nil {
		return nil, err
	}
	if _, err := r.ItemResult(0); err != nil {
		return nil, err
	}
	return &kvpb.GetResponse{Item: item(&r.Items[0])}, nil
}

func (s *kvServer) MultiGet(ctx context.Context, in *kvpb.MultiGetRequest) (*kvpb.MultiGetResponse, error) {
	return authed(ctx, s.o.Keys, in, s.multiGet)
}

func (s *kvServer) multiGet(who *auth.Principal, in *kvpb.MultiGetRequest) (*kvpb.MultiGetResponse, error) {
	if len(in.Keys) == 0 {
		return nil, invalid("keys: at least one key is needed")
	}
	if len(in.Keys) > s.o.MaxMultiGet {
		return nil, invalid("%d keys is more than the limit of %d", len(in.Keys), s.o.MaxMultiGet)
	}
	for i, k := range in.Keys {
		if err := gateway.ValidKey(k); err != nil {
			return nil, invalid("keys[%d]: %s", i, err.(*ndbclient.Error).Message)
		}
	}
	r, err := s.request(who, in.Container)
	if err != nil {
		return nil, err
	}
	defer s.done(r)
	// The keys are read in pieces (MultiGetPiece), and
	// a response is at most MaxMessage bytes, as a request is: a MultiGet
	// holds no more than that, whatever it asks for.
	size := 0
	out := &kvpb.MultiGetResponse{Items: make([]*kvpb.Item, 0, len(in.Keys))}
	err = s.o.KV.GetInPieces(r, len(in.Keys), func(i int) []byte { return in.Keys[i] }, func(_, _ int) error {
		if _, err := r.Result(); err != nil {
			return err
		}
		for i := range r.Items {
			it := &r.Items[i]
			if it.Err != nil {
				return it.Err
			}
			if size += len(it.Key) + len(it.Value) + 32; size > s.o.MaxMessage {
				return status.Errorf(codes.ResourceExhausted, "MultiGet: the values of these %d keys come to more than the %d bytes a message may hold (api.limits.max_body); ask for fewer keys", len(in.Keys), s.o.MaxMessage)
			}
			out.Items = append(out.Items, item(it))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *kvServer) Set(ctx context.Context, in *kvpb.SetRequest) (*kvpb.SetResponse, error) {
	return authed(ctx, s.o.Keys, in, s.set)
}

func (s *kvServer) set(who *auth.Principal, in *kvpb.SetRequest) (*kvpb.SetResponse, error) {
	if err := gateway.ValidKey(in.Key); err != nil {
		return nil, err
	}
	if limit := s.o.KV.ItemSizeMax(); len(in.Value) > limit {
		return nil, invalid("value of %d bytes is larger than the item size limit of %d", len(in.Value), limit)
	}
	verb := gateway.VerbSet
	switch in.Mode {
	case kvpb.SetMode_SET_MODE_SET:
	case kvpb.SetMode_SET_MODE_ADD:
		verb = gateway.VerbAdd
	case kvpb.SetMode_SET_MODE_REPLACE:
		verb = gateway.VerbReplace
	default:
		return nil, invalid("mode %d is not a SetMode", in.Mode)
	}
	if in.Cas != 0 {
		if verb == gateway.VerbAdd {
			return nil, invalid("cas with SET_MODE_ADD: an item that must not exist has no cas")
		}
		verb = gateway.VerbCas
	}
	r, err := s.request(who, in.Container)
	if err != nil {
		return nil, err
	}
	defer s.done(r)
	r.Verb, r.Flags, r.Exptime, r.Cas = verb, in.Flags, in.Ttl, in.Cas
	r.AddKey(in.Key)
	r.SetValue(in.Value)
	s.o.KV.Run(r)
	if _, err := r.Result(); err != nil {
		return nil, err
	}
	return &kvpb.SetResponse{Cas: r.NewCas}, nil
}

func (s *kvServer) Delete(ctx context.Context, in *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	return authed(ctx, s.o.Keys, in, s.delete)
}

func (s *kvServer) delete(who *auth.Principal, in *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	r, err := s.keyRequest(who, in.Container, in.Key)
	if err != nil {
		return nil, err
	}
	defer s.done(r)
	if _, err := s.o.KV.RunKey(r, gateway.VerbDelete, in.Key); err != nil {
		return nil, err
	}
	return &kvpb.DeleteResponse{}, nil
}

func (s *kvServer) Incr(ctx context.Context, in *kvpb.IncrRequest) (*kvpb.IncrResponse, error) {
	return authed(ctx, s.o.Keys, in, s.incr)
}

func (s *kvServer) incr(who *auth.Principal, in *kvpb.IncrRequest) (*kvpb.IncrResponse, error) {
	r, err := s.keyRequest(who, in.Container, in.Key)
	if err != nil {
		return nil, err
	}
	defer s.done(r)
	verb := gateway.VerbIncr
	if in.Decrement {
		verb = gateway.VerbDecr
	}
	r.Delta = in.Delta
	if in.Initial != nil {
		r.Create, r.Initial, r.Exptime = true, *in.Initial, in.Ttl
	}
	if _, err := s.o.KV.RunKey(r, verb, in.Key); err != nil {
		return nil, err
	}
	return &kvpb.IncrResponse{Value: r.Number, Cas: r.NewCas}, nil
}

// Batch serves a stream of requests, up to batchWindow at once; each reply
// carries its request's id.
func (s *kvServer) Batch(stream kvpb.KV_BatchServer) error {
	who, err := principal(stream.Context(), s.o.Keys, "")
	if err != nil {
		return err
	}
	var sendMu sync.Mutex
	var sendErr error
	sem := make(chan struct{}, batchWindow)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		in, err := stream.Recv()
		if err != nil {
			wg.Wait()
			sendMu.Lock()
			defer sendMu.Unlock()
			if sendErr != nil {
				return sendErr
			}
			if isEOF(err) {
				return nil
			}
			return err
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(in *kvpb.BatchRequest) {
			defer func() { <-sem; wg.Done() }()
			out := s.batchOne(who, in)
			sendMu.Lock()
			if sendErr == nil {
				sendErr = stream.Send(out)
			}
			sendMu.Unlock()
		}(in)
	}
}

func (s *kvServer) batchOne(who *auth.Principal, in *kvpb.BatchRequest) *kvpb.BatchResponse {
	out := &kvpb.BatchResponse{Id: in.Id}
	var err error
	switch op := in.Op.(type) {
	case *kvpb.BatchRequest_Get:
		var r *kvpb.GetResponse
		if r, err = s.get(who, op.Get); err == nil {
			out.Result = &kvpb.BatchResponse_Get{Get: r}
		}
	case *kvpb.BatchRequest_MultiGet:
		var r *kvpb.MultiGetResponse
		if r, err = s.multiGet(who, op.MultiGet); err == nil {
			out.Result = &kvpb.BatchResponse_MultiGet{MultiGet: r}
		}
	case *kvpb.BatchRequest_Set:
		var r *kvpb.SetResponse
		if r, err = s.set(who, op.Set); err == nil {
			out.Result = &kvpb.BatchResponse_Set{Set: r}
		}
	case *kvpb.BatchRequest_Delete:
		var r *kvpb.DeleteResponse
		if r, err = s.delete(who, op.Delete); err == nil {
			out.Result = &kvpb.BatchResponse_Delete{Delete: r}
		}
	case *kvpb.BatchRequest_Incr:
		var r *kvpb.IncrResponse
		if r, err = s.incr(who, op.Incr); err == nil {
			out.Result = &kvpb.BatchResponse_Incr{Incr: r}
		}
	default:
		err = invalid("request %d has no operation", in.Id)
	}
	if err != nil {
		st, _ := status.FromError(statusOf(err))
		out.Code, out.Message = int32(st.Code()), st.Message()
	}
	return out
}
