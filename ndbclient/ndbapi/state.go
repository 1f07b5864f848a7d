package ndbapi

// Item state on NDB. memcached keeps bookkeeping with every item (fetched
// since written, stale, recache token handed out, last access) that the
// meta protocol's h, l and W/X/Z flags report. NDB rows carry none of it, so
// the driver keeps it in a column that the table's StateColumn names, one
// BIGINT UNSIGNED: the last access in unix seconds in the low 32 bits, and
// the flags above them. A NULL column (a row written before the column was
// added, or by another application) is a row with no state yet.
//
// Above the flags, a 29-bit tag drawn for each new version tells versions
// apart: the state's conditional updates compare the whole value, and two
// versions written in the same second would otherwise have equal states.
//
// The cost stays off the common path:
//   - a write that starts a new version sets the column with its other
//     columns: no extra round trip;
//   - a read reads the column with its projection, and writes it only when
//     the state changes: the first read of a version (fetched), a read
//     a minute or more after the last recorded access (memcached's
//     ITEM_UPDATE_INTERVAL: its item time moves at most once a minute too),
//     or a read that takes the recache token. That write is a second round
//     trip, a conditional update of the column from the value just read,
//     so two readers cannot both take the token: the one whose condition
//     fails reads again and finds the token gone;
//   - an update that keeps the state (touch, incr) reads the column back
//     in its transaction and, like a read, records its access when the
//     recorded one is a minute old, and a touch's first fetch;
//   - an update that keeps the state but marks it stale (meta delete with
//     I) reads the column first.

import (
	"math/rand/v2"

	"github.com/ndbgate/ndbgate/ndbclient"
)

const (
	stateTime    uint64 = 1<<32 - 1 // unix seconds of the last access
	stateFetched uint64 = 1 << 32
	stateStale   uint64 = 1 << 33
	stateToken   uint64 = 1 << 34
	stateTag     uint64 = 1<<64 - 1<<35 // tells versions apart

	// bumpInterval: a read records its access when the recorded one is at
	// least this old (seconds), as memcached's ITEM_UPDATE_INTERVAL.
	bumpInterval = 60
	// stateAttempts bounds the calls of state work after a flight's own. A read
	// that lost a race for the token reads the state again and tries once
	// more, so two tries for the token fit in the bound.
	stateAttempts = 4
)

// stateExtra is what the driver adds to one op of a flight for item state:
// the state column (and with a lease below a recache time, the expire
// column) read after the op's Read projection, and the state column set
// after its Set. The zero value adds nothing.
type stateExtra struct {
	read       bool // read the state column
	readExpire bool // read the expire column too
	set        bool // set the state column to value
	col        int  // the state column
	expireCol  int
	value      uint64
}

func (x stateExtra) reads() int {
	n := 0
	if x.read {
		n++
	}
	if x.readExpire {
		n++
	}
	return n
}

// readColumn is the column of the i-th value an op reads: its Read
// projection, then the state column, then the expire column.
func readColumn(op *ndbclient.Op, x stateExtra, i int) int {
	if i < len(op.Read) {
		return op.Read[i]
	}
	i -= len(op.Read)
	if x.read {
		if i == 0 {
			return x.col
		}
		i--
	}
	if x.readExpire && i == 0 {
		return x.expireCol
	}
	return -1
}

// metaOf decodes a state column's value.
func metaOf(v uint64) ndbclient.ItemMeta {
	return ndbclient.ItemMeta{
		LastAccess: uint32(v & stateTime),
		Fetched:    v&stateFetched != 0,
		Stale:      v&stateStale != 0,
		TokenSent:  v&stateToken != 0,
	}
}

// freshState is the state a write gives a new version of its row; tag is
// the version's (stateTag bits).
func freshState(op *ndbclient.Op, now uint32, tag uint64) uint64 {
	v := uint64(now) | tag&stateTag
	if op.MarkStale {
		v |= stateStale
	}
	if op.TokenSent {
		v |= stateToken
	}
	if op.MarkFetched {
		v |= stateFetched
	}
	return v
}

