package embedded

import (
	"github.com/ndbgate/ndbgate/ndbclient"
	"sync"
)

// do runs one checked op on this partition, whose lock the caller holds. key is
// the op's encoded primary key and tag its index tag. Inside a transaction, u
// records what a mutation changes so the run can be undone. With a data dir,
// lb collects the change for the log (and, with fsync always and no u, its
// before-image).
func (p *partition) do(op *ndbclient.Op, key []byte, tag uint32, now uint32, u *undoLog, lb *logBatch) {
	op.Row = op.Row[:0]
	if op.Kind == ndbclient.OpRead {
		op.Err = p.read(op, key, tag, now)
		return // Affected is left as it was: a read changes no row
	}
	popOnFail := false
	if lb != nil {
		w := p.e.wal
		if err := w.refusing(); err != nil {
			op.Err, op.Affected = err, 0
			return
		}
		if u == nil && w.mode == FsyncAlways {
			u, popOnFail = &lb.undo, true
		}
	}
	if u != nil {
		u.save(p, op, key, tag, now)
	}
	op.Affected = 0
	var err error
	s := int32(-1)
	switch op.Kind {
	case ndbclient.OpInsert:
		if p.find(tag, key, now) >= 0 {
			err = ndbclient.ErrDuplicate
		} else {
			s, err = p.write(-1, tag, key, op.Set, -1, nil, now)
		}
	case ndbclient.OpUpdate, ndbclient.OpWrite:
		s = p.find(tag, key, now)
		if s < 0 && op.Kind == ndbclient.OpUpdate {
			err = ndbclient.ErrNotFound
		} else {
			op.Meta = p.meta(s)
			s, err = p.write(s, tag, key, op.Set, -1, nil, now)
		}
	case ndbclient.OpDelete:
		if s := p.find(tag, key, now); s < 0 {
			err = ndbclient.ErrNotFound
		} else if op.HasCond && !p.condHolds(s, op) {
			err = ndbclient.ErrConditionFailed
		} else {
			p.del(s)
		}
	case ndbclient.OpCondUpdate:
		s = p.find(tag, key, now)
		switch {
		case s < 0:
			err = ndbclient.ErrNotFound
		case !p.condHolds(s, op):
			err = ndbclient.ErrConditionFailed
		default:
			op.Meta = p.meta(s)
			s, err = p.write(s, tag, key, op.Set, -1, nil, now)
		}
	case ndbclient.OpAdd:
		s, err = p.add(op, key, tag, now)
	case ndbclient.OpAppend:
		s, err = p.appendOp(op, key, tag, now)
	}
	op.Err = err
	if err == nil {
		if s >= 0 {
			p.afterWrite(s, op)
		}
		op.Affected = 1
		if lb != nil {
			lb.logChange(p, op, key, s)
		}
	} else if popOnFail {
		lb.undo.pop()
	}
}

// recacheDue reports whether slot s's row expires before at.
func (p *partition) recacheDue(s int32, at uint32) bool {
	x := p.expiry(s)
	return x != 0 && x < at
}

func (p *partition) read(op *ndbclient.Op, key []byte, tag uint32, now uint32) error {
	s := p.find(tag, key, now)
	if s < 0 {
		return ndbclient.ErrNotFound
	}
	sl := &p.slots[s]
	op.Meta = p.meta(s)
	if op.Lease && sl.state&stToken == 0 &&
		(sl.state&stStale != 0 || op.RecacheAt != 0 && p.recacheDue(s, op.RecacheAt)) {
		sl.state |= stToken
		op.Won = true
	}
	if !op.NoBump {
		if sl.state&stFetched == 0 { // a store only when it changes: the line stays clean
			sl.state |= stFetched
		}
		if p.t.eviction {
			p.lruTouch(s, now) // sets used when it bumps: last access to the minute, as memcached
		} else {
			sl.used = now
		}
	}
	if len(op.Read) > 0 {
		p.t.project(op, p.row(s))
	}
	return nil
}

// write builds the new row (slot s's row, or a new one if s < 0, with set and
// then xcol = xval applied) in scratch and stores it.
func (p *partition) write(s int32, tag uint32, key []byte, set []ndbclient.ColumnValue, xcol int, xval *ndbclient.Value, now uint32) (int32, error) {
	var old []byte
	if s >= 0 {
		old = p.row(s)
	}
	if need := rowEstimate(key, old, set, xval); need > maxChunk && cap(p.build) < need {
		p.build = getScratch(need)
	}
	p.build = p.t.buildRow(p.build, key, old, set, xcol, xval)
	s, err := p.put(s, tag, p.build, now, false)
	if cap(p.build) > maxChunk {
		putScratch(p.build) // do not pin a huge row's scratch to the partition
		p.build = nil
	}
	return s, err
}

