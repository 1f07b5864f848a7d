// Package ndbapi is ndbgate's NDB API driver. The cgo part (driver.go,
// shim*.cpp) builds only with the ndbapi tag; this file, the flat buffer format
// between Go and the C++ shim and the mapping of NDB types and errors, is
// plain Go, so CI tests it without NDB.
//
// Request (little endian): u32 nops; per op: u8 kind, u8 lock, u8 flags, u8 0,
// u32 table id, [partition (flag 64): u32 the key's partition], u16 nkey {u16 col, u32 len, native bytes}, u16 nread {u16 col},
// u16 nset {u16 col, u8 null, u32 len, bytes}, [cond: u16 col, u8 null, u32
// len, bytes], [add: u16 col, u64 delta, u64 initial], [append: u16 col, u32
// len, bytes], [expiry (flag 32): u16 expire column, u32 now]; then u32
// response bound.
// Response per op: i32 ndb code, u8 status, u8 classification; on error u16 0,
// u32 len, message, u32 affected (delete_all: rows of the batches committed
// before the error; else 0); else u16 nvalues {u8 null, u32 len, bytes}, u32
// affected, [append: u32 len, the value written].
// Describe: u32 partitions, u16 ncols {u16 len, name, u8 type, u32 length, u8
// nullable, u8 key flags (1 primary key, 2 distribution key, 4 in the ordered
// index PRIMARY: create only, 8 auto-increment), u8 array type,
// u16 precision, u16 scale, u32 slot bytes (the column's NdbRecord row slot,
// getSizeInBytesForRecord: the native size, a length prefix included; 0 for
// BLOB/TEXT), u16 character set number (0 for non-character columns)}, u32
// frm length (0xFFFFFFFF: too large for the buffer), mysqld's packed .frm
// (none for tables made through the NDB API; see internal/frm).
package ndbapi

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ndbgate/ndbgate/internal/charset"
	"github.com/ndbgate/ndbgate/internal/prefetch"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// NdbDictionary::Column::Type values.
const (
	ndbTinyint         = 1
	ndbTinyunsigned    = 2
	ndbSmallint        = 3
	ndbSmallunsigned   = 4
	ndbMediumint       = 5
	ndbMediumunsigned  = 6
	ndbInt             = 7
	ndbUnsigned        = 8
	ndbBigint          = 9
	ndbBigunsigned     = 10
	ndbFloat           = 11
	ndbDouble          = 12
	ndbChar            = 14
	ndbVarchar         = 15
	ndbBinary          = 16
	ndbVarbinary       = 17
	ndbDatetime        = 18
	ndbDate            = 19
	ndbBlob            = 20
	ndbText            = 21
	ndbBit             = 22
	ndbLongvarchar     = 23
	ndbLongvarbinary   = 24
	ndbTime            = 25
	ndbYear            = 26
	ndbTimestamp       = 27
	ndbDecimal         = 29
	ndbDecimalunsigned = 30
	ndbTime2           = 31
	ndbDatetime2       = 32
	ndbTimestamp2      = 33
)

// NdbError::Status and ::Classification values used here (ndberror.h:
// ndberror_st_* and ndberror_cl_*; 16 is ndberror_cl_configuration).
const (
	statusTemporary     = 1
	statusUnknownResult = 3

	classApplication      = 1
	classNoDataFound      = 2
	classConstraint       = 3
	classSchema           = 4
	classInsufficientSpc  = 6
	classTemporaryRes     = 7
	classNodeRecovery     = 8
	classOverload         = 9
	classTimeout          = 10
	classUnknownResult    = 11
	classNodeShutdown     = 15
	classSchemaObjectExst = 17
	classInternalTemp     = 18
)

// The codes the shim's interpreted programs exit with and the shim's own, the
// op kinds, lock modes and flags, and maxMessage are in wire_consts.go,
// generated from the one table both sides are made from (internal/wiregen).
//
//go:generate go run ./internal/wiregen/gen

// column is what the driver needs of one NDB column.
type column struct {
	ndbType   uint8
	arrayType uint8 // 0 fixed, 1 short var (1-byte length), 2 medium var (2 bytes)
	length    int   // chars/bytes for strings, bits for BIT
	maxBytes  int   // the shim's row slot: native size, a length prefix included
	precision int   // DECIMAL digits
	scale     int   // DECIMAL decimals
	fsp       int   // TIME2, DATETIME2, TIMESTAMP2: fractional-second digits
	charset   int   // CHAR/VARCHAR/TEXT: MySQL collation id (63: binary)
	blob      bool  // BLOB/TEXT: no row slot; ops naming it are refused
	// exact: an ENUM or SET (a CHAR of binary character set holding an
	// index or a bitmask): its bytes are kept as stored, not space-trimmed,
	// and zero-padded.
	exact bool
}

