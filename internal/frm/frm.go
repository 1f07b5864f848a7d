// Package frm reads what ndbgate needs from a MySQL 5.x table definition
// (.frm), as mysqld stores it, packed, in the NDB dictionary
// (NdbDictionary::Table::getFrmData): each column's MySQL type, character
// set and, for ENUM and SET, the names of its values. NDB itself keeps an
// ENUM as the index of its value and a SET as the bitmask of its members,
// in a CHAR of binary character set; only the .frm knows the names.
//
// The format, as MySQL 5.7's sql/unireg.cc writes it and sql/table.cc
// (open_binary_frm) reads it:
//
//   - a 64-byte header: 0xFE 0x01, the frm version at 2 (a field record is
//     17 bytes from version 9 on), at 4 the length of the form-names block
//     that follows at 64 and at 8 their count; after that block (at 64 +
//     that length) a 4-byte offset of the form info;
//   - the form info, 288 bytes: the field count at 258, the length of the
//     screens that precede the field records at 260, the length of the field
//     names at 268, the interval count at 270 and the intervals' length at
//     274;
//   - after the form info and the screens, one 17-byte record per field:
//     the pack flags at 8 (256: an interval, ENUM; 512: a bit set, SET),
//     the interval's number (from 1) at 12, the MySQL type at 13, and the
//     collation id, high byte at 11 and low byte at 14;
//   - then the field names, each after a separator (0xFF), the last followed
//     by the separator and a NUL; then each interval the same way, its
//     separator being its first byte (0xFF unless a name contains 0xFF).
//
// Packed (mysys packfrm): a 12-byte header, u32 version 1, u32 the frm's
// length, u32 the stored length, then the frm deflated with zlib, or as it
// is when compressing did not shrink it (both lengths then equal).
//
// Everything is bounds-checked: a malformed or hostile blob is an error,
// never a panic (the fuzz targets hold that).
package frm

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MySQL field types (enum_field_types) the driver looks at.
const (
	TypeJSON       = 245
	TypeNewDecimal = 246
	TypeEnum       = 247
	TypeSet        = 248
	TypeTinyBlob   = 249
	TypeMediumBlob = 250
	TypeLongBlob   = 251
	TypeBlob       = 252
	TypeVarString  = 253
	TypeString     = 254
	TypeGeometry   = 255
)

// Pack flag bits (sql/field.h).
const (
	flagNumber   = 2
	flagInterval = 256
	flagBitfield = 512
	flagBlob     = 1024
)

// Limits: a .frm is at most a few hundred KiB (MySQL caps a table at 4096
// columns); anything larger is not one.
const (
	maxFrm    = 4 << 20
	maxFields = 4096
)

// Field is one column of the definition.
type Field struct {
	Name string
	// Type is the MySQL field type (TypeEnum, TypeSet, TypeBlob, ...).
	Type byte
	// Charset is the collation id (0 for non-character types; for GEOMETRY
	// the byte holds the geometry type, so Charset is 0).
	Charset  int
	PackFlag uint16
	// Names is an ENUM's values or a SET's members, in order, in the
	// column's character set; nil for other columns.
	Names [][]byte
}

// IsEnum reports an ENUM column.
func (f *Field) IsEnum() bool {
	return f.PackFlag&(flagInterval|flagNumber) == flagInterval
}

// IsSet reports a SET column.
func (f *Field) IsSet() bool {
	return f.PackFlag&(flagBitfield|flagNumber) == flagBitfield
}

// TypeName is the column's MySQL type as SQL spells it, for the types
// whose NDB form does not tell them apart (blobs, ENUM, SET, JSON,
// GEOMETRY); "" for the rest.
func (f *Field) TypeName() string {
	switch {
	case f.IsEnum():
		return "ENUM"
	case f.IsSet():
		return "SET"
	}
	blobText := func(blob, text string) string {
		if f.Charset == 63 || f.Charset == 0 {
			return blob
		}
		return text
	}
	switch f.Type {
	case TypeJSON:
		return "JSON"
	case TypeGeometry:
		return "GEOMETRY"
	case TypeTinyBlob:
		return blobText("TINYBLOB", "TINYTEXT")
	case TypeMediumBlob:
		return blobText("MEDIUMBLOB", "MEDIUMTEXT")
	case TypeLongBlob:
		return blobText("LONGBLOB", "LONGTEXT")
	case TypeBlob:
		return blobText("BLOB", "TEXT")
	}
	return ""
}

// Table is what Parse reads of a definition.
type Table struct {
	Fields []Field
}

// Field returns the named field, or nil.
func (t *Table) Field(name string) *Field {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return &t.Fields[i]
		}
	}
	return nil
}

var errShort = errors.New("frm: truncated")

