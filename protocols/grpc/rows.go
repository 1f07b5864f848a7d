package grpcfront

import (
	"context"
	"errors"
	"io"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
	"google.golang.org/protobuf/proto"
)

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// rowServer is RonDB's RonDBREST service over rowapi.
type rowServer struct {
	rdrspb.UnimplementedRonDBRESTServer
	o Options
}

func toOp(in *rdrspb.PKReadRequestProto) rowapi.Op {
	op := rowapi.Op{Method: rowapi.MethodRead, DB: in.GetDB(), Table: in.GetTable(), OperationID: in.GetOperationID()}
	for _, f := range in.Filters {
		op.Filters = append(op.Filters, rowapi.Field{Column: f.GetColumn(), Value: []byte(f.GetValue())})
	}
	for _, rc := range in.ReadColumns {
		op.ReadColumns = append(op.ReadColumns, rc.GetColumn())
		op.ReturnTypes = append(op.ReturnTypes, rc.GetDataReturnType())
	}
	return op
}

// response turns a result into RonDB's reply; code is the HTTP-style status.
func response(res *rowapi.Result) *rdrspb.PKReadResponseProto {
	code, _ := rowapi.HTTPStatus(res.Err)
	out := &rdrspb.PKReadResponseProto{Code: proto.Int32(int32(code))}
	if res.OperationID != "" {
		out.OperationID = proto.String(res.OperationID)
	}
	if res.Err == nil && res.Data != nil {
		out.Data = make(map[string]*rdrspb.ColumnValueProto, len(res.Data))
		for _, c := range res.Data {
			v := &rdrspb.ColumnValueProto{}
			if string(c.Value) != "null" { // NULL: the value left unset, as RonDB sends it
				v.Name = proto.String(string(c.Value))
			}
			out.Data[c.Name] = v
		}
	}
	return out
}

// PKRead reads one row; a failure is the call's status (NOT_FOUND for a
// missing row, INVALID_ARGUMENT for a bad filter, ...).
func (s *rowServer) PKRead(ctx context.Context, in *rdrspb.PKReadRequestProto) (*rdrspb.PKReadResponseProto, error) {
	who, err := principal(ctx, s.o.Keys, in.GetAPIKey())
	if err != nil {
		return nil, err
	}
	res, err := s.o.Rows.Execute(ctx, who, []rowapi.Op{toOp(in)})
	if err != nil {
		return nil, err
	}
	if res[0].Err != nil {
		return nil, res[0].Err
	}
	return response(&res[0]), nil
}

// Batch reads many rows in one backend batch; each reply has its own code.
func (s *rowServer) Batch(ctx context.Context, in *rdrspb.BatchRequestProto) (*rdrspb.BatchResponseProto, error) {
	who, err := principal(ctx, s.o.Keys, in.GetAPIKey())
	if err != nil {
		return nil, err
	}
	if len(in.Operations) == 0 {
		return nil, invalid("operations: at least one operation is needed")
	}
	ops := make([]rowapi.Op, len(in.Operations))
	for i, o := range in.Operations {
		ops[i] = toOp(o)
		// An operation may carry its own key; it must pass too.
		if k := o.GetAPIKey(); k != "" && k != in.GetAPIKey() {
			if _, err := principal(ctx, s.o.Keys, k); err != nil {
				return nil, err
			}
		}
	}
	res, err := s.o.Rows.Execute(ctx, who, ops)
	if err != nil {
		return nil, err
	}
	out := &rdrspb.BatchResponseProto{Responses: make([]*rdrspb.PKReadResponseProto, len(res))}
	for i := range res {
		out.Responses[i] = response(&res[i])
	}
	return out, nil
}

func (s *rowServer) Stat(ctx context.Context, _ *rdrspb.StatRequestProto) (*rdrspb.StatResponseProto, error) {
	if _, err := principal(ctx, s.o.Keys, ""); err != nil {
		return nil, err
	}
	st := s.o.Rows.Stats()
	return &rdrspb.StatResponseProto{
		MemoryStats: &rdrspb.MemoryStatsProto{AllocationsCount: proto.Int64(st.AllocationsCount), DeallocationsCount: proto.Int64(st.DeallocationsCount),
			BuffersCount: proto.Int64(st.BuffersCount), FreeBuffers: proto.Int64(st.FreeBuffers)},
		RonDBStats: &rdrspb.RonDBStatsProto{NdbObjectsCreationCount: proto.Int64(st.NdbObjectsCreationCount), NdbObjectsDeletionCount: proto.Int64(st.NdbObjectsDeletionCount),
			NdbObjectsTotalCount: proto.Int64(st.NdbObjectsTotalCount), NdbObjectsFreeCount: proto.Int64(st.NdbObjectsFreeCount)},
	}, nil
}

func (s *rowServer) Ping(context.Context, *rdrspb.PingRequestProto) (*rdrspb.PingResponseProto, error) {
	if err := s.o.Rows.Ready(); err != nil {
		return nil, err
	}
	return &rdrspb.PingResponseProto{}, nil
}