// tableInfo is a described table.
type tableInfo struct {
	id     int
	schema *ndbclient.Table
	cols   []column
	// hasBlob: a BLOB/TEXT column. An asynchronous delete would leave its
	// parts behind in the blob table, so deletes are refused.
	hasBlob bool
	// lanes maps partition -> dispatcher lane (driver.go); nil: lane 0.
	// Replaced when the table is looked up again.
	lanes atomic.Pointer[[]int]
	// partitions remembers the partitions of recently routed keys
	// (partmemo.go); replaced with the lanes.
	partitions atomic.Pointer[partitionMemo]
	// partitionCount is the table's partitions when the lanes were made.
	partitionCount atomic.Int32
	// gone: the dictionary no longer has the table in a shape the gateway
	// can serve (driver.go refresh); nil while it can.
	gone atomic.Pointer[goneTable]
}

// goneTable is why a table cannot be served, and since when.
type goneTable struct {
	err error
	at  time.Time
}

// decodeDescribe turns the shim's describe output into a schema.
func decodeDescribe(db, name string, id int, b []byte) (*tableInfo, error) {
	r := reader{b: b}
	ti := &tableInfo{id: id, schema: &ndbclient.Table{Database: db, Name: name, ExpireColumn: -1}}
	ti.schema.Partitions = int(r.u32())
	n := int(r.u16())
	var dist []int
	for i := 0; i < n && r.ok(); i++ {
		cname := string(r.bytes(int(r.u16())))
		nt := r.u8()
		length := int(r.u32())
		nullable := r.u8() != 0
		keyFlags := r.u8()
		pk := keyFlags&1 != 0
		at := r.u8()
		prec, scale := int(r.u16()), int(r.u16())
		maxBytes := int(r.u32())
		cs := int(r.u16())
		ct, err := columnType(nt)
		if err != nil {
			return nil, fmt.Errorf("%s.%s column %s: %w", db, name, cname, err)
		}
		col := column{ndbType: nt, arrayType: at, length: length, maxBytes: maxBytes, charset: cs}
		if nt == ndbBit && maxBytes != 4 && maxBytes != 8 {
			// NDB keeps BIT(n) in 32-bit words; the shim's slot says how many.
			return nil, fmt.Errorf("%s.%s column %s: BIT(%d) in a %d-byte slot (4 or 8 expected)", db, name, cname, length, maxBytes)
		}
		sc := ndbclient.Column{Name: cname, Type: ct, Length: length, Nullable: nullable, Charset: cs,
			AutoIncrement: keyFlags&8 != 0}
		if ct == ndbclient.TypeChar || ct == ndbclient.TypeVarchar {
			if mb := charset.MaxBytes(cs); mb > 0 {
				sc.Chars = length / mb
			}
		}
		switch nt {
		case ndbBlob, ndbText:
			// Served, but never read or written: NdbBlob's parts need a
			// synchronous execute() (wire.go refuses ops that name such a
			// column, and deletes of the table's rows).
			sc.Unsupported = "a " + ct.String() + " column: ndbgate does not read or write BLOB/TEXT"
			col.blob = true
			ti.hasBlob = true
		case ndbDecimal, ndbDecimalunsigned:
			col.precision, col.scale = prec, scale
			sc.Precision, sc.Scale = prec, scale
			if !decimalShapeOK(&col) {
				return nil, fmt.Errorf("%s.%s column %s: DECIMAL(%d,%d) is out of MySQL's range", db, name, cname, prec, scale)
			}
		case ndbTime2, ndbDatetime2, ndbTimestamp2:
			// The dictionary keeps these types' fractional digits as precision.
			if prec < 0 || prec > 6 {
				return nil, fmt.Errorf("%s.%s column %s: %d fractional-second digits (MySQL allows 0-6)", db, name, cname, prec)
			}
			col.fsp, sc.Scale = prec, prec
		}
		ti.schema.Columns = append(ti.schema.Columns, sc)
		ti.cols = append(ti.cols, col)
		if pk {
			ti.schema.PrimaryKey = append(ti.schema.PrimaryKey, i)
		}
		if keyFlags&2 != 0 {
			dist = append(dist, i)
		}
	}
	if !r.ok() {
		return nil, fmt.Errorf("%s.%s: malformed describe output", db, name)
	}
	// The .frm trailer, when the shim sent one (older test buffers end here).
	var frmBytes []byte
	var frmErr error
	if len(r.b) >= 4 {
		switch n := r.u32(); {
		case n == 0xFFFFFFFF:
			frmErr = fmt.Errorf("the table definition did not fit the describe buffer")
		case n > 0:
			if frmBytes = r.bytes(int(n)); !r.ok() {
				return nil, fmt.Errorf("%s.%s: malformed describe output (table definition)", db, name)
			}
		}
	}
	applyFrm(ti, frmBytes, frmErr)
	// An explicit distribution key only when it is not the whole primary key.
	if len(dist) > 0 && !sameInts(dist, ti.schema.PrimaryKey) {
		ti.schema.DistributionKey = dist
	}
	return ti, nil
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// columnType maps an NDB column type onto the contract's; types this driver
// does not carry yet are refused when the table is described.
func columnType(t uint8) (ndbclient.ColumnType, error) {
	switch t {
	case ndbTinyint:
		return ndbclient.TypeInt8, nil
	case ndbTinyunsigned:
		return ndbclient.TypeUint8, nil
	case ndbSmallint:
		return ndbclient.TypeInt16, nil
	case ndbSmallunsigned:
		return ndbclient.TypeUint16, nil
	case ndbMediumint:
		return ndbclient.TypeInt24, nil
	case ndbMediumunsigned:
		return ndbclient.TypeUint24, nil
	case ndbInt:
		return ndbclient.TypeInt32, nil
	case ndbUnsigned:
		return ndbclient.TypeUint32, nil
	case ndbBigint:
		return ndbclient.TypeInt64, nil
	case ndbBigunsigned:
		return ndbclient.TypeUint64, nil
	case ndbFloat:
		return ndbclient.TypeFloat, nil
	case ndbDouble:
		return ndbclient.TypeDouble, nil
	case ndbChar:
		return ndbclient.TypeChar, nil
	case ndbVarchar, ndbLongvarchar:
		return ndbclient.TypeVarchar, nil
	case ndbBinary:
		return ndbclient.TypeBinary, nil
	case ndbVarbinary, ndbLongvarbinary:
		return ndbclient.TypeVarbinary, nil
	case ndbBit:
		return ndbclient.TypeBit, nil
	case ndbYear:
		return ndbclient.TypeYear, nil
	case ndbDecimal, ndbDecimalunsigned:
		return ndbclient.TypeDecimal, nil
	case ndbDate:
		return ndbclient.TypeDate, nil
	case ndbDatetime, ndbDatetime2:
		return ndbclient.TypeDatetime, nil
	case ndbTime, ndbTime2:
		return ndbclient.TypeTime, nil
	case ndbTimestamp, ndbTimestamp2:
		return ndbclient.TypeTimestamp, nil
	case ndbBlob:
		return ndbclient.TypeBlob, nil
	case ndbText:
		return ndbclient.TypeText, nil
	}
	return 0, fmt.Errorf("NDB column type %d is not supported by this driver (old-style DECIMAL from before MySQL 5.0 and unknown types are refused)", t)
}

// appendNative appends v in the column's native NDB format.
func appendNative(dst []byte, c *column, v ndbclient.Value) ([]byte, error) {
	switch c.ndbType {
	case ndbTinyint, ndbTinyunsigned:
		return append(dst, byte(v.Uint())), nil
	case ndbSmallint, ndbSmallunsigned:
		return binary.LittleEndian.AppendUint16(dst, uint16(v.Uint())), nil
	case ndbMediumint, ndbMediumunsigned:
		n := v.Uint()
		return append(dst, byte(n), byte(n>>8), byte(n>>16)), nil
	case ndbInt, ndbUnsigned:
		return binary.LittleEndian.AppendUint32(dst, uint32(v.Uint())), nil
	case ndbBigint, ndbBigunsigned:
		return binary.LittleEndian.AppendUint64(dst, v.Uint()), nil
	case ndbBit:
		// 32-bit words, low word first: BIT(1..32) is 4 bytes, BIT(33..64) 8.
		if nativeSize(c) == 4 {
			return binary.LittleEndian.AppendUint32(dst, uint32(v.Uint())), nil
		}
		return binary.LittleEndian.AppendUint64(dst, v.Uint()), nil
	case ndbYear:
		// MySQL's one byte: 0 is the year 0000, else the year less 1900.
		if v.Uint() == 0 {
			return append(dst, 0), nil
		}
		return append(dst, byte(v.Uint()-1900)), nil
	case ndbFloat:
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.Float()))), nil
	case ndbDouble:
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Float())), nil
	case ndbChar, ndbBinary:
		if len(v.B) > c.length {
			return dst, tooLong(c, len(v.B))
		}
		dst = append(dst, v.B...)
		pad := byte(' ')
		if c.ndbType == ndbBinary || c.exact {
			pad = 0
		}
		for i := len(v.B); i < c.length; i++ {
			dst = append(dst, pad)
		}
		return dst, nil
	case ndbVarchar, ndbVarbinary, ndbLongvarchar, ndbLongvarbinary:
		if len(v.B) > c.length {
			return dst, tooLong(c, len(v.B))
		}
		if c.arrayType == 1 {
			dst = append(dst, byte(len(v.B)))
		} else {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(v.B)))
		}
		return append(dst, v.B...), nil
	case ndbDecimal, ndbDecimalunsigned:
		return appendDecimal(dst, c, v.B)
	case ndbDate, ndbDatetime, ndbDatetime2, ndbTime, ndbTime2, ndbTimestamp, ndbTimestamp2:
		return appendTemporal(dst, c, v.B)
	}
	return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "NDB column type %d not supported", c.ndbType)
}