// Unpack undoes mysqld's packfrm: the .frm from the bytes NDB keeps.
func Unpack(packed []byte) ([]byte, error) {
	if len(packed) < 12 {
		return nil, errShort
	}
	ver := binary.LittleEndian.Uint32(packed)
	orig := binary.LittleEndian.Uint32(packed[4:])
	stored := binary.LittleEndian.Uint32(packed[8:])
	if ver != 1 {
		return nil, fmt.Errorf("frm: packed version %d (1 expected)", ver)
	}
	if orig > maxFrm || stored > maxFrm {
		return nil, fmt.Errorf("frm: %d bytes is larger than a table definition", max(orig, stored))
	}
	body := packed[12:]
	if uint32(len(body)) < stored {
		return nil, errShort
	}
	body = body[:stored]
	if stored == orig {
		// Stored as it is: compressing would not have shrunk it.
		return body, nil
	}
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("frm: %w", err)
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(orig, 64<<10)))
	// One byte more than promised shows a lying header.
	n, err := io.Copy(buf, io.LimitReader(zr, int64(orig)+1))
	if err != nil {
		return nil, fmt.Errorf("frm: %w", err)
	}
	if n != int64(orig) {
		return nil, fmt.Errorf("frm: %d bytes unpacked, %d promised", n, orig)
	}
	return buf.Bytes(), nil
}

// Parse reads the fields of a .frm.
func Parse(b []byte) (*Table, error) {
	if len(b) < 64 {
		return nil, errShort
	}
	if b[0] != 0xFE || b[1] != 0x01 {
		return nil, errors.New("frm: not a table definition (bad magic)")
	}
	// head[2] is FRM_VER (6) plus the format version; field records of 17
	// bytes from FRM_VER+3 (MySQL 4.1) on.
	if b[2] < 6+3 {
		return nil, fmt.Errorf("frm: format %d is older than MySQL 4.1's", b[2])
	}
	const recLen = 17
	u16 := func(off int) (int, bool) {
		if off < 0 || off+2 > len(b) {
			return 0, false
		}
		return int(binary.LittleEndian.Uint16(b[off:])), true
	}
	namesLen, ok1 := u16(4)
	if names, ok := u16(8); !ok || names == 0 || !ok1 {
		return nil, errors.New("frm: no form")
	}
	posAt := 64 + namesLen
	if posAt+4 > len(b) {
		return nil, errShort
	}
	form := int(binary.LittleEndian.Uint32(b[posAt:]))
	if form <= 0 || form+288 > len(b) {
		return nil, errShort
	}
	fields, _ := u16(form + 258)
	screens, _ := u16(form + 260)
	nLength, _ := u16(form + 268)
	intervals, _ := u16(form + 270)
	intLength, _ := u16(form + 274)
	if fields == 0 || fields > maxFields {
		return nil, fmt.Errorf("frm: %d fields", fields)
	}
	recs := form + 288 + screens
	names := recs + fields*recLen
	end := names + nLength + intLength
	if end > len(b) {
		return nil, errShort
	}
	t := &Table{Fields: make([]Field, fields)}
	for i := range t.Fields {
		r := b[recs+i*recLen : recs+(i+1)*recLen]
		f := &t.Fields[i]
		f.PackFlag = binary.LittleEndian.Uint16(r[8:])
		f.Type = r[13]
		if f.Type != TypeGeometry {
			f.Charset = int(r[11])<<8 | int(r[14])
		}
	}
	p := typeNames{b: b[names:end]}
	fieldNames, err := p.next()
	if err != nil {
		return nil, fmt.Errorf("frm: field names: %w", err)
	}
	if len(fieldNames) != fields {
		return nil, fmt.Errorf("frm: %d field names for %d fields", len(fieldNames), fields)
	}
	for i, n := range fieldNames {
		t.Fields[i].Name = string(n)
	}
	all := make([][][]byte, intervals)
	for i := range all {
		if all[i], err = p.next(); err != nil {
			return nil, fmt.Errorf("frm: interval %d: %w", i+1, err)
		}
	}
	for i := range t.Fields {
		f := &t.Fields[i]
		if !f.IsEnum() && !f.IsSet() {
			continue
		}
		n := int(b[recs+i*recLen+12])
		if n < 1 || n > len(all) {
			return nil, fmt.Errorf("frm: field %s: interval %d of %d", f.Name, n, len(all))
		}
		f.Names = all[n-1]
	}
	return t, nil
}

// typeNames reads MySQL's "type names" lists (sql/table.cc
// fix_type_pointers): a separator byte, each name followed by it, and a NUL
// after the last; a lone NUL is an empty list. Names never hold a NUL.
type typeNames struct{ b []byte }

func (p *typeNames) next() ([][]byte, error) {
	if len(p.b) == 0 {
		return nil, errShort
	}
	sep := p.b[0]
	if sep == 0 {
		p.b = p.b[1:]
		return [][]byte{}, nil
	}
	// The list ends at the first NUL; the byte before it is the last
	// separator.
	z := bytes.IndexByte(p.b, 0)
	if z < 0 {
		return nil, errShort
	}
	list := p.b[1:z]
	if len(list) == 0 || list[len(list)-1] != sep {
		return nil, errors.New("list not closed by its separator")
	}
	list = list[:len(list)-1]
	p.b = p.b[z+1:]
	return bytes.Split(list, []byte{sep}), nil
}
