package ndbclient

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dispatcher sits between Client.Submit and the driver, like CockroachDB's
// DistSender: it splits a batch by the data node that owns each key, cuts each
// node's share into rounds of at most RoundSize operations, and sends them in
// parallel, each in a flight (one driver round trip). With lanes on, each node
// has a bounded number of flights at once; rounds that arrive meanwhile wait
// in the node's queue and leave together in the next flight (coalescing: one
// round trip, never one transaction). Temporary failures are retried with
// backoff and jitter; a write whose result is unknown is never sent again.
//
// Lock order: a lane's mu is the only lock, held briefly and never while
// calling the driver or a completion.

// DispatchConfig tunes the dispatcher. Zero values take the defaults.
type DispatchConfig struct {
	// RoundSize bounds the operations of one round, and of a flight that
	// coalesces queued rounds (default 256; the NDB API allows 1024
	// transactions per Ndb object). Rounds of 256 rather than 128 gave
	// 100-key gets 1.15x the keys/s on NDB 7.5.0 (fewer flights, so fewer
	// wake-ups on both sides) and left single keys at pipeline 16 level.
	RoundSize int
	// Lanes turns on per-node lanes: at most FlightsPerNode flights at once
	// per node, the rounds beyond them queued. Off, each round goes straight
	// to the driver as its own flight (the embedded engine without a
	// simulated delay completes inline and needs no lanes).
	Lanes          bool
	FlightsPerNode int // default 1
	// Coalesce sends a node's queued rounds together in one flight (with
	// lanes). Off, each round is its own flight.
	Coalesce bool
	// MaxInFlight bounds operations admitted at once; past it callers get
	// Overloaded at once instead of queueing without limit (default 65536).
	MaxInFlight int
	// MaxRetries bounds retries of Temporary failures (default 3); the backoff
	// starts at RetryBase (default 1ms), doubles, is capped at 100ms, and is
	// jittered.
	MaxRetries int
	RetryBase  time.Duration
	// NoRetry disables retries (tests of the first attempt).
	NoRetry bool
	// Log gets a warning, at most once a second, when an operation ends
	// failed on the backend (failureLog); nil logs nothing.
	Log *slog.Logger
}

func (c *DispatchConfig) defaults() {
	if c.RoundSize <= 0 {
		c.RoundSize = 256
	}
	if c.RoundSize > 1024 {
		c.RoundSize = 1024
	}
	if c.FlightsPerNode <= 0 {
		c.FlightsPerNode = 1
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 65536
	}
	if c.MaxRetries <= 0 && !c.NoRetry {
		c.MaxRetries = 3
	}
	if c.NoRetry {
		c.MaxRetries = 0
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Millisecond
	}
}

const retryCap = 100 * time.Millisecond

// call is one Submit in flight: its rounds complete into it.
type call struct {
	c       *Client
	b       *Batch
	done    func(*Batch, error)
	pending atomic.Int32 // rounds outstanding
	errOnce sync.Once
	err     error // the first batch-level error
	// admitted: the ops count against the client's in-flight bound.
	admitted bool
	// lone: the batch is lone and was cut into one round (round.lone).
	lone bool
	// onDirect is the completion of the fast path: a batch that is one round
	// for one node, sent without lanes, as it is.
	onDirect func(*Batch, error)
}

// round is a share of a call's ops for one node: whole transaction runs only.
type round struct {
	call    *call
	node    int
	ops     []*Op
	attempt int
	// failedAt is the Unix nanoseconds of the round's first failure that
	// was tried again (stillRefused), 0 before.
	failedAt int64
	// onTurn: the round completes in a turn's flight on the turn's
	// goroutine (Turn.Run), where its call may start more of the turn.
	onTurn bool
}

