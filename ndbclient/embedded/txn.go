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
	tag     uint32
	key     [2]int // key bytes in undoLog.buf
	row     [2]int // before-image in undoLog.buf
	existed bool
	state   uint8 // the row's item state and last access
	used    uint32
}

type undoLog struct {
	recs []undoRec
	buf  []byte
}

func (u *undoLog) reset() {
	clear(u.recs) // drop partition pointers
	u.recs, u.buf = u.recs[:0], u.buf[:0]
}

// save records the current state of key's row, live or absent.
func (u *undoLog) save(p *partition, key []byte, tag uint32, now uint32) {
	r := undoRec{p: p, tag: tag}
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

// rollback restores every saved row, newest first. Restoring ignores the
// memory limit: the rows fitted before the transaction began.
func (u *undoLog) rollback(now uint32) {
	for i := len(u.recs) - 1; i >= 0; i-- {
		r := &u.recs[i]
		p := r.p
		if s := p.lookup(r.tag, u.buf[r.key[0]:r.key[1]]); s >= 0 {
			p.del(s)
		}
		if r.existed {
			s, _ := p.put(-1, r.tag, u.buf[r.row[0]:r.row[1]], now, true)
			p.slots[s].state, p.slots[s].used = r.state, r.used
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
	x.undo.reset()
	failed := -1
	for i := a; i < b; i++ {
		pr := &x.prep[i]
		pr.p.do(ops[i], x.keys[pr.koff:pr.kend], pr.tag, x.now, &x.undo)
		if ops[i].Err != nil {
			failed = i
			break
		}
	}
	if failed >= 0 {
		x.undo.rollback(x.now)
	}
	for _, p := range x.locks {
		p.mu.Unlock()
	}
	x.undo.reset()
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
