package ndbapi

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// encodeCreate writes t in describe's format (wire.go), for the shim's
// ndbgate_create_table: the inverse of decodeDescribe. CHAR(n) and
// VARCHAR(n) take n bytes; the shim leaves strings NDB's default character
// set, binary (the column's Charset travels, but is not applied: memcache
// keys and values are bytes). VARCHAR and VARBINARY longer than 255 bytes
// take a 2-byte length prefix (NDB's long variants). An AutoIncrement
// column makes the table's sequence, starting at 1, as mysqld does.
func encodeCreate(t *ndbclient.Table) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	auto := -1
	for i, c := range t.Columns {
		if !c.AutoIncrement {
			continue
		}
		// NDB keeps one sequence a table (error 4335 for a second).
		if auto >= 0 {
			return nil, fmt.Errorf("%s: columns %s and %s are both AUTO_INCREMENT; a table has one sequence", t.FullName(), t.Columns[auto].Name, c.Name)
		}
		if c.Type < ndbclient.TypeInt8 || c.Type > ndbclient.TypeUint64 {
			return nil, fmt.Errorf("%s column %s: an AUTO_INCREMENT column is an integer, not %s", t.FullName(), c.Name, c.Type)
		}
		auto = i
	}
	dist := t.DistributionKey
	b := binary.LittleEndian.AppendUint32(nil, uint32(t.Partitions))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(t.Columns)))
	for i, c := range t.Columns {
		nt, length, prec, scale, err := ndbTypeOf(c)
		if err != nil {
			return nil, fmt.Errorf("%s column %s: %w", t.FullName(), c.Name, err)
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(len(c.Name)))
		b = append(b, c.Name...)
		b = append(b, nt)
		b = binary.LittleEndian.AppendUint32(b, uint32(length))
		b = append(b, nullableByte(c.Nullable))
		var keyFlags byte
		if slices.Contains(t.PrimaryKey, i) {
			keyFlags |= 1
		}
		if slices.Contains(dist, i) {
			keyFlags |= 2
		}
		if t.OrderedPrimaryKey && slices.Contains(t.PrimaryKey, i) {
			keyFlags |= 4 // in the ordered index PRIMARY
		}
		if c.AutoIncrement {
			keyFlags |= 8
		}
		b = append(b, keyFlags, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(prec))
		b = binary.LittleEndian.AppendUint16(b, uint16(scale))
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint16(b, uint16(c.Charset))
	}
	return b, nil
}

// ndbTypeOf maps a contract column onto an NdbDictionary type with its
// length (bytes, or bits for BIT), precision and scale (DECIMAL), or
// fractional-second digits as precision (TIME2, DATETIME2, TIMESTAMP2).
func ndbTypeOf(c ndbclient.Column) (nt uint8, length, prec, scale int, err error) {
	length = 1
	switch c.Type {
	case ndbclient.TypeInt8:
		nt = ndbTinyint
	case ndbclient.TypeUint8:
		nt = ndbTinyunsigned
	case ndbclient.TypeInt16:
		nt = ndbSmallint
	case ndbclient.TypeUint16:
		nt = ndbSmallunsigned
	case ndbclient.TypeInt24:
		nt = ndbMediumint
	case ndbclient.TypeUint24:
		nt = ndbMediumunsigned
	case ndbclient.TypeInt32:
		nt = ndbInt
	case ndbclient.TypeUint32:
		nt = ndbUnsigned
	case ndbclient.TypeInt64:
		nt = ndbBigint
	case ndbclient.TypeUint64:
		nt = ndbBigunsigned
	case ndbclient.TypeFloat:
		nt = ndbFloat
	case ndbclient.TypeDouble:
		nt = ndbDouble
	case ndbclient.TypeDecimal:
		nt, prec, scale = ndbDecimal, c.Precision, c.Scale
	case ndbclient.TypeChar:
		nt, length = ndbChar, charBytes(c)
	case ndbclient.TypeBinary:
		nt, length = ndbBinary, c.Length
	case ndbclient.TypeVarchar:
		nt, length = ndbVarchar, charBytes(c)
		if length > 255 {
			nt = ndbLongvarchar
		}
	case ndbclient.TypeVarbinary:
		nt, length = ndbVarbinary, c.Length
		if c.Length > 255 {
			nt = ndbLongvarbinary
		}
	case ndbclient.TypeDate:
		nt = ndbDate
	case ndbclient.TypeDatetime:
		nt, prec = ndbDatetime2, c.Scale
	case ndbclient.TypeTime:
		nt, prec = ndbTime2, c.Scale
	case ndbclient.TypeTimestamp:
		nt, prec = ndbTimestamp2, c.Scale
	case ndbclient.TypeYear:
		nt = ndbYear
	case ndbclient.TypeBit:
		nt, length = ndbBit, c.Length
	case ndbclient.TypeBlob:
		nt = ndbBlob
	case ndbclient.TypeText:
		nt = ndbText
	default:
		return 0, 0, 0, 0, fmt.Errorf("type %s has no NDB column type", c.Type)
	}
	return nt, length, prec, scale, nil
}

func nullableByte(nullable bool) byte {
	if nullable {
		return 1
	}
	return 0
}

// charBytes is a CHAR or VARCHAR column's length in bytes of a single-byte
// character set: its characters.
func charBytes(c ndbclient.Column) int {
	if c.Chars > 0 {
		return c.Chars
	}
	return c.Length
}