// flight is one driver round trip: one or more rounds of one node, or a
// turn's rounds of any nodes (turn).
type flight struct {
	lane   *lane // nil without lanes, and for a turn's flight
	turn   bool
	c      *Client
	rounds []*round
	b      Batch
	state  atomic.Uint32
	next   *flight // set when the driver completed inline
	// err: a turn's flight done before Submit returned leaves its rounds,
	// and the batch's error, to runFlights, on the turn's goroutine.
	err    error
	onDone func(*Batch, error)
}

const (
	flightSubmitting uint32 = iota
	flightWaiting
	flightDone
)

// lane is one node's queue and its flight slots.
type lane struct {
	c        *Client
	node     int
	nodeOps  prometheus.Counter
	mu       sync.Mutex
	inFlight int // flights sent and not done, at most FlightsPerNode
	// queue holds rounds waiting for a slot, bulk those of Bulk batches,
	// which leave only when queue is empty; queued counts both's ops.
	queue  []*round
	bulk   []*round
	queued int
}

var (
	callPool   sync.Pool // New is set in init, like flightPool
	roundPool  = sync.Pool{New: func() any { return &round{} }}
	flightPool sync.Pool // New is set in init: flights refer back to the pool
)

func init() {
	callPool.New = func() any {
		k := &call{}
		k.onDirect = k.directDone
		return k
	}
	flightPool.New = func() any {
		f := &flight{}
		f.onDone = f.driverDone
		return f
	}
}

// dispatch runs b through the dispatcher.
func (c *Client) dispatch(b *Batch, done func(*Batch, error)) {
	n := int64(len(b.Ops))
	admitted := !c.inline
	if admitted && c.inFlight.Add(n) > int64(c.cfg.MaxInFlight) {
		c.inFlight.Add(-n)
		dispatchOverloaded.Inc()
		for _, op := range b.Ops {
			op.Err = ErrOverloaded
		}
		done(b, ErrOverloaded)
		return
	}
	k := callPool.Get().(*call)
	k.c, k.b, k.done, k.err, k.errOnce, k.admitted, k.lone = c, b, done, nil, sync.Once{}, admitted, false
	if !c.cfg.Lanes && c.nodes == 1 && int(n) <= c.cfg.RoundSize {
		// Fast path: the whole batch is one round for the only node.
		dispatchHintOps.Add(b.Shard, hintKey, uint64(n))
		observeFlight(b.Shard, int(n))
		c.driver.Submit(b, k.onDirect)
		return
	}
	sp, hinted, unhinted := c.split(k, b.Ops)
	rounds := *sp
	k.lone = b.Lone && len(rounds) == 1
	if hinted > 0 {
		dispatchHintOps.Add(b.Shard, hintKey, uint64(hinted))
	}
	if unhinted > 0 {
		dispatchHintOps.Add(b.Shard, hintNone, uint64(unhinted))
	}
	k.pending.Store(int32(len(rounds)))
	if b.Turn != nil && c.cfg.Lanes && c.cfg.Coalesce {
		// The caller's loop runs the rounds at its turn's end (Turn.Run).
		k.lone = false
		b.Turn.add(rounds, b.Poll)
	} else {
		for _, r := range rounds {
			c.send(r)
		}
	}
	clear(rounds)
	c.scratch.Put(sp)
}

// directDone completes a fast-path batch, or hands it to the general path if
// some of it may be retried.
func (k *call) directDone(b *Batch, err error) {
	retry := false
	if k.c.cfg.MaxRetries > 0 {
		retry = CodeOf(err) == CodeTemporary
		for _, op := range b.Ops {
			if c := CodeOf(op.Err); c == CodeTemporary || c == CodeUnknownResult {
				retry = true
				break
			}
		}
	}
	if !retry {
		k.err = err
		k.complete(false)
		return
	}
	// Rare: cut it into rounds and let finish decide and schedule the retries.
	// The last finish may complete (and recycle) k: keep the client.
	c := k.c
	sp, _, _ := c.split(k, b.Ops)
	rounds := *sp
	k.pending.Store(int32(len(rounds)))
	for _, r := range rounds {
		r.finish(err)
	}
	clear(rounds)
	c.scratch.Put(sp)
}