func tooLong(c *column, n int) error {
	return ndbclient.Errorf(ndbclient.CodeTooLarge, "value of %d bytes for a column of %d", n, c.length)
}

// nativeSize is the bytes a fixed-size native value takes (0: variable).
func nativeSize(c *column) int {
	switch c.ndbType {
	case ndbTinyint, ndbTinyunsigned, ndbYear:
		return 1
	case ndbSmallint, ndbSmallunsigned:
		return 2
	case ndbMediumint, ndbMediumunsigned:
		return 3
	case ndbInt, ndbUnsigned, ndbFloat:
		return 4
	case ndbBigint, ndbBigunsigned, ndbDouble:
		return 8
	case ndbBit:
		// The shim's slot: 4 or 8 (decodeDescribe refuses others).
		if c.maxBytes == 4 {
			return 4
		}
		return 8
	case ndbDecimal, ndbDecimalunsigned:
		return decimalSize(c.precision, c.scale)
	}
	return temporalSize(c)
}

// decodeNative reads a native value; bytes alias b. A value too short for
// its type (a malformed response) reads as NULL rather than panicking.
func decodeNative(c *column, b []byte) ndbclient.Value {
	if len(b) < nativeSize(c) {
		return ndbclient.Null()
	}
	switch c.ndbType {
	case ndbTinyint:
		return ndbclient.Int(int64(int8(b[0])))
	case ndbTinyunsigned:
		return ndbclient.Uint(uint64(b[0]))
	case ndbSmallint:
		return ndbclient.Int(int64(int16(binary.LittleEndian.Uint16(b))))
	case ndbSmallunsigned:
		return ndbclient.Uint(uint64(binary.LittleEndian.Uint16(b)))
	case ndbMediumint:
		n := int32(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16) << 8 >> 8
		return ndbclient.Int(int64(n))
	case ndbMediumunsigned:
		return ndbclient.Uint(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16)
	case ndbInt:
		return ndbclient.Int(int64(int32(binary.LittleEndian.Uint32(b))))
	case ndbUnsigned:
		return ndbclient.Uint(uint64(binary.LittleEndian.Uint32(b)))
	case ndbBigint:
		return ndbclient.Int(int64(binary.LittleEndian.Uint64(b)))
	case ndbBigunsigned:
		return ndbclient.Uint(binary.LittleEndian.Uint64(b))
	case ndbBit:
		// NDB fills only the column's bits of its words; the rest of the
		// record slot is whatever the buffer held (seen live: BIT(12)).
		var v uint64
		if nativeSize(c) == 4 {
			v = uint64(binary.LittleEndian.Uint32(b))
		} else {
			v = binary.LittleEndian.Uint64(b)
		}
		if c.length > 0 && c.length < 64 {
			v &= 1<<uint(c.length) - 1
		}
		return ndbclient.Uint(v)
	case ndbYear:
		if b[0] == 0 {
			return ndbclient.Uint(0) // the year 0000
		}
		return ndbclient.Uint(uint64(b[0]) + 1900)
	case ndbFloat:
		return ndbclient.Float(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case ndbDouble:
		return ndbclient.Float(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case ndbChar:
		if c.exact {
			return ndbclient.Bytes(b)
		}
		end := len(b)
		for end > 0 && b[end-1] == ' ' {
			end--
		}
		return ndbclient.Bytes(b[:end])
	case ndbBinary:
		return ndbclient.Bytes(b)
	case ndbVarchar, ndbVarbinary, ndbLongvarchar, ndbLongvarbinary:
		if c.arrayType == 1 {
			if len(b) < 1 || len(b) < 1+int(b[0]) {
				return ndbclient.Null()
			}
			return ndbclient.Bytes(b[1 : 1+int(b[0])])
		}
		if len(b) < 2 {
			return ndbclient.Null()
		}
		n := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+n {
			return ndbclient.Null()
		}
		return ndbclient.Bytes(b[2 : 2+n])
	case ndbDecimal, ndbDecimalunsigned:
		if s, ok := decodeDecimal(c, b[:nativeSize(c)]); ok {
			return ndbclient.String(s)
		}
	case ndbDate, ndbDatetime, ndbDatetime2, ndbTime, ndbTime2, ndbTimestamp, ndbTimestamp2:
		if s, ok := decodeTemporal(c, b[:nativeSize(c)]); ok {
			return ndbclient.String(s)
		}
	}
	return ndbclient.Null()
}

// Request encoding (op kinds and flags: wire_consts.go).

// expiring: op kinds that treat an expired row as missing. A write (set)
// overwrites it either way; delete_all removes every row.
func expiring(k ndbclient.OpKind) bool {
	return k != ndbclient.OpWrite && k != ndbclient.OpDeleteAll
}

// tableCache answers a flight's table lookups, asking tables only when the
// table changes: a flight's ops are mostly of one table, and the lookup is a
// map read per op.
type tableCache struct {
	tables func(*ndbclient.Table) (*tableInfo, error)
	t      *ndbclient.Table
	ti     *tableInfo
}

func (c *tableCache) get(t *ndbclient.Table) (*tableInfo, error) {
	if c.ti == nil || t != c.t {
		ti, err := c.tables(t)
		if err != nil {
			return nil, err
		}
		c.t, c.ti = t, ti
	}
	return c.ti, nil
}

// wireKinds is the shim's code for each op kind; 0 (no code starts at 0)
// marks a kind the shim does not know. An array, not a map: it is read
// once per op.
var wireKinds = [...]byte{
	ndbclient.OpRead: kindRead, ndbclient.OpInsert: kindInsert, ndbclient.OpUpdate: kindUpdate,
	ndbclient.OpWrite: kindWrite, ndbclient.OpDelete: kindDelete, ndbclient.OpCondUpdate: kindCondUpdate,
	ndbclient.OpAdd: kindAdd, ndbclient.OpAppend: kindAppend, ndbclient.OpDeleteAll: kindDeleteAll,
}

// wireKind is the shim's code for an op kind.
func wireKind(k ndbclient.OpKind) (byte, bool) {
	if int(k) >= len(wireKinds) || wireKinds[k] == 0 {
		return 0, false
	}
	return wireKinds[k], true
}

// warmAhead: encodeFlight and decodeResults ask for the ops this far ahead
// of the one they work on. An executor reads ops that another core has just
// built, so every op's lines are misses; asked for early, they overlap.
const warmAhead = 2

// warmOps asks for the cache lines of ops[i+warmAhead] that a flight reads
// and writes (ndbclient.Op puts them first).
func warmOps(ops []*ndbclient.Op, i int) {
	if j := i + warmAhead; j < len(ops) {
		prefetch.Lines(uintptr(unsafe.Pointer(ops[j])), 3)
	}
}

// warmKey asks for the key values of ops[i+1], for encodeFlight; warmOps
// brought in the op itself.
func warmKey(ops []*ndbclient.Op, i int) {
	if j := i + 1; j < len(ops) && len(ops[j].Key) > 0 {
		prefetch.Line(uintptr(unsafe.Pointer(&ops[j].Key[0])))
	}
}

// warmRow asks for the start of the row and row buffer that decodeResults
// will write for ops[i+1].
func warmRow(ops []*ndbclient.Op, i int) {
	if j := i + 1; j < len(ops) {
		if op := ops[j]; cap(op.Row) > 0 && cap(op.RowBuf) > 0 {
			prefetch.Line(uintptr(unsafe.Pointer(&op.Row[:1][0])))
			prefetch.Line(uintptr(unsafe.Pointer(&op.RowBuf[:1][0])))
		}
	}
}

// encodeFlight builds the request for ops; tables resolves each op's table.
// It returns the buffer with the response bound appended. On tables with an
// expire column (Table.ExpireColumn), ops carry now (unix seconds): the
// shim's programs make a row whose expiry is not after now a miss.
//
// extra, nil or one per op, adds the driver's own item-state columns
// (state.go) to an op's reads and sets.
func encodeFlight(dst []byte, ops []*ndbclient.Op, extra []stateExtra, tables func(*ndbclient.Table) (*tableInfo, error), now uint32) ([]byte, error) {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ops)))
	bound := 0
	known := tableCache{tables: tables}
	for i, op := range ops {
		warmOps(ops, i)
		warmKey(ops, i)
		var x stateExtra
		if extra != nil {
			x = extra[i]
		}
		ti, err := known.get(op.Table)
		if err != nil {
			return dst, err
		}
		kind, ok := wireKind(op.Kind)
		if !ok {
			return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "unknown op kind %d", op.Kind)
		}
		if ti.hasBlob && (op.Kind == ndbclient.OpDelete || op.Kind == ndbclient.OpDeleteAll) {
			return dst, blobDeleteRefused(ti)
		}
		if op.Kind == ndbclient.OpAdd && op.Create {
			// NDB has no insert-if-missing add; the gateway creates missing
			// counters with an insert after NotFound.
			return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "atomic add with create is done by the caller on the NDB driver")
		}
		var flags byte
		if op.TxnWithNext {
			flags |= flagTxnWithNext
		}
		if op.StartsNode() {
			flags |= flagNodeStart
		}
		if op.HasCond {
			flags |= flagHasCond
		}
		if op.Subtract {
			flags |= flagSubtract
		}
		if op.Prepend {
			flags |= flagPrepend
		}
		expiry := op.Table.ExpireColumn
		if expiry >= 0 && expiring(op.Kind) && !op.Table.ExpiryByCaller {
			if expiry >= len(ti.cols) || !isExpiryType(ti.cols[expiry].ndbType) {
				return dst, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s: expire column %d must be INT or BIGINT, signed or unsigned, or TIMESTAMP", op.Table.FullName(), expiry)
			}
			flags |= flagExpiry
		}
		partition, hashed := op.KeyPartition()
		if hashed {
			flags |= flagPartition
		}
		dst = append(dst, kind, byte(op.Lock), flags, 0)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(ti.id))
		if hashed {
			dst = binary.LittleEndian.AppendUint32(dst, uint32(partition))
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(op.Key)))
		for i, k := range op.Key {
			col := ti.schema.PrimaryKey[i]
			if dst, err = appendValue(dst, ti, col, k, false); err != nil {
				return dst, err
			}
		}
		nread := len(op.Read) + x.reads()
		dst = binary.LittleEndian.AppendUint16(dst, uint16(nread))
		for j := 0; j < nread; j++ {
			c := readColumn(op, x, j)
			if c < 0 || c >= len(ti.cols) {
				return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "read column %d out of range", c)
			}
			if ti.cols[c].blob {
				return dst, blobRefused(ti, c)
			}
			dst = binary.LittleEndian.AppendUint16(dst, uint16(c))
			bound += 5 + ti.cols[c].maxBytes
		}
		nset := len(op.Set)
		if x.set {
			nset++
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(nset))
		for _, s := range op.Set {
			if dst, err = appendValue(dst, ti, s.Column, s.Value, true); err != nil {
				return dst, err
			}
		}
		if x.set {
			if dst, err = appendValue(dst, ti, x.col, ndbclient.Uint(x.value), true); err != nil {
				return dst, err
			}
		}
		if op.HasCond || op.Kind == ndbclient.OpCondUpdate {
			if dst, err = appendValue(dst, ti, op.CondColumn, op.CondValue, true); err != nil {
				return dst, err
			}
		}
		switch op.Kind {
		case ndbclient.OpAdd:
			if op.AddColumn < 0 || op.AddColumn >= len(ti.cols) || ti.cols[op.AddColumn].blob {
				return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s: column %d cannot be added to", op.Table.FullName(), op.AddColumn)
			}
			dst = binary.LittleEndian.AppendUint16(dst, uint16(op.AddColumn))
			dst = binary.LittleEndian.AppendUint64(dst, op.Delta)
			dst = binary.LittleEndian.AppendUint64(dst, op.Initial)
		case ndbclient.OpAppend:
			if op.AppendColumn < 0 || op.AppendColumn >= len(ti.cols) || ti.cols[op.AppendColumn].blob {
				return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s: column %d cannot be appended to", op.Table.FullName(), op.AppendColumn)
			}
			dst = binary.LittleEndian.AppendUint16(dst, uint16(op.AppendColumn))
			// The data travels with the column's length prefix; the shim strips it.
			c := &ti.cols[op.AppendColumn]
			start := len(dst)
			dst = binary.LittleEndian.AppendUint32(dst, 0)
			if c.arrayType == 1 {
				dst = append(dst, byte(len(op.Data)))
			} else if c.arrayType == 2 {
				dst = binary.LittleEndian.AppendUint16(dst, uint16(len(op.Data)))
			}
			dst = append(dst, op.Data...)
			binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
			bound += 4 + c.maxBytes
		}
		if flags&flagExpiry != 0 {
			dst = binary.LittleEndian.AppendUint16(dst, uint16(expiry))
			dst = binary.LittleEndian.AppendUint32(dst, now)
		}
		bound += 8 + 2 + 4 + 4 + maxMessage + 16 // also covers an error: 6 + 2 + 4 + message + 4
	}
	return binary.LittleEndian.AppendUint32(dst, uint32(bound)), nil
}

