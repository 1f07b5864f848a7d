// Starting a text command: storage, delete, arithmetic and the rest, and a
// multi-key get in pieces.

package memcache

import (
	"github.com/ndbgate/ndbgate/gateway"
)

// dispatchText starts a text command; see dispatch for what it returns.
func (cs *connState) dispatchText(cmd *Command) stop {
	s := cs.srv
	switch cmd.Kind {
	case CmdGet, CmdGets, CmdGat, CmdGats:
		if len(cmd.Keys) == 0 { // "gat <exptime>" with no keys
			cs.reply(dialectText, cmd.Kind, replyEnd, false)
			return stopNone
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
	return stopNone
}

// dispatchGet starts a text get, gets, gat or gats, in pieces of at most
// MultiGetPiece keys, and at most getKeysPerServe keys a serve. Between pieces
// it flushes what is done, and it stops while the client is not reading
// (stopOutput) or once the serve's keys are used (stopBudget): it then
// reports why, and the command, left in the input, is parsed again later
// and resumed at key getResume.
func (cs *connState) dispatchGet(cmd *Command) stop {
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
				return stopOutput
			}
		}
		left := getKeysPerServe - cs.getKeys
		if left <= 0 {
			return stopBudget
		}
		n := min(len(keys), piece, left)
		cs.getKeys += n
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
	return stopNone
}