// split cuts ops into rounds: per node, whole transaction runs, at most
// RoundSize ops each (a longer transaction goes alone).
func (c *Client) split(k *call, ops []*Op) (_ *[]*round, hinted, unhinted int) {
	sp := c.scratch.Get().(*[]*round)
	rounds := (*sp)[:0]
	open := map[int]*round(nil)
	single := -2 // the node when every run so far went to one node
	if c.batcher != nil && c.nodes > 1 && len(ops) >= batchPartitionsFrom {
		c.batcher.Partitions(ops)
	}
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops)-1 && ops[j].TxnWithNext {
			j++
		}
		run := ops[i : j+1]
		node, hint := c.nodeOf(run[0])
		if hint {
			hinted++
		} else {
			unhinted++
		}
		if single == -2 || single == node {
			single = node
		} else {
			single = -1
		}
		var r *round
		if open == nil {
			// The common case first: no map until a second node shows up.
			if len(rounds) > 0 && rounds[len(rounds)-1].node == node && len(rounds[len(rounds)-1].ops)+len(run) <= c.cfg.RoundSize {
				r = rounds[len(rounds)-1]
			}
		} else if o := open[node]; o != nil && len(o.ops)+len(run) <= c.cfg.RoundSize {
			r = o
		}
		if r == nil {
			r = roundPool.Get().(*round)
			r.call, r.node, r.ops, r.attempt, r.failedAt = k, node, r.ops[:0], 0, 0
			rounds = append(rounds, r)
			if single == -1 && open == nil {
				open = make(map[int]*round)
				for _, x := range rounds {
					open[x.node] = x
				}
			}
			if open != nil {
				open[node] = r
			}
		}
		r.ops = append(r.ops, run...)
		i = j + 1
	}
	*sp = rounds
	return sp, hinted, unhinted
}

// batchPartitionsFrom: a batch of at least this many ops has its
// partitions computed together (PartitionBatcher).
const batchPartitionsFrom = 4

// nodeOf is the data node a run goes to: its first op's key decides (NDB
// starts the transaction on that key's node). Keyless ops (delete_all) go to
// node 0, without a hint.
func (c *Client) nodeOf(op *Op) (node int, hint bool) {
	if op.Kind == OpDeleteAll || op.Table == nil || len(op.Key) == 0 {
		return 0, false
	}
	if c.nodes <= 1 {
		return 0, true
	}
	p, known := op.KeyPartition()
	if !known {
		if p = c.driver.Partition(op.Table, op.Key); p >= 0 {
			op.SetKeyPartition(p)
		}
	}
	// Past the nodes known at start: data nodes added while serving, whose
	// lanes are made when first used.
	n := c.driver.NodeOf(op.Table, p)
	if n < 0 || n >= maxLanes {
		return 0, true
	}
	return n, true
}

// send starts a round: through its node's lane, or straight to the driver.
func (c *Client) send(r *round) {
	if !c.cfg.Lanes {
		f := c.newFlight(nil)
		f.add(r)
		f.b.Lone, f.b.Poll = r.lone(), r.poll()
		runFlights(f)
		return
	}
	c.lane(r.node).enqueue(r)
}

func (c *Client) newFlight(l *lane) *flight {
	f := flightPool.Get().(*flight)
	f.lane, f.c, f.rounds, f.next = l, c, f.rounds[:0], nil
	f.b.Reset()
	return f
}

func (f *flight) add(r *round) {
	if len(f.rounds) == 0 {
		f.b.Shard = r.call.b.Shard // the metrics shard of the first caller
		f.b.OneNode, f.b.Node = true, r.node
	} else if r.node != f.b.Node {
		f.b.OneNode = false
	}
	f.rounds = append(f.rounds, r)
	f.b.Ops = append(f.b.Ops, r.ops...)
}

