package ndbapi

// ScanRows' plain-Go half (driver.go makes the cgo call): the columns asked
// for, the size of the buffer the shim writes rows into, and the decoding of
// those rows. Scan output (shim_scan.cpp ndbgate_scan_rows), little endian: per
// row, per column asked for, u8 null, u32 len, the native bytes: a read's
// values in a flight's response.

import (
	"bytes"
	"math"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// scanBufferStart is the largest buffer a scan starts with; a scan whose rows
// need more runs again into a buffer of the size the shim reported.
const scanBufferStart = 1 << 20

// scanBufferMin keeps a buffer's first byte addressable for the cgo call.
const scanBufferMin = 64

// scanAttempts bounds the scans of one ScanRows: rows added between two
// scans can make the second need more than the first reported.
const scanAttempts = 4

// scanColumns checks read against t's columns and returns them as the shim
// takes them.
func scanColumns(t *ndbclient.Table, ti *tableInfo, read []int) ([]uint16, error) {
	cols := make([]uint16, len(read))
	for i, c := range read {
		if c < 0 || c >= len(ti.cols) {
			return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s has no column %d", t.FullName(), c)
		}
		cols[i] = uint16(c)
	}
	return cols, nil
}

// scanLimit is limit as the shim takes it: -1 for none (a negative limit),
// at most the shim's largest int.
func scanLimit(limit int) int {
	if limit < 0 {
		return -1
	}
	return min(limit, math.MaxInt32)
}

// scanBound is the most bytes limit rows of the columns in read can take in
// the scan output (5 bytes and the column's row slot a value), or -1 when
// nothing bounds it below the shim's largest output: no limit, or too many
// rows. read has been checked (scanColumns).
func scanBound(cols []column, read []int, limit int) int {
	if limit < 0 {
		return -1
	}
	per := 0
	for _, c := range read {
		per += 5 + cols[c].maxBytes
	}
	if per == 0 {
		return 0
	}
	if limit > math.MaxInt32/per {
		return -1
	}
	return limit * per
}

// firstScanBuffer is the size of a scan's first buffer: room for every row
// the limit allows, up to scanBufferStart.
func firstScanBuffer(bound int) int {
	if bound < 0 || bound > scanBufferStart {
		return scanBufferStart
	}
	return max(bound, scanBufferMin)
}

// nextScanBuffer is the size of the buffer for a scan again after one whose
// rows needed `needed` bytes: a quarter more, for rows written meanwhile,
// within the bound.
func nextScanBuffer(needed, bound int) int {
	n := needed + needed/4
	if n < needed || n > math.MaxInt32 {
		n = math.MaxInt32
	}
	if bound >= 0 && n > bound {
		n = max(bound, needed)
	}
	return max(n, scanBufferMin)
}

// decodeScanRows turns the scan output b, nrows rows of the columns in read,
// into rows of values. b is copied first, once: the values' bytes are the
// copy's, so they outlive b, and each is capped at its own length, so that
// appending to one cannot write over the next.
func decodeScanRows(b []byte, cols []column, read []int, nrows int) ([][]ndbclient.Value, error) {
	malformed := ndbclient.Errorf(ndbclient.CodeInternal, "malformed scan output from the NDB shim")
	n := len(read)
	// Each value takes at least 5 bytes: no more rows than b can hold.
	if nrows < 0 || n > 0 && nrows > len(b)/(5*n) || n == 0 && len(b) != 0 {
		return nil, malformed
	}
	for _, c := range read {
		if c < 0 || c >= len(cols) {
			return nil, malformed
		}
	}
	r := reader{b: bytes.Clone(b)}
	vals := make([]ndbclient.Value, nrows*n)
	rows := make([][]ndbclient.Value, nrows)
	for i := range rows {
		row := vals[i*n : (i+1)*n : (i+1)*n]
		for j, c := range read {
			null := r.u8() != 0
			v := r.bytes(int(r.u32()))
			if !r.ok() {
				return nil, malformed
			}
			if null {
				continue // the zero Value is NULL
			}
			val := decodeNative(&cols[c], v)
			if val.Kind == ndbclient.KindBytes {
				val.B = val.B[:len(val.B):len(val.B)]
			}
			row[j] = val
		}
		rows[i] = row
	}
	if len(r.b) != 0 {
		return nil, malformed
	}
	return rows, nil
}
