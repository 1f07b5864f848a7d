package ndbclient

import (
	"fmt"
	"slices"
)

// ColumnType covers NDB's column types.
type ColumnType uint8

const (
	TypeInt8 ColumnType = iota + 1
	TypeUint8
	TypeInt16
	TypeUint16
	TypeInt24
	TypeUint24
	TypeInt32
	TypeUint32
	TypeInt64
	TypeUint64
	TypeFloat
	TypeDouble
	TypeDecimal   // Value is canonical decimal text, e.g. "-12.50"
	TypeChar      // fixed length, space padded on store, trailing spaces trimmed on read
	TypeVarchar   // up to Length bytes
	TypeBinary    // fixed length, zero padded
	TypeVarbinary // up to Length bytes
	TypeDate      // Value is text "YYYY-MM-DD"
	TypeDatetime  // Value is text "YYYY-MM-DD hh:mm:ss[.ffffff]"
	TypeTime      // Value is text "[-]hhh:mm:ss[.ffffff]"
	TypeTimestamp // Value is text like Datetime
	TypeYear      // Value is an unsigned integer 1901..2155
	TypeBit       // Value is an unsigned integer of Length bits (1..64)
	TypeBlob      // later
	TypeText      // later
)

var typeNames = map[ColumnType]string{
	TypeInt8: "TINYINT", TypeUint8: "TINYINT UNSIGNED", TypeInt16: "SMALLINT",
	TypeUint16: "SMALLINT UNSIGNED", TypeInt24: "MEDIUMINT", TypeUint24: "MEDIUMINT UNSIGNED",
	TypeInt32: "INT", TypeUint32: "INT UNSIGNED", TypeInt64: "BIGINT",
	TypeUint64: "BIGINT UNSIGNED", TypeFloat: "FLOAT", TypeDouble: "DOUBLE",
	TypeDecimal: "DECIMAL", TypeChar: "CHAR", TypeVarchar: "VARCHAR", TypeBinary: "BINARY",
	TypeVarbinary: "VARBINARY", TypeDate: "DATE", TypeDatetime: "DATETIME", TypeTime: "TIME",
	TypeTimestamp: "TIMESTAMP", TypeYear: "YEAR", TypeBit: "BIT", TypeBlob: "BLOB", TypeText: "TEXT",
}

func (t ColumnType) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("ColumnType(%d)", uint8(t))
}

// IsInteger reports whether values of t travel as Int or Uint.
func (t ColumnType) IsInteger() bool {
	return t >= TypeInt8 && t <= TypeUint64 || t == TypeYear || t == TypeBit
}

// IsSigned reports whether t is a signed integer type.
func (t ColumnType) IsSigned() bool {
	switch t {
	case TypeInt8, TypeInt16, TypeInt24, TypeInt32, TypeInt64:
		return true
	}
	return false
}

// IsBytes reports whether values of t travel as Bytes.
func (t ColumnType) IsBytes() bool {
	switch t {
	case TypeDecimal, TypeChar, TypeVarchar, TypeBinary, TypeVarbinary, TypeDate,
		TypeDatetime, TypeTime, TypeTimestamp, TypeBlob, TypeText:
		return true
	}
	return false
}

// Column is one typed column.
type Column struct {
	Name   string
	Type   ColumnType
	Length int // bytes for CHAR/VARCHAR/BINARY/VARBINARY, bits for BIT
	// Chars, when set, bounds a CHAR/VARCHAR value in characters, as a
	// multibyte charset does (utf8mb4: Length = 4 x Chars); the row API checks it.
	Chars    int
	Nullable bool
	// Precision and Scale for DECIMAL.
	Precision, Scale int
	// Charset is a CHAR, VARCHAR or TEXT column's MySQL collation id (8
	// latin1_swedish_ci, 45 utf8mb4_general_ci, 63 binary, ...; see
	// internal/charset), as the NDB dictionary has it. 0: none known (the
	// embedded engine's tables), taken as UTF-8. Values are the column's
	// bytes in that character set; only the row API converts them to and
	// from UTF-8. Memcache keys and values are the raw bytes.
	Charset int `json:",omitempty"`
	// Enum names an ENUM column's values (the value stored as i is
	// Enum[i-1]; 0 is MySQL's empty error value) and Set a SET column's
	// members (bit i is Set[i]), in UTF-8. NDB keeps either as a CHAR of
	// binary character set (Length 1..8) holding the index or the bitmask,
	// little-endian; mysqld keeps the names in its table definition.
	Enum []string `json:",omitempty"`
	Set  []string `json:",omitempty"`
	// Unsupported, when set, is why the row API refuses to read or write
	// the column, e.g. "a TEXT column" or "an ENUM or SET whose names ...".
	// The table is still served; its other columns can be used.
	Unsupported string `json:",omitempty"`
	// AutoIncrement: the column takes its values from the table's
	// auto-increment sequence, as MySQL's AUTO_INCREMENT column does. NDB
	// makes the sequence with the table; Sequencer hands out its values.
	// It is not part of the column's shape (Equal): the sequence is the
	// table's, and a table made by mysqld says so where a declared one
	// may not.
	AutoIncrement bool `json:",omitempty"`
}

// Equal reports whether c and o are the same column in every attribute.
func (c *Column) Equal(o *Column) bool {
	return c.Name == o.Name && c.Type == o.Type && c.Length == o.Length && c.Chars == o.Chars &&
		c.Nullable == o.Nullable && c.Precision == o.Precision && c.Scale == o.Scale &&
		c.Charset == o.Charset && slices.Equal(c.Enum, o.Enum) && slices.Equal(c.Set, o.Set) &&
		c.Unsupported == o.Unsupported
}

