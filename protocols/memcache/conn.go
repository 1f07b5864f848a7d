package memcache

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/gateway"
)

// connState is one client connection. Everything except pending.state is touched
// only on the connection's event loop; completions from other goroutines set
// pending.state and wake the loop.
type connState struct {
	srv     *Server
	t       transport
	shard   int // metrics shard: the event loop's
	swallow int // bytes of a refused data block still to discard
	// scratch is the parser, the reply buffer and spare pendings, shared by
	// every connection of an event loop.
	scratch *loopScratch
	// queue holds commands in arrival order; replies leave from its head.
	queue      []*pending
	closeAfter bool
	closed     atomic.Bool
	// proto is fixed by the connection's first byte, as in memcached.
	proto connProto
	// authed: SASL succeeded on this connection (when credentials are set).
	authed bool
	// authFailures counts failed SASL attempts: each waits longer.
	authFailures int
	// openGet collects a run of binary quiet gets into one request (one backend
	// batch); a non-quiet get, any other command or the end of the input ends it.
	openGet *pending
	// undone counts queued commands whose completion comes from another
	// goroutine and has not come yet. At zero (the embedded engine's inline
	// completions) nothing in the queue can conflict or block, so the
	// per-command checks skip their queue scans.
	undone atomic.Int32
	// yielded: serve stopped after its per-call command budget with input
	// left, and has asked to be called again.
	yielded bool
	// partial is what this connection holds of the server's budget for
	// storage commands still arriving; waitingFor is, after serveLoop, the
	// length of the command it stopped in (0: none).
	partial    int64
	waitingFor int
	// unflushed estimates the bytes of replies done but not flushed.
	// getResume is how many keys of the get at the head of the input have
	// started, when it stopped between pieces; pieceFailed: a piece of the
	// get being encoded failed, so its later pieces say nothing.
	// outputFull: serve stopped because the client is not reading.
	unflushed   int
	getResume   int
	pieceFailed bool
	outputFull  bool
	runPiece    int // the keys of the open get run's piece
}

// loopScratch is what a connection needs only while it is being served: the
// parser and the command it fills (a command is started before the next is
// parsed; a partial one is parsed again from the start), the buffer replies
// are encoded into and the pendings of finished commands, ready for reuse.
// An event loop serves one connection at a time, so its connections share
// one: a command finds these cache lines warm from the connection served
// before it, not cold from its own last turn (memtier puts 25 connections on
// each loop). A connection on a goroutine of its own (TLS) has its own.
type loopScratch struct {
	parser Parser
	cmd    Command
	out    []byte
	free   []*pending
	// now is when the epoll loop's turn began (monoNanos), the start of the
	// requests it reads: one clock read per turn instead of one per request.
	// Zero elsewhere: each request reads the clock.
	now int64
}

// What a connection holds in replies is bounded, whatever a client asks
// for or fails to read:
//   - a get reads at most gateway.MultiGetPieceBytes of values per request:
//     a get of many keys (or a run of binary or meta gets) goes in pieces
//     of svc.MultiGetPiece() keys;
//   - replies done but not yet flushed are flushed once they pass
//     flushEarly, so that the transport's backlog says what is held;
//   - while that backlog is replyBacklogMax or more, no command starts: the
//     rest of the input waits, and the transport serves it again when the
//     client has read (the epoll loop's EPOLLOUT; gnet by polling).
const (
	flushEarly      = 256 << 10
	replyBacklogMax = maxStreamBuffer
)

// commandsPerServe bounds the commands one connection runs per call before
// the loop moves on to its other connections, as memcached's reqs_per_event:
// a deep pipeline must not starve its neighbours on the same event loop.
const commandsPerServe = 128

type connProto uint8

const (
	protoUnknown connProto = iota
	protoText
	protoBinary
)

// binKey is the opcode and opaque of one key of a binary get run.
type binKey struct {
	opcode uint8
	opaque uint32
}

// Completion states of a pending command.
const (
	stateSubmitting uint32 = iota // Do has not returned yet
	stateWaiting                  // Do returned; completion will come from elsewhere
	stateDone
)

