package memcache

import "github.com/ndbgate/ndbgate/gateway"

// batchRun collects a run of batchable commands into one queued command and
// at most two requests, one backend batch each: binary gets of one verb,
// quiet or not (GET, GETQ, GETKQ, ...; a touch joins as a GAT that reads
// nothing back), with binary sets (SET or SETQ without a cas) among them,
// meta gets (mg ... q, ended by one without q), or text gets of one key
// (all get or all gets) with text sets among them. A pipelining client's
// gets then read as one multi-get and its sets store as one multi-key set
// (gateway.Request.AddSet), while each command still gets its own reply, in
// arrival order (encodeBinaryRun, encodeTextRun). A command on a key the run
// already holds, where either writes it, waits for the run (conflicts), so
// the run's two requests share no key and their order does not matter. A
// command that cannot join, a meta get without q, a piece's worth of keys,
// setRunBytes of values, the connection's command budget, or the end of its
// input closes the run, and closing starts its requests.
type batchRun struct {
	cs *connState
	p  *pending // the open run's command; nil: none open
	// piece is the most keys one request of the run takes
	// (gateway.Service.MultiGetPiece), or 0 until the run is long enough
	// to need it (pieceFloor): short runs, the common case, never pay for
	// working it out.
	piece int
}

// setRunBytes bounds the values a run's sets hold: a pipeline of large sets
// goes in several requests.
const setRunBytes = 64 << 10

// batchable reports whether a command can share a run with its neighbours:
// a binary get-family one, a binary set without a cas where any keys may
// share a request (gateway.Service.SetsCanShareABatch: routes can change
// while the server serves) and a text set on the same terms, a meta get,
// or a text get or gets of one key that is not what is left of a get
// stopped between its pieces (dispatchGet: that one ends the earlier
// pieces' reply).
func (cs *connState) batchable(cmd *Command) bool {
	switch {
	case isRunSet(cmd):
		return cs.srv.svc.SetsCanShareABatch()
	case cmd.Binary:
		return cmd.Kind == CmdGet || cmd.Kind == CmdGat || cmd.Kind == CmdTouch
	case cmd.Kind.IsMeta():
		return metaGetBatchable(cmd)
	default:
		return (cmd.Kind == CmdGet || cmd.Kind == CmdGets) && len(cmd.Keys) == 1 && cmd.Next == 0 && cs.getResume == Resume{}
	}
}

// isRunSet reports whether cmd is a set a run can take: a binary set
// without a cas, or a text set.
func isRunSet(cmd *Command) bool { return cmd.Kind == CmdSet && cmd.Cas == 0 }

// joins reports whether a batchable cmd can join the open run of its
// dialect: a set joins any binary or text run, a get one whose gets (if any
// yet) have its verb and options.
func (r *batchRun) joins(cmd *Command) bool {
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
	if r.p.dialect == dialectText || !cmd.Binary {
		return r.p.dialect == dialectText && !cmd.Binary &&
			(cmd.Kind == CmdSet || r.p.text.getKind == CmdNone || cmd.Kind == r.p.text.getKind)
	}
	if isRunSet(cmd) || req.NumKeys() == 0 {
		return true
	}
	if cmd.Kind == CmdGet {
		return req.Verb == gateway.VerbGet
	}
	return req.Verb == gateway.VerbGat && req.Exptime == cmd.Exptime
}

// open opens a run with cmd's options.
func (r *batchRun) open(cmd *Command) {
	cs := r.cs
	switch {
	case cmd.Kind == CmdMetaGet:
		r.p = cs.newPending(dialectMeta, CmdMetaGet, false)
		metaGetOptions(r.p.req, cmd)
	case !cmd.Binary:
		r.p = cs.newPending(dialectText, cmd.Kind, false)
		r.p.text.run = true
	default:
		kind := cmd.Kind
		if kind == CmdTouch {
			kind = CmdGat // a run of touches is a gat that reads nothing back
		}
		r.p = cs.newPending(dialectBinary, kind, false)
		r.p.bin.opcode, r.p.bin.opaque = cmd.Opcode, cmd.Opaque
	}
	r.piece = 0
}

// add adds cmd's key to the run, opening one if none is open. A meta get
// without q closes it; a binary get, quiet or not, does not (a pipeline's
// GETs batch as its GETQs do). setRunBytes of values, or a full piece,
// closes it too.
func (r *batchRun) add(cmd *Command) {
	if r.p == nil {
		r.open(cmd)
	}
	p := r.p
	if isRunSet(cmd) { // its key is in setKeys, which write
		sets := p.setRequest()
		sets.AddSet(cmd.Keys[0], cmd.Data, cmd.Flags, cmd.Exptime)
		if cmd.Binary {
			p.bin.keys = append(p.bin.keys, binKey{cmd.Opcode, cmd.Opaque, true})
		} else {
			p.text.cmds = append(p.text.cmds, textCmd{set: true, noreply: cmd.NoReply})
		}
		if len(sets.Value()) >= setRunBytes {
			r.close()
		}
		return
	}
	if cmd.Binary && p.req.NumKeys() == 0 { // the run's first get sets its verb
		p.req.Verb, p.req.Omit = gateway.VerbGet, gateway.OmitExpire // a binary reply has the cas
		if cmd.Kind == CmdGat || cmd.Kind == CmdTouch {
			p.req.Verb, p.req.Exptime = gateway.VerbGat, cmd.Exptime
		}
	}
	p.writes = p.writes || writesKeys(cmd) // a GAT's
	p.req.AddKey(cmd.Keys[0])
	switch {
	case cmd.Kind == CmdMetaGet:
		p.addMeta(cmd)
		p.req.Omit &= metaGetOmit(cmd) // the run reads what any of its mgs needs
	case cmd.Binary:
		p.bin.keys = append(p.bin.keys, binKey{cmd.Opcode, cmd.Opaque, false})
	default:
		if p.text.getKind == CmdNone { // the run's first get sets its verb
			p.text.getKind = cmd.Kind
			p.req.Verb, p.req.Omit = gateway.VerbGet, textGetOmit(cmd)
		}
		p.text.cmds = append(p.text.cmds, textCmd{})
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

// close starts the open run's requests, if a run is open.
func (r *batchRun) close() {
	if p := r.p; p != nil {
		r.p = nil
		r.cs.do(p)
	}
}