// keptState is the state an update that keeps the row's state leaves: old
// with the update's marks applied and its access recorded (old may be a
// NULL column's 0).
func keptState(old uint64, op *ndbclient.Op, now uint32) uint64 {
	v := old&^stateTime | uint64(now)
	if op.MarkStale {
		v = v&^stateToken | stateStale
	}
	if op.TokenSent {
		v |= stateToken
	}
	if op.MarkFetched {
		v |= stateFetched
	}
	return v
}

// readState is the state a read leaves, from the state old it read and
// the row's expiry (0: none), and whether the read takes the recache token.
// Without bump the read only tries for the token.
// The rules are the embedded engine's, except the once-a-minute access time.
func readState(old uint64, op *ndbclient.Op, expire uint64, now uint32, bump bool) (next uint64, token bool) {
	next = old
	if op.Lease && old&stateToken == 0 &&
		(old&stateStale != 0 || (op.RecacheAt != 0 && expire != 0 && expire < uint64(op.RecacheAt))) {
		next |= stateToken
		token = true
	}
	if bump && !op.NoBump {
		next = accessed(next|stateFetched, now)
	}
	return next, token
}

// accessed is state v with an access at now recorded, when the recorded one
// is none or a minute old or more.
func accessed(v uint64, now uint32) uint64 {
	if last := uint32(v & stateTime); last == 0 || now >= last+bumpInterval {
		v = v&^stateTime | uint64(now)
	}
	return v
}

// stateColumn is the index of op's table's state column in ti, or -1. A
// named column that is not a BIGINT UNSIGNED of the table is an error.
func stateColumn(op *ndbclient.Op, ti *tableInfo) (int, error) {
	name := op.Table.StateColumn
	if name == "" {
		return -1, nil
	}
	for i := range ti.cols {
		if ti.schema.Columns[i].Name == name {
			if ti.cols[i].ndbType != ndbBigunsigned {
				break
			}
			return i, nil
		}
	}
	return -1, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s: item state column %q must be a BIGINT UNSIGNED column of the table", op.Table.FullName(), name)
}

// stateStep is one piece of state work after a flight, for the flight's op
// at index op: a conditional update of its state column from old to next
// (null: the column was NULL), or with reread, a read of the state again.
type stateStep struct {
	op     int
	reread bool
	token  bool // the update takes the recache token
	null   bool
	old    uint64
	next   uint64
}

// stateFlight is an executor's item-state work for one flight; it is reused
// from flight to flight.
type stateFlight struct {
	extra []stateExtra // one per op of the flight, nil when none has state
	buf   []stateExtra // extra's storage
	now   uint32

	pre    []int           // ops whose update needs the state read first (kept state)
	tags   uint64          // the last version tag drawn, 0 before the first
	goOn   []*ndbclient.Op // the ops left after failed pre-reads
	goOnX  []stateExtra    // and their extras
	steps  []stateStep
	next   []stateStep
	work   []ndbclient.Op // the ops of the current step or pre-read call
	workPt []*ndbclient.Op
}

// plan fills r.extra for ops and reports whether any op has state work. A
// table whose state column is not a BIGINT UNSIGNED fails the flight, as
// encodeFlight fails it for a bad expire column.
func (r *stateFlight) plan(ops []*ndbclient.Op, tables func(*ndbclient.Table) (*tableInfo, error), now uint32) (bool, error) {
	r.extra, r.pre, r.steps, r.now = nil, r.pre[:0], r.steps[:0], now
	for i, op := range ops {
		if op.Table == nil || op.Table.StateColumn == "" {
			continue
		}
		ti, err := tables(op.Table)
		if err != nil {
			continue // encodeFlight reports it
		}
		col, err := stateColumn(op, ti)
		if err != nil {
			return false, err
		}
		if r.extra == nil {
			if cap(r.buf) < len(ops) {
				r.buf = make([]stateExtra, len(ops))
			}
			r.extra = r.buf[:len(ops)]
			clear(r.extra)
		}
		x := &r.extra[i]
		x.col = col
		switch op.Kind {
		case ndbclient.OpRead:
			x.read = true
			if op.Lease && op.RecacheAt != 0 && op.Table.ExpireColumn >= 0 {
				x.readExpire, x.expireCol = true, op.Table.ExpireColumn
			}
		case ndbclient.OpInsert, ndbclient.OpWrite, ndbclient.OpUpdate, ndbclient.OpCondUpdate, ndbclient.OpAdd, ndbclient.OpAppend:
			switch {
			case !op.KeepState:
				x.set, x.value = true, freshState(op, now, r.newTag())
			case op.MarkStale || op.TokenSent:
				r.pre = append(r.pre, i)
			case !op.NoBump && (op.Kind == ndbclient.OpUpdate || op.Kind == ndbclient.OpCondUpdate || op.Kind == ndbclient.OpAdd):
				// Read the state back in the update's transaction, to
				// record the access after it when that is due.
				x.read = true
			}
		}
	}
	return r.extra != nil, nil
}