// pending is one command awaiting its turn to reply.
type pending struct {
	cs      *connState
	req     *gateway.Request
	kind    CommandKind
	noreply bool
	state   atomic.Uint32
	fixed   []byte // a reply known at parse time (errors, version)
	// render makes the reply when p reaches the head of the queue (stats):
	// it then counts every command before it, as memcached's would.
	render  func(dst []byte) []byte
	start   int64 // monoNanos
	barrier bool  // later commands wait for this one (flush_all)
	// keys hashes the keys the command touches and writes says whether it
	// changes them, so later commands on the same keys wait their turn.
	keys   []uint64
	writes bool
	// elsewhere: completing on another goroutine, counted in Server.handoffs
	// until flushed.
	elsewhere bool
	onDone    func(*gateway.Request)
	// Binary protocol: the request's opcode and opaque, and per key of a get
	// run its own.
	bin     bool
	opcode  uint8
	opaque  uint32
	binKeys []binKey
	// Meta protocol: per command (or per key of an mg run) its flags and key.
	meta    []metaKey
	metaBuf []byte
	// A text get in pieces: piece marks each, more each but the last (no
	// END after it).
	piece, more bool
}

func (cs *connState) newPending(kind CommandKind, noreply bool) *pending {
	var p *pending
	if free := cs.scratch.free; len(free) > 0 {
		p = free[len(free)-1]
		cs.scratch.free = free[:len(free)-1]
	} else {
		p = &pending{}
		p.req = cs.srv.svc.NewRequest()
		p.req.Shard = cs.shard // the loop's, so the same for every connection sharing p
		p.onDone = p.complete
		p.req.Done = p.onDone
	}
	p.cs = cs
	p.kind, p.noreply, p.fixed, p.render, p.barrier = kind, noreply, p.fixed[:0], nil, false
	p.keys, p.writes = p.keys[:0], false
	p.bin, p.opcode, p.opaque, p.binKeys = false, 0, 0, p.binKeys[:0]
	p.meta, p.metaBuf = p.meta[:0], p.metaBuf[:0]
	p.piece, p.more = false, false
	p.start = cs.scratch.now
	if p.start == 0 {
		p.start = monoNanos()
	}
	p.req.Reset()
	p.state.Store(stateSubmitting)
	cs.queue = append(cs.queue, p)
	return p
}

// complete runs when the gateway finishes a request, on any goroutine.
func (p *pending) complete(*gateway.Request) {
	cs := p.cs // once done is stored, the loop may flush p and reuse it elsewhere
	if p.state.CompareAndSwap(stateSubmitting, stateDone) {
		return // inline: the loop flushes after Do returns
	}
	p.state.Store(stateDone)
	cs.undone.Add(-1)
	if !cs.closed.Load() {
		cs.t.wake()
	}
}

// waiting marks p as completing elsewhere, unless it already completed inline.
func (cs *connState) waiting(p *pending) {
	if p.state.CompareAndSwap(stateSubmitting, stateWaiting) {
		cs.undone.Add(1)
		p.elsewhere = true
		cs.srv.handoffs.Add(cs.shard, handoffsStarted, 1)
	}
}

// do hands the request to the gateway.
func (cs *connState) do(p *pending) {
	cs.srv.svc.Do(p.req)
	cs.waiting(p)
	if p.state.Load() == stateDone {
		cs.unflushed += p.replyBytes()
	}
}

// replyBytes estimates the length of p's reply, once it is done.
func (p *pending) replyBytes() int {
	n := len(p.fixed)
	for i := range p.req.Items {
		n += len(p.req.Items[i].Value) + len(p.req.Items[i].Key) + 48
	}
	return n
}

// reply queues a reply known now.
func (cs *connState) reply(kind CommandKind, b []byte, noreply bool) {
	p := cs.newPending(kind, noreply)
	p.fixed = append(p.fixed, b...)
	p.state.Store(stateDone)
}