// rowEstimate is about the bytes of a row built from key, old and the sets.
func rowEstimate(key, old []byte, set []ndbclient.ColumnValue, xval *ndbclient.Value) int {
	n := len(key) + len(old)
	for i := range set {
		n += len(set[i].Value.B) + 8
	}
	if xval != nil {
		n += len(xval.B) + 8
	}
	return n
}

// bigScratch keeps the scratch of rows over maxChunk between writes, for
// any partition. Pages are outside the Go heap, so the heap is small, and a
// row-sized allocation per large write would bring on a collection every
// few writes.
var bigScratch sync.Pool // *[]byte

func getScratch(n int) []byte {
	if b, ok := bigScratch.Get().(*[]byte); ok {
		if cap(*b) >= n {
			return (*b)[:0]
		}
		bigScratch.Put(b)
	}
	return make([]byte, 0, n)
}

func putScratch(b []byte) { bigScratch.Put(&b) }

// meta reports slot s's state (zero for s < 0).
func (p *partition) meta(s int32) ndbclient.ItemMeta {
	if s < 0 {
		return ndbclient.ItemMeta{}
	}
	sl := &p.slots[s]
	return ndbclient.ItemMeta{
		LastAccess: sl.used,
		Fetched:    sl.state&stFetched != 0,
		Stale:      sl.state&stStale != 0,
		TokenSent:  sl.state&stToken != 0,
	}
}

// afterWrite sets the state of slot s, just written by op: a new version
// starts afresh, as a new memcached item does, unless op keeps it.
func (p *partition) afterWrite(s int32, op *ndbclient.Op) {
	sl := &p.slots[s]
	if !op.KeepState {
		sl.state = 0
	}
	if op.MarkStale {
		sl.state = sl.state&^stToken | stStale
	}
	if op.TokenSent {
		sl.state |= stToken
	}
	if op.MarkFetched {
		sl.state |= stFetched
	}
}

func (p *partition) condHolds(s int32, op *ndbclient.Op) bool {
	var v ndbclient.Value
	p.t.decode(p.row(s), op.CondColumn, &v)
	return p.t.cols[op.CondColumn].equal(&v, &op.CondValue)
}

func (p *partition) add(op *ndbclient.Op, key []byte, tag uint32, now uint32) (int32, error) {
	t := p.t
	s := p.find(tag, key, now)
	var err error
	if s < 0 {
		if !op.Create {
			return -1, ndbclient.ErrNotFound
		}
		v := ndbclient.Uint(op.Initial)
		s, err = p.write(-1, tag, key, op.Set, op.AddColumn, &v, now)
	} else {
		v := t.colValue(p.row(s), op.AddColumn)
		if v.IsNull() {
			return -1, ndbclient.ErrNotNumeric // before the condition (ndbclient.Op.HasCond)
		}
		if op.HasCond && !p.condHolds(s, op) {
			return -1, ndbclient.ErrConditionFailed
		}
		op.Meta = p.meta(s)
		n := v.Uint()
		switch {
		case !op.Subtract:
			n = (n + op.Delta) & t.cols[op.AddColumn].umax // wraps at the column's width
		case op.Delta >= n:
			n = 0
		default:
			n -= op.Delta
		}
		v = ndbclient.Uint(n)
		s, err = p.write(s, tag, key, op.Set, op.AddColumn, &v, now)
	}
	if err != nil {
		return -1, err
	}
	if len(op.Read) > 0 {
		t.project(op, p.row(s))
	}
	return s, nil
}

func (p *partition) appendOp(op *ndbclient.Op, key []byte, tag uint32, now uint32) (int32, error) {
	t := p.t
	s := p.find(tag, key, now)
	if s < 0 {
		return -1, ndbclient.ErrNotFound
	}
	if op.HasCond && !p.condHolds(s, op) {
		return -1, ndbclient.ErrConditionFailed
	}
	op.Meta = p.meta(s)
	ci := &t.cols[op.AppendColumn]
	old := t.colValue(p.row(s), op.AppendColumn).B // NULL appends as empty
	if need := len(old) + len(op.Data); need > maxChunk && cap(p.cat) < need {
		p.cat = getScratch(need)
	}
	if op.Prepend {
		p.cat = append(append(p.cat[:0], op.Data...), old...)
	} else {
		p.cat = append(append(p.cat[:0], old...), op.Data...)
	}
	if n := ci.byteLen(p.cat); n > ci.byteLimit() {
		return -1, ndbclient.Errorf(ndbclient.CodeTooLarge, "column %q (%s): value would be %d bytes, longer than the column's %d", ci.Name, ci.Type, n, ci.byteLimit())
	}
	v := ndbclient.Bytes(p.cat)
	s, err := p.write(s, tag, key, op.Set, op.AppendColumn, &v, now)
	if cap(p.cat) > maxChunk {
		putScratch(p.cat)
		p.cat = nil
	}
	if err != nil {
		return -1, err
	}
	if len(op.Read) > 0 {
		t.project(op, p.row(s))
	}
	return s, nil
}
