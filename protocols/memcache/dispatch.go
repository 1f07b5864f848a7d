// Starting a parsed command in its dialect: dispatchText (text_dispatch.go),
// dispatchMeta (meta_dispatch.go) or dispatchBinary (binary_dispatch.go).
// A command that can share a batch with its neighbours (Server.batchable)
// joins the connection's run instead (batchRun, batchrun.go). What text and binary share: flush_all and the
// storage verbs.

package memcache

import (
	"github.com/ndbgate/ndbgate/gateway"
)

// dispatch starts cmd in its dialect. It reports why, if a text get
// stopped between its pieces (dispatchGet): the command is then not
// consumed.
func (cs *connState) dispatch(cmd *Command) stop {
	switch {
	case cmd.Binary:
		cs.dispatchBinary(cmd)
	case cmd.Kind.IsMeta():
		cs.dispatchMeta(cmd)
	default:
		return cs.dispatchText(cmd)
	}
	return stopNone
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

var storageVerb = [NumCommandKinds]gateway.Verb{
	CmdSet: gateway.VerbSet, CmdAdd: gateway.VerbAdd, CmdReplace: gateway.VerbReplace,
	CmdAppend: gateway.VerbAppend, CmdPrepend: gateway.VerbPrepend, CmdCas: gateway.VerbCas,
	CmdDelete: gateway.VerbDelete, CmdIncr: gateway.VerbIncr, CmdDecr: gateway.VerbDecr,
	CmdTouch: gateway.VerbTouch,
}
