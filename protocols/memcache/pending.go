package memcache

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/gateway"
)

// A dialect is one of memcached's three protocols. A connection speaks
// binary, or text and meta, as its first byte says; each command's reply
// is made by its dialect's encoder (connState.encode). The values index
// the dialect counters (metrics.go).
type dialect uint8

const (
	dialectText dialect = iota
	dialectMeta
	dialectBinary
	numDialects
)

// dialectOf is the dialect of a command parsed on the connection.
func dialectOf(cmd *Command) dialect {
	switch {
	case cmd.Binary:
		return dialectBinary
	case cmd.Kind.IsMeta():
		return dialectMeta
	}
	return dialectText
}

// Completion states of a pending command.
const (
	stateSubmitting uint32 = iota // Do has not returned yet
	stateWaiting                  // Do returned; completion will come from elsewhere
	stateDone
)

// pending is one command awaiting its turn to reply, or one run of them
// (batchRun).
type pending struct {
	cs  *connState
	req *gateway.Request
	// sets is a binary run's set request (hasSets: in use by this run),
	// made the first time a run needs one and kept with the pending.
	sets    *gateway.Request
	hasSets bool
	// parts counts, for a run with sets, its requests still to complete:
	// it is done at zero.
	parts   atomic.Int32
	kind    CommandKind
	dialect dialect
	noreply bool
	state   atomic.Uint32
	fixed   []byte // a reply known at parse time (errors, version)
	// render makes the reply when p reaches the head of the queue (stats):
	// it then counts every command before it, as memcached's would.
	render  func(dst []byte) []byte
	start   int64 // transport.Nanos
	barrier bool  // later commands wait for this one (flush_all, a failed SASL attempt)
	// writes says whether the command changes the keys of its request, so
	// that later commands on them wait their turn (connState.conflicts).
	// keys holds their hashes, made only once a conflict check needs them.
	writes bool
	keys   []uint64
	// setKeys holds the hashes of a run's sets' keys, which it writes
	// whatever writes says.
	setKeys []uint64
	// keysOut: the keys p's requests gave the gateway (connState.keysOut).
	keysOut int32
	// elsewhere: completing on another goroutine, counted in Server.handoffs
	// until flushed.
	elsewhere bool
	// unsent: made by the server, not sent by the client (the unlink after
	// a set refused as too large), so not counted as a request.
	unsent bool
	onDone func(*gateway.Request)
	// What each dialect's encoder needs beyond the request.
	bin  binReply
	meta metaReply
	text textReply
}

// binReply is what a binary reply echoes: the request's opcode and
// opaque, and per key of a run its own.
type binReply struct {
	opcode uint8
	opaque uint32
	keys   []binKey
}

// binKey is the opcode and opaque of one command of a binary run; set
// says which request holds its key.
type binKey struct {
	opcode uint8
	opaque uint32
	set    bool
}

// metaReply is per command, or per key of an mg run, its flags and key as
// sent (meta_dispatch.go).
type metaReply struct {
	keys []metaKey
	buf  []byte
}

// textReply marks a text get in pieces: piece each, more each but the last
// (no END after it).
type textReply struct {
	piece, more bool
	// A run (batchRun) of one-key gets and sets answers each command for
	// itself, in the order of cmds. Its gets are all getKind (get or gets).
	run     bool
	cmds    []textCmd
	getKind CommandKind
}

// textCmd is one command of a text run: a set (its key in the run's set
// request) or a get.
type textCmd struct {
	set, noreply bool
}

// newPending queues a command of dialect d in arrival order.
func (cs *connState) newPending(d dialect, kind CommandKind, noreply bool) *pending {
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
	p.kind, p.dialect, p.noreply, p.fixed, p.render, p.barrier = kind, d, noreply, p.fixed[:0], nil, false
	p.writes, p.keys, p.setKeys, p.hasSets, p.unsent, p.keysOut = false, p.keys[:0], p.setKeys[:0], false, false, 0
	p.bin = binReply{keys: p.bin.keys[:0]}
	p.meta = metaReply{keys: p.meta.keys[:0], buf: p.meta.buf[:0]}
	p.text = textReply{cmds: p.text.cmds[:0]}
	p.start = cs.scratch.now
	if p.start == 0 {
		p.start = monoNanos()
	}
	p.req.Reset()
	p.state.Store(stateSubmitting)
	cs.queue = append(cs.queue, p)
	return p
}

// newBinPending queues a binary command; its reply echoes cmd's opcode and
// opaque.
func (cs *connState) newBinPending(cmd *Command) *pending {
	p := cs.newPending(dialectBinary, cmd.Kind, false)
	p.bin.opcode, p.bin.opaque = cmd.Opcode, cmd.Opaque
	return p
}

