package embedded

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

var allCols = []int{colValue, colFlags, colCas, colExpire, colMath}

// fullRow is the allCols projection of an item.
func fullRow(it item) []ndbclient.Value {
	m := ndbclient.Null()
	if it.math != nil {
		m = ndbclient.Uint(*it.math)
	}
	return []ndbclient.Value{ndbclient.String(it.value), ndbclient.Uint(it.flags), ndbclient.Uint(it.cas), ndbclient.Uint(it.expire), m}
}

func TestOps(t *testing.T) {
	base := item{value: "hello", flags: 7, cas: 100, math: nil}
	num := item{value: "41", flags: 1, cas: 5, math: u64(41)}
	U, S := ndbclient.Uint, ndbclient.String
	type tc struct {
		name  string
		seed  *item // row "k" before the op (nil: absent)
		op    func(tbl *ndbclient.Table) *ndbclient.Op
		code  ndbclient.Code
		row   []ndbclient.Value // expected op.Row
		after *item             // row "k" after (nil: absent)
		aff   uint64
	}
	cases := []tc{
		{name: "read hit", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op { return readOp(tb, "k", colValue, colFlags) },
			row: []ndbclient.Value{S("hello"), U(7)}, after: &base},
		{name: "read key column", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op { return readOp(tb, "k", colKey, colMath) },
			row: []ndbclient.Value{S("k"), ndbclient.Null()}, after: &base},
		{name: "read existence only", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op { return readOp(tb, "k") }, after: &base},
		{name: "read miss", op: func(tb *ndbclient.Table) *ndbclient.Op { return readOp(tb, "k", colValue) }, code: ndbclient.CodeNotFound},
		{name: "insert", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpInsert, tb, "k", base.set()...)
		}, after: &base, aff: 1},
		{name: "insert defaults: zero values, NULL for nullable", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpInsert, tb, "k", set(colFlags, U(3)))
		}, after: &item{flags: 3}, aff: 1},
		{name: "insert duplicate", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpInsert, tb, "k", set(colValue, S("other")))
		}, code: ndbclient.CodeDuplicate, after: &base},
		{name: "update", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colFlags, U(9)), set(colValue, S("a longer value")))
		}, after: &item{value: "a longer value", flags: 9, cas: 100}, aff: 1},
		{name: "update sets NULL", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colMath, ndbclient.Null()))
		}, after: &item{value: "41", flags: 1, cas: 5}, aff: 1},
		{name: "update last assignment wins", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colValue, S("x")), set(colValue, S("y")))
		}, after: &item{value: "y", flags: 7, cas: 100}, aff: 1},
		{name: "update missing", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colFlags, U(9)))
		}, code: ndbclient.CodeNotFound},
		{name: "write inserts", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tb, "k", num.set()...)
		}, after: &num, aff: 1},
		{name: "write overwrites set columns only", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tb, "k", set(colValue, S("v")))
		}, after: &item{value: "v", flags: 1, cas: 5, math: u64(41)}, aff: 1},
		{name: "delete", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op { return writeOp(ndbclient.OpDelete, tb, "k") }, aff: 1},
		{name: "delete missing", op: func(tb *ndbclient.Table) *ndbclient.Op { return writeOp(ndbclient.OpDelete, tb, "k") }, code: ndbclient.CodeNotFound},
		{name: "cond update matches", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colValue, S("new")), set(colCas, U(101)))
			o.CondColumn, o.CondValue = colCas, U(100)
			return o
		}, after: &item{value: "new", flags: 7, cas: 101}, aff: 1},
		{name: "cond update mismatch", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colValue, S("new")))
			o.CondColumn, o.CondValue = colCas, U(99)
			return o
		}, code: ndbclient.CodeConditionFailed, after: &base},
		{name: "cond update NULL matches NULL", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colFlags, U(8)))
			o.CondColumn, o.CondValue = colMath, ndbclient.Null()
			return o
		}, after: &item{value: "hello", flags: 8, cas: 100}, aff: 1},
		{name: "cond update NULL vs value", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colFlags, U(8)))
			o.CondColumn, o.CondValue = colMath, ndbclient.Null()
			return o
		}, code: ndbclient.CodeConditionFailed, after: &num},
		{name: "cond update missing", op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colFlags, U(8)))
			o.CondColumn, o.CondValue = colCas, U(1)
			return o
		}, code: ndbclient.CodeNotFound},
		{name: "add incr, set applied, row after", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 1,
				Set: []ndbclient.ColumnValue{set(colCas, U(6))}, Read: []int{colMath, colCas}}
		}, row: []ndbclient.Value{U(42), U(6)}, after: &item{value: "41", flags: 1, cas: 6, math: u64(42)}, aff: 1},
		{name: "add incr wraps at 2^64", seed: &item{math: u64(math.MaxUint64 - 1)}, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 3, Read: []int{colMath}}
		}, row: []ndbclient.Value{U(1)}, after: &item{math: u64(1)}, aff: 1},
		{name: "add decr", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 40, Subtract: true, Read: []int{colMath}}
		}, row: []ndbclient.Value{U(1)}, after: &item{value: "41", flags: 1, cas: 5, math: u64(1)}, aff: 1},
		{name: "add decr clamps at 0", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 1000, Subtract: true, Read: []int{colMath}}
		}, row: []ndbclient.Value{U(0)}, after: &item{value: "41", flags: 1, cas: 5, math: u64(0)}, aff: 1},
		{name: "add on NULL is not numeric", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 1}
		}, code: ndbclient.CodeNotNumeric, after: &base},
		{name: "add missing", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 1}
		}, code: ndbclient.CodeNotFound},
		{name: "add creates", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colMath, Delta: 1, Create: true, Initial: 10,
				Set: []ndbclient.ColumnValue{set(colValue, S("10")), set(colMath, U(999))}, Read: []int{colMath}}
		}, row: []ndbclient.Value{U(10)}, after: &item{value: "10", math: u64(10)}, aff: 1},
		{name: "append", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte(" world"),
				Set: []ndbclient.ColumnValue{set(colCas, U(101))}}
		}, after: &item{value: "hello world", flags: 7, cas: 101}, aff: 1},
		{name: "prepend", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte(">> "), Prepend: true}
		}, after: &item{value: ">> hello", flags: 7, cas: 100}, aff: 1},
		{name: "append missing", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte("x")}
		}, code: ndbclient.CodeNotFound},
		{name: "append too large", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte("0123456789012")}
		}, code: ndbclient.CodeTooLarge, after: &base},
		{name: "append cond NULL holds", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte("!"),
				HasCond: true, CondColumn: colMath, CondValue: ndbclient.Null()}
		}, after: &item{value: "hello!", flags: 7, cas: 100}, aff: 1},
		{name: "append cond fails", seed: &num, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colValue, Data: []byte("!"),
				HasCond: true, CondColumn: colMath, CondValue: ndbclient.Null()}
		}, code: ndbclient.CodeConditionFailed, after: &num},
		{name: "set key column to its own value", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tb, "k", set(colKey, S("k")), set(colFlags, U(2)))
		}, after: &item{flags: 2}, aff: 1},

		// Invalid operations fail before touching anything.
		{name: "set changes the key", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tb, "k", set(colKey, S("other")))
		}, code: ndbclient.CodeInvalidArgument, after: &base},
		{name: "key with wrong arity", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tb, Key: []ndbclient.Value{S("k"), S("x")}}
		}, code: ndbclient.CodeInvalidArgument},
		{name: "NULL key", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tb, Key: []ndbclient.Value{ndbclient.Null()}}
		}, code: ndbclient.CodeInvalidArgument},
		{name: "key too long", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tb, Key: []ndbclient.Value{ndbclient.Bytes(make([]byte, 251))}}
		}, code: ndbclient.CodeTooLarge},
		{name: "unknown kind", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: 99, Table: tb, Key: key("k")}
		}, code: ndbclient.CodeInvalidArgument},
		{name: "no table", op: func(*ndbclient.Table) *ndbclient.Op { return readOp(nil, "k") }, code: ndbclient.CodeInvalidArgument},
		{name: "unknown table", op: func(*ndbclient.Table) *ndbclient.Op { return readOp(memcacheTable("nope", 8), "k") }, code: ndbclient.CodeSchemaError},
		{name: "read column out of range", op: func(tb *ndbclient.Table) *ndbclient.Op { return readOp(tb, "k", 6) }, code: ndbclient.CodeInvalidArgument},
		{name: "set column out of range", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tb, "k", set(-1, U(1)))
		}, code: ndbclient.CodeInvalidArgument},
		{name: "set wrong kind", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colFlags, ndbclient.Int(1)))
		}, code: ndbclient.CodeInvalidArgument, after: &base},
		{name: "set NULL in NOT NULL column", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colFlags, ndbclient.Null()))
		}, code: ndbclient.CodeInvalidArgument, after: &base},
		{name: "set value too long", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tb, "k", set(colValue, S("0123456789abcdefg")))
		}, code: ndbclient.CodeTooLarge, after: &base},
		{name: "add on bytes column", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colValue, Delta: 1}
		}, code: ndbclient.CodeInvalidArgument, after: &base},
		{name: "add initial out of range", op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tb, Key: key("k"), AddColumn: colFlags, Create: true, Initial: 1 << 32}
		}, code: ndbclient.CodeInvalidArgument},
		{name: "append on integer column", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tb, Key: key("k"), AppendColumn: colFlags, Data: []byte("1")}
		}, code: ndbclient.CodeInvalidArgument, after: &base},
		{name: "cond value of wrong kind", seed: &base, op: func(tb *ndbclient.Table) *ndbclient.Op {
			o := writeOp(ndbclient.OpCondUpdate, tb, "k", set(colFlags, U(1)))
			o.CondColumn, o.CondValue = colCas, S("100")
			return o
		}, code: ndbclient.CodeInvalidArgument, after: &base},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, Config{Partitions: 4})
			tbl := mustCreate(t, e, memcacheTable("ops", 16))
			if c.seed != nil {
				put(t, e, tbl, "k", *c.seed)
			}
			op := c.op(tbl)
			run(t, e, op)
			require.Equal(t, c.code, codeOf(op), "err: %v", op.Err)
			if c.code != ndbclient.CodeOK {
				var ne *ndbclient.Error
				require.ErrorAs(t, op.Err, &ne)
			}
			if c.row != nil {
				assertRow(t, c.row, op.Row)
			} else {
				assert.Empty(t, op.Row)
			}
			if op.Kind != ndbclient.OpRead {
				assert.Equal(t, c.aff, op.Affected)
			}
			if c.code == ndbclient.CodeInvalidArgument || c.code == ndbclient.CodeSchemaError || c.code == ndbclient.CodeTooLarge {
				assert.NotEmpty(t, op.Err.Error())
			}
			if op.Table == nil || op.Table != tbl {
				return
			}
			rd := readOp(tbl, "k", allCols...)
			run(t, e, rd)
			if c.after == nil {
				assert.Equal(t, ndbclient.CodeNotFound, codeOf(rd))
				assert.Equal(t, uint64(0), e.Stats().Items)
				return
			}
			require.NoError(t, rd.Err)
			assertRow(t, fullRow(*c.after), rd.Row)
			assert.Equal(t, uint64(1), e.Stats().Items)
		})
	}
}

