package ndbapi

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// demoDescribe is the shim's describe output for ndbmemcache's demo table.
func demoDescribe() []byte { return describeDemo(false) }

// describeDemo is demo_table's description, with ndbgate's item_state
// column at the end when withState.
func describeDemo(withState bool) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 8)
	if withState {
		b = binary.LittleEndian.AppendUint16(b, 7)
	} else {
		b = binary.LittleEndian.AppendUint16(b, 6)
	}
	col := func(name string, typ uint8, length uint32, null, pk bool, array uint8, slot uint32) {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = append(b, typ)
		b = binary.LittleEndian.AppendUint32(b, length)
		b = append(b, boolByte(null), boolByte(pk), array)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint32(b, slot)
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	col("mkey", ndbVarchar, 250, false, true, 1, 251)
	col("string_value", ndbVarbinary, 13000, true, false, 2, 13002)
	col("flags", ndbUnsigned, 1, true, false, 0, 4)
	col("cas_value", ndbBigunsigned, 1, true, false, 0, 8)
	col("expire_time", ndbUnsigned, 1, true, false, 0, 4)
	col("math_value", ndbBigunsigned, 1, true, false, 0, 8)
	if withState {
		col("item_state", ndbBigunsigned, 1, true, false, 0, 8)
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func TestDecodeDescribe(t *testing.T) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 3, demoDescribe())
	require.NoError(t, err)
	s := ti.schema
	assert.Equal(t, 8, s.Partitions)
	assert.Equal(t, []int{0}, s.PrimaryKey)
	require.Len(t, s.Columns, 6)
	assert.Equal(t, ndbclient.TypeVarchar, s.Columns[0].Type)
	assert.Equal(t, ndbclient.TypeVarbinary, s.Columns[1].Type)
	assert.Equal(t, ndbclient.TypeUint64, s.Columns[3].Type)
	assert.True(t, s.Columns[5].Nullable)

	assert.Empty(t, s.DistributionKey, "no flags: the primary key")

	_, err = decodeDescribe("d", "t", 0, demoDescribe()[:20])
	assert.Error(t, err, "truncated output is refused")
}

func TestDecodeDescribeDistributionKey(t *testing.T) {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 4)
	b = binary.LittleEndian.AppendUint16(b, 3)
	col := func(name string, typ uint8, keyFlags uint8) {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = append(b, typ)
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = append(b, 0, keyFlags, 0)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint32(b, 4)
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	col("tenant", ndbUnsigned, 3) // primary and distribution key
	col("id", ndbUnsigned, 1)     // primary key only
	col("v", ndbUnsigned, 0)
	ti, err := decodeDescribe("d", "t", 0, b)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, ti.schema.PrimaryKey)
	assert.Equal(t, []int{0}, ti.schema.DistributionKey)

	b = b[:0]
	b = binary.LittleEndian.AppendUint32(b, 4)
	b = binary.LittleEndian.AppendUint16(b, 3)
	col("tenant", ndbUnsigned, 3)
	col("id", ndbUnsigned, 3)
	col("v", ndbUnsigned, 0)
	ti, err = decodeDescribe("d", "t", 0, b)
	require.NoError(t, err)
	assert.Empty(t, ti.schema.DistributionKey, "distribution key == primary key stays implicit")
}

func TestDecodeDescribeBitSlot(t *testing.T) {
	describe := func(bits, slot uint32) []byte {
		var b []byte
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = append(b, 'b', ndbBit)
		b = binary.LittleEndian.AppendUint32(b, bits)
		b = append(b, 0, 1, 0)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint16(b, 0)
		b = binary.LittleEndian.AppendUint32(b, slot)
		return binary.LittleEndian.AppendUint16(b, 0)
	}
	ti, err := decodeDescribe("d", "t", 0, describe(40, 8))
	require.NoError(t, err)
	assert.Equal(t, 8, nativeSize(&ti.cols[0]), "BIT's size is the shim's slot")
	got, err := appendNative(nil, &ti.cols[0], ndbclient.Uint(1<<33))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 0, 2, 0, 0, 0}, got)

	_, err = decodeDescribe("d", "t", 0, describe(40, 5))
	assert.Error(t, err, "a BIT slot that is not whole 32-bit words (one or two) is refused")
}

