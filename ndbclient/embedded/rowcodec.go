package embedded

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Row encoding (integers little-endian):
//
//	[1 or 3]    key length K: one byte if 1..254, else 0xFF and 2 bytes
//	[K]         encoded primary key: key columns in key order
//	[nullBytes] null bitmap of the nullable non-key columns
//	[denseLen]  NOT NULL fixed-width non-key columns at precomputed offsets
//	...         nullable fixed-width non-key columns that are not NULL, in
//	            column order (a NULL one takes no byte)
//	...         variable-length non-key columns in column order: length prefix
//	            (1, 2 or 4 bytes, by the column's maximum) then the bytes; the
//	            last one has no prefix: it is the rest of the row
//
// A row's first byte is never 0 (K >= 1): the arena tells free chunks by it.
// The row's length is its slot's size, or its log entry's.
//
// The data dir's files of version 1 (walrec.go) hold the earlier encoding:
// a 2-byte K, every fixed-width column in one area whether NULL or not, and
// every variable-length column prefixed. upgradeRow turns such a row into
// this encoding as it is loaded.
//
// A column is encoded the same way in the key and in the row: integers at their
// width, FLOAT/DOUBLE as IEEE bits, BINARY zero padded to its length, other
// bytes types length-prefixed. CHAR is stored with trailing spaces trimmed,
// which is what padding on store and trimming on read amount to, and makes
// "a" and "a  " the same key. Encodings are canonical, so keys compare as bytes.

func getUint(b []byte, w int) uint64 {
	switch w {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b))
	case 8:
		return binary.LittleEndian.Uint64(b)
	}
	var u uint64
	for i := w - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	return u
}

func putUint(b []byte, w int, u uint64) {
	switch w {
	case 1:
		b[0] = byte(u)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(u))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(u))
	case 8:
		binary.LittleEndian.PutUint64(b, u)
	default:
		for i := range w {
			b[i] = byte(u)
			u >>= 8
		}
	}
}

// Values go by pointer below: copying the 40-byte Value struct through the
// stack costs store-forwarding stalls that showed up in profiles.

// putFixed writes a non-NULL value of a fixed-width column into b[:width].
func (ci *colInfo) putFixed(b []byte, v *ndbclient.Value) {
	switch ci.Type {
	case ndbclient.TypeFloat:
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(v.Float())))
	case ndbclient.TypeBinary:
		clear(b[copy(b, v.B):ci.width])
	default:
		putUint(b, ci.width, v.RawBits())
	}
}