// runFlights submits f, and then, while the driver keeps completing inline,
// the flights that completion released: a loop, not a recursion.
func runFlights(f *flight) {
	for f != nil {
		f.state.Store(flightSubmitting)
		c := f.c
		observeFlight(f.b.Shard, len(f.b.Ops))
		if n := len(f.rounds); n > 1 {
			dispatchCoalesced.Add(float64(n - 1))
		}
		if f.lane != nil {
			f.lane.nodeOps.Add(float64(len(f.b.Ops)))
		}
		c.driver.Submit(&f.b, f.onDone)
		if f.state.CompareAndSwap(flightSubmitting, flightWaiting) {
			return // completes later on the driver's goroutine
		}
		if f.turn {
			// Done before Submit returned, inline or on a driver goroutine
			// that beat this CAS: its rounds complete here, on the turn's
			// goroutine, where their calls may add to the turn.
			f.finishTurn(f.err, true)
		}
		next := f.next
		f.release()
		f = next
	}
}

// driverDone finishes the flight's rounds and, with lanes, starts what was queued.
func (f *flight) driverDone(_ *Batch, err error) {
	if f.turn {
		// No lane and no next. A driver may complete on another goroutine
		// before Submit returns, so the CAS, not the goroutine, decides who
		// finishes the rounds. Won: runFlights has yet to see Submit
		// return, and finishes them on the turn's goroutine. Lost:
		// runFlights has returned, so they finish here, away from the turn.
		f.err = err
		if f.state.CompareAndSwap(flightSubmitting, flightDone) {
			return
		}
		f.finishTurn(err, false)
		f.release()
		return
	}
	for _, r := range f.rounds {
		r.finish(err)
	}
	var next *flight
	if f.lane != nil {
		next = f.lane.completed()
	}
	// Publish next before the state: runFlights reads it once it sees Done.
	f.next = next
	if f.state.CompareAndSwap(flightSubmitting, flightDone) {
		return // inline: runFlights goes on with next
	}
	f.release()
	runFlights(next)
}

// finishTurn completes a turn's flight's rounds; onTurn says this is the
// turn's goroutine.
func (f *flight) finishTurn(err error, onTurn bool) {
	for _, r := range f.rounds {
		r.onTurn = onTurn
		r.finish(err)
	}
}

func (f *flight) release() {
	clear(f.rounds)
	clear(f.b.Ops)
	f.rounds, f.lane, f.c, f.next, f.turn, f.err = f.rounds[:0], nil, nil, nil, false, nil
	f.b.Reset()
	flightPool.Put(f)
}

// enqueue sends r now if the lane has room, else queues it; a round whose
// caller abandoned it completes at once.
func (l *lane) enqueue(r *round) {
	if r.call.b.Abandoned() {
		r.finish(ErrAbandoned)
		return
	}
	l.mu.Lock()
	if l.inFlight < l.c.cfg.FlightsPerNode {
		l.inFlight++
		l.mu.Unlock()
		f := l.c.newFlight(l)
		f.add(r)
		f.b.Lone, f.b.Poll = r.lone(), r.poll()
		runFlights(f)
		return
	}
	if r.call.b.Bulk {
		l.bulk = append(l.bulk, r)
	} else {
		l.queue = append(l.queue, r)
	}
	l.queued += len(r.ops)
	l.mu.Unlock()
}

// lone says a round's flight may run on its caller's goroutine (Batch.Lone):
// the caller's batch is lone and this is its only round, on its first try.
// A batch of several rounds is not: running one would hold up the others.
func (r *round) lone() bool { return r.attempt == 0 && r.call.lone }

// poll says a lone round's flight may poll for its answer (Batch.Poll).
func (r *round) poll() bool { return r.lone() && r.call.b.Poll }