// newTag draws the tag of a new version: a counter from a random start, so
// that versions written by this executor, or by other gateways, in the
// same second differ.
func (r *stateFlight) newTag() uint64 {
	if r.tags == 0 {
		r.tags = rand.Uint64()
	}
	r.tags++
	return r.tags << 35
}

// preReads returns the reads of the state that kept-state updates need
// before the flight (none: nil).
func (r *stateFlight) preReads(ops []*ndbclient.Op) []*ndbclient.Op {
	if len(r.pre) == 0 {
		return nil
	}
	r.resetWork(len(r.pre))
	for k, i := range r.pre {
		w := &r.work[k]
		w.Kind, w.Table, w.Key, w.NoBump = ndbclient.OpRead, ops[i].Table, ops[i].Key, true
		w.Read = append(w.Read, r.extra[i].col)
	}
	return r.workPt
}

// applyPreReads sets each kept-state update's state from its pre-read, and
// returns the ops that go on into the flight (ops itself when all do), with
// r.extra following them. A row that was not found gets no state: the
// update finds no row either. A pre-read that failed otherwise fails its
// update, and the rest of the update's transaction, which stay out of the
// flight: an update sent without the state would drop the stale mark it
// was asked for. Nothing was applied, so a Temporary failure is retried.
func (r *stateFlight) applyPreReads(ops []*ndbclient.Op) []*ndbclient.Op {
	failed := false
	for k, i := range r.pre {
		w := &r.work[k]
		switch {
		case w.Err == nil && len(w.Row) == 1:
			x := &r.extra[i]
			x.set, x.value = true, keptState(w.Row[0].Uint(), ops[i], r.now)
		case w.Err != nil && ndbclient.CodeOf(w.Err) != ndbclient.CodeNotFound:
			ops[i].Err, failed = w.Err, true
		}
	}
	if !failed {
		return ops
	}
	r.goOn, r.goOnX = r.goOn[:0], r.goOnX[:0]
	for start := 0; start < len(ops); {
		end := start // the transaction is ops[start:end+1]
		for end < len(ops)-1 && ops[end].TxnWithNext {
			end++
		}
		var err error
		for _, op := range ops[start : end+1] {
			if op.Err != nil {
				err = op.Err
			}
		}
		for j := start; j <= end; j++ {
			if err != nil {
				ops[j].Err = err
				continue
			}
			r.goOn, r.goOnX = append(r.goOn, ops[j]), append(r.goOnX, r.extra[j])
		}
		start = end + 1
	}
	r.extra = r.goOnX
	return r.goOn
}

// afterFlight reads the state of each op that read it, sets a read's Meta
// and strips the extra values from its Row, and plans the updates of the
// states that change.
func (r *stateFlight) afterFlight(ops []*ndbclient.Op) {
	for i, x := range r.extra {
		if !x.read {
			continue
		}
		op := ops[i]
		if op.Err != nil || len(op.Row) < len(op.Read)+x.reads() {
			continue
		}
		state, expire := op.Row[len(op.Read)], ndbclient.Null()
		if x.readExpire {
			expire = op.Row[len(op.Read)+1]
		}
		op.Row = op.Row[:len(op.Read)]
		if op.Kind != ndbclient.OpRead { // a kept-state update read it back
			old := state.Uint()
			next := accessed(old, r.now)
			if op.MarkFetched {
				next |= stateFetched
			}
			if next != old {
				r.steps = append(r.steps, stateStep{op: i, null: state.IsNull(), old: old, next: next})
			}
			continue
		}
		op.Meta = metaOf(state.Uint())
		r.plant(&r.steps, i, op, state, expire, true)
	}
}

