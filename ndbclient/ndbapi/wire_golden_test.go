package ndbapi

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/flight.golden and flight.golden.txt")

// The golden flight: a request that uses every part of the format, encoded
// by encodeFlight (testdata/flight.golden), and what each of its fields must
// read as (testdata/flight.golden.txt), written here from the ops themselves
// rather than from the buffer. `make shim-wire-test` builds
// testdata/shim_wire_test.cpp, the shim's own parser (shim_wire.h) with g++
// and no NDB, and checks that it reads the buffer as the text says, field by
// field. A change to either side's format fails one of the two.
const (
	goldenBin  = "testdata/flight.golden"
	goldenText = "testdata/flight.golden.txt"
	goldenNow  = 1700000000
)

// goldenOp is an op of the golden flight and the flags it must carry.
type goldenOp struct {
	op    *ndbclient.Op
	flags int
}

func goldenOps(t *testing.T) (*tableInfo, []goldenOp) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 7, demoDescribe())
	require.NoError(t, err)
	ti.schema.ExpireColumn = 4 // expire_time: every op but a write and delete_all carries the flight's time
	key := func(s string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(s)} }
	read := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: key("k1"), Lock: ndbclient.LockShared,
		Read: []int{1, 2, 5}, TxnWithNext: true}
	read.SetKeyPartition(5)
	insert := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: ti.schema, Key: key("k2"), Set: []ndbclient.ColumnValue{
		{Column: 1, Value: ndbclient.Bytes([]byte("value"))}, {Column: 2, Value: ndbclient.Null()}, {Column: 3, Value: ndbclient.Uint(9)}}}
	cas := &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: ti.schema, Key: key("k3"), Lock: ndbclient.LockExclusive,
		Set: []ndbclient.ColumnValue{{Column: 3, Value: ndbclient.Uint(10)}}, CondColumn: 3, CondValue: ndbclient.Uint(9)}
	add := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: ti.schema, Key: key("counter"), Read: []int{5},
		AddColumn: 5, Delta: 3, Subtract: true, Initial: 7, HasCond: true, CondColumn: 3, CondValue: ndbclient.Null()}
	app := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: ti.schema, Key: key("k4"), AppendColumn: 1,
		Data: []byte("tail"), Prepend: true}
	update := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: ti.schema, Key: key("k5"),
		Set: []ndbclient.ColumnValue{{Column: 4, Value: ndbclient.Uint(goldenNow + 60)}}}
	write := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: ti.schema, Key: key("k6"),
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.Bytes(nil)}}}
	del := &ndbclient.Op{Kind: ndbclient.OpDelete, Table: ti.schema, Key: key("k7"), Read: []int{1},
		HasCond: true, CondColumn: 3, CondValue: ndbclient.Uint(1)}
	flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: ti.schema}
	return ti, []goldenOp{
		{read, flagTxnWithNext | flagExpiry | flagPartition},
		{insert, flagExpiry},
		{cas, flagExpiry},
		{add, flagHasCond | flagSubtract | flagExpiry},
		{app, flagPrepend | flagExpiry},
		{update, flagExpiry},
		{write, 0},
		{del, flagHasCond | flagExpiry},
		{flush, 0},
	}
}

// goldenDescribe writes what the shim must read of ops, field by field, in
// the format testdata/shim_wire_test.cpp prints.
func goldenDescribe(t *testing.T, ti *tableInfo, ops []goldenOp, bound uint32) []byte {
	var b bytes.Buffer
	native := func(col int, v ndbclient.Value) string {
		if v.IsNull() {
			return "0 -"
		}
		n, err := appendNative(nil, &ti.cols[col], v)
		require.NoError(t, err)
		return fmt.Sprintf("%d %s", len(n), hexOrDash(n))
	}
	nullOf := func(v ndbclient.Value) int {
		if v.IsNull() {
			return 1
		}
		return 0
	}
	fmt.Fprintf(&b, "nops %d\n", len(ops))
	for i, g := range ops {
		op := g.op
		kind, ok := wireKind(op.Kind)
		require.True(t, ok)
		fmt.Fprintf(&b, "op %d\nkind %d\nlock %d\nflags %d\ntable %d\n", i, kind, op.Lock, g.flags, ti.id)
		if partition, hashed := op.KeyPartition(); hashed {
			fmt.Fprintf(&b, "partition %d\n", partition)
		}
		for j, k := range op.Key {
			fmt.Fprintf(&b, "key %d %s\n", ti.schema.PrimaryKey[j], native(ti.schema.PrimaryKey[j], k))
		}
		for _, c := range op.Read {
			fmt.Fprintf(&b, "read %d\n", c)
		}
		for _, s := range op.Set {
			fmt.Fprintf(&b, "set %d %d %s\n", s.Column, nullOf(s.Value), native(s.Column, s.Value))
		}
		if op.HasCond || op.Kind == ndbclient.OpCondUpdate {
			fmt.Fprintf(&b, "cond %d %d %s\n", op.CondColumn, nullOf(op.CondValue), native(op.CondColumn, op.CondValue))
		}
		switch op.Kind {
		case ndbclient.OpAdd:
			fmt.Fprintf(&b, "add %d %d %d\n", op.AddColumn, op.Delta, op.Initial)
		case ndbclient.OpAppend:
			// The data travels with its column's length prefix.
			v, err := appendNative(nil, &ti.cols[op.AppendColumn], ndbclient.Bytes(op.Data))
			require.NoError(t, err)
			fmt.Fprintf(&b, "append %d %d %s\n", op.AppendColumn, len(v), hexOrDash(v))
		}
		if g.flags&flagExpiry != 0 {
			fmt.Fprintf(&b, "expiry %d %d\n", op.Table.ExpireColumn, goldenNow)
		}
	}
	fmt.Fprintf(&b, "bound %d\nend\n", bound)
	return b.Bytes()
}

func hexOrDash(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

func TestGoldenFlight(t *testing.T) {
	ti, golden := goldenOps(t)
	ops := make([]*ndbclient.Op, len(golden))
	for i, g := range golden {
		ops[i] = g.op
	}
	req, err := encodeFlight(nil, ops, nil, func(*ndbclient.Table) (*tableInfo, error) { return ti, nil }, goldenNow)
	require.NoError(t, err)
	text := goldenDescribe(t, ti, golden, binary.LittleEndian.Uint32(req[len(req)-4:]))
	if *updateGolden {
		require.NoError(t, os.WriteFile(filepath.FromSlash(goldenBin), req, 0o644))
		require.NoError(t, os.WriteFile(filepath.FromSlash(goldenText), text, 0o644))
	}
	wantBin, err := os.ReadFile(filepath.FromSlash(goldenBin))
	require.NoError(t, err)
	wantText, err := os.ReadFile(filepath.FromSlash(goldenText))
	require.NoError(t, err)
	require.Equal(t, hex.Dump(wantBin), hex.Dump(req), "encodeFlight's bytes changed: if the format changed on purpose, change shim_wire.h to match and run go test ./ndbclient/ndbapi -run TestGoldenFlight -update, then make shim-wire-test")
	require.Equal(t, string(wantText), string(text), "the golden flight's fields changed: go test ./ndbclient/ndbapi -run TestGoldenFlight -update")
}
