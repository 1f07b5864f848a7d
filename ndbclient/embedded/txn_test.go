package embedded

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// txn links ops into one transaction.
func txn(ops ...*ndbclient.Op) []*ndbclient.Op {
	for _, op := range ops[:len(ops)-1] {
		op.TxnWithNext = true
	}
	return ops
}

// snapshot reads every key's full row ("<missing>" when absent).
func snapshot(t *testing.T, e *Engine, tbl *ndbclient.Table, keys ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		rd := readOp(tbl, k, allCols...)
		run(t, e, rd)
		if codeOf(rd) == ndbclient.CodeNotFound {
			out[k] = "<missing>"
			continue
		}
		require.NoError(t, rd.Err)
		out[k] = fmt.Sprint(rd.Row)
	}
	return out
}

func TestTransactionCommits(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8})
	tbl := mustCreate(t, e, memcacheTable("t", 64))
	put(t, e, tbl, "b", item{value: "b0"})
	put(t, e, tbl, "c", item{value: "c0"})
	ops := txn(
		writeOp(ndbclient.OpInsert, tbl, "a", set(colValue, ndbclient.String("a1"))),
		writeOp(ndbclient.OpUpdate, tbl, "b", set(colValue, ndbclient.String("b1"))),
		writeOp(ndbclient.OpDelete, tbl, "c"),
		readOp(tbl, "a", colValue),
	)
	run(t, e, ops...)
	for _, op := range ops {
		require.NoError(t, op.Err)
	}
	assert.Equal(t, "a1", ops[3].Row[0].Str(), "a transaction sees its own writes")
	v, _ := getValue(t, e, tbl, "b")
	assert.Equal(t, "b1", v)
	_, ok := getValue(t, e, tbl, "c")
	assert.False(t, ok)
}

func TestTransactionRollsBack(t *testing.T) {
	keys := []string{"upd", "new", "del", "wr", "add", "app", "dup", "twice"}
	seed := func(t *testing.T, e *Engine, tbl *ndbclient.Table) {
		put(t, e, tbl, "upd", item{value: "u0", flags: 1})
		put(t, e, tbl, "del", item{value: "d0"})
		put(t, e, tbl, "wr", item{value: "w0", cas: 9})
		put(t, e, tbl, "add", item{value: "5", math: u64(5)})
		put(t, e, tbl, "app", item{value: "short"})
		put(t, e, tbl, "dup", item{value: "dup"})
	}
	mutations := func(tbl *ndbclient.Table) []*ndbclient.Op {
		return []*ndbclient.Op{
			writeOp(ndbclient.OpUpdate, tbl, "upd", set(colValue, ndbclient.String(strings.Repeat("grown", 10)))),
			writeOp(ndbclient.OpInsert, tbl, "new", set(colValue, ndbclient.String("n1"))),
			writeOp(ndbclient.OpDelete, tbl, "del"),
			writeOp(ndbclient.OpWrite, tbl, "wr", set(colCas, ndbclient.Uint(10))),
			{Kind: ndbclient.OpAdd, Table: tbl, Key: key("add"), AddColumn: colMath, Delta: 10},
			{Kind: ndbclient.OpAppend, Table: tbl, Key: key("app"), AppendColumn: colValue, Data: []byte(" and longer")},
			writeOp(ndbclient.OpInsert, tbl, "twice", set(colValue, ndbclient.String("t1"))),
			writeOp(ndbclient.OpUpdate, tbl, "twice", set(colValue, ndbclient.String("t2"))),
			writeOp(ndbclient.OpDelete, tbl, "upd"),
		}
	}
	cases := []struct {
		name    string
		failing func(tbl *ndbclient.Table) *ndbclient.Op
		at      int // position of the failing op in the run
		code    ndbclient.Code
	}{
		{"duplicate at the end", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpInsert, tbl, "dup")
		}, 9, ndbclient.CodeDuplicate},
		{"not found in the middle", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tbl, "nobody", set(colFlags, ndbclient.Uint(1)))
		}, 4, ndbclient.CodeNotFound},
		{"condition failed first", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: tbl, Key: key("dup"), CondColumn: colCas, CondValue: ndbclient.Uint(77)}
		}, 0, ndbclient.CodeConditionFailed},
		{"invalid op: nothing runs", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tbl, "dup", set(colFlags, ndbclient.Int(-1)))
		}, 5, ndbclient.CodeInvalidArgument},
		{"delete_all cannot join", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
		}, 9, ndbclient.CodeInvalidArgument},
		{"too large", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key("dup"), AppendColumn: colValue, Data: make([]byte, 64)}
		}, 9, ndbclient.CodeTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, Config{Partitions: 8})
			tbl := mustCreate(t, e, memcacheTable("t", 64))
			seed(t, e, tbl)
			before := snapshot(t, e, tbl, keys...)
			st := e.Stats()
			ops := mutations(tbl)
			fail := c.failing(tbl)
			ops = append(ops[:c.at], append([]*ndbclient.Op{fail}, ops[c.at:]...)...)
			// A plain op after the transaction is not part of it.
			after := writeOp(ndbclient.OpWrite, tbl, "independent", set(colValue, ndbclient.String("i")))
			run(t, e, append(txn(ops...), after)...)

			require.Equal(t, c.code, codeOf(fail), "%v", fail.Err)
			for i, op := range ops {
				if op == fail {
					continue
				}
				require.Equal(t, c.code, codeOf(op), "op %d", i)
				assert.Contains(t, op.Err.Error(), "transaction aborted")
				assert.Zero(t, op.Affected)
			}
			require.NoError(t, after.Err)
			assert.Equal(t, before, snapshot(t, e, tbl, keys...), "every row is as before")
			st2 := e.Stats()
			assert.Equal(t, st.Items+1, st2.Items)
			put(t, e, tbl, "independent", item{})
			run(t, e, writeOp(ndbclient.OpDelete, tbl, "independent"))
			assert.Equal(t, st.Bytes, e.Stats().Bytes, "memory accounting is restored too")
		})
	}
}