func TestNativeValues(t *testing.T) {
	cases := []struct {
		col  column
		in   ndbclient.Value
		wire []byte
	}{
		{column{ndbType: ndbVarchar, arrayType: 1, length: 250}, ndbclient.String("abc"), []byte{3, 'a', 'b', 'c'}},
		{column{ndbType: ndbVarbinary, arrayType: 2, length: 13000}, ndbclient.String("xy"), []byte{2, 0, 'x', 'y'}},
		{column{ndbType: ndbChar, length: 4}, ndbclient.String("ab"), []byte{'a', 'b', ' ', ' '}},
		{column{ndbType: ndbBinary, length: 3}, ndbclient.String("a"), []byte{'a', 0, 0}},
		{column{ndbType: ndbUnsigned}, ndbclient.Uint(0x01020304), []byte{4, 3, 2, 1}},
		{column{ndbType: ndbBigunsigned}, ndbclient.Uint(1), []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{column{ndbType: ndbInt}, ndbclient.Int(-2), []byte{0xfe, 0xff, 0xff, 0xff}},
		{column{ndbType: ndbMediumint}, ndbclient.Int(-1), []byte{0xff, 0xff, 0xff}},
		{column{ndbType: ndbTinyint}, ndbclient.Int(-128), []byte{0x80}},
		{column{ndbType: ndbYear}, ndbclient.Uint(2026), []byte{126}},
		{column{ndbType: ndbYear}, ndbclient.Uint(1901), []byte{1}},
		{column{ndbType: ndbYear}, ndbclient.Uint(2155), []byte{255}},
		{column{ndbType: ndbYear}, ndbclient.Uint(0), []byte{0}}, // MySQL's YEAR 0000
		// BIT is 32-bit words in NDB (getSizeInBytesForRecord, the slot the
		// shim describes), low word first.
		{column{ndbType: ndbBit, length: 1, maxBytes: 4}, ndbclient.Uint(1), []byte{1, 0, 0, 0}},
		{column{ndbType: ndbBit, length: 32, maxBytes: 4}, ndbclient.Uint(0x80000001), []byte{1, 0, 0, 0x80}},
		{column{ndbType: ndbBit, length: 33, maxBytes: 8}, ndbclient.Uint(1 << 32), []byte{0, 0, 0, 0, 1, 0, 0, 0}},
	}
	for _, tc := range cases {
		got, err := appendNative(nil, &tc.col, tc.in)
		require.NoError(t, err)
		assert.Equal(t, tc.wire, got, "type %d", tc.col.ndbType)
		back := decodeNative(&tc.col, got)
		if tc.col.ndbType == ndbBinary {
			assert.Equal(t, string(tc.wire), string(back.B), "BINARY reads back zero padded")
		} else if tc.in.Kind == ndbclient.KindBytes {
			assert.Equal(t, string(tc.in.B), string(back.B))
		} else {
			assert.Equal(t, tc.in, back)
		}
	}
	// NDB writes only a BIT column's own bits; the rest of its words is
	// whatever the row buffer held, and must not reach the caller.
	bit12 := column{ndbType: ndbBit, length: 12, maxBytes: 4}
	assert.Equal(t, uint64(0x0fff), decodeNative(&bit12, []byte{0xff, 0x9f, 0x5a, 0xa5}).Uint())
	_, err := appendNative(nil, &column{ndbType: ndbVarchar, arrayType: 1, length: 2}, ndbclient.String("abc"))
	assert.Equal(t, ndbclient.CodeTooLarge, ndbclient.CodeOf(err))
}

// shimResponse builds a response as the shim writes it.
type shimResponse struct{ b []byte }

// ok adds a successful op's values (nil: NULL).
func (w *shimResponse) ok(vals ...[]byte) {
	w.b = binary.LittleEndian.AppendUint32(w.b, 0)
	w.b = append(w.b, 0, 0)
	w.b = binary.LittleEndian.AppendUint16(w.b, uint16(len(vals)))
	for _, v := range vals {
		if v == nil {
			w.b = append(w.b, 1)
			w.b = binary.LittleEndian.AppendUint32(w.b, 0)
			continue
		}
		w.b = append(w.b, 0)
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(v)))
		w.b = append(w.b, v...)
	}
	w.b = binary.LittleEndian.AppendUint32(w.b, 1)
}

// fail adds a failed op.
func (w *shimResponse) fail(code int32, status, class uint8, msg string, affected uint32) {
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(code))
	w.b = append(w.b, status, class)
	w.b = binary.LittleEndian.AppendUint16(w.b, 0)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(msg)))
	w.b = append(w.b, msg...)
	w.b = binary.LittleEndian.AppendUint32(w.b, affected)
}

