package embedded

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Execute runs the batch inline. Ops are checked and hashed first, without any
// lock. Then the batch runs in segments, in batch order: a run of plain ops is
// grouped by partition (stable, so ops on one key keep their order) and each
// partition's lock is taken once for all its ops; a transaction run, or a
// delete_all, is a segment of its own.
func (e *Engine) Execute(ctx context.Context, b *ndbclient.Batch) error {
	if err := ctx.Err(); err != nil {
		failAll(b, err)
		return err
	}
	if e.closed.Load() {
		failAll(b, errClosed)
		return errClosed
	}
	if e.wal == nil {
		e.apply(b)
		return nil
	}
	lsn, ok := e.applyGated(b)
	if !ok {
		failAll(b, errClosed)
		return errClosed
	}
	if e.syncWait && lsn > e.wal.settled.Load() {
		e.wal.awaitSync(lsn, b)
	}
	return nil
}

// apply runs the batch; with a data dir it returns the lsn of its last frame
// in the log (0: it logged nothing).
func (e *Engine) apply(b *ndbclient.Batch) uint64 {
	now := e.now()
	switch len(b.Ops) {
	case 0:
		return 0
	case 1:
		return e.runOne(b.Ops[0], now) // a one-op transaction is just the op
	}
	x := execPool.Get().(*exec)
	x.run(e, b.Ops, now)
	lsn := x.lsn
	x.done()
	execPool.Put(x)
	return lsn
}

// CompletesInline reports that Submit calls done before it returns, unless a
// simulated round trip is configured or writes wait for fsync
// (ndbclient.InlineDriver).
func (e *Engine) CompletesInline() bool { return e.cfg.RoundTripDelay <= 0 && !e.syncWait }

// SubmitNeverWaits reports that Submit returns at once, unless a simulated
// round trip is configured (ndbclient.NonBlockingDriver): with fsync always a
// write completes later, from the log, but nothing waits for it.
func (e *Engine) SubmitNeverWaits() bool { return e.cfg.RoundTripDelay <= 0 }

// Submit runs the batch inline and calls done on the caller's goroutine; with
// a simulated round-trip delay, it completes that much later elsewhere, and
// with fsync always, a batch that changed rows completes from the log writer
// once its changes are durable.
func (e *Engine) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if d := e.cfg.RoundTripDelay; d > 0 {
		time.AfterFunc(d, func() { done(b, e.Execute(context.Background(), b)) })
		return
	}
	if e.closed.Load() {
		failAll(b, errClosed)
		done(b, errClosed)
		return
	}
	if e.wal == nil {
		e.apply(b)
		done(b, nil)
		return
	}
	lsn, ok := e.applyGated(b)
	switch {
	case !ok:
		failAll(b, errClosed)
		done(b, errClosed)
	case e.syncWait && lsn > e.wal.settled.Load():
		e.wal.await(lsn, b, done)
	default:
		done(b, nil)
	}
}

// applyGated is apply with a data dir, under e.gate held for reading: Close
// takes it for writing once closed is set, so the log finishes only after
// every batch that got past the closed check has appended its frames (one
// that applied after would be acknowledged and not logged). ok is false once
// closed.
func (e *Engine) applyGated(b *ndbclient.Batch) (lsn uint64, ok bool) {
	e.gate.RLock()
	defer e.gate.RUnlock()
	if e.closed.Load() {
		return 0, false
	}
	if h := e.cfg.applyHook; h != nil {
		h()
	}
	return e.apply(b), true
}

var errClosed = &ndbclient.Error{Code: ndbclient.CodeUnavailable, Message: "embedded engine is closed"}

func failAll(b *ndbclient.Batch, err error) {
	for _, op := range b.Ops {
		op.Err = err
	}
}

// keyStack is the key size encoded on the stack by the single-op path; longer
// keys spill to the heap.
const keyStack = 320