// replyInOrder queues a reply that render makes once every earlier reply
// has been flushed.
func (cs *connState) replyInOrder(kind CommandKind, render func(dst []byte) []byte) *pending {
	p := cs.newPending(kind, false)
	p.render = render
	p.state.Store(stateDone)
	return p
}

// serve parses and starts commands from buf; it returns the bytes consumed.
func (cs *connState) serve(buf []byte) int {
	if cs.proto == protoUnknown && len(buf) > 0 {
		cs.proto = protoText
		if buf[0] == binReqMagic {
			cs.proto = protoBinary
		}
	}
	if cs.proto == protoText && cs.srv.cfg.Credentials != nil {
		// Under SASL memcached speaks only binary and hangs up on anything else.
		cs.srv.m.countAuth(authRefused)
		cs.closeAfter = true
		return len(buf)
	}
	// A command still arriving may take what is left of the server's
	// budget, and what this connection already holds for it.
	cs.scratch.parser.MaxBuffered = max(1, int(cs.srv.partialBytes()-cs.srv.partial.Load()+cs.partial))
	cs.waitingFor, cs.outputFull = 0, false
	used := cs.serveLoop(buf)
	cs.holdPartial(int64(max(cs.waitingFor, len(buf)-used)))
	cs.closeRun()
	if cs.outputFull && used < len(buf) {
		cs.t.wakeWhenSent()
	}
	if cs.yielded {
		cs.yielded = false
		if !cs.closeAfter {
			cs.t.wake() // serve the rest after the loop's other connections
		}
	}
	return used
}

func (cs *connState) parse(buf []byte) Result {
	if cs.proto == protoBinary {
		return cs.scratch.parser.ParseBinary(buf, &cs.scratch.cmd)
	}
	return cs.scratch.parser.Parse(buf, &cs.scratch.cmd)
}

func (cs *connState) serveLoop(buf []byte) int {
	used := 0
	maxPending := cs.srv.cfg.MaxPending
	budget := commandsPerServe
	cmd := &cs.scratch.cmd // what parse fills
	for used < len(buf) && !cs.closeAfter {
		if budget <= 0 && cs.openGet == nil { // an open get run stays one batch
			cs.yielded = true
			break
		}
		budget--
		if cs.swallow > 0 {
			n := min(cs.swallow, len(buf)-used)
			cs.swallow -= n
			used += n
			continue
		}
		if len(cs.queue) >= maxPending || cs.blocked() {
			cs.flush()
			if len(cs.queue) >= maxPending || cs.blocked() {
				break // a completion will wake the loop and serve the rest
			}
		}
		if cs.unflushed >= flushEarly {
			cs.flush()
		}
		if cs.t.backlog() >= replyBacklogMax {
			cs.outputFull = true
			break
		}
		res := cs.parse(buf[used:])
		if res.Status != StatusNeedMore && cs.proto == protoBinary && !res.Close && cs.needsAuth(cmd) {
			cs.closeRun()
			cs.srv.m.countAuth(authRefused)
			p := cs.newPending(cmd.Kind, false)
			p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
			p.fixed = appendBinError(p.fixed, cmd.Opcode, cmd.Opaque, statusAuthError)
			p.state.Store(stateDone)
			cs.closeAfter = true
			return used + res.N
		}
		switch res.Status {
		case StatusNeedMore:
			cs.waitingFor = res.Need
			return used
		case StatusError:
			cs.closeRun()
			if res.TooLarge && cs.conflicts(cmd) {
				cs.flush()
				if cs.conflicts(cmd) {
					return used
				}
			}
			used += res.N
			cs.swallow = res.Swallow
			cs.srv.m.parseErrors.Inc()
			if len(res.Reply) > 0 {
				cs.reply(cmd.Kind, res.Reply, false)
			}
			if res.TooLarge && (cmd.Kind == CmdSet || cmd.Kind == CmdMetaSet) && len(cmd.Keys) == 1 {
				// memcached drops the old item when a set is refused, so a
				// client never reads back the value it meant to replace.
				p := cs.newPending(CmdDelete, true)
				p.req.Verb = gateway.VerbUnlink
				p.req.AddKey(cmd.Keys[0])
				p.track(cmd)
				cs.do(p)
			}
			if res.Close {
				cs.closeAfter = true
			}
		default:
			if cs.inRun(cmd) {
				if cs.openGet != nil && !cs.joinsRun(cmd) {
					cs.closeRun()
				}
				if cs.conflicts(cmd) {
					cs.closeRun()
					cs.flush()
					if cs.conflicts(cmd) {
						return used
					}
				}
				used += res.N
				cs.addToRun(cmd)
				continue
			}
			cs.closeRun()
			if cs.conflicts(cmd) {
				// An earlier command on one of these keys is still running; the
				// client must see its effect, so parse this one again once it is done.
				cs.flush()
				if cs.conflicts(cmd) {
					return used
				}
			}
			if !cs.dispatch(cmd) {
				cs.outputFull = true
				return used // stopped between the pieces of a get
			}
			used += res.N
		}
	}
	return used
}