func TestErrorMessagesNameTheColumn(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("msg", 4))
	for _, op := range []*ndbclient.Op{
		writeOp(ndbclient.OpWrite, tbl, "k", set(colValue, ndbclient.String("too long"))),
		writeOp(ndbclient.OpWrite, tbl, "k", set(colFlags, ndbclient.Uint(1<<40))),
		writeOp(ndbclient.OpWrite, tbl, "k", set(colCas, ndbclient.Null())),
	} {
		run(t, e, op)
		require.Error(t, op.Err)
		name := tbl.Columns[op.Set[0].Column].Name
		assert.Contains(t, op.Err.Error(), name)
	}
	_, err := e.Table("test", "missing")
	require.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.Contains(t, err.Error(), "test.missing")
}

func TestDeleteAll(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8})
	tbl := mustCreate(t, e, memcacheTable("flush", 64))
	other := mustCreate(t, e, memcacheTable("other", 64))
	for i := range 100 {
		put(t, e, tbl, string(rune('a'+i%26))+string(rune('0'+i/26)), item{value: "v"})
	}
	put(t, e, other, "keep", item{value: "kept"})
	before := e.Stats()
	require.Equal(t, uint64(101), before.Items)

	op := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
	run(t, e, op)
	require.NoError(t, op.Err)
	assert.Equal(t, uint64(100), op.Affected)
	st := e.Stats()
	assert.Equal(t, uint64(1), st.Items)
	assert.Less(t, st.Bytes, before.Bytes/50, "flush releases the rows' bytes")
	_, ok := getValue(t, e, tbl, "a0")
	assert.False(t, ok)
	v, ok := getValue(t, e, other, "keep")
	assert.True(t, ok)
	assert.Equal(t, "kept", v)

	// The table works again after a flush, and an empty flush affects nothing.
	put(t, e, tbl, "again", item{value: "x"})
	v, _ = getValue(t, e, tbl, "again")
	assert.Equal(t, "x", v)
	ops := []*ndbclient.Op{
		writeOp(ndbclient.OpWrite, tbl, "before", set(colValue, ndbclient.String("b"))),
		{Kind: ndbclient.OpDeleteAll, Table: tbl},
		writeOp(ndbclient.OpWrite, tbl, "after", set(colValue, ndbclient.String("a"))),
	}
	run(t, e, ops...)
	assert.Equal(t, uint64(2), ops[1].Affected, "batch order: the flush sees the write before it")
	_, ok = getValue(t, e, tbl, "before")
	assert.False(t, ok)
	_, ok = getValue(t, e, tbl, "after")
	assert.True(t, ok)
}