// getFixed decodes a fixed-width value at b into v.
func (ci *colInfo) getFixed(b []byte, v *ndbclient.Value) {
	switch {
	case ci.kind == ndbclient.KindUint:
		*v = ndbclient.Uint(getUint(b, ci.width))
	case ci.kind == ndbclient.KindInt:
		shift := 64 - 8*ci.width
		*v = ndbclient.Int(int64(getUint(b, ci.width)<<shift) >> shift)
	case ci.Type == ndbclient.TypeFloat:
		*v = ndbclient.Float(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case ci.Type == ndbclient.TypeDouble:
		*v = ndbclient.Float(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	default: // BINARY
		*v = ndbclient.Bytes(b[:ci.width:ci.width])
	}
}

// appendVar appends a bytes value (NULL encodes as empty), length-prefixed
// if prefix is set.
func (ci *colInfo) appendVar(dst []byte, b []byte, prefix bool) []byte {
	if ci.Type == ndbclient.TypeChar {
		b = bytes.TrimRight(b, " ")
	}
	if prefix {
		var pre [4]byte
		binary.LittleEndian.PutUint32(pre[:], uint32(len(b)))
		dst = append(dst, pre[:ci.lenBytes]...)
	}
	return append(dst, b...)
}

// varSize is the encoded size (prefix included) of the variable value at b.
func (ci *colInfo) varSize(b []byte) int {
	return ci.lenBytes + int(getUint(b, ci.lenBytes))
}

func (ci *colInfo) getVar(b []byte, v *ndbclient.Value) {
	n := ci.lenBytes + int(getUint(b, ci.lenBytes))
	*v = ndbclient.Bytes(b[ci.lenBytes:n:n])
}

// appendKey appends the encoded primary key.
func (t *table) appendKey(dst []byte, key []ndbclient.Value) []byte {
	for i, c := range t.pk {
		dst = t.cols[c].appendKeyValue(dst, &key[i])
	}
	return dst
}

// appendDistKey appends the encoded distribution key (key columns in t.dist).
func (t *table) appendDistKey(dst []byte, key []ndbclient.Value) []byte {
	for _, pos := range t.dist {
		dst = t.cols[t.pk[pos]].appendKeyValue(dst, &key[pos])
	}
	return dst
}

func (ci *colInfo) appendKeyValue(dst []byte, v *ndbclient.Value) []byte {
	if ci.width == 0 {
		return ci.appendVar(dst, v.B, true)
	}
	n := len(dst)
	dst = slices.Grow(dst, ci.width)[:n+ci.width]
	ci.putFixed(dst[n:], v)
	return dst
}

// keyLenLong marks a key length that takes the 2 bytes after it.
const keyLenLong = 0xFF

// appendKeyLen appends the row header for a key of k bytes (1 <= k <= maxKeyBytes).
func appendKeyLen(dst []byte, k int) []byte {
	if k < keyLenLong {
		return append(dst, byte(k))
	}
	return append(dst, keyLenLong, byte(k), byte(k>>8))
}

// keyBounds returns where a row's key starts and ends.
func keyBounds(row []byte) (start, end int) {
	if k := int(row[0]); k != keyLenLong {
		return 1, 1 + k
	}
	return 3, 3 + int(binary.LittleEndian.Uint16(row[1:]))
}

// rowKey returns the encoded key of a row (row may run past the row's end).
func rowKey(row []byte) []byte {
	start, end := keyBounds(row)
	return row[start:end]
}

// isNull reports whether nullable non-key column ci is NULL in the row whose
// null bitmap is at base.
func isNull(row []byte, base int, ci *colInfo) bool {
	return ci.nullBit >= 0 && row[base+ci.nullBit>>3]&(1<<(ci.nullBit&7)) != 0
}

// fixedAt is the offset of non-key fixed-width column ci, not NULL, in a
// row whose null bitmap is at base.
func (t *table) fixedAt(row []byte, base int, ci *colInfo) int {
	off := base + t.nullBytes
	if ci.sparseAt < 0 {
		return off + ci.fixedOff
	}
	off += t.denseLen
	for _, c := range t.sparse[:ci.sparseAt] {
		if sc := &t.cols[c]; !isNull(row, base, sc) {
			off += sc.width
		}
	}
	return off
}

// varStart is the offset of the variable-length area of a row whose null
// bitmap is at base.
func (t *table) varStart(row []byte, base int) int {
	off := base + t.nullBytes + t.denseLen
	for _, c := range t.sparse {
		if sc := &t.cols[c]; !isNull(row, base, sc) {
			off += sc.width
		}
	}
	return off
}

// colValue decodes column c of row. Bytes point into row.
func (t *table) colValue(row []byte, c int) ndbclient.Value {
	var v ndbclient.Value
	t.decode(row, c, &v)
	return v
}

// decode decodes column c of row into v. Bytes point into row.
func (t *table) decode(row []byte, c int, v *ndbclient.Value) {
	ci := &t.cols[c]
	ks, base := keyBounds(row)
	if ci.keyPos >= 0 {
		key := row[ks:base]
		for _, kc := range t.pk[:ci.keyPos] {
			kci := &t.cols[kc]
			if kci.width > 0 {
				key = key[kci.width:]
			} else {
				key = key[kci.varSize(key):]
			}
		}
		if ci.width > 0 {
			ci.getFixed(key, v)
		} else {
			ci.getVar(key, v)
		}
		return
	}
	if isNull(row, base, ci) {
		*v = ndbclient.Value{}
		return
	}
	if ci.width > 0 {
		ci.getFixed(row[t.fixedAt(row, base, ci):], v)
		return
	}
	off := t.varStart(row, base)
	for _, vc := range t.varCols[:ci.varIdx] {
		off += t.cols[vc].varSize(row[off:])
	}
	if ci.varIdx == len(t.varCols)-1 {
		*v = ndbclient.Bytes(row[off:len(row):len(row)]) // the last: unprefixed
		return
	}
	ci.getVar(row[off:], v)
}

// expireOf returns the row's expiry as the slot caches it: 0 for never, and a
// negative time (already past) as 1. The expire column is a non-key integer
// or TIMESTAMP.
func (t *table) expireOf(row []byte) uint32 {
	col := t.expireColumn()
	if col < 0 {
		return 0
	}
	ci := &t.cols[col]
	_, base := keyBounds(row)
	if isNull(row, base, ci) {
		return 0
	}
	if ci.kind == ndbclient.KindBytes { // a TIMESTAMP's text
		return uint32(ndbclient.ExpirySeconds(t.colValue(row, col)))
	}
	u := getUint(row[t.fixedAt(row, base, ci):], ci.width)
	if ci.kind == ndbclient.KindInt {
		shift := 64 - 8*ci.width
		if n := int64(u<<shift) >> shift; n < 0 {
			return 1
		}
	}
	return uint32(min(u, math.MaxUint32))
}

// lastSet finds the last assignment to column c in set, or nil.
func lastSet(set []ndbclient.ColumnValue, c int) *ndbclient.Value {
	for i := len(set) - 1; i >= 0; i-- {
		if set[i].Column == c {
			return &set[i].Value
		}
	}
	return nil
}

// buildRow appends to dst[:0] the row with the given encoded key: old (nil for
// a new row) with the assignments of set applied, then column xcol (if >= 0)
// set to xval. A new row's unassigned columns are NULL if nullable, else their
// zero value (0, empty, zero-filled BINARY), as NDB's defaults would be.
// Values have been checked; key columns in set are ignored (they equal the key).
func (t *table) buildRow(dst, key, old []byte, set []ndbclient.ColumnValue, xcol int, xval *ndbclient.Value) []byte {
	dst = appendKeyLen(dst[:0], len(key))
	dst = append(dst, key...)
	base := len(dst)
	// The null bitmap and the dense area: old's, or a new row's.
	n := t.nullBytes + t.denseLen
	dst = slices.Grow(dst, n)[:base+n]
	oldBase := 0
	if old != nil {
		_, oldBase = keyBounds(old)
		copy(dst[base:], old[oldBase:oldBase+n])
	} else {
		clear(dst[base:])
		for i := range t.cols {
			if b := t.cols[i].nullBit; b >= 0 {
				dst[base+b>>3] |= 1 << (b & 7)
			}
		}
	}
	for i := range set {
		t.setFixed(dst, base, set[i].Column, &set[i].Value)
	}
	if xcol >= 0 {
		t.setFixed(dst, base, xcol, xval)
	}
	// The sparse area: each nullable fixed column not NULL now, from its
	// assignment or from old.
	oldOff := oldBase + n
	for _, c := range t.sparse {
		ci := &t.cols[c]
		var was []byte
		if old != nil && !isNull(old, oldBase, ci) {
			was = old[oldOff : oldOff+ci.width]
			oldOff += ci.width
		}
		if isNull(dst, base, ci) {
			continue
		}
		v := xval
		if c != xcol {
			v = lastSet(set, c)
		}
		if v == nil {
			dst = append(dst, was...) // not assigned, not NULL: old has it
			continue
		}
		k := len(dst)
		dst = slices.Grow(dst, ci.width)[:k+ci.width]
		ci.putFixed(dst[k:], v)
	}
	var oldVar []byte
	if old != nil {
		oldVar = old[oldOff:]
	}
	for j, c := range t.varCols {
		ci := &t.cols[c]
		last := j == len(t.varCols)-1
		var size int
		if oldVar != nil {
			if size = len(oldVar); !last {
				size = ci.varSize(oldVar)
			}
		}
		v := xval
		if c != xcol {
			v = lastSet(set, c)
		}
		switch {
		case v != nil:
			setNull(dst, base, ci, v.Kind == ndbclient.KindNull)
			dst = ci.appendVar(dst, v.B, !last)
		case oldVar != nil:
			dst = append(dst, oldVar[:size]...)
		default:
			dst = ci.appendVar(dst, nil, !last)
		}
		if oldVar != nil {
			oldVar = oldVar[size:]
		}
	}
	return dst
}

// setFixed applies one assignment to the null bitmap and, for a NOT NULL
// column, the dense area (sparse columns are written after: buildRow).
func (t *table) setFixed(row []byte, base, c int, v *ndbclient.Value) {
	ci := &t.cols[c]
	if ci.keyPos >= 0 || ci.width == 0 {
		return
	}
	if ci.sparseAt >= 0 {
		setNull(row, base, ci, v.Kind == ndbclient.KindNull)
		return
	}
	ci.putFixed(row[base+t.nullBytes+ci.fixedOff:][:ci.width], v) // checked: not NULL
}

func setNull(row []byte, base int, ci *colInfo, null bool) {
	if ci.nullBit < 0 {
		return
	}
	if null {
		row[base+ci.nullBit>>3] |= 1 << (ci.nullBit & 7)
	} else {
		row[base+ci.nullBit>>3] &^= 1 << (ci.nullBit & 7)
	}
}

// project sets op.Row to the Read projection of row, copying bytes into
// op.RowBuf so the result outlives the partition lock.
func (t *table) project(op *ndbclient.Op, row []byte) {
	buf := op.RowBuf[:0]
	if cap(buf) < len(row) {
		buf = make([]byte, 0, len(row)) // enough unless a column is read twice
	}
	start := &buf[:1][0]
	out := op.Row[:0]
	for _, c := range op.Read {
		out = append(out, ndbclient.Value{})
		v := &out[len(out)-1]
		t.decode(row, c, v)
		if v.Kind == ndbclient.KindBytes {
			n := len(buf)
			buf = append(buf, v.B...)
			v.B = buf[n:len(buf):len(buf)]
		}
	}
	if &buf[:1][0] != start {
		// buf moved while growing: point the earlier values at the new copy.
		off := 0
		for i := range out {
			if out[i].Kind == ndbclient.KindBytes {
				n := len(out[i].B)
				out[i].B = buf[off : off+n : off+n]
				off += n
			}
		}
	}
	op.Row, op.RowBuf = out, buf
}

// upgradeRow appends to dst the row of version 1 encoding v1 (checked by
// checkRowV1) in the current encoding.
func (t *table) upgradeRow(dst, v1 []byte) []byte {
	k := int(binary.LittleEndian.Uint16(v1))
	key := v1[2 : 2+k]
	dst = append(appendKeyLen(dst, k), key...)
	base, v1Base := len(dst), 2+k
	dst = append(dst, v1[v1Base:v1Base+t.nullBytes]...)
	fixed := v1Base + t.nullBytes
	for i := range t.cols { // NOT NULL fixed columns, in column order
		if ci := &t.cols[i]; ci.fixedOff >= 0 {
			dst = append(dst, v1[fixed+ci.v1Off:fixed+ci.v1Off+ci.width]...)
		}
	}
	for _, c := range t.sparse {
		if ci := &t.cols[c]; !isNull(dst, base, ci) {
			dst = append(dst, v1[fixed+ci.v1Off:fixed+ci.v1Off+ci.width]...)
		}
	}
	off := fixed + t.v1Fixed
	for j, c := range t.varCols {
		ci := &t.cols[c]
		n := ci.varSize(v1[off:])
		if j == len(t.varCols)-1 {
			dst = append(dst, v1[off+ci.lenBytes:off+n]...)
		} else {
			dst = append(dst, v1[off:off+n]...)
		}
		off += n
	}
	return dst
}