// setRequest is the run's set request, reset for this run at its first set.
func (p *pending) setRequest() *gateway.Request {
	if !p.hasSets {
		if p.sets == nil {
			p.sets = p.cs.srv.svc.NewRequest()
			p.sets.Shard = p.req.Shard
			p.sets.Done = p.onDone
		}
		p.sets.Reset()
		p.sets.Verb = gateway.VerbSet
		p.sets.DropOnTooLarge = true // a run's sets are plain sets (dropsOnTooLarge)
		p.hasSets = true
	}
	return p.sets
}

// result is the request whose outcome is p's: a failed one, else the
// get request of a run that has gets, else its set request.
func (p *pending) result() *gateway.Request {
	if !p.hasSets || p.req.Outcome == gateway.OutcomeError {
		return p.req
	}
	if p.sets.Outcome == gateway.OutcomeError || p.req.NumKeys() == 0 {
		return p.sets
	}
	return p.req
}

// complete runs when the gateway finishes one of p's requests, on any
// goroutine.
func (p *pending) complete(*gateway.Request) {
	if p.hasSets && p.parts.Add(-1) > 0 {
		return // the run's other request is still running
	}
	cs := p.cs // once done is stored, the loop may flush p and reuse it elsewhere
	if p.state.CompareAndSwap(stateSubmitting, stateDone) {
		return // inline: the loop flushes after Do returns
	}
	p.state.Store(stateDone)
	cs.undone.Add(-1)
	if !cs.closed.Load() {
		cs.t.Wake()
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

// do hands the request to the gateway. On a loop that ends its turns, the
// request's backend rounds wait for the turn's end, which runs them with
// the rest of the turn's (ndbclient.Turn). A lone request (the last of its
// input, in a turn of its loop that serves nothing else) may run on the
// loop's goroutine, and poll for its answer if the turn allows it
// (transport.Loop.BeginTurn: a solo turn, with halt polling only beside
// another loop's solo client); a run's
// two requests may not, nor a get's piece with more to follow, or the
// first would hold up the next.
func (cs *connState) do(p *pending) {
	lone := cs.last && cs.scratch.lone && !p.text.more
	poll := lone && cs.scratch.poll
	if cs.scratch.turns {
		p.req.Turn = &cs.scratch.turn
		if p.hasSets {
			p.sets.Turn = &cs.scratch.turn
		}
	}
	n := p.req.NumKeys()
	if p.hasSets {
		n += p.sets.NumKeys()
	}
	bulk := cs.keysOut-int(p.keysOut)-cs.ownKeys >= bulkFromKeys
	p.req.Bulk = bulk
	if p.hasSets {
		p.sets.Bulk = bulk
	}
	cs.keysOut += n - int(p.keysOut) // as if a pending could be sent twice
	p.keysOut = int32(n)
	switch {
	case !p.hasSets:
		p.req.Lone, p.req.Poll = lone, poll
		cs.srv.svc.Do(p.req)
	case p.req.NumKeys() == 0: // a run of sets only
		p.parts.Store(1)
		p.sets.Lone, p.sets.Poll = lone, poll
		cs.srv.svc.Do(p.sets)
	default:
		p.parts.Store(2)
		p.req.Lone, p.sets.Lone = false, false
		p.req.Poll, p.sets.Poll = false, false
		cs.srv.svc.Do(p.sets)
		cs.srv.svc.Do(p.req)
	}
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
func (cs *connState) reply(d dialect, kind CommandKind, b []byte, noreply bool) *pending {
	p := cs.newPending(d, kind, noreply)
	p.fixed = append(p.fixed, b...)
	p.state.Store(stateDone)
	return p
}

// replyInOrder queues a reply that render makes once every earlier reply
// has been flushed.
func (cs *connState) replyInOrder(d dialect, kind CommandKind, render func(dst []byte) []byte) *pending {
	p := cs.newPending(d, kind, false)
	p.render = render
	p.state.Store(stateDone)
	return p
}

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

// showsState reports whether cmd's reply shows its item's state: an mg
// with h or l, or an me.
func showsState(cmd *Command) bool {
	return cmd.Kind == CmdMetaDebug || cmd.Kind == CmdMetaGet && (cmd.Meta.On('h') || cmd.Meta.On('l'))
}

var keySeed = maphash.MakeSeed()

// keyHashes returns the hashes of the keys of p's request and of its run's
// sets, hashing those added since the last call. Called only while p is not
// done: its keys do not change then, but for those an open run adds.
func (p *pending) keyHashes() (req, sets []uint64) {
	for i := len(p.keys); i < p.req.NumKeys(); i++ {
		p.keys = append(p.keys, maphash.Bytes(keySeed, p.req.Key(i)))
	}
	for i := len(p.setKeys); p.hasSets && i < p.sets.NumKeys(); i++ {
		p.setKeys = append(p.setKeys, maphash.Bytes(keySeed, p.sets.Key(i)))
	}
	return p.keys, p.setKeys
}
