package embedded

import (
	"cmp"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A transaction is a run of ops linked by TxnWithNext. Its partitions are all
// locked, in ascending gid order, for the whole run; each mutation first saves
// the row it is about to change (before-image) in an undo log, and a failure
// puts every saved row back in reverse order before the locks are released, so
// nobody ever sees a partial transaction.

type undoRec struct {
	p       *partition
	op      *ndbclient.Op // the op that made the change
	tag     uint32
	key     [2]int // key bytes in undoLog.buf
	row     [2]int // before-image in undoLog.buf
	existed bool
	state   uint8 // the row's item state and last access
	used    uint32
	cleared *clearedRows // a delete_all's rows (log only): no key or row
}

type undoLog struct {
	recs []undoRec
	buf  []byte
}

func (u *undoLog) reset() {
	clear(u.recs) // drop partition pointers
	u.recs, u.buf = u.recs[:0], u.buf[:0]
}

// release forgets records whose changes the log has taken for good, and
// frees the rows the delete_alls among them took out.
func (u *undoLog) release(e *Engine) {
	for i := range u.recs {
		if c := u.recs[i].cleared; c != nil {
			c.free(e)
		}
	}
	u.reset()
}

// save records the current state of key's row, live or absent, before op
// changes it.
func (u *undoLog) save(p *partition, op *ndbclient.Op, key []byte, tag uint32, now uint32) {
	r := undoRec{p: p, op: op, tag: tag}
	r.key[0] = len(u.buf)
	u.buf = append(u.buf, key...)
	r.key[1] = len(u.buf)
	if s := p.find(tag, key, now); s >= 0 {
		r.existed = true
		r.row[0] = len(u.buf)
		u.buf = append(u.buf, p.row(s)...)
		r.row[1] = len(u.buf)
		r.state, r.used = p.slots[s].state, p.slots[s].used
	}
	u.recs = append(u.recs, r)
}

// pop forgets the last record (its op failed and changed nothing).
func (u *undoLog) pop() {
	r := u.recs[len(u.recs)-1]
	u.buf = u.buf[:r.key[0]]
	u.recs[len(u.recs)-1] = undoRec{}
	u.recs = u.recs[:len(u.recs)-1]
}

// take moves v's records to the end of u.
func (u *undoLog) take(v *undoLog) {
	off := len(u.buf)
	u.buf = append(u.buf, v.buf...)
	for _, r := range v.recs {
		r.key[0], r.key[1] = r.key[0]+off, r.key[1]+off
		if r.existed {
			r.row[0], r.row[1] = r.row[0]+off, r.row[1]+off
		}
		u.recs = append(u.recs, r)
	}
	v.reset()
}

// rollbackFailing rolls back, as rollback does, changes the log could not
// take, and fails their ops with err.
func (u *undoLog) rollbackFailing(now uint32, err error) {
	u.rollback(now)
	for i := range u.recs {
		op := u.recs[i].op
		op.Err, op.Affected = err, 0
		op.Row = op.Row[:0]
	}
}

// rollback restores every saved row, newest first. Restoring ignores the
// memory limit: the rows fitted before the transaction began.
func (u *undoLog) rollback(now uint32) {
	for i := len(u.recs) - 1; i >= 0; i-- {
		r := &u.recs[i]
		if r.cleared != nil {
			r.cleared.putBack(now)
			continue
		}
		p := r.p
		if s := p.lookup(r.tag, u.buf[r.key[0]:r.key[1]]); s >= 0 {
			p.del(s)
		}
		if r.existed {
			p.restore(r.tag, u.buf[r.row[0]:r.row[1]], r.state, r.used, now)
		}
	}
}

// abortErrs are the errors the other ops of a failed transaction get: the
// failing op's code, and a message saying they did not fail on their own.
var abortErrs = func() (a [ndbclient.NumCodes]*ndbclient.Error) {
	for i := range a {
		a[i] = &ndbclient.Error{Code: ndbclient.Code(i), Message: "transaction aborted"}
	}
	return a
}()

// runTxn runs ops[a:b] as one transaction.
func (x *exec) runTxn(ops []*ndbclient.Op, a, b int) {
	for i := a; i < b; i++ {
		if x.prep[i].t == nil { // failed its checks: nothing runs
			x.abort(ops, a, b, i)
			return
		}
	}
	x.locks = x.locks[:0]
	for i := a; i < b; i++ {
		x.locks = append(x.locks, x.prep[i].p)
	}
	slices.SortFunc(x.locks, func(p, q *partition) int { return cmp.Compare(p.gid, q.gid) })
	x.locks = slices.Compact(x.locks)
	for _, p := range x.locks {
		p.mu.Lock()
	}
	// With fsync always the transaction's before-images go to the log with
	// its frame, to be rolled back if the frame cannot be made durable.
	lb, u := x.logBatch(), &x.undo
	if lb != nil && x.e.wal.mode == FsyncAlways {
		u = &lb.undo
	}
	u.reset()
	failed := -1
	for i := a; i < b; i++ {
		pr := &x.prep[i]
		pr.p.do(ops[i], x.keys[pr.koff:pr.kend], pr.tag, x.now, u, lb)
		if ops[i].Err != nil {
			if ops[i].Kind == ndbclient.OpRead && ops[i].Lock == ndbclient.LockSimple && ndbclient.CodeOf(ops[i].Err) == ndbclient.CodeNotFound {
				continue // its miss is its own (ndbclient.LockSimple)
			}
			failed = i
			break
		}
	}
	var lsn uint64 // the transaction's frame, if it committed one
	if failed < 0 && lb != nil {
		var err error
		lsn, err = x.e.wal.commit(lb) // one frame: all of it or none
		if err != nil {
			ops[a].Err, ops[a].Affected, failed = err, 0, a
		}
	}
	if failed >= 0 {
		u.rollback(x.now)
		if lb != nil {
			lb.reset()
		}
	}
	if lb != nil {
		for _, p := range x.locks {
			x.lsn = max(x.lsn, p.seen(lsn))
		}
	}
	for _, p := range x.locks {
		p.settle() // the undo log holds keys, not slot numbers
		p.mu.Unlock()
	}
	u.reset()
	clear(x.locks)
	if failed >= 0 {
		x.abort(ops, a, b, failed)
	}
}

// abort gives every op of ops[a:b] but the failed one the aborted error.
func (x *exec) abort(ops []*ndbclient.Op, a, b, failed int) {
	code := ndbclient.CodeOf(ops[failed].Err)
	for i := a; i < b; i++ {
		if i == failed {
			continue
		}
		op := ops[i]
		op.Err = abortErrs[code]
		op.Row = op.Row[:0]
		if op.Kind != ndbclient.OpRead {
			op.Affected = 0
		}
	}
}