// With eviction off, a transaction that runs out of memory part way leaves
// every row as it was.
func TestTransactionOutOfMemoryRollsBack(t *testing.T) {
	e := newEngine(t, Config{Partitions: 4, MemoryLimit: 4000})
	tbl := mustCreateKept(t, e, "db", 4000)
	put(t, e, tbl, "a", item{value: "small"})
	put(t, e, tbl, "b", item{value: "small"})
	before := snapshot(t, e, tbl, "a", "b", "c")
	ops := txn(
		writeOp(ndbclient.OpUpdate, tbl, "a", set(colValue, ndbclient.String("changed"))),
		writeOp(ndbclient.OpDelete, tbl, "b"),
		writeOp(ndbclient.OpInsert, tbl, "c", set(colValue, ndbclient.Bytes(make([]byte, 3900)))),
	)
	run(t, e, ops...)
	require.Equal(t, ndbclient.CodeOutOfMemory, codeOf(ops[2]))
	assert.Equal(t, ndbclient.CodeOutOfMemory, codeOf(ops[0]))
	assert.Equal(t, before, snapshot(t, e, tbl, "a", "b", "c"))
}

// Transactions that touch the same partitions in opposite orders, from many
// goroutines, neither deadlock nor lose money.
func TestTransactionsConcurrentTransfers(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8})
	tbl := mustCreate(t, e, memcacheTable("bank", 64))
	const accounts, start = 16, 1000
	for i := range accounts {
		put(t, e, tbl, fmt.Sprint("acct", i), item{math: u64(start)})
	}
	const workers, transfers = 8, 300
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for r := range transfers {
				from, to := (w*7+r)%accounts, (w*3+r*5+1)%accounts
				if from == to {
					continue
				}
				amount := uint64(r%50 + 1)
				// Debit only if the balance covers it (cas on the balance), then credit.
				rd := readOp(tbl, fmt.Sprint("acct", from), colMath)
				run(t, e, rd)
				bal := rd.Row[0].Uint()
				if bal < amount {
					continue
				}
				debit := &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: tbl, Key: key(fmt.Sprint("acct", from)),
					CondColumn: colMath, CondValue: ndbclient.Uint(bal), Set: []ndbclient.ColumnValue{set(colMath, ndbclient.Uint(bal-amount))}}
				credit := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(fmt.Sprint("acct", to)), AddColumn: colMath, Delta: amount}
				run(t, e, txn(debit, credit)...)
				if debit.Err != nil {
					assert.Equal(t, ndbclient.CodeConditionFailed, codeOf(debit))
					assert.Equal(t, ndbclient.CodeConditionFailed, codeOf(credit))
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	var total uint64
	for i := range accounts {
		rd := readOp(tbl, fmt.Sprint("acct", i), colMath)
		run(t, e, rd)
		require.NoError(t, rd.Err)
		total += rd.Row[0].Uint()
	}
	assert.Equal(t, uint64(accounts*start), total)
}