// completed frees a lane slot and takes the next flight from the queues:
// with coalescing as many queued rounds as fit in RoundSize ops, else one;
// bulk rounds only after every other. Rounds met on the way whose callers
// abandoned them are dropped: they complete with ErrAbandoned, unsent, so a
// client that hung up costs the node nothing more.
func (l *lane) completed() *flight {
	var dropped []*round
	defer func() {
		for _, r := range dropped {
			r.finish(ErrAbandoned)
		}
	}()
	l.mu.Lock()
	if len(l.queue) == 0 && len(l.bulk) == 0 {
		l.inFlight--
		l.mu.Unlock()
		return nil
	}
	f := l.c.newFlight(l)
	ops := 0
	l.queue = l.take(l.queue, f, &ops, &dropped)
	if len(l.queue) == 0 {
		l.bulk = l.take(l.bulk, f, &ops, &dropped)
	}
	l.queued -= ops
	if len(f.rounds) == 0 {
		l.inFlight--
		l.mu.Unlock()
		f.release()
		return nil
	}
	l.mu.Unlock()
	return f
}

// take moves rounds from the head of q into f while they fit (with
// coalescing, RoundSize ops in all; else one round a flight), dropping
// abandoned ones; it returns what is left of q. Called with l.mu held.
func (l *lane) take(q []*round, f *flight, ops *int, dropped *[]*round) []*round {
	i := 0
	for ; i < len(q); i++ {
		r := q[i]
		n := len(r.ops)
		if r.call.b.Abandoned() {
			*dropped = append(*dropped, r)
			l.queued -= n
			continue
		}
		if len(f.rounds) > 0 && (!l.c.cfg.Coalesce || *ops+n > l.c.cfg.RoundSize) {
			break
		}
		f.add(r)
		*ops += n
	}
	rest := copy(q, q[i:])
	clear(q[rest:])
	return q[:rest]
}

// finish records a round's driver result: retry what may be retried, else
// complete it.
func (r *round) finish(batchErr error) {
	k := r.call
	c := k.c
	onTurn := r.onTurn
	r.onTurn = false
	if batchErr != nil {
		for _, op := range r.ops {
			if op.Err == nil {
				op.Err = batchErr
			}
		}
	}
	if c.cfg.MaxRetries > 0 {
		may, failed := retryable(r.ops)
		if may && r.mayRetry(r.ops) {
			r.retry()
			return
		}
		if again := r.failedRuns(failed); again != nil {
			// Its applied writes complete now; its transactions that failed
			// whole go again on their own.
			k.pending.Add(1)
			again.retry()
		}
	}
	if batchErr != nil {
		k.errOnce.Do(func() { k.err = batchErr })
	}
	if c.failures.log != nil {
		for _, op := range r.ops {
			if failedOnBackend(op.Err) {
				c.failures.note(op.Err)
				break
			}
		}
	}
	r.ops = r.ops[:0]
	r.call = nil
	roundPool.Put(r)
	if k.pending.Add(-1) == 0 {
		k.complete(onTurn)
	}
}

// notSentRetryFor is how long the dispatcher keeps trying, past
// MaxRetries, a round whose every failure is the driver's refusal to send
// (Error.NotSent). The NDB driver refuses a transaction on a data node
// that owes answers and has sent none for a flight wait (10 ms), rather
// than block its executor if the node has stopped; on a busy host a live
// node is that slow now and then (live: a fresh preload at pipeline 16 on
// 2 cores got refusals and SERVER_ERROR within MaxRetries' 7 ms). A node
// that has stopped has its requests refused this long, in timers, holding
// up no executor and no other request, before they fail.
const notSentRetryFor = time.Second

// stillRefused: every failure among ops (r's) is the driver's refusal to
// send, and r's first failure was less than notSentRetryFor ago.
func (r *round) stillRefused(ops []*Op) bool {
	for _, op := range ops {
		if code := CodeOf(op.Err); code == CodeTemporary || code == CodeUnknownResult {
			var e *Error
			if !errors.As(op.Err, &e) || !e.NotSent {
				return false
			}
		}
	}
	return time.Now().UnixNano()-r.failedAt < int64(notSentRetryFor)
}