// Table is a table's schema. Column indexes used throughout ndbclient are
// positions in Columns.
type Table struct {
	Database string
	Name     string
	Columns  []Column
	// PrimaryKey lists column indexes, in key order.
	PrimaryKey []int
	// DistributionKey lists column indexes that choose the partition; empty means
	// the primary key (NDB's default).
	DistributionKey []int
	// Partitions is the partition count (NDB: fragments). 0 means the driver's default.
	Partitions int
	// OrderedPrimaryKey: creating the table on NDB also makes an ordered
	// index PRIMARY on the primary key, as MySQL does for a key not declared
	// USING HASH (NDB API applications range-scan by it).
	OrderedPrimaryKey bool

	// Cache-table options, honoured by the embedded engine (NDB has no such notion):
	// Eviction turns on LRU eviction when the memory limit is reached.
	Eviction bool
	// ExpireColumn is the index of an integer or TIMESTAMP column holding an
	// absolute Unix expiry time (0 or NULL = never); a row past it is a miss.
	// -1 for none. ExpiryValue and ExpirySeconds convert its values.
	ExpireColumn int
	// ExpiryByCaller: the caller keeps ExpireColumn's expiry itself (a
	// container with large values, whose expired rows must be replaced or
	// deleted with their parts): drivers read the column for a lease's
	// recache (Op.RecacheAt), but never make an expired row a miss, nor
	// free or replace it.
	ExpiryByCaller bool
	// StateColumn names a BIGINT UNSIGNED column where a driver without
	// item state of its own (NDB) keeps the Op's item state: fetched, stale,
	// recache token, last access. "" for none. Make it nullable, so that
	// ALTER TABLE can add it online. The embedded engine ignores it.
	StateColumn string
}

// FullName is "database.table".
func (t *Table) FullName() string { return t.Database + "." + t.Name }

// ColumnIndex returns the index of the named column, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i := range t.Columns {
		if t.Columns[i].Name == name {
			return i
		}
	}
	return -1
}

// Validate checks the schema for mistakes a user could make in a config file.
func (t *Table) Validate() error {
	if t.Database == "" || t.Name == "" {
		return Errorf(CodeSchemaError, "table needs a database and a name")
	}
	if len(t.Columns) == 0 {
		return Errorf(CodeSchemaError, "table %s has no columns", t.FullName())
	}
	seen := make(map[string]bool, len(t.Columns))
	for _, c := range t.Columns {
		if c.Name == "" {
			return Errorf(CodeSchemaError, "table %s has a column with no name", t.FullName())
		}
		if seen[c.Name] {
			return Errorf(CodeSchemaError, "table %s: column %q declared twice", t.FullName(), c.Name)
		}
		seen[c.Name] = true
		if _, ok := typeNames[c.Type]; !ok {
			return Errorf(CodeSchemaError, "table %s: column %q has no valid type", t.FullName(), c.Name)
		}
		switch c.Type {
		case TypeChar, TypeVarchar, TypeBinary, TypeVarbinary:
			if c.Length <= 0 {
				return Errorf(CodeSchemaError, "table %s: column %q (%s) needs a length > 0", t.FullName(), c.Name, c.Type)
			}
		case TypeBit:
			if c.Length < 1 || c.Length > 64 {
				return Errorf(CodeSchemaError, "table %s: BIT column %q needs a length of 1..64", t.FullName(), c.Name)
			}
		}
	}
	if len(t.PrimaryKey) == 0 {
		return Errorf(CodeSchemaError, "table %s has no primary key", t.FullName())
	}
	for _, list := range [][]int{t.PrimaryKey, t.DistributionKey} {
		for _, i := range list {
			if i < 0 || i >= len(t.Columns) {
				return Errorf(CodeSchemaError, "table %s: key column index %d out of range", t.FullName(), i)
			}
		}
	}
	for _, i := range t.PrimaryKey {
		if t.Columns[i].Nullable {
			return Errorf(CodeSchemaError, "table %s: primary key column %q cannot be nullable", t.FullName(), t.Columns[i].Name)
		}
	}
	if t.ExpireColumn >= len(t.Columns) {
		return Errorf(CodeSchemaError, "table %s: expire column index out of range", t.FullName())
	}
	if t.ExpireColumn >= 0 && !IsExpiryType(t.Columns[t.ExpireColumn].Type) {
		return Errorf(CodeSchemaError, "table %s: expire column %q must be an integer or a TIMESTAMP", t.FullName(), t.Columns[t.ExpireColumn].Name)
	}
	return t.validateStateColumn()
}

// validateStateColumn: the state column, if named, is a BIGINT UNSIGNED
// outside the primary key.
func (t *Table) validateStateColumn() error {
	if t.StateColumn == "" {
		return nil
	}
	i := t.ColumnIndex(t.StateColumn)
	if i < 0 {
		return Errorf(CodeSchemaError, "table %s: item state column %q is not a column of it", t.FullName(), t.StateColumn)
	}
	if c := t.Columns[i]; c.Type != TypeUint64 {
		return Errorf(CodeSchemaError, "table %s: item state column %q must be a BIGINT UNSIGNED, not %s", t.FullName(), c.Name, c.Type)
	}
	for _, k := range t.PrimaryKey {
		if k == i {
			return Errorf(CodeSchemaError, "table %s: item state column %q cannot be part of the primary key", t.FullName(), t.StateColumn)
		}
	}
	return nil
}
