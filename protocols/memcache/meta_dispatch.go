// Starting a meta command (mg, ms, md, ma, mn, me): the request it makes and
// what its reply will need from the request line.

package memcache

import (
	"github.com/ndbgate/ndbgate/gateway"
)

// metaKey is what the reply to one meta command needs from its request line:
// its flag tokens and key, copied into metaReply.buf.
type metaKey struct {
	tokens, key [2]int // spans in metaReply.buf
	b64         bool
	quiet       bool
}

// metaTokens returns key i's flag tokens and key (as sent).
func (p *pending) metaTokens(i int) (tokens, key []byte) {
	m := &p.meta
	mk := &m.keys[i]
	return m.buf[mk.tokens[0]:mk.tokens[1]], m.buf[mk.key[0]:mk.key[1]]
}

func (p *pending) addMeta(cmd *Command) {
	m := &p.meta
	mk := metaKey{b64: cmd.Meta.KeyB64, quiet: cmd.Quiet}
	mk.tokens[0] = len(m.buf)
	m.buf = append(m.buf, cmd.Meta.Tokens...)
	mk.tokens[1] = len(m.buf)
	m.buf = append(m.buf, cmd.Meta.RawKey...)
	mk.key[1] = len(m.buf)
	mk.key[0] = mk.tokens[1]
	m.keys = append(m.keys, mk)
}

// metaGetBatchable reports whether an mg can share a batch with its
// neighbours: one that changes the item (T, N) runs alone.
func metaGetBatchable(cmd *Command) bool {
	return cmd.Kind == CmdMetaGet && !cmd.Meta.On('T') && !cmd.Meta.On('N')
}

// metaGetOmit is what an mg's reply does not use: the cas without c or C,
// the expiry without t.
func metaGetOmit(cmd *Command) gateway.Omit {
	m := &cmd.Meta
	var o gateway.Omit
	if !m.On('c') && !m.On('C') {
		o |= gateway.OmitCas
	}
	if !m.On('t') {
		o |= gateway.OmitExpire
	}
	return o
}

// metaGetOptions sets a meta get's request options.
func metaGetOptions(r *gateway.Request, cmd *Command) {
	m := &cmd.Meta
	r.Verb, r.Omit = gateway.VerbGet, metaGetOmit(cmd)
	if m.On('T') {
		r.Verb, r.Exptime = gateway.VerbGat, m.TTL
		r.Meta.GatMissIsGet = true
	}
	r.Meta.Lease = true
	r.Meta.NoBump = m.On('u')
	r.Meta.Recache = m.Recache
	if m.On('N') {
		r.Meta.Vivify, r.Meta.VivifyExptime = true, m.Vivify
	}
	if m.On('E') {
		r.Meta.HasNewCas, r.Meta.NewCas = true, m.NewCas
	}
}

// dispatchMeta starts a meta command other than a batchable mg.
func (cs *connState) dispatchMeta(cmd *Command) {
	m := &cmd.Meta
	if cmd.Kind == CmdMetaNoop {
		cs.reply(dialectMeta, cmd.Kind, replyMetaNoop, false)
		return
	}
	p := cs.newPending(dialectMeta, cmd.Kind, false)
	p.addMeta(cmd)
	r := p.req
	r.AddKey(cmd.Keys[0])
	switch cmd.Kind {
	case CmdMetaGet:
		metaGetOptions(r, cmd)
	case CmdMetaDebug:
		r.Verb = gateway.VerbGet
		r.Meta.NoBump, r.Meta.Uncounted = true, true
	case CmdMetaSet:
		r.SetValue(cmd.Data)
		r.Flags, r.Exptime = m.ClientFlags, m.TTL
		r.DropOnTooLarge = dropsOnTooLarge(cmd)
		r.Verb = gateway.VerbSet
		switch m.Mode {
		case 'E', 'e':
			r.Verb = gateway.VerbAdd
		case 'A', 'a':
			r.Verb = gateway.VerbAppend
		case 'P', 'p':
			r.Verb = gateway.VerbPrepend
		case 'R', 'r':
			r.Verb = gateway.VerbReplace
		}
		if m.On('C') {
			switch r.Verb {
			case gateway.VerbSet, gateway.VerbReplace:
				r.Verb, r.Cas = gateway.VerbCas, m.CompareCas
			case gateway.VerbAppend, gateway.VerbPrepend:
				r.Cas = m.CompareCas
			}
		}
		r.Meta.Invalidate = m.On('I')
		if m.On('N') && (r.Verb == gateway.VerbAppend || r.Verb == gateway.VerbPrepend) {
			r.Meta.Vivify, r.Meta.VivifyExptime = true, m.Vivify
		}
		r.Meta.WantSize = m.On('s')
	case CmdMetaDelete:
		r.Verb = gateway.VerbDelete
		if m.On('C') {
			r.Cas, r.Meta.CasFailIsMiss, r.Meta.CompareZeroCas = m.CompareCas, true, true
		}
		r.Meta.Invalidate, r.Meta.ClearValue = m.On('I'), m.On('x')
		if m.On('T') {
			r.Meta.SetTTL, r.Exptime = true, m.TTL
		}
	case CmdMetaArithmetic:
		r.Verb = gateway.VerbIncr
		if m.Mode == 'D' || m.Mode == 'd' || m.Mode == '-' {
			r.Verb = gateway.VerbDecr
		}
		r.Delta = m.Delta
		if m.On('C') {
			r.Cas = m.CompareCas
		}
		if m.On('N') {
			r.Create, r.Initial = true, m.Initial
			r.Meta.Vivify, r.Meta.VivifyExptime = true, m.Vivify
		}
		if m.On('T') {
			r.Meta.SetTTL, r.Exptime = true, m.TTL
		}
	}
	if cmd.Kind != CmdMetaGet && cmd.Kind != CmdMetaDebug && m.On('E') {
		r.Meta.HasNewCas, r.Meta.NewCas = true, m.NewCas
	}
	p.writes = writesKeys(cmd)
	cs.do(p)
}