// plant adds the update that moves op's row from state to the state its
// read leaves, when that differs; without bump only the token is taken.
func (r *stateFlight) plant(steps *[]stateStep, i int, op *ndbclient.Op, state, expire ndbclient.Value, bump bool) {
	old := state.Uint()
	next, token := readState(old, op, ndbclient.ExpirySeconds(expire), r.now, bump)
	if next != old {
		*steps = append(*steps, stateStep{op: i, token: token, null: state.IsNull(), old: old, next: next})
	}
}

// stepOps returns the ops of the pending steps.
func (r *stateFlight) stepOps(ops []*ndbclient.Op) []*ndbclient.Op {
	r.resetWork(len(r.steps))
	for k, s := range r.steps {
		w, op, x := &r.work[k], ops[s.op], r.extra[s.op]
		w.Table, w.Key = op.Table, op.Key
		if s.reread {
			w.Kind, w.NoBump = ndbclient.OpRead, true
			w.Read = append(w.Read, x.col)
			if x.readExpire {
				w.Read = append(w.Read, x.expireCol)
			}
			continue
		}
		w.Kind, w.CondColumn = ndbclient.OpCondUpdate, x.col
		if s.null {
			w.CondValue = ndbclient.Null()
		} else {
			w.CondValue = ndbclient.Uint(s.old)
		}
		w.Set = append(w.Set, ndbclient.ColumnValue{Column: x.col, Value: ndbclient.Uint(s.next)})
	}
	return r.workPt
}

// afterSteps records what the steps did and plans the next ones: a token
// update that lost a race reads the state again and tries once more. Other
// updates that fail are dropped: the row changed or went, and its new state
// stands. It reports whether steps remain.
func (r *stateFlight) afterSteps(ops []*ndbclient.Op) bool {
	r.next = r.next[:0]
	for k, s := range r.steps {
		w, op := &r.work[k], ops[s.op]
		switch {
		case s.reread:
			if w.Err == nil && len(w.Row) >= 1 {
				expire := ndbclient.Null()
				if len(w.Row) > 1 {
					expire = w.Row[1]
				}
				// Another change won the race. Someone else holds the
				// token now (Z for this reader, as memcached would answer
				// it after the winner), or it may still be free.
				if w.Row[0].Uint()&stateToken != 0 {
					op.Meta.TokenSent = true
				}
				r.plant(&r.next, s.op, op, w.Row[0], expire, false)
			}
		case w.Err == nil:
			if s.token {
				op.Won = true
			}
		case s.token && ndbclient.CodeOf(w.Err) == ndbclient.CodeConditionFailed:
			r.next = append(r.next, stateStep{op: s.op, reread: true})
		}
	}
	r.steps, r.next = r.next, r.steps
	return len(r.steps) > 0
}

// release drops the references to the caller's ops, keys and tables that
// the flight's work kept: a driver keeps nothing of an op after its flight.
func (r *stateFlight) release() {
	for k := range r.work {
		r.work[k].Key, r.work[k].Table = nil, nil
	}
	clear(r.goOn)
	r.goOn = r.goOn[:0]
}

// resetWork makes r.work n cleared ops (keeping their buffers) and r.workPt
// pointers to them.
func (r *stateFlight) resetWork(n int) {
	for len(r.work) < n {
		r.work = append(r.work, ndbclient.Op{})
	}
	r.work = r.work[:n]
	r.workPt = r.workPt[:0]
	for k := range r.work {
		r.work[k].Reset()
		r.workPt = append(r.workPt, &r.work[k])
	}
}