// holdPartial makes what the connection holds of the server's budget for
// commands still arriving n bytes: the unparsed input, or the whole of the
// command it waits for.
func (cs *connState) holdPartial(n int64) {
	if n != cs.partial {
		cs.srv.partial.Add(n - cs.partial)
		cs.partial = n
	}
}

// partialBytes is the budget for commands still arriving.
func (s *Server) partialBytes() int64 {
	if s.cfg.PartialBytes > 0 {
		return s.cfg.PartialBytes
	}
	return DefaultPartialBytes
}

// blocked reports whether a barrier command is still running.
func (cs *connState) blocked() bool {
	if cs.undone.Load() <= 0 {
		return false
	}
	for _, p := range cs.queue {
		if p.barrier && p.state.Load() != stateDone {
			return true
		}
	}
	return false
}

var keySeed = maphash.MakeSeed()

// writesKeys reports whether a command changes the keys it names.
func writesKeys(cmd *Command) bool {
	switch cmd.Kind {
	case CmdGet, CmdGets, CmdMetaDebug:
		return false
	case CmdMetaGet:
		return !metaGetBatchable(cmd)
	}
	return true
}

// conflicts reports whether cmd must wait for a command still in flight: one
// connection's commands take effect in the order they were sent, even when the
// backend completes them out of order.
func (cs *connState) conflicts(cmd *Command) bool {
	if len(cmd.Keys) == 0 || cs.undone.Load() <= 0 && cs.openGet == nil {
		return false
	}
	w := writesKeys(cmd)
	for _, p := range cs.queue {
		if p.state.Load() == stateDone || len(p.keys) == 0 || (!w && !p.writes) {
			continue
		}
		for _, k := range cmd.Keys {
			h := maphash.Bytes(keySeed, k)
			for _, pk := range p.keys {
				if pk == h {
					return true
				}
			}
		}
	}
	return false
}

// track records the keys of a command about to start, for conflicts.
func (p *pending) track(cmd *Command) {
	p.writes = writesKeys(cmd)
	for _, k := range cmd.Keys {
		p.keys = append(p.keys, maphash.Bytes(keySeed, k))
	}
}

// inRun reports whether a command is a binary get-family one, or a meta get,
// that can share a batch with its neighbours.
func (cs *connState) inRun(cmd *Command) bool {
	if cmd.Binary {
		return cmd.Kind == CmdGet || cmd.Kind == CmdGat || cmd.Kind == CmdTouch
	}
	return metaGetBatchable(cmd)
}

func (cs *connState) joinsRun(cmd *Command) bool {
	r := cs.openGet.req
	if cmd.Kind == CmdMetaGet {
		return cs.openGet.kind == CmdMetaGet && r.Meta.NoBump == cmd.Meta.On('u') && r.Meta.Recache == cmd.Meta.Recache
	}
	if cs.openGet.kind == CmdMetaGet {
		return false
	}
	if cmd.Kind == CmdGet {
		return r.Verb == gateway.VerbGet
	}
	return r.Verb == gateway.VerbGat && r.Exptime == cmd.Exptime
}

