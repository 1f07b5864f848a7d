package memcache

import (
	"bytes"

	"github.com/ndbgate/ndbgate/gateway"
)

// Starting a parsed command, one function per dialect: dispatchText here,
// dispatchMeta in meta_conn.go and dispatchBinary here. A get that can
// share a batch with its neighbours goes to the connection's getRun
// instead (getrun.go).

// dispatch starts cmd in its dialect. It reports false when a text get
// stopped between its pieces (dispatchGet): the command is then not
// consumed.
func (cs *connState) dispatch(cmd *Command) bool {
	switch {
	case cmd.Binary:
		cs.dispatchBinary(cmd)
	case cmd.Kind.IsMeta():
		cs.dispatchMeta(cmd)
	default:
		return cs.dispatchText(cmd)
	}
	return true
}

// dispatchText starts a text command.
func (cs *connState) dispatchText(cmd *Command) bool {
	s := cs.srv
	switch cmd.Kind {
	case CmdGet, CmdGets, CmdGat, CmdGats:
		if len(cmd.Keys) == 0 { // "gat <exptime>" with no keys
			cs.reply(dialectText, cmd.Kind, replyEnd, false)
			return true
		}
		return cs.dispatchGet(cmd)
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas:
		p := cs.newPending(dialectText, cmd.Kind, cmd.NoReply)
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.SetValue(cmd.Data)
		r.Flags, r.Exptime, r.Cas = cmd.Flags, cmd.Exptime, cmd.Cas
		p.writes = true
		cs.do(p)
	case CmdDelete, CmdIncr, CmdDecr, CmdTouch:
		p := cs.newPending(dialectText, cmd.Kind, cmd.NoReply)
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.Delta, r.Exptime = cmd.Delta, cmd.Exptime
		p.writes = true
		cs.do(p)
	case CmdFlushAll:
		p := cs.newPending(dialectText, cmd.Kind, cmd.NoReply)
		p.fixed = append(p.fixed, replyOK...)
		cs.flushAll(p, cmd.Delay)
	case CmdVersion:
		cs.reply(dialectText, cmd.Kind, AppendVersion(nil, s.cfg.Version), false)
	case CmdVerbosity:
		s.verbosity.Store(cmd.Level)
		cs.reply(dialectText, cmd.Kind, replyOK, cmd.NoReply)
	case CmdQuit:
		cs.closeAfter = true
	case CmdStats:
		arg, arg2 := append([]byte(nil), cmd.Arg...), append([]byte(nil), cmd.Arg2...)
		cs.replyInOrder(dialectText, cmd.Kind, func(dst []byte) []byte { return s.appendStats(dst, arg, arg2) })
	default:
		cs.reply(dialectText, cmd.Kind, replyError, false)
	}
	return true
}

// flushAll runs flush_all's scan-delete on a goroutine of its own, since it
// may take a while and no event loop waits on it; p, its reply, holds the
// connection's later commands until it is done.
func (cs *connState) flushAll(p *pending, delay int64) {
	p.barrier = true
	go func() {
		if err := cs.srv.svc.FlushAll(delay); err != nil {
			// Not flushed (e.g. the data dir refused it): say so, not OK.
			if p.dialect == dialectText {
				p.fixed = appendErrorReply(p.fixed[:0], err)
			} else {
				p.fixed = appendBinError(p.fixed[:0], p.bin.opcode, p.bin.opaque, binStatusOf(err))
			}
		}
		p.complete(nil)
	}()
	cs.waiting(p)
}

