package memcache

import "github.com/ndbgate/ndbgate/gateway"

// getRun collects a run of gets into one request, one backend batch: binary
// gets of one verb, quiet or not (GET, GETQ, GETKQ, ...: a pipelined client's
// gets read as one multi-get, and each still gets its own reply), or meta
// gets (mg ... q, ended by one without q). A command that cannot join, a
// piece's worth of keys, the connection's command budget, or the end of its
// input closes the run, and closing starts its request.
type getRun struct {
	cs *connState
	p  *pending // the open run's command; nil: none open
	// piece is the most keys one request of the run takes
	// (gateway.Service.MultiGetPiece), or 0 until the run is long enough
	// to need it (pieceFloor): short runs, the common case, never pay for
	// working it out.
	piece int
}

// batchable reports whether a command is a binary get-family one, or a meta
// get, that can share a batch with its neighbours.
func batchable(cmd *Command) bool {
	if cmd.Binary {
		return cmd.Kind == CmdGet || cmd.Kind == CmdGat || cmd.Kind == CmdTouch
	}
	return metaGetBatchable(cmd)
}

// joins reports whether a batchable cmd can join the open run: the same
// verb, and the same options.
func (r *getRun) joins(cmd *Command) bool {
	if r.p == nil {
		return false
	}
	req := r.p.req
	if cmd.Kind == CmdMetaGet {
		return r.p.kind == CmdMetaGet && req.Meta.NoBump == cmd.Meta.On('u') && req.Meta.Recache == cmd.Meta.Recache
	}
	if r.p.kind == CmdMetaGet {
		return false
	}
	if cmd.Kind == CmdGet {
		return req.Verb == gateway.VerbGet
	}
	return req.Verb == gateway.VerbGat && req.Exptime == cmd.Exptime
}

// open opens a run with cmd's options.
func (r *getRun) open(cmd *Command) {
	cs := r.cs
	if cmd.Kind == CmdMetaGet {
		r.p = cs.newPending(dialectMeta, CmdMetaGet, false)
		metaGetOptions(r.p.req, cmd)
	} else {
		kind := cmd.Kind
		if kind == CmdTouch {
			kind = CmdGat
		}
		r.p = cs.newPending(dialectBinary, kind, false)
		r.p.bin.opcode, r.p.bin.opaque = cmd.Opcode, cmd.Opaque
		r.p.req.Verb = gateway.VerbGet
		if kind == CmdGat {
			r.p.req.Verb, r.p.req.Exptime = gateway.VerbGat, cmd.Exptime
		}
	}
	r.p.writes = writesKeys(cmd)
	r.piece = 0
}

// add adds cmd's key to the run, opening one if none is open; a command
// that is not quiet, or a full piece, closes it.
func (r *getRun) add(cmd *Command) {
	if r.p == nil {
		r.open(cmd)
	}
	p := r.p
	p.req.AddKey(cmd.Keys[0])
	if cmd.Kind == CmdMetaGet {
		p.addMeta(cmd)
	} else {
		p.bin.keys = append(p.bin.keys, binKey{cmd.Opcode, cmd.Opaque})
	}
	if !cmd.Quiet && cmd.Kind == CmdMetaGet {
		r.close()
		return
	}
	n := p.req.NumKeys()
	if r.piece == 0 {
		if n < r.cs.srv.pieceFloor() {
			return
		}
		r.piece = r.cs.srv.svc.MultiGetPiece()
	}
	if n >= r.piece {
		r.close() // a long run goes in pieces
	}
}

// pieceFloor is the fewest keys MultiGetPiece can be: what a run may hold
// before it needs to ask.
func (s *Server) pieceFloor() int {
	return max(1, gateway.MultiGetPieceBytes/max(1, s.svc.ItemSizeMax()))
}

// close starts the open run's request, if a run is open.
func (r *getRun) close() {
	if p := r.p; p != nil {
		r.p = nil
		r.cs.do(p)
	}
}
