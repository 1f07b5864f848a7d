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
	now := e.now()
	switch len(b.Ops) {
	case 0:
		return nil
	case 1:
		e.runOne(b.Ops[0], now) // a one-op transaction is just the op
		return nil
	}
	x := execPool.Get().(*exec)
	x.run(e, b.Ops, now)
	x.done()
	execPool.Put(x)
	return nil
}

// CompletesInline reports that Submit calls done before it returns, unless a
// simulated round trip is configured (ndbclient.InlineDriver).
func (e *Engine) CompletesInline() bool { return e.cfg.RoundTripDelay <= 0 }

// Submit runs the batch inline and calls done on the caller's goroutine; with
// a simulated round-trip delay, it completes that much later elsewhere.
func (e *Engine) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if d := e.cfg.RoundTripDelay; d > 0 {
		time.AfterFunc(d, func() { done(b, e.Execute(context.Background(), b)) })
		return
	}
	done(b, e.Execute(context.Background(), b))
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
func (e *Engine) runOne(op *ndbclient.Op, now uint32) {
	t, err := e.tableOf(op.Table)
	if err == nil {
		err = t.checkOp(op, false)
	}
	if err != nil {
		op.Err = err
		op.Row = op.Row[:0]
		return
	}
	if op.Kind == ndbclient.OpDeleteAll {
		t.deleteAll(op, now)
		return
	}
	var kb [keyStack]byte
	key := t.appendKey(kb[:0], op.Key)
	h := e.hash(key)
	p := t.parts[t.partIndex(e, h, op.Key)]
	p.mu.Lock()
	p.do(op, key, uint32(h), now, nil)
	p.mu.Unlock()
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
	x.e = nil
}

func (x *exec) run(e *Engine, ops []*ndbclient.Op, now uint32) {
	x.e, x.now = e, now
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
				t.deleteAll(ops[i], now)
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
	return prep{t: t, p: t.parts[t.partIndex(x.e, h, op.Key)], tag: uint32(h), koff: koff, kend: len(x.keys)}
}

// runGroup runs the plain ops ops[a:b], taking each partition's lock once.
func (x *exec) runGroup(ops []*ndbclient.Op, a, b int) {
	x.order = x.order[:0]
	for i := a; i < b; i++ {
		if p := x.prep[i].p; p != nil {
			x.order = append(x.order, uint64(p.gid)<<32|uint64(i))
		}
	}
	slices.Sort(x.order) // keys are unique, so this is stable by op index
	for k := 0; k < len(x.order); {
		p := x.prep[uint32(x.order[k])].p
		p.mu.Lock()
		for ; k < len(x.order) && uint32(x.order[k]>>32) == p.gid; k++ {
			i := int(uint32(x.order[k]))
			pr := &x.prep[i]
			p.do(ops[i], x.keys[pr.koff:pr.kend], pr.tag, x.now, nil)
		}
		p.mu.Unlock()
	}
}

// deleteAll empties every partition of t, one lock at a time (like NDB's scan
// delete, it is not atomic across partitions).
func (t *table) deleteAll(op *ndbclient.Op, now uint32) {
	var n uint64
	for _, p := range t.parts {
		p.mu.Lock()
		n += p.clear(now)
		p.mu.Unlock()
	}
	op.Err, op.Affected = nil, n
	op.Row = op.Row[:0]
}