// dispatchGet starts a text get, gets, gat or gats, in pieces of at most
// MultiGetPiece keys. Between pieces it flushes what is done, and it stops while
// the client is not reading: it then reports false, and the command, left
// in the input, is parsed again later and resumed at key getResume.
func (cs *connState) dispatchGet(cmd *Command) bool {
	keys, piece := cmd.Keys[cs.getResume:], len(cmd.Keys)
	if piece > 1 {
		piece = cs.srv.svc.MultiGetPiece()
	}
	for len(keys) > 0 {
		if cs.getResume > 0 {
			if cs.unflushed >= flushEarly {
				cs.flush()
			}
			if cs.t.Backlog() >= replyBacklogMax {
				return false
			}
		}
		n := min(len(keys), piece)
		p := cs.newPending(dialectText, cmd.Kind, false)
		p.text = textReply{piece: n < len(cmd.Keys), more: n < len(keys)}
		r := p.req
		r.Verb = gateway.VerbGet
		if cmd.Kind == CmdGat || cmd.Kind == CmdGats {
			r.Verb, r.Exptime = gateway.VerbGat, cmd.Exptime
		}
		for _, k := range keys[:n] {
			r.AddKey(k)
		}
		p.writes = writesKeys(cmd)
		cs.do(p)
		keys = keys[n:]
		cs.getResume += n
	}
	cs.getResume = 0
	return true
}

var storageVerb = [NumCommandKinds]gateway.Verb{
	CmdSet: gateway.VerbSet, CmdAdd: gateway.VerbAdd, CmdReplace: gateway.VerbReplace,
	CmdAppend: gateway.VerbAppend, CmdPrepend: gateway.VerbPrepend, CmdCas: gateway.VerbCas,
	CmdDelete: gateway.VerbDelete, CmdIncr: gateway.VerbIncr, CmdDecr: gateway.VerbDecr,
	CmdTouch: gateway.VerbTouch,
}

// dispatchBinary starts a binary command that is not part of a get run.
func (cs *connState) dispatchBinary(cmd *Command) {
	s := cs.srv
	fixed := func(b []byte) {
		p := cs.newBinPending(cmd)
		p.fixed = append(p.fixed, b...)
		p.state.Store(stateDone)
	}
	switch cmd.Kind {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas, CmdDelete, CmdIncr, CmdDecr:
		p := cs.newBinPending(cmd)
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.SetValue(cmd.Data)
		r.Flags, r.Exptime, r.Cas, r.Delta = cmd.Flags, cmd.Exptime, cmd.Cas, cmd.Delta
		r.Create, r.Initial = cmd.Create, cmd.Initial
		p.writes = true
		cs.do(p)
	case CmdFlushAll:
		p := cs.newBinPending(cmd)
		if !cmd.Quiet {
			p.fixed = appendBinHeader(p.fixed, cmd.Opcode, 0, 0, statusOK, 0, cmd.Opaque, 0)
		}
		cs.flushAll(p, cmd.Delay)
	case CmdNoop, CmdVerbosity:
		if cmd.Kind == CmdVerbosity {
			s.verbosity.Store(cmd.Level)
		}
		fixed(appendBinHeader(nil, cmd.Opcode, 0, 0, statusOK, 0, cmd.Opaque, 0))
	case CmdVersion:
		b := appendBinHeader(nil, cmd.Opcode, 0, 0, statusOK, len(s.cfg.Version), cmd.Opaque, 0)
		fixed(append(b, s.cfg.Version...))
	case CmdQuit:
		if !cmd.Quiet {
			fixed(appendBinHeader(nil, cmd.Opcode, 0, 0, statusOK, 0, cmd.Opaque, 0))
		}
		cs.closeAfter = true
	case CmdSaslList, CmdSaslAuth, CmdSaslStep:
		cs.dispatchSASL(cmd, fixed)
	case CmdStats:
		op, opaque, arg := cmd.Opcode, cmd.Opaque, append([]byte(nil), cmd.Arg...)
		p := cs.replyInOrder(dialectBinary, cmd.Kind, func(dst []byte) []byte {
			if bytes.HasPrefix(arg, []byte("detail")) {
				word, _ := bytes.CutPrefix(arg, []byte("detail ")) // "detail" alone has no word
				if len(word) == len(arg) {
					word = nil
				}
				return s.prefix.detailBinary(dst, op, opaque, word)
			}
			text := s.appendStats(nil, arg, nil)
			if string(text) == string(replyError) {
				return appendBinError(dst, op, opaque, statusKeyNotFound)
			}
			return appendBinStats(dst, op, opaque, text)
		})
		p.bin.opcode, p.bin.opaque = cmd.Opcode, cmd.Opaque
	default:
		fixed(appendBinError(nil, cmd.Opcode, cmd.Opaque, statusUnknownCommand))
	}
}