func TestEncodeFlightAndDecodeResults(t *testing.T) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 7, demoDescribe())
	require.NoError(t, err)
	tables := func(*ndbclient.Table) (*tableInfo, error) { return ti, nil }
	read := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")}, Read: []int{1, 2}, Affected: 42}
	cas := &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("k")},
		Set: []ndbclient.ColumnValue{{Column: 3, Value: ndbclient.Uint(9)}}, CondColumn: 3, CondValue: ndbclient.Uint(8)}
	miss := &ndbclient.Op{Kind: ndbclient.OpRead, Table: ti.schema, Key: []ndbclient.Value{ndbclient.String("x")}, Read: []int{1}, Affected: 43}
	flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: ti.schema}
	req, err := encodeFlight(nil, []*ndbclient.Op{read, cas, miss, flush}, nil, tables, 0)
	require.NoError(t, err)
	assert.Equal(t, uint32(4), binary.LittleEndian.Uint32(req))
	assert.Equal(t, byte(kindRead), req[4])
	assert.Equal(t, uint32(7), binary.LittleEndian.Uint32(req[8:]), "table id")
	assert.Zero(t, req[6]&flagPartition, "no partition unless the dispatcher hashed the key")
	nokey := binary.LittleEndian.Uint16(req[12:])

	// A key the dispatcher hashed carries its partition after the table id,
	// so that the shim does not hash it again.
	read.SetKeyPartition(5)
	hinted, err := encodeFlight(nil, []*ndbclient.Op{read}, nil, tables, 0)
	require.NoError(t, err)
	assert.Equal(t, byte(flagPartition), hinted[6]&flagPartition)
	assert.Equal(t, uint32(5), binary.LittleEndian.Uint32(hinted[12:]), "partition")
	assert.Equal(t, nokey, binary.LittleEndian.Uint16(hinted[16:]), "the key follows the partition")
	read.Reset()
	_, hashed := read.KeyPartition()
	assert.False(t, hashed, "Reset forgets the partition")
	read.Kind, read.Table, read.Key, read.Read, read.Affected = ndbclient.OpRead, ti.schema, []ndbclient.Value{ndbclient.String("k")}, []int{1, 2}, 42

	// A response as the shim writes it.
	var w shimResponse
	ok, fail := w.ok, w.fail
	ok([]byte{5, 0, 'h', 'e', 'l', 'l', 'o'}, nil)
	fail(exitCondFailed, 2, 5, "interpreted program exit", 0)
	fail(626, 2, classNoDataFound, "Tuple did not exist", 0)
	fail(266, statusTemporary, classTimeout, "Time-out in NDB", 1000) // a later batch of the flush failed
	cas.Affected = 9
	resp := w.b
	require.NoError(t, decodeResults(resp, []*ndbclient.Op{read, cas, miss, flush}, nil, tables))
	require.NoError(t, read.Err)
	require.Len(t, read.Row, 2)
	assert.Equal(t, "hello", string(read.Row[0].B))
	assert.True(t, read.Row[1].IsNull())
	assert.Same(t, &read.RowBuf[2], &read.Row[0].B[0], "values point into RowBuf")
	assert.Equal(t, uint64(42), read.Affected, "reads keep the caller's tag in Affected")
	assert.ErrorIs(t, cas.Err, ndbclient.ErrConditionFailed)
	assert.Zero(t, cas.Affected, "a failed write changed nothing")
	assert.ErrorIs(t, miss.Err, ndbclient.ErrNotFound)
	assert.Equal(t, uint64(43), miss.Affected, "a failed read keeps the caller's tag too")
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(flush.Err))
	assert.Equal(t, uint64(1000), flush.Affected, "rows of the batches committed before the failure")

	assert.Error(t, decodeResults(resp[:10], []*ndbclient.Op{read, cas, miss, flush}, nil, tables), "truncated response")
	assert.Error(t, decodeResults(resp[:len(resp)-2], []*ndbclient.Op{read, cas, miss, flush}, nil, tables), "error without its count")
}

