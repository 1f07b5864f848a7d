package memcache

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/protocols/memcache/transport"
)

// connState is one client connection: the transport's Session. It and its
// pendings are touched only on the connection's event loop, except where a
// command completes on another goroutine: the gateway fills in the
// pending's request (a flush_all's goroutine, its fixed reply), then
// pending.complete counts down the run's parts, stores pending.state,
// decrements undone and, unless closed is set, wakes the loop; those four
// are atomics. The loop reads what was filled in only once it has seen
// state done.
//
// Serving input (serve) takes one command at a time through four steps:
//   - admission: the per-call command budget, swallowing the data of a
//     refused command, and backpressure (admit);
//   - parsing, and answering what does not parse (step, refuse);
//   - starting it (start): a batchable command joins the connection's run,
//     anything else is dispatched in its dialect (dispatch.go), once no
//     command still in flight on one of its keys must go first (mustWait);
//   - replying, in arrival order (flush), by the dialect's encoder.
type connState struct {
	srv   *Server
	t     transport.Conn
	shard int // metrics shard: the event loop's
	// scratch is the parser, the command it fills and spare pendings,
	// shared by every connection of an event loop.
	scratch *loopScratch
	// queue holds commands in arrival order; replies leave from its head.
	queue []*pending
	// run is the open run of batchable commands, if any (batchrun.go).
	run        batchRun
	closeAfter bool
	// last: the command being started ends the input (do, Lone).
	last   bool
	closed atomic.Bool
	// proto is fixed by the connection's first byte, as in memcached.
	proto connProto
	// authed: SASL succeeded on this connection (when credentials are set).
	authed bool
	// authFailures counts failed SASL attempts: each waits longer.
	authFailures int
	// undone counts queued commands whose completion comes from another
	// goroutine and has not come yet. At zero (the embedded engine's inline
	// completions) nothing in the queue can conflict or block, so the
	// per-command checks skip their queue scans.
	undone atomic.Int32
	// keysOut counts the keys of queued commands given to the gateway
	// (pending.keysOut), until their replies are flushed.
	keysOut int
	// swallow is the bytes of a refused data block still to discard.
	swallow int
	// partial is what this connection holds of the server's budget for
	// storage commands still arriving; waitingFor is, after serveLoop, the
	// length of the command it stopped in (0: none).
	partial    int64
	waitingFor int
	// unflushed estimates the bytes of replies done but not flushed.
	// getResume is where the get at the head of the input stopped between
	// pieces (Skip 0: none did); lineLen is the length of the text command
	// being started. pieceFailed: a piece of the get being encoded failed,
	// so its later pieces say nothing.
	unflushed   int
	getResume   Resume
	lineLen     int
	pieceFailed bool
	// getKeys counts the keys text gets started in this serve
	// (getKeysPerServe).
	getKeys int
	// ownKeys: the keys that earlier pieces of the command being
	// dispatched gave the gateway, not counted against it for bulk (do).
	ownKeys int
}