// runOne is the single-op fast path: no scratch state, no sorting, no pool.
// It returns the lsn of the op's frame in the log, 0 for none.
func (e *Engine) runOne(op *ndbclient.Op, now uint32) uint64 {
	t, err := e.tableOf(op.Table)
	if err == nil {
		err = t.checkOp(op, false)
	}
	if err != nil {
		op.Err = err
		op.Row = op.Row[:0]
		return 0
	}
	if op.Kind == ndbclient.OpDeleteAll {
		return t.deleteAll(op, now)
	}
	var kb [keyStack]byte
	key := t.appendKey(kb[:0], op.Key)
	h := e.hash(key)
	p := t.parts[t.partIndex(e, h, op.Key)]
	p.mu.Lock()
	if e.wal == nil {
		p.do(op, key, uint32(h), now, nil, nil)
		p.settle()
		p.mu.Unlock()
		return 0
	}
	p.do(op, key, uint32(h), now, nil, &p.lb)
	lsn := p.seen(e.wal.commitOrUndo(&p.lb, now))
	p.settle()
	p.mu.Unlock()
	return lsn
}

// exec is the scratch state of one multi-op batch, pooled.
type exec struct {
	e     *Engine
	now   uint32
	prep  []prep
	keys  []byte   // encoded keys of all ops
	order []uint64 // gid<<32 | op index, sorted: the partition grouping
	locks []*partition
	undo  undoLog
	lb    logBatch // with a data dir: what the current lock hold logs
	lsn   uint64   // the batch's last frame in the log
}

// logBatch is x.lb with a data dir, else nil.
func (x *exec) logBatch() *logBatch {
	if x.e.wal == nil {
		return nil
	}
	return &x.lb
}

// prep is what the lock-free first pass learned about one op.
type prep struct {
	t          *table // nil: the op failed its checks (Err is set)
	p          *partition
	tag        uint32
	koff, kend int
}

var execPool = sync.Pool{New: func() any { return new(exec) }}

func (x *exec) done() {
	clear(x.prep)
	x.lb.reset()
	x.e, x.lsn = nil, 0
}

func (x *exec) run(e *Engine, ops []*ndbclient.Op, now uint32) {
	x.e, x.now, x.lsn = e, now, 0
	x.prep = slices.Grow(x.prep[:0], len(ops))[:len(ops)]
	x.keys = x.keys[:0]
	for i, op := range ops {
		inTxn := op.TxnWithNext || i > 0 && ops[i-1].TxnWithNext
		x.prep[i] = x.prepare(op, inTxn)
	}
	for i := 0; i < len(ops); {
		switch {
		case ops[i].TxnWithNext:
			j := i
			for j < len(ops)-1 && ops[j].TxnWithNext {
				j++
			}
			x.runTxn(ops, i, j+1)
			i = j + 1
		case ops[i].Kind == ndbclient.OpDeleteAll:
			if t := x.prep[i].t; t != nil {
				x.lsn = max(x.lsn, t.deleteAll(ops[i], now))
			}
			i++
		default:
			j := i
			for j < len(ops) && !ops[j].TxnWithNext && ops[j].Kind != ndbclient.OpDeleteAll {
				j++
			}
			x.runGroup(ops, i, j)
			i = j
		}
	}
}

// prepare checks op, encodes its key into x.keys and finds its partition.
func (x *exec) prepare(op *ndbclient.Op, inTxn bool) prep {
	t, err := x.e.tableOf(op.Table)
	if err == nil {
		err = t.checkOp(op, inTxn)
	}
	if err != nil {
		op.Err = err
		op.Row = op.Row[:0]
		return prep{}
	}
	if op.Kind == ndbclient.OpDeleteAll {
		return prep{t: t}
	}
	koff := len(x.keys)
	x.keys = t.appendKey(x.keys, op.Key)
	h := x.e.hash(x.keys[koff:])
	i := t.partIndex(x.e, h, op.Key)
	t.hints[i].prefetchHome(uint32(h))
	return prep{t: t, p: t.parts[i], tag: uint32(h), koff: koff, kend: len(x.keys)}
}

// runGroup runs the plain ops ops[a:b], taking each partition's lock once.
func (x *exec) runGroup(ops []*ndbclient.Op, a, b int) {
	x.orderByPartition(a, b)
	if len(x.order) >= warmMin {
		x.warm(false)
		x.warm(true)
	}
	lb := x.logBatch()
	for k := 0; k < len(x.order); {
		p := x.prep[uint32(x.order[k])].p
		p.mu.Lock()
		for ; k < len(x.order) && uint32(x.order[k]>>32) == p.gid; k++ {
			i := int(uint32(x.order[k]))
			pr := &x.prep[i]
			p.do(ops[i], x.keys[pr.koff:pr.kend], pr.tag, x.now, nil, lb)
		}
		if lb != nil {
			x.lsn = max(x.lsn, p.seen(x.e.wal.commitOrUndo(lb, x.now)))
		}
		p.settle()
		p.mu.Unlock()
	}
}