// A batch with many ops over many partitions gives each op its own result,
// and ops on the same key keep batch order.
func TestBatchOrderAndIndependentResults(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8})
	tbl := mustCreate(t, e, memcacheTable("batch", 64))
	var ops []*ndbclient.Op
	for i := range 50 {
		k := string(rune('A' + i))
		ops = append(ops,
			writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.String("1"))),
			writeOp(ndbclient.OpUpdate, tbl, k, set(colValue, ndbclient.String("2"))),
			readOp(tbl, k, colValue),
			writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.String("3"))),
			readOp(tbl, "missing"+k, colValue),
		)
	}
	run(t, e, ops...)
	for i := 0; i < len(ops); i += 5 {
		require.NoError(t, ops[i].Err)
		require.NoError(t, ops[i+1].Err)
		require.NoError(t, ops[i+2].Err)
		assert.Equal(t, "2", ops[i+2].Row[0].Str())
		assert.Equal(t, ndbclient.CodeDuplicate, codeOf(ops[i+3]))
		assert.Equal(t, ndbclient.CodeNotFound, codeOf(ops[i+4]))
	}
}

// Row values stay valid after the lock is released and the row changes.
func TestReadResultsAreCopies(t *testing.T) {
	e := newEngine(t, Config{Partitions: 1})
	tbl := mustCreate(t, e, memcacheTable("copy", 64))
	put(t, e, tbl, "k", item{value: "first"})
	rd := readOp(tbl, "k", colValue, colKey)
	run(t, e, rd)
	put(t, e, tbl, "k", item{value: "XXXXX"})
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "k"))
	put(t, e, tbl, "j", item{value: "YYYYY"})
	assert.Equal(t, "first", rd.Row[0].Str())
	assert.Equal(t, "k", rd.Row[1].Str())
}