// addToRun adds a binary get-family command to the open run, opening one if
// needed; a non-quiet command ends the run.
func (cs *connState) addToRun(cmd *Command) {
	p := cs.openGet
	if cmd.Kind == CmdMetaGet {
		if p == nil {
			p = cs.newPending(CmdMetaGet, false)
			metaGetOptions(p.req, cmd)
			cs.openGet, cs.runPiece = p, cs.srv.svc.MultiGetPiece()
		}
		p.req.AddKey(cmd.Keys[0])
		p.addMeta(cmd)
		p.track(cmd)
		if !cmd.Quiet || len(p.keys) >= cs.runPiece {
			cs.closeRun() // a long run goes in pieces
		}
		return
	}
	if p == nil {
		kind := cmd.Kind
		if kind == CmdTouch {
			kind = CmdGat
		}
		p = cs.newPending(kind, false)
		p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
		p.req.Verb = gateway.VerbGet
		if kind == CmdGat {
			p.req.Verb, p.req.Exptime = gateway.VerbGat, cmd.Exptime
		}
		cs.openGet, cs.runPiece = p, cs.srv.svc.MultiGetPiece()
	}
	p.req.AddKey(cmd.Keys[0])
	p.binKeys = append(p.binKeys, binKey{cmd.Opcode, cmd.Opaque})
	p.track(cmd)
	if !cmd.Quiet || len(p.keys) >= cs.runPiece {
		cs.closeRun() // a long run goes in pieces
	}
}

// closeRun starts the open run of binary gets, if any.
func (cs *connState) closeRun() {
	if p := cs.openGet; p != nil {
		cs.openGet = nil
		cs.do(p)
	}
}

