// Starting a binary command that is not part of a run (batchrun.go).

package memcache

import (
	"bytes"
)

// dispatchBinary starts a binary command that is not part of a run.
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
		r.DropOnTooLarge = dropsOnTooLarge(cmd)
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