func TestMapError(t *testing.T) {
	for _, tc := range []struct {
		code          int
		status, class uint8
		want          ndbclient.Code
	}{
		{626, 2, classNoDataFound, ndbclient.CodeNotFound},
		{exitExpired, 2, 5, ndbclient.CodeNotFound},                // a program exit on the data node
		{exitExpired, 2, classNoDataFound, ndbclient.CodeNotFound}, // the shim's own check
		{630, 2, classConstraint, ndbclient.CodeDuplicate},
		{266, statusTemporary, classTimeout, ndbclient.CodeTemporary},
		{4010, statusTemporary, classNodeRecovery, ndbclient.CodeTemporary}, // aborted by a node failure: retried
		{286, statusTemporary, classNodeRecovery, ndbclient.CodeTemporary},
		{4021, 2, classNodeShutdown, ndbclient.CodeUnavailable},
		{4012, statusUnknownResult, classUnknownResult, ndbclient.CodeUnknownResult},
		{errNotSent, statusTemporary, classTimeout, ndbclient.CodeTemporary}, // the shim's refusal to send
		{410, statusTemporary, classOverload, ndbclient.CodeOverloaded},
		{723, 2, classSchema, ndbclient.CodeSchemaError},
		{827, 2, classInsufficientSpc, ndbclient.CodeOutOfMemory},
		{exitNotNumeric, 2, 5, ndbclient.CodeNotNumeric},
		{errLinkedSync, 2, classApplication, ndbclient.CodeInvalidArgument},
		{errBadValue, 2, classApplication, ndbclient.CodeInvalidArgument},
		{721, 2, classSchemaObjectExst, ndbclient.CodeSchemaError},
		{4009, statusUnknownResult, classUnknownResult, ndbclient.CodeUnknownResult},
		{4009, statusTemporary, classUnknownResult, ndbclient.CodeUnavailable}, // startTransaction failed: nothing sent
		{9999, 2, 16, ndbclient.CodeInternal},                                  // ndberror_cl_configuration
	} {
		err := mapError(tc.code, tc.status, tc.class, "m")
		assert.Equal(t, tc.want, ndbclient.CodeOf(err), "ndb %d", tc.code)
		assert.Equal(t, tc.want, ndbclient.CodeOf(mapOpError(ndbclient.OpRead, tc.code, tc.status, tc.class, "m")), "a read's ndb %d", tc.code)
		var e *ndbclient.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, tc.code, e.NativeCode, "NDB's own code is kept for logs")
		assert.Equal(t, tc.code == errNotSent && tc.class == classTimeout, e.NotSent, "ndb %d: only the shim's refusal is not sent", tc.code)
	}
}

// A write that lost its coordinator (4010) may have committed: it is
// UnknownResult, not retried; a read is Temporary, retried.
func TestLostCoordinatorWriteIsUnknown(t *testing.T) {
	for _, k := range []ndbclient.OpKind{ndbclient.OpWrite, ndbclient.OpInsert, ndbclient.OpUpdate, ndbclient.OpDelete} {
		err := mapOpError(k, errLostCoordinator, statusTemporary, classNodeRecovery, "Node failure caused abort of transaction")
		assert.Equal(t, ndbclient.CodeUnknownResult, ndbclient.CodeOf(err), "%v", k)
		assert.False(t, ndbclient.Retryable(err))
	}
	err := mapOpError(ndbclient.OpRead, errLostCoordinator, statusTemporary, classNodeRecovery, "m")
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err))
	err = mapOpError(ndbclient.OpWrite, 286, statusTemporary, classNodeRecovery, "m")
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err), "the coordinator itself aborted it: retried")
}

// FuzzDecode: the shim's outputs are decoded without panicking whatever they
// hold, and a malformed response is an error, never a wrong success.
func FuzzDecode(f *testing.F) {
	f.Add(demoDescribe(), []byte{0, 0, 0, 0, 0, 0, 1, 0, 0, 3, 0, 0, 0, 'a', 'b', 'c', 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, describe, resp []byte) {
		ti, err := decodeDescribe("d", "t", 0, describe)
		if err != nil || len(ti.schema.Columns) == 0 {
			ti, _ = decodeDescribe("d", "t", 0, demoDescribe())
		}
		tables := func(*ndbclient.Table) (*tableInfo, error) { return ti, nil }
		ops := []*ndbclient.Op{
			{Kind: ndbclient.OpRead, Table: ti.schema, Read: []int{0}},
			{Kind: ndbclient.OpAppend, Table: ti.schema, Read: []int{0}, AppendColumn: 0},
		}
		_ = decodeResults(resp, ops, nil, tables)
		// The same bytes as scan output (ScanRows): rows of every column.
		read := make([]int, len(ti.cols))
		for i := range read {
			read[i] = i
		}
		for _, nrows := range []int{0, 1, 2, len(resp) / 5} {
			rows, err := decodeScanRows(resp, ti.cols, read, nrows)
			if err == nil && len(rows) != nrows {
				t.Fatalf("%d rows decoded, %d said", len(rows), nrows)
			}
		}
	})
}

func TestWireKindKnowsEveryKindAndNoOther(t *testing.T) {
	codes := map[byte]bool{}
	for k := ndbclient.OpRead; k <= ndbclient.OpDeleteAll; k++ {
		code, ok := wireKind(k)
		assert.True(t, ok, "kind %d", k)
		assert.False(t, codes[code], "kind %d shares code %d", k, code)
		codes[code] = true
	}
	for _, k := range []ndbclient.OpKind{0, ndbclient.OpDeleteAll + 1, 255} {
		_, ok := wireKind(k)
		assert.False(t, ok, "kind %d", k)
	}
}
