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
		r.DropOnTooLarge = dropsOnTooLarge(cmd)
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
// from its first key not yet started (getResume, ParseFrom), a serve's
// keys at a time.
func (cs *connState) dispatchGet(cmd *Command) stop {
	keys, piece := cmd.Keys, len(cmd.Keys)
	base := cs.getResume.Skip // cmd.Keys start this far past the line's first key
	if piece > 1 || base > 0 || cmd.Next > 0 {
		piece = cs.srv.svc.MultiGetPiece()
	}
	for i := 0; i < len(keys); {
		if i > 0 || base > 0 {
			if cs.unflushed >= flushEarly {
				cs.flush()
			}
			if cs.t.Backlog() >= replyBacklogMax {
				return cs.stopGet(base+KeySkip(keys, i), stopOutput)
			}
		}
		left := getKeysPerServe - cs.getKeys
		if left <= 0 {
			return cs.stopGet(base+KeySkip(keys, i), stopBudget)
		}
		n := min(len(keys)-i, piece, left)
		cs.getKeys += n
		more := i+n < len(keys) || cmd.Next > 0
		p := cs.newPending(dialectText, cmd.Kind, false)
		p.text = textReply{piece: base > 0 || i > 0 || more, more: more}
		r := p.req
		r.Verb, r.Omit = gateway.VerbGet, textGetOmit(cmd)
		if cmd.Kind == CmdGat || cmd.Kind == CmdGats {
			r.Verb, r.Exptime = gateway.VerbGat, cmd.Exptime
		}
		for _, k := range keys[i : i+n] {
			r.AddKey(k)
		}
		p.writes = writesKeys(cmd)
		cs.ownKeys = base + i
		cs.do(p)
		cs.ownKeys = 0
		i += n
	}
	if cmd.Next > 0 { // ParseFrom took this serve's keys; the rest next serve
		return cs.stopGet(cmd.Next, stopBudget)
	}
	cs.getResume = Resume{}
	return stopNone
}

// stopGet stops the get being started before its key skip bytes past the
// line's first key, for why.
func (cs *connState) stopGet(skip int, why stop) stop {
	cs.getResume = Resume{Line: cs.lineLen, Skip: skip}
	return why
}

// textGetOmit is what a text get's reply does not show: the expiry, and for
// get the cas (gets shows it).
func textGetOmit(cmd *Command) gateway.Omit {
	if cmd.Kind == CmdGet {
		return gateway.OmitCas | gateway.OmitExpire
	}
	return gateway.OmitExpire
}
