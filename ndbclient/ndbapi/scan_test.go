package ndbapi

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// scanValue appends one value of the shim's scan output: u8 null, u32 len,
// the native bytes.
func scanValue(b []byte, null bool, native []byte) []byte {
	if null {
		return binary.LittleEndian.AppendUint32(append(b, 1), 0)
	}
	b = binary.LittleEndian.AppendUint32(append(b, 0), uint32(len(native)))
	return append(b, native...)
}

// scanOutput is what the shim writes for demo_table's flags, mkey and
// string_value (in that order) over two rows: a NULL in each, a VARCHAR
// with a 1-byte length prefix and a VARBINARY with a 2-byte one.
func scanOutput() (b []byte, read []int) {
	read = []int{2, 0, 1}
	b = scanValue(b, false, binary.LittleEndian.AppendUint32(nil, 7))
	b = scanValue(b, false, append([]byte{2}, "k1"...))
	b = scanValue(b, true, nil)
	b = scanValue(b, true, nil)
	b = scanValue(b, false, append([]byte{7}, "key-two"...))
	b = scanValue(b, false, append([]byte{11, 0}, "hello world"...))
	return b, read
}

func TestDecodeScanRows(t *testing.T) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 0, demoDescribe())
	require.NoError(t, err)
	b, read := scanOutput()
	rows, err := decodeScanRows(b, ti.cols, read, 2)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	want := [][]ndbclient.Value{
		{ndbclient.Uint(7), ndbclient.String("k1"), ndbclient.Null()},
		{ndbclient.Null(), ndbclient.String("key-two"), ndbclient.String("hello world")},
	}
	for i := range want {
		require.Len(t, rows[i], 3, "row %d", i)
		for j := range want[i] {
			assert.True(t, want[i][j].Equal(rows[i][j]), "row %d column %d: %v, want %v", i, j, rows[i][j], want[i][j])
		}
	}

	// The values are the decoder's own: the output buffer can be reused,
	// and a value appended to cannot write over its neighbours or the next
	// row.
	clear(b)
	assert.Equal(t, "k1", rows[0][1].Str())
	assert.Equal(t, "hello world", rows[1][2].Str())
	rows[0][1].B = append(rows[0][1].B, "xxxxxxxxxxxxxxxx"...)
	rows[1][1].B = append(rows[1][1].B, "yyyyyyyyyyyyyyyy"...)
	rows[0] = append(rows[0], ndbclient.Uint(1))
	assert.Equal(t, "key-two", string(rows[1][1].B[:7]))
	assert.Equal(t, "hello world", rows[1][2].Str())
	assert.True(t, rows[1][0].IsNull(), "appending to row 0 left row 1 alone")

	// No rows, and rows of no columns.
	rows, err = decodeScanRows(nil, ti.cols, read, 0)
	require.NoError(t, err)
	assert.Empty(t, rows)
	rows, err = decodeScanRows(nil, ti.cols, nil, 3)
	require.NoError(t, err)
	assert.Len(t, rows, 3)
	assert.Empty(t, rows[2])
}

func TestDecodeScanRowsRefusesMalformedOutput(t *testing.T) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 0, demoDescribe())
	require.NoError(t, err)
	b, read := scanOutput()
	for name, tc := range map[string]struct {
		b     []byte
		read  []int
		nrows int
	}{
		"truncated":            {b[:len(b)-1], read, 2},
		"trailing bytes":       {append(b[:len(b):len(b)], 0), read, 2},
		"fewer rows than said": {b, read, 3},
		"more rows than said":  {b, read, 1},
		"negative row count":   {b, read, -1},
		"rows past the buffer": {b, read, math.MaxInt32},
		"column out of range":  {b, []int{2, 0, 9}, 2},
		"bytes but no columns": {b, nil, 2},
	} {
		_, err := decodeScanRows(tc.b, ti.cols, tc.read, tc.nrows)
		assert.Equal(t, ndbclient.CodeInternal, ndbclient.CodeOf(err), name)
	}
}

func TestScanColumnsAndBuffer(t *testing.T) {
	ti, err := decodeDescribe("ndbmemcache", "demo_table", 0, demoDescribe())
	require.NoError(t, err)
	cols, err := scanColumns(ti.schema, ti, []int{2, 0, 1})
	require.NoError(t, err)
	assert.Equal(t, []uint16{2, 0, 1}, cols)
	for _, bad := range [][]int{{-1}, {0, 6}} {
		_, err := scanColumns(ti.schema, ti, bad)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err), "%v", bad)
	}

	assert.Equal(t, -1, scanLimit(-5))
	assert.Equal(t, 10, scanLimit(10))
	assert.Equal(t, math.MaxInt32, scanLimit(math.MaxInt64))

	// flags (4-byte slot) and mkey (251): 5 + 4 + 5 + 251 bytes a row.
	read := []int{2, 0}
	assert.Equal(t, 10*265, scanBound(ti.cols, read, 10))
	assert.Equal(t, -1, scanBound(ti.cols, read, -1), "no limit, no bound")
	assert.Equal(t, -1, scanBound(ti.cols, read, math.MaxInt32), "past the shim's largest output")
	assert.Equal(t, 0, scanBound(ti.cols, nil, 10))

	assert.Equal(t, 2650, firstScanBuffer(2650), "every row the limit allows")
	assert.Equal(t, scanBufferMin, firstScanBuffer(0))
	assert.Equal(t, scanBufferStart, firstScanBuffer(-1))
	assert.Equal(t, scanBufferStart, firstScanBuffer(scanBufferStart*10))

	assert.Equal(t, 5000, nextScanBuffer(4000, -1), "a quarter more")
	assert.Equal(t, 4500, nextScanBuffer(4000, 4500), "within the bound")
	assert.Equal(t, 4000, nextScanBuffer(4000, 3000), "never less than needed")
	assert.Equal(t, math.MaxInt32, nextScanBuffer(math.MaxInt32-1, -1))
}

func TestStaleErrorOfAScan(t *testing.T) {
	tbl := &ndbclient.Table{Database: "d", Name: "t"}
	again, err := staleError(tbl, mapError(errSchemaVersion, 0, classSchema, "Invalid schema object version"))
	assert.True(t, again)
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(err))
	assert.Contains(t, err.Error(), "d.t changed")
	again, err = staleError(tbl, mapError(errNoSuchTable, 0, classSchema, "No such table existed"))
	assert.True(t, again)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err), "a dropped table stays an error")
	again, err = staleError(tbl, mapError(4009, statusTemporary, classNodeRecovery, "cluster failure"))
	assert.False(t, again)
	assert.Equal(t, ndbclient.CodeUnavailable, ndbclient.CodeOf(err), "nothing sent while detached")
	again, err = staleError(tbl, nil)
	assert.False(t, again)
	assert.NoError(t, err)
}