// retry sends r again after a backoff, its ops' results cleared.
func (r *round) retry() {
	c := r.call.c
	if r.failedAt == 0 {
		r.failedAt = time.Now().UnixNano()
	}
	r.attempt++
	reason := "temporary"
	if r.attempt > c.cfg.MaxRetries {
		reason = "not_sent"
	}
	for _, op := range r.ops {
		if CodeOf(op.Err) == CodeUnknownResult {
			reason = "unknown_result"
		}
		op.Err, op.Row, op.Won, op.Meta = nil, op.Row[:0], false, ItemMeta{}
	}
	dispatchRetries.WithLabelValues(reason).Inc()
	backoff := c.cfg.RetryBase << min(r.attempt-1, 16)
	if backoff > retryCap {
		backoff = retryCap
	}
	backoff = backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
	time.AfterFunc(backoff, func() { c.send(r) })
}

// mayRetry: ops (r's, or some of its transactions), retryable, may go
// again, within MaxRetries, or past it while refused (stillRefused).
func (r *round) mayRetry(ops []*Op) bool {
	return r.attempt < r.call.c.cfg.MaxRetries || r.stillRefused(ops)
}

// failedRuns moves r's transactions that may go again on their own (each
// failed whole: nothing of it was applied) to a new round, when r cannot
// go again whole (a write applied, a write's result unknown, or a failure
// past MaxRetries that is no refusal to send): a memcache pipeline's sets
// are one batch, and a refusal to send some of its transactions must not
// fail them for what became of the others. failed says whether any op of
// r failed so (retryable); nil when none did, or none may go again.
func (r *round) failedRuns(failed bool) *round {
	if !failed {
		return nil
	}
	var again *round
	kept := r.ops[:0]
	for i := 0; i < len(r.ops); {
		j := i
		for j < len(r.ops)-1 && r.ops[j].TxnWithNext {
			j++
		}
		run := r.ops[i : j+1]
		i = j + 1
		if may, _ := retryable(run); !may || !r.mayRetry(run) {
			kept = append(kept, run...) // copies down: kept never passes i
			continue
		}
		if again == nil {
			again = roundPool.Get().(*round)
			again.call, again.node, again.ops, again.attempt, again.failedAt = r.call, r.node, again.ops[:0], r.attempt, r.failedAt
		}
		again.ops = append(again.ops, run...)
	}
	r.ops = kept
	return again
}

// retryable reports whether ops may go again (may): some op failed
// Temporary (NDB aborted it: nothing was applied), or its result is unknown
// and the ops only read; and no write among them was applied, since the ops
// go again together (failedRuns splits a round by its transactions). failed
// says whether any failed Temporary or with its result unknown.
func retryable(ops []*Op) (may, failed bool) {
	temporary, unknown, wrote, applied := false, false, false, false
	for _, op := range ops {
		switch CodeOf(op.Err) {
		case CodeTemporary:
			temporary = true
		case CodeUnknownResult:
			unknown = true
		}
		if writes(op) {
			wrote = true
			applied = applied || op.Err == nil
		}
	}
	failed = temporary || unknown
	if unknown {
		return !wrote, failed
	}
	return temporary && !applied, failed
}

// writes: op changes the row. A read that won the recache token wrote the
// token into the row's state; read again, it would find the token taken and
// nobody would hold it.
func writes(op *Op) bool { return op.Kind != OpRead || op.Won }

// complete calls the caller's completion. Unless it runs on the goroutine
// of the batch's turn (onTurn), the batch leaves the turn (Batch.Turn).
func (k *call) complete(onTurn bool) {
	c, b, done, err := k.c, k.b, k.done, k.err
	if k.admitted {
		c.inFlight.Add(-int64(len(b.Ops)))
	}
	if !onTurn {
		b.Turn = nil
	}
	k.c, k.b, k.done, k.err = nil, nil, nil, nil
	callPool.Put(k)
	done(b, err)
}
