// Row and key checks: that bytes loaded from the data dir are a well-formed
// row (rowcodec.go) or key of their table, in the current encoding or
// version 1's.

package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// keyColumns walks an encoded key, calling fn with each key column's
// position and bytes; false if the key is malformed.
func (t *table) keyColumns(key []byte, fn func(pos int, b []byte)) bool {
	for pos, c := range t.pk {
		ci := &t.cols[c]
		n := ci.width
		if n == 0 {
			if len(key) < ci.lenBytes {
				return false
			}
			v := getUint(key, ci.lenBytes)
			if v > uint64(ci.maxLen) || v > uint64(len(key)-ci.lenBytes) {
				return false
			}
			n = ci.lenBytes + int(v)
		}
		if n > len(key) {
			return false
		}
		if fn != nil {
			fn(pos, key[:n])
		}
		key = key[n:]
	}
	return len(key) == 0
}

func (t *table) checkKeyBytes(key []byte) error {
	if !t.keyColumns(key, nil) {
		return errors.New("malformed key")
	}
	return nil
}

// checkRow checks that row is a well-formed row of t (rowcodec.go): every
// length within its column's and the row's bounds.
func (t *table) checkRow(row []byte) error {
	// A one-byte key and nothing else (or an empty last variable column)
	// makes a row of two bytes; a key length in 3 bytes needs them.
	if len(row) < 2 || row[0] == 0 || row[0] == keyLenLong && len(row) < 3 {
		return errors.New("row too short")
	}
	ks, base := keyBounds(row)
	if base > len(row) {
		return errors.New("key longer than the row")
	}
	if ks == 3 && base-ks < keyLenLong {
		return errors.New("a short key's length in 3 bytes")
	}
	if err := t.checkKeyBytes(row[ks:base]); err != nil {
		return err
	}
	if base+t.nullBytes+t.denseLen > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	off := t.varStart(row, base)
	if off > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	for j, c := range t.varCols {
		ci := &t.cols[c]
		if j == len(t.varCols)-1 {
			if n := len(row) - off; n > ci.maxLen {
				return fmt.Errorf("column %q: bad length %d", ci.Name, n)
			}
			return nil
		}
		var err error
		if off, err = varColumnEnd(row, off, ci); err != nil {
			return err
		}
	}
	if off != len(row) {
		return fmt.Errorf("%d bytes after the last column", len(row)-off)
	}
	return nil
}

// varColumnEnd checks the length-prefixed column ci at off in row and
// returns where it ends.
func varColumnEnd(row []byte, off int, ci *colInfo) (int, error) {
	if off+ci.lenBytes > len(row) {
		return 0, fmt.Errorf("column %q cut short", ci.Name)
	}
	n := getUint(row[off:], ci.lenBytes)
	if n > uint64(ci.maxLen) || n > uint64(len(row)-off-ci.lenBytes) {
		return 0, fmt.Errorf("column %q: bad length %d", ci.Name, n)
	}
	return off + ci.lenBytes + int(n), nil
}

// checkRowV1 is checkRow for a row of the data dir's version 1 files
// (rowcodec.go, upgradeRow).
func (t *table) checkRowV1(row []byte) error {
	if len(row) < 2 {
		return errors.New("row too short")
	}
	k := int(binary.LittleEndian.Uint16(row))
	if 2+k > len(row) {
		return errors.New("key longer than the row")
	}
	if k == 0 {
		return errors.New("empty key")
	}
	if err := t.checkKeyBytes(row[2 : 2+k]); err != nil {
		return err
	}
	off := 2 + k + t.nullBytes + t.v1Fixed
	if off > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	for _, c := range t.varCols {
		ci := &t.cols[c]
		var err error
		if off, err = varColumnEnd(row, off, ci); err != nil {
			return err
		}
	}
	if off != len(row) {
		return fmt.Errorf("%d bytes after the last column", len(row)-off)
	}
	return nil
}
