package embedded

import (
	"github.com/ndbgate/ndbgate/ndbclient"
)

// do runs one checked op on this partition, whose lock the caller holds. key is
// the op's encoded primary key and tag its index tag. Inside a transaction, u
// records what a mutation changes so the run can be undone.
func (p *partition) do(op *ndbclient.Op, key []byte, tag uint32, now uint32, u *undoLog) {
	op.Row = op.Row[:0]
	if op.Kind == ndbclient.OpRead {
		op.Err = p.read(op, key, tag, now)
		return // Affected is left alone for reads: callers may use it as a tag
	}
	if u != nil {
		u.save(p, key, tag, now)
	}
	op.Affected = 0
	var err error
	switch op.Kind {
	case ndbclient.OpInsert:
		if p.find(tag, key, now) >= 0 {
			err = ndbclient.ErrDuplicate
		} else {
			_, err = p.write(-1, tag, key, op.Set, -1, nil, now)
		}
	case ndbclient.OpUpdate, ndbclient.OpWrite:
		s := p.find(tag, key, now)
		if s < 0 && op.Kind == ndbclient.OpUpdate {
			err = ndbclient.ErrNotFound
		} else {
			_, err = p.write(s, tag, key, op.Set, -1, nil, now)
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
		s := p.find(tag, key, now)
		switch {
		case s < 0:
			err = ndbclient.ErrNotFound
		case !p.condHolds(s, op):
			err = ndbclient.ErrConditionFailed
		default:
			_, err = p.write(s, tag, key, op.Set, -1, nil, now)
		}
	case ndbclient.OpAdd:
		err = p.add(op, key, tag, now)
	case ndbclient.OpAppend:
		err = p.appendOp(op, key, tag, now)
	}
	op.Err = err
	if err == nil {
		op.Affected = 1
	}
}

func (p *partition) read(op *ndbclient.Op, key []byte, tag uint32, now uint32) error {
	s := p.find(tag, key, now)
	if s < 0 {
		return ndbclient.ErrNotFound
	}
	if p.t.eviction {
		p.lruTouch(s, now)
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
	p.build = p.t.buildRow(p.build, key, old, set, xcol, xval)
	s, err := p.put(s, tag, p.build, now, false)
	if cap(p.build) > maxChunk {
		p.build = nil // do not pin a huge row's scratch
	}
	return s, err
}

func (p *partition) condHolds(s int32, op *ndbclient.Op) bool {
	var v ndbclient.Value
	p.t.decode(p.row(s), op.CondColumn, &v)
	return p.t.cols[op.CondColumn].equal(&v, &op.CondValue)
}

func (p *partition) add(op *ndbclient.Op, key []byte, tag uint32, now uint32) error {
	t := p.t
	s := p.find(tag, key, now)
	var err error
	if s < 0 {
		if !op.Create {
			return ndbclient.ErrNotFound
		}
		v := ndbclient.Uint(op.Initial)
		s, err = p.write(-1, tag, key, op.Set, op.AddColumn, &v, now)
	} else {
		v := t.colValue(p.row(s), op.AddColumn)
		if v.IsNull() {
			return ndbclient.ErrNotNumeric
		}
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
	if err == nil && len(op.Read) > 0 {
		t.project(op, p.row(s))
	}
	return err
}

func (p *partition) appendOp(op *ndbclient.Op, key []byte, tag uint32, now uint32) error {
	t := p.t
	s := p.find(tag, key, now)
	if s < 0 {
		return ndbclient.ErrNotFound
	}
	if op.HasCond && !p.condHolds(s, op) {
		return ndbclient.ErrConditionFailed
	}
	ci := &t.cols[op.AppendColumn]
	old := t.colValue(p.row(s), op.AppendColumn).B // NULL appends as empty
	if op.Prepend {
		p.cat = append(append(p.cat[:0], op.Data...), old...)
	} else {
		p.cat = append(append(p.cat[:0], old...), op.Data...)
	}
	if n := ci.byteLen(p.cat); n > ci.byteLimit() {
		return ndbclient.Errorf(ndbclient.CodeTooLarge, "column %q (%s): value would be %d bytes, longer than the column's %d", ci.Name, ci.Type, n, ci.byteLimit())
	}
	v := ndbclient.Bytes(p.cat)
	_, err := p.write(s, tag, key, op.Set, op.AppendColumn, &v, now)
	if cap(p.cat) > maxChunk {
		p.cat = nil
	}
	return err
}
