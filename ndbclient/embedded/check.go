package embedded

import (
	"bytes"
	"math"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Everything an op carries is checked before any lock is taken, so the code
// under the partition lock can trust kinds, ranges and lengths. The checks do
// not allocate unless they fail.

var kindNames = [...]string{"NULL", "signed integer", "unsigned integer", "float", "bytes"}

func kindName(k ndbclient.Kind) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown kind"
}

func (ci *colInfo) invalid(format string, args ...any) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %q (%s): "+format, append([]any{ci.Name, ci.Type}, args...)...)
}

// kindOf is the Value kind a column type travels as.
func kindOf(ci *colInfo) ndbclient.Kind {
	switch {
	case ci.Type.IsSigned():
		return ndbclient.KindInt
	case ci.Type.IsInteger():
		return ndbclient.KindUint
	case ci.Type == ndbclient.TypeFloat || ci.Type == ndbclient.TypeDouble:
		return ndbclient.KindFloat
	}
	return ndbclient.KindBytes
}

// check reports whether v may be stored in the column.
func (ci *colInfo) check(v *ndbclient.Value) error {
	if v.Kind == ndbclient.KindNull {
		if !ci.Nullable {
			return ci.invalid("NULL in a NOT NULL column")
		}
		return nil
	}
	if v.Kind != ci.kind {
		return ci.invalid("takes %s values, got %s", kindName(ci.kind), kindName(v.Kind))
	}
	switch v.Kind {
	case ndbclient.KindInt:
		if n := v.Int(); n < ci.min || n > ci.max {
			return ci.invalid("%d is out of range %d..%d", n, ci.min, ci.max)
		}
	case ndbclient.KindUint:
		n := v.Uint()
		if n > ci.umax {
			return ci.invalid("%d is out of range 0..%d", n, ci.umax)
		}
		if ci.Type == ndbclient.TypeYear && n != 0 && n < 1901 {
			return ci.invalid("%d is not a year in 1901..2155 (or 0)", n)
		}
	case ndbclient.KindFloat:
		if f := v.Float(); ci.Type == ndbclient.TypeFloat && !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
			return ci.invalid("%g is out of FLOAT range", f)
		}
	case ndbclient.KindBytes:
		if n, limit := ci.byteLen(v.B), ci.byteLimit(); n > limit {
			return ndbclient.Errorf(ndbclient.CodeTooLarge, "column %q (%s): value of %d bytes is longer than the column's %d", ci.Name, ci.Type, n, limit)
		}
	}
	return nil
}

// byteLen is the stored length of b: CHAR ignores trailing spaces (they are
// padding), so "ab  " fits a CHAR(2).
func (ci *colInfo) byteLen(b []byte) int {
	if ci.Type == ndbclient.TypeChar {
		return len(bytes.TrimRight(b, " "))
	}
	return len(b)
}

func (ci *colInfo) byteLimit() int {
	if ci.width > 0 {
		return ci.width // BINARY
	}
	return ci.maxLen
}

// equal compares a stored value (as colValue returns it) with v the way MySQL
// compares padded types: CHAR ignores trailing spaces, BINARY trailing zeros.
func (ci *colInfo) equal(stored, v *ndbclient.Value) bool {
	if stored.IsNull() || v.IsNull() {
		return stored.IsNull() && v.IsNull()
	}
	switch ci.Type {
	case ndbclient.TypeChar:
		return bytes.Equal(bytes.TrimRight(stored.B, " "), bytes.TrimRight(v.B, " "))
	case ndbclient.TypeBinary:
		return bytes.Equal(bytes.TrimRight(stored.B, "\x00"), bytes.TrimRight(v.B, "\x00"))
	case ndbclient.TypeFloat:
		return float32(stored.Float()) == float32(v.Float())
	case ndbclient.TypeDouble:
		return stored.Float() == v.Float()
	}
	return stored.Equal(*v)
}