func TestReadsLeaveAffectedAlone(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("aff", 64))
	put(t, e, tbl, "k", item{value: "v"})
	rd := readOp(tbl, "k", colValue)
	rd.Affected = 42
	miss := readOp(tbl, "nope", colValue)
	miss.Affected = 43
	run(t, e, rd, miss)
	assert.Equal(t, uint64(42), rd.Affected)
	assert.Equal(t, uint64(43), miss.Affected)
}

// A projection that reads a column twice outgrows the row-sized buffer; the
// values must still point at the final buffer.
func TestReadSameColumnTwice(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("twice", 64))
	v := "0123456789012345678901234567890123456789"
	put(t, e, tbl, "k", item{value: v, flags: 3})
	rd := readOp(tbl, "k", colValue, colFlags, colValue, colKey, colValue)
	rd.RowBuf = make([]byte, 0, 1) // force the grow path
	run(t, e, rd)
	require.NoError(t, rd.Err)
	assertRow(t, []ndbclient.Value{ndbclient.String(v), ndbclient.Uint(3), ndbclient.String(v), ndbclient.String("k"), ndbclient.String(v)}, rd.Row)
	// Everything lives in RowBuf, back to back.
	assert.Equal(t, v+v+"k"+v, string(rd.RowBuf))
	run(t, e, writeOp(ndbclient.OpDelete, tbl, "k"))
	assert.Equal(t, v, rd.Row[4].Str())
	for i := range rd.RowBuf {
		rd.RowBuf[i] = 'X'
	}
	for _, i := range []int{0, 2, 3, 4} {
		assert.Equal(t, strings.Repeat("X", len(rd.Row[i].B)), rd.Row[i].Str(), "value %d points into RowBuf", i)
	}
}