// dispatchBinary starts a binary command other than a get.
func (cs *connState) dispatchBinary(cmd *Command) {
	s := cs.srv
	fixed := func(b []byte) {
		p := cs.newPending(cmd.Kind, false)
		p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
		p.fixed = append(p.fixed, b...)
		p.state.Store(stateDone)
	}
	switch cmd.Kind {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas, CmdDelete, CmdIncr, CmdDecr:
		p := cs.newPending(cmd.Kind, false)
		p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.SetValue(cmd.Data)
		r.Flags, r.Exptime, r.Cas, r.Delta = cmd.Flags, cmd.Exptime, cmd.Cas, cmd.Delta
		r.Create, r.Initial = cmd.Create, cmd.Initial
		p.track(cmd)
		cs.do(p)
	case CmdFlushAll:
		p := cs.newPending(cmd.Kind, false)
		p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
		if !cmd.Quiet {
			p.fixed = appendBinHeader(p.fixed, cmd.Opcode, 0, 0, statusOK, 0, cmd.Opaque, 0)
		}
		p.barrier = true
		delay := cmd.Delay
		go func() {
			s.svc.FlushAll(delay)
			p.complete(nil)
		}()
		cs.waiting(p)
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
		p := cs.replyInOrder(cmd.Kind, func(dst []byte) []byte {
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
		p.bin, p.opcode, p.opaque = true, cmd.Opcode, cmd.Opaque
	default:
		fixed(appendBinError(nil, cmd.Opcode, cmd.Opaque, statusUnknownCommand))
	}
}

// dispatch starts one parsed command. It reports false when a get stopped
// between its pieces (dispatchGet): the command is then not consumed.
func (cs *connState) dispatch(cmd *Command) bool {
	if cmd.Binary {
		cs.dispatchBinary(cmd)
		return true
	}
	if cmd.Kind.IsMeta() {
		cs.dispatchMeta(cmd)
		return true
	}
	s := cs.srv
	switch cmd.Kind {
	case CmdGet, CmdGets, CmdGat, CmdGats:
		if len(cmd.Keys) == 0 { // "gat <exptime>" with no keys
			cs.reply(cmd.Kind, replyEnd, false)
			return true
		}
		return cs.dispatchGet(cmd)
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCas:
		p := cs.newPending(cmd.Kind, cmd.NoReply)
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.SetValue(cmd.Data)
		r.Flags, r.Exptime, r.Cas = cmd.Flags, cmd.Exptime, cmd.Cas
		p.track(cmd)
		cs.do(p)
	case CmdDelete, CmdIncr, CmdDecr, CmdTouch:
		p := cs.newPending(cmd.Kind, cmd.NoReply)
		r := p.req
		r.Verb = storageVerb[cmd.Kind]
		r.AddKey(cmd.Keys[0])
		r.Delta, r.Exptime = cmd.Delta, cmd.Exptime
		p.track(cmd)
		cs.do(p)
	case CmdFlushAll:
		p := cs.newPending(cmd.Kind, cmd.NoReply)
		p.fixed = append(p.fixed, replyOK...)
		p.barrier = true
		delay := cmd.Delay
		go func() { // the scan-delete may take a while; no event loop waits on it
			s.svc.FlushAll(delay)
			p.complete(nil)
		}()
		cs.waiting(p)
	case CmdVersion:
		cs.reply(cmd.Kind, AppendVersion(nil, s.cfg.Version), false)
	case CmdVerbosity:
		s.verbosity.Store(cmd.Level)
		cs.reply(cmd.Kind, replyOK, cmd.NoReply)
	case CmdQuit:
		cs.closeAfter = true
	case CmdStats:
		arg, arg2 := append([]byte(nil), cmd.Arg...), append([]byte(nil), cmd.Arg2...)
		cs.replyInOrder(cmd.Kind, func(dst []byte) []byte { return s.appendStats(dst, arg, arg2) })
	default:
		cs.reply(cmd.Kind, replyError, false)
	}
	return true
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
			if cs.t.backlog() >= replyBacklogMax {
				return false
			}
		}
		n := min(len(keys), piece)
		p := cs.newPending(cmd.Kind, false)
		p.piece, p.more = n < len(cmd.Keys), n < len(keys)
		r := p.req
		r.Verb = gateway.VerbGet
		if cmd.Kind == CmdGat || cmd.Kind == CmdGats {
			r.Verb, r.Exptime = gateway.VerbGat, cmd.Exptime
		}
		for _, k := range keys[:n] {
			r.AddKey(k)
			p.keys = append(p.keys, maphash.Bytes(keySeed, k))
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

// flush encodes the replies at the head of the queue that are done, in order,
// and writes them in one call.
func (cs *connState) flush() {
	sc := cs.scratch
	out := sc.out
	n := 0
	var now int64 // read once the first reply is ready
	for _, p := range cs.queue {
		if p.state.Load() != stateDone {
			break
		}
		if cs.srv.prefix.on.Load() {
			cs.srv.prefix.record(p)
		}
		if p.render != nil {
			p.fixed, p.render = p.render(p.fixed[:0]), nil
		}
		if !p.noreply {
			out = cs.encode(out, p)
		}
		if p.elsewhere {
			p.elsewhere = false
			cs.srv.handoffs.Add(cs.shard, handoffsSettled, 1)
		}
		if now == 0 {
			now = monoNanos()
		}
		cs.srv.m.observe(p, now)
		n++
	}
	if n == 0 {
		return
	}
	for i := 0; i < n; i++ {
		sc.free = append(sc.free, cs.queue[i])
		cs.queue[i] = nil
	}
	rest := copy(cs.queue, cs.queue[n:])
	cs.queue = cs.queue[:rest]
	cs.unflushed = 0
	if len(out) > 0 {
		// A failed write closes the connection mid-callback, and its fd may
		// be reused by then: later flushes must not write. write copies
		// what the socket does not take, so out is free again on return.
		if !cs.closed.Load() {
			cs.t.write(out)
			cs.srv.m.stats.Add(cs.shard, statBytesWritten, uint64(len(out)))
		}
		if cap(out) > 1<<20 {
			out = nil // do not pin a huge buffer to an idle loop
		}
	}
	sc.out = out[:0]
}