func isExpiryType(t uint8) bool {
	switch t {
	case ndbInt, ndbUnsigned, ndbBigint, ndbBigunsigned, ndbTimestamp, ndbTimestamp2:
		return true
	}
	return false
}

func appendValue(dst []byte, ti *tableInfo, col int, v ndbclient.Value, withNull bool) ([]byte, error) {
	if col < 0 || col >= len(ti.cols) {
		return dst, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %d out of range", col)
	}
	if ti.cols[col].blob {
		return dst, blobRefused(ti, col)
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(col))
	if withNull {
		if v.IsNull() {
			dst = append(dst, 1)
			return binary.LittleEndian.AppendUint32(dst, 0), nil
		}
		dst = append(dst, 0)
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	var err error
	if dst, err = appendNative(dst, &ti.cols[col], v); err != nil {
		return dst, err
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

// decodeResults fills each op's result from the shim's response.
// extra is what encodeFlight was given: values past an op's Read projection
// are its state columns.
func decodeResults(b []byte, ops []*ndbclient.Op, extra []stateExtra, tables func(*ndbclient.Table) (*tableInfo, error)) error {
	r := reader{b: b}
	return decodeResultsFrom(&r, ops, extra, tables)
}

// decodeResultsFrom decodes ops' results from r, leaving r after them: a
// section's results among others (owed.go).
func decodeResultsFrom(r *reader, ops []*ndbclient.Op, extra []stateExtra, tables func(*ndbclient.Table) (*tableInfo, error)) error {
	known := tableCache{tables: tables}
	for k, op := range ops {
		warmOps(ops, k)
		warmRow(ops, k)
		var x stateExtra
		if extra != nil {
			x = extra[k]
		}
		if !r.ok() {
			break
		}
		code := int32(r.u32())
		status, class := r.u8(), r.u8()
		n := int(r.u16())
		op.Row = op.Row[:0]
		if code != 0 || status != 0 {
			msg := string(r.bytes(int(r.u32())))
			op.Err = mapOpError(op.Kind, int(code), status, class, msg)
			// A delete_all that failed part way has removed some rows.
			if affected := r.u32(); op.Kind != ndbclient.OpRead {
				op.Affected = uint64(affected)
			}
			continue
		}
		op.Err = nil
		ti, err := known.get(op.Table)
		if err != nil {
			return err
		}
		// Values are copied into RowBuf and decoded from there. RowBuf grows
		// once, to the values' total, so that no copy moves under a value
		// already decoded.
		op.RowBuf = slices.Grow(op.RowBuf[:0], r.valuesLen(n))
		for i := 0; i < n; i++ {
			null := r.u8() != 0
			v := r.bytes(int(r.u32()))
			start := len(op.RowBuf)
			op.RowBuf = append(op.RowBuf, v...)
			c := readColumn(op, x, i)
			if null || c < 0 || c >= len(ti.cols) {
				op.Row = append(op.Row, ndbclient.Null())
				continue
			}
			op.Row = append(op.Row, decodeNative(&ti.cols[c], op.RowBuf[start:]))
		}
		affected := r.u32()
		if op.Kind != ndbclient.OpRead {
			op.Affected = uint64(affected)
		}
		if op.Kind == ndbclient.OpAppend {
			written := r.bytes(int(r.u32()))
			if len(op.Read) > 0 {
				start := len(op.RowBuf)
				op.RowBuf = append(op.RowBuf, written...)
				v := decodeNative(&ti.cols[op.AppendColumn], op.RowBuf[start:])
				for _, c := range op.Read {
					if c == op.AppendColumn {
						op.Row = append(op.Row, v)
					} else {
						op.Row = append(op.Row, ndbclient.Null())
					}
				}
			}
		}
	}
	if !r.ok() {
		return ndbclient.Errorf(ndbclient.CodeInternal, "malformed response from the NDB shim")
	}
	return nil
}

// errLostCoordinator is the NDB API's own "Node failure caused abort of
// transaction": it lost the connection to the transaction's coordinator,
// whatever state the transaction was in (Ndb::abortTransactionsAfterNodeFailure).
const errLostCoordinator = 4010

// mapOpError is mapError for one op's error. A write that lost its
// coordinator may have committed: NDB reports 4010 even when the commit had
// gone out with the operations (execute(Commit) sends them together), and a
// coordinator that is still up (only the API's link to it broke), or the
// one that took over from it, then commits it. tests/lin found such a write,
// refused as "temporary" and retried, whose value a later read returned
// (a gateway cut from one data node). So it is UnknownResult, never
// retried; a read that lost its coordinator did nothing and stays Temporary.
func mapOpError(kind ndbclient.OpKind, code int, status, class uint8, msg string) error {
	if code == errLostCoordinator && kind != ndbclient.OpRead {
		return &ndbclient.Error{Code: ndbclient.CodeUnknownResult, NativeCode: code,
			Message: msg + "; the write may have been applied"}
	}
	return mapError(code, status, class, msg)
}

// errNotSent is the shim's refusal to send a transaction (notSentStalled,
// notSentFull): NDB's 4012 in the timeout class, where NDB's own 4012 is
// in the unknown-result class.
const errNotSent = 4012

// mapError turns an NdbError into a canonical error, keeping NDB's code and
// message for logs.
func mapError(code int, status, class uint8, msg string) error {
	if code == errNotSent && class == classTimeout {
		return &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: code, Message: msg, NotSent: true}
	}
	c := ndbclient.CodeInternal
	switch {
	case code == 626 || code == exitExpired || class == classNoDataFound:
		c = ndbclient.CodeNotFound
	case code == 630 || class == classConstraint && code == 893:
		c = ndbclient.CodeDuplicate
	case code == exitCondFailed:
		c = ndbclient.CodeConditionFailed
	case code == exitNotNumeric:
		c = ndbclient.CodeNotNumeric
	case code == errLinkedSync || code == errBadValue:
		c = ndbclient.CodeInvalidArgument
	case code == 1 && class == classApplication:
		c = ndbclient.CodeTooLarge
	case code == errClusterFail && status != statusUnknownResult:
		// the shim marks errors of startTransaction: nothing was sent
		c = ndbclient.CodeUnavailable
	case status == statusUnknownResult || class == classUnknownResult:
		c = ndbclient.CodeUnknownResult
	case class == classOverload:
		c = ndbclient.CodeOverloaded
	case (class == classNodeShutdown || class == classNodeRecovery) && status == statusTemporary:
		// A node failure aborted the transaction (286, 4010): nothing was
		// applied, and another node has taken over, so the dispatcher may
		// retry it (seen live: a data node killed under write load).
		c = ndbclient.CodeTemporary
	case class == classNodeShutdown || class == classNodeRecovery:
		c = ndbclient.CodeUnavailable
	case status == statusTemporary || class == classTemporaryRes || class == classTimeout || class == classInternalTemp:
		c = ndbclient.CodeTemporary
	case class == classSchema || class == classSchemaObjectExst:
		c = ndbclient.CodeSchemaError
	case class == classInsufficientSpc:
		c = ndbclient.CodeOutOfMemory
	case class == classConstraint:
		c = ndbclient.CodeInvalidArgument
	}
	return &ndbclient.Error{Code: c, NativeCode: code, Message: msg}
}

type reader struct {
	b   []byte
	bad bool
}

func (r *reader) ok() bool { return !r.bad }

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) bytes(n int) []byte { return r.take(n) }

// valuesLen is the total length of the next n values (a null byte, a
// length, the bytes), without reading them; what is there if they run past
// the end.
func (r *reader) valuesLen(n int) int {
	b, total := r.b, 0
	for i := 0; i < n && len(b) >= 5; i++ {
		l := int(binary.LittleEndian.Uint32(b[1:]))
		if l > len(b)-5 {
			break
		}
		total += l
		b = b[5+l:]
	}
	return total
}