// orderByPartition fills x.order with the checked ops of ops[a:b], as
// partition gid << 32 | op index, in lock order.
func (x *exec) orderByPartition(a, b int) {
	x.order = x.order[:0]
	for i := a; i < b; i++ {
		if p := x.prep[i].p; p != nil {
			x.order = append(x.order, uint64(p.gid)<<32|uint64(i))
		}
	}
	slices.Sort(x.order) // keys are unique, so this is stable by op index
}

// warmMin is the smallest group that warms its slots and rows first: one
// op has no other miss to overlap with.
const warmMin = 2

// warm is one of runGroup's passes before its ops run (prefetch.go): it asks
// for each op's slot, or with rows its row, holding each partition's lock
// only for that, and passing over a partition whose lock is held.
func (x *exec) warm(rows bool) {
	for k := 0; k < len(x.order); {
		p := x.prep[uint32(x.order[k])].p
		locked := p.mu.TryLock()
		for ; k < len(x.order) && uint32(x.order[k]>>32) == p.gid; k++ {
			if !locked {
				continue
			}
			if tag := x.prep[uint32(x.order[k])].tag; rows {
				p.warmRow(tag)
			} else {
				p.warmSlot(tag)
			}
		}
		if locked {
			p.mu.Unlock()
		}
	}
}

// deleteAll empties every partition of t, one lock at a time (like NDB's scan
// delete, it is not atomic across partitions). With a data dir it returns the
// lsn of its log frame (0: none).
func (t *table) deleteAll(op *ndbclient.Op, now uint32) uint64 {
	if t.e.wal != nil {
		return t.deleteAllLogged(op, now)
	}
	var n uint64
	for _, p := range t.parts {
		p.mu.Lock()
		n += p.clear(now)
		p.mu.Unlock()
	}
	op.Err, op.Affected = nil, n
	op.Row = op.Row[:0]
	return 0
}

// deleteAllLogged is deleteAll with a data dir. It holds every partition of
// the table at once, so that the log's one clear entry sits where the clear
// happened for every key (keys do not map to the same partitions after a
// restart), but only to swap their rows out and append the entry (clear.go):
// the rows are freed after the locks are let go, or with fsync always once
// the entry is durable, and put back if the log refuses it. The caller does
// not wait: its batch completes through the returned lsn, like any write.
func (t *table) deleteAllLogged(op *ndbclient.Op, now uint32) uint64 {
	op.Row = op.Row[:0]
	w := t.e.wal
	for _, p := range t.parts { // ascending gid
		p.mu.Lock()
	}
	if err := w.refusing(); err != nil {
		t.unlockAll()
		op.Err, op.Affected = err, 0
		return 0
	}
	c := &clearedRows{parts: make([]partRows, len(t.parts))}
	for i, p := range t.parts {
		c.parts[i] = p.detach()
	}
	frame := appendClear(beginFrame(nil), t.id)
	endFrame(frame, 0)
	var u *undoLog
	if w.mode == FsyncAlways {
		u = &undoLog{recs: []undoRec{{op: op, cleared: c}}}
	}
	c.mu.Lock() // before the writer can reach c (see clearedRows.mu)
	lsn, _, err := w.append(frame, u, false)
	if err != nil {
		for i, p := range t.parts {
			p.putBack(&c.parts[i], now)
		}
	}
	if err == nil {
		for _, p := range t.parts {
			p.seen(lsn)
		}
	}
	t.unlockAll()
	if err != nil {
		c.mu.Unlock()
		op.Err, op.Affected = err, 0
		return 0
	}
	live, expired := c.count(now)
	op.Err, op.Affected = nil, live // before a rollback can set them
	c.expired = expired
	c.mu.Unlock()
	if u == nil {
		c.free(t.e)
	}
	return lsn
}

func (t *table) unlockAll() {
	for _, p := range t.parts {
		p.mu.Unlock()
	}
}