// checkOp validates op against t. inTxn says op is part of a multi-op
// transaction.
func (t *table) checkOp(op *ndbclient.Op, inTxn bool) error {
	name := t.schema.Name
	switch op.Kind {
	case ndbclient.OpDeleteAll:
		if inTxn {
			return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s: delete_all cannot be part of a transaction", name)
		}
		return nil
	case ndbclient.OpRead, ndbclient.OpInsert, ndbclient.OpUpdate, ndbclient.OpWrite, ndbclient.OpDelete,
		ndbclient.OpCondUpdate, ndbclient.OpAdd, ndbclient.OpAppend:
	default:
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s: unknown operation kind %d", name, op.Kind)
	}
	if err := t.checkKey(op.Key); err != nil {
		return err
	}
	switch op.Kind {
	case ndbclient.OpRead:
		return t.checkRead(op.Read)
	case ndbclient.OpDelete:
		if op.HasCond {
			return t.checkCond(op)
		}
		return nil
	}
	if err := t.checkSet(op); err != nil {
		return err
	}
	switch op.Kind {
	case ndbclient.OpCondUpdate:
		return t.checkCond(op)
	case ndbclient.OpAdd:
		ci, err := t.column(op.AddColumn, "add")
		if err != nil {
			return err
		}
		switch ci.Type {
		case ndbclient.TypeUint8, ndbclient.TypeUint16, ndbclient.TypeUint24, ndbclient.TypeUint32,
			ndbclient.TypeUint64, ndbclient.TypeBit:
		default:
			return ci.invalid("atomic add needs an unsigned integer column")
		}
		if ci.keyPos >= 0 {
			return ci.invalid("atomic add cannot change a primary key column")
		}
		if op.Create && op.Initial > ci.umax {
			return ci.invalid("initial value %d is out of range 0..%d", op.Initial, ci.umax)
		}
		if op.HasCond {
			if err := t.checkCond(op); err != nil {
				return err
			}
		}
		return t.checkRead(op.Read)
	case ndbclient.OpAppend:
		ci, err := t.column(op.AppendColumn, "append")
		if err != nil {
			return err
		}
		if !ci.Type.IsBytes() || ci.keyPos >= 0 {
			return ci.invalid("append needs a non-key bytes column")
		}
		if op.HasCond {
			if err := t.checkCond(op); err != nil {
				return err
			}
		}
		return t.checkRead(op.Read)
	}
	return nil
}

func (t *table) checkKey(key []ndbclient.Value) error {
	if len(key) != len(t.pk) {
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s: key has %d values; the primary key has %d columns", t.schema.Name, len(key), len(t.pk))
	}
	for i, c := range t.pk {
		if err := t.cols[c].check(&key[i]); err != nil {
			return err
		}
	}
	return nil
}

func (t *table) column(c int, what string) (*colInfo, error) {
	if c < 0 || c >= len(t.cols) {
		return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s: %s column index %d out of range", t.schema.Name, what, c)
	}
	return &t.cols[c], nil
}

func (t *table) checkRead(read []int) error {
	for _, c := range read {
		if _, err := t.column(c, "read"); err != nil {
			return err
		}
	}
	return nil
}

func (t *table) checkSet(op *ndbclient.Op) error {
	for i := range op.Set {
		cv := &op.Set[i]
		ci, err := t.column(cv.Column, "set")
		if err != nil {
			return err
		}
		if err := ci.check(&cv.Value); err != nil {
			return err
		}
		// Setting a key column to the key's own value is harmless (a copied row);
		// anything else would move the row.
		if ci.keyPos >= 0 && !ci.equal(&op.Key[ci.keyPos], &cv.Value) {
			return ci.invalid("cannot change a primary key column")
		}
	}
	return nil
}

func (t *table) checkCond(op *ndbclient.Op) error {
	ci, err := t.column(op.CondColumn, "condition")
	if err != nil {
		return err
	}
	if op.CondValue.IsNull() {
		return nil // NULL matches NULL, even in a NOT NULL column (never)
	}
	return ci.check(&op.CondValue)
}