// loopScratch is an event loop's state (transport.Loop): what a connection
// needs only while it is being served, the parser and the command it fills
// (a command is started before the next is parsed; a partial one is parsed
// again from the start), and the pendings of finished commands, ready for
// reuse. A loop serves one connection at a time, so its connections share
// one: a command finds these cache lines warm from the connection served
// before it, not cold from its own last turn (memtier puts 25 connections on
// each loop). A connection on a goroutine of its own (TLS) has its own.
type loopScratch struct {
	srv    *Server
	shard  int
	parser Parser
	cmd    Command
	free   []*pending
	hashes []uint64 // a command's key hashes, for conflicts
	// now is when the epoll loop's turn began (monoNanos), the start of the
	// requests it reads: one clock read per turn instead of one per request.
	// Zero elsewhere: each request reads the clock.
	now int64
	// lone: the turn serves one connection's input and nothing else; poll:
	// its last request's answer may be polled for
	// (transport.Loop.BeginTurn).
	lone, poll bool
	// turn collects the backend rounds the turn's requests start, for
	// EndTurn to run (ndbclient.Turn); turns: the loop begins and ends its
	// turns (transport.Loop).
	turn  ndbclient.Turn
	turns bool
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
//     client has read (WakeWhenSent).
const (
	flushEarly      = 256 << 10
	replyBacklogMax = transport.MaxBuffered
)

// commandsPerServe bounds the commands one connection runs per call before
// the loop moves on to its other connections, as memcached's reqs_per_event:
// a deep pipeline must not starve its neighbours on the same event loop.
const commandsPerServe = 128

// fairShareKeys is what a connection may hold at the gateway while the
// dispatcher is crowded (connState.full): a round's worth (the
// dispatcher's default round size), enough to keep its pipeline moving.
const fairShareKeys = 256

// bulkFromKeys: a request from a connection whose earlier commands hold
// this many keys at the gateway is bulk (gateway.Request.Bulk): a pipeline
// deeper than the 16 single gets benchmarks use. A get's own pieces do not
// count: a 100- or 300-key get alone is one client waiting. Its rounds go
// through the lanes, not its loop's turn flight: at 256, a lone client's
// get beside a flood of pipelined gets still took 1.6-2.0 ms on NDB 7.5.0
// (the flood's first 256 keys a connection rode in the turn flights that
// the lone get waited for), at 32 about 0.1 ms.
const bulkFromKeys = 32

// getKeysPerServe bounds, likewise, the keys of text gets one connection
// starts per call: a get of thousands of keys is one command, and run whole
// it held its loop for milliseconds while the loop's other connections
// waited (TestBigGetDoesNotHoldOthers). It goes in slices, resumed at
// getResume after the other connections have been served. Slices cost
// little since a resumed get parses only its own keys: at 128 rather than
// 512, a connection beside four sending 5,000-key gets saw its p50 fall
// from 0.5 to 0.16 ms and its p99 from 3.0 to 1.3 ms, with the big gets
// as fast (bench/RESULTS.md, session 33).
const getKeysPerServe = 128

type connProto uint8

const (
	protoUnknown connProto = iota
	protoText
	protoBinary
)

// stop says why serveLoop stopped before the end of its input.
type stop uint8

const (
	stopNone   stop = iota // the input is used up, or the connection closes
	stopBudget             // commandsPerServe ran: the rest after the loop's other connections
	stopWait               // a completion from elsewhere will wake the loop: the queue is full, a barrier holds, or a command waits for another on its keys
	stopOutput             // the client is not reading its replies
	stopInput              // the next command has not all arrived (waitingFor)
)

// Serve implements transport.Session.
func (cs *connState) Serve(buf []byte) int {
	used := cs.serve(buf)
	if used > 0 {
		cs.srv.m.stats.Add(cs.shard, statBytesRead, uint64(used))
	}
	return used
}

// Flush implements transport.Session.
func (cs *connState) Flush() { cs.flush() }

// Owes reports whether replies are still queued.
func (cs *connState) Owes() bool { return len(cs.queue) > 0 }

// Closing reports whether the connection ends once its replies are out.
func (cs *connState) Closing() bool { return cs.closeAfter }

// Stop takes no more commands.
func (cs *connState) Stop() { cs.closeAfter = true }

// Closed forgets the connection. Requests still in flight complete into
// the dead queue and are dropped.
func (cs *connState) Closed() {
	s := cs.srv
	cs.closed.Store(true)
	cs.holdPartial(0)
	for _, p := range cs.queue {
		if p.req != nil { // nobody will read its reply: drop what is not sent yet
			p.req.Abandon()
		}
		if p.hasSets {
			p.sets.Abandon()
		}
		if p.elsewhere { // its reply will never be flushed
			p.elsewhere = false
			s.handoffs.Add(cs.shard, handoffsSettled, 1)
		}
	}
	s.Unadmit()
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
	cs.waitingFor = 0
	used, why := cs.serveLoop(buf)
	cs.holdPartial(int64(max(cs.waitingFor, len(buf)-used)))
	cs.last = used == len(buf)
	cs.run.close() // the end of the input ends a run
	cs.last = false
	switch why {
	case stopOutput:
		if used < len(buf) {
			cs.t.WakeWhenSent()
		}
	case stopBudget:
		if !cs.closeAfter {
			cs.t.Wake() // serve the rest after the loop's other connections
		}
	}
	return used
}

// serveLoop runs the commands of buf until it is used up or a command may
// not run yet; it returns the bytes used and why it stopped.
func (cs *connState) serveLoop(buf []byte) (int, stop) {
	used := 0
	cs.getKeys = 0
	for budget := commandsPerServe; used < len(buf) && !cs.closeAfter; budget-- {
		if budget <= 0 {
			return used, stopBudget // serve closes an open run
		}
		if cs.swallow > 0 {
			n := min(cs.swallow, len(buf)-used)
			cs.swallow -= n
			used += n
			continue
		}
		if why := cs.admit(); why != stopNone {
			return used, why
		}
		n, why := cs.step(buf[used:])
		used += n
		if why != stopNone {
			return used, why
		}
	}
	return used, stopNone
}

// admit says whether a command may start now: the queue has room and no
// barrier holds it, after a flush of what is done if need be, and the
// client is reading its replies.
func (cs *connState) admit() stop {
	if cs.full() || cs.blocked() {
		cs.flush()
		if cs.full() || cs.blocked() {
			return stopWait
		}
	}
	if cs.unflushed >= flushEarly {
		cs.flush()
	}
	if cs.t.Backlog() >= replyBacklogMax {
		return stopOutput
	}
	return stopNone
}

// full reports whether the connection holds its share of the server: as
// many queued replies as MaxPending, as many keys at the gateway as
// MaxPendingKeys, or fairShareKeys while the backend's dispatcher is
// crowded (ndbclient.Client.Crowded). The last leaves the rest of the
// dispatcher's room to connections with few keys out, so that one
// pipeline's flood does not get their requests refused as overloaded
// (SERVER_ERROR busy). Whichever holds, the connection has commands in
// flight, whose completions wake its loop.
func (cs *connState) full() bool {
	return len(cs.queue) >= cs.srv.cfg.MaxPending || cs.keysOut >= cs.srv.cfg.MaxPendingKeys ||
		cs.keysOut >= fairShareKeys && cs.srv.svc.Crowded()
}

// step parses the next command of in and starts it, or answers what does
// not parse; it returns the bytes used.
func (cs *connState) step(in []byte) (int, stop) {
	cmd := &cs.scratch.cmd
	var res Result
	if cs.proto == protoBinary {
		res = cs.scratch.parser.ParseBinary(in, cmd)
	} else if cs.getResume.Skip > 0 {
		res = cs.scratch.parser.ParseFrom(in, cs.getResume, max(1, getKeysPerServe-cs.getKeys), cmd)
	} else {
		res = cs.scratch.parser.Parse(in, cmd)
	}
	switch {
	case res.Status == StatusNeedMore:
		cs.waitingFor = res.Need
		return 0, stopInput
	case cs.proto == protoBinary && !res.Close && cs.needsAuth(cmd):
		cs.refuseUnauthenticated(cmd)
		return res.N, stopNone
	case res.Status == StatusError:
		cs.getResume = Resume{} // the next command starts afresh
		return cs.refuse(cmd, res)
	}
	cs.lineLen = res.N
	return cs.start(cmd, res.N, res.N == len(in))
}

// refuseUnauthenticated answers a binary command sent before SASL
// succeeded, and closes the connection, as memcached does.
func (cs *connState) refuseUnauthenticated(cmd *Command) {
	cs.run.close()
	cs.srv.m.countAuth(authRefused)
	p := cs.newBinPending(cmd)
	p.fixed = appendBinError(p.fixed, cmd.Opcode, cmd.Opaque, statusAuthError)
	p.state.Store(stateDone)
	cs.closeAfter = true
}

// refuse answers a command that did not parse (res.Reply, unless
// memcached says nothing), and arranges for its data block to be
// swallowed.
func (cs *connState) refuse(cmd *Command, res Result) (int, stop) {
	cs.run.close()
	if res.TooLarge && cs.mustWait(cmd) {
		return 0, stopWait // the unlink below must come after the command in flight
	}
	cs.swallow = res.Swallow
	cs.srv.m.parseErrors.Inc()
	if res.NoMemory && dialectOf(cmd) != dialectBinary {
		// memcached counts a text or meta store it has no memory for,
		// noreply or not; its binary stores never count there.
		cs.srv.m.stats.Add(cs.shard, statStoreNoMemory, 1)
	}
	if res.TooLarge && dropsOnTooLarge(cmd) && len(cmd.Keys) == 1 {
		// memcached drops the old item when a set is refused, before it
		// replies, so a client never reads back the value it meant to
		// replace, on this connection or another (gomemcache closes the
		// connection after a server error). The unlink is queued before the
		// refusal, which therefore waits for it. No reply of its own, and
		// not a command of the client's.
		p := cs.newPending(dialectText, CmdDelete, true)
		p.unsent = true
		p.req.Verb = gateway.VerbUnlink
		p.req.AddKey(cmd.Keys[0])
		p.writes = true
		cs.do(p)
	}
	switch {
	case len(res.Reply) > 0:
		cs.reply(dialectOf(cmd), cmd.Kind, res.Reply, false)
	case res.TooLarge && cmd.NoReply:
		// Nothing is sent, but the set counts as memcached counts it (a
		// store too large in store_too_large too): by the reply it would
		// have sent.
		refusal := replyTooLarge
		if res.NoMemory {
			refusal = replyOutOfMemory
		}
		cs.reply(dialectOf(cmd), cmd.Kind, refusal, true)
	}
	if res.Close {
		cs.closeAfter = true
	}
	return res.N, stopNone
}

// dropsOnTooLarge says whether cmd, refused as too large, drops its key's
// old item first, as memcached does for a text set, a binary SET or SETQ
// (with a cas too: memcached tests the opcode) and every meta set, whether
// the parser refuses it (refuse) or the backend's column cannot hold it
// (gateway.Request.DropOnTooLarge).
func dropsOnTooLarge(cmd *Command) bool {
	return cmd.Kind == CmdSet || cmd.Kind == CmdMetaSet || cmd.Binary && (cmd.Opcode == opSet || cmd.Opcode == opSetQ)
}

// start starts a parsed command of n bytes: a batchable get or set joins
// the connection's run, anything else closes it and is dispatched. last
// says the command ends the input.
func (cs *connState) start(cmd *Command, n int, last bool) (int, stop) {
	batch := cs.batchable(cmd)
	if !batch || !cs.run.joins(cmd) {
		cs.run.close()
	}
	if cs.mustWait(cmd) {
		return 0, stopWait
	}
	cs.last = last
	if batch {
		cs.run.add(cmd)
		cs.last = false
		return n, stopNone
	}
	why := cs.dispatch(cmd)
	cs.last = false
	if why != stopNone {
		return 0, why // stopped between the pieces of a get
	}
	return n, stopNone
}

// mustWait reports whether cmd must wait for an earlier command on one of
// its keys that is still in flight: the client must see that one's effect.
// It first closes the run and flushes what is done, then asks again; cmd
// is parsed again once the other completes.
func (cs *connState) mustWait(cmd *Command) bool {
	if !cs.conflicts(cmd) {
		return false
	}
	cs.run.close()
	cs.flush()
	return cs.conflicts(cmd)
}

// conflicts reports whether cmd shares a key with a command still in
// flight when one of them writes it: one connection's commands take effect
// in the order they were sent, even when the backend completes them out of
// order. A command can be in flight only while a completion is awaited
// from elsewhere (undone) or a run is open, so only then are keys
// hashed: cmd's once per check, each earlier command's once (keyHashes).
func (cs *connState) conflicts(cmd *Command) bool {
	if len(cmd.Keys) == 0 || cs.undone.Load() <= 0 && cs.run.p == nil {
		return false
	}
	// A command that shows an item's state waits for every command on its
	// keys, as one that writes does: a read in flight may change the state
	// (fetched, last access), and on NDB it does so after its flight.
	w := writesKeys(cmd) || showsState(cmd)
	var hashes []uint64 // cmd's, made at the first command to compare with
	for _, p := range cs.queue {
		if p.state.Load() == stateDone {
			continue
		}
		// A run's sets write their keys; its other keys as p.writes says.
		reqKeys := (w || p.writes) && p.req.NumKeys() > 0
		if !reqKeys && !p.hasSets {
			continue
		}
		if hashes == nil {
			hashes = cs.scratch.hashKeys(cmd)
		}
		gets, sets := p.keyHashes()
		if reqKeys && anyEqual(gets, hashes) || anyEqual(sets, hashes) {
			return true
		}
	}
	return false
}

// anyEqual reports whether a and b share a value.
func anyEqual(a, b []uint64) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// hashKeys returns the hashes of cmd's keys, in the loop's scratch.
func (sc *loopScratch) hashKeys(cmd *Command) []uint64 {
	sc.hashes = sc.hashes[:0]
	for _, k := range cmd.Keys {
		sc.hashes = append(sc.hashes, maphash.Bytes(keySeed, k))
	}
	return sc.hashes
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

// flush encodes the replies at the head of the queue that are done, in
// order, into the transport's output, and sends them.
func (cs *connState) flush() {
	n := 0
	var out []byte
	var now int64 // read once the first reply is ready
	for _, p := range cs.queue {
		if p.state.Load() != stateDone {
			break
		}
		if n == 0 {
			out = cs.t.Output()
		}
		if !p.unsent && cs.srv.prefix.on.Load() {
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
		if !p.unsent {
			cs.srv.m.observe(p, now)
		}
		n++
	}
	if n == 0 {
		return
	}
	sc := cs.scratch
	for i := 0; i < n; i++ {
		cs.keysOut -= int(cs.queue[i].keysOut)
		sc.free = append(sc.free, cs.queue[i])
		cs.queue[i] = nil
	}
	rest := copy(cs.queue, cs.queue[n:])
	cs.queue = cs.queue[:rest]
	cs.unflushed = 0
	if len(out) > 0 {
		cs.send(out)
	}
}

// send gives replies to the transport. A failed write closes the
// connection mid-callback, and its fd may be reused by then: later
// flushes must not write.
func (cs *connState) send(b []byte) {
	if !cs.closed.Load() {
		cs.t.Send(b)
		cs.srv.m.stats.Add(cs.shard, statBytesWritten, uint64(len(b)))
	}
}
