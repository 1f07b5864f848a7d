package ndbapi

import (
	"fmt"

	"github.com/ndbgate/ndbgate/internal/charset"
	"github.com/ndbgate/ndbgate/internal/frm"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// applyFrm completes a described table from mysqld's table definition, the
// packed .frm the dictionary keeps for tables made in SQL (nil for tables
// made through the NDB API; frmErr when the shim could not hand it over):
// ENUM and SET columns get their names, and columns the row API cannot
// show get the reason (Column.Unsupported). It never fails the table: a
// definition it cannot read only leaves the columns that need it refused.
func applyFrm(ti *tableInfo, packed []byte, frmErr error) {
	var def *frm.Table
	if frmErr == nil && packed != nil {
		raw, err := frm.Unpack(packed)
		if err == nil {
			def, err = frm.Parse(raw)
		}
		frmErr = err
	}
	fromSQL := packed != nil || frmErr != nil
	for i := range ti.schema.Columns {
		sc, c := &ti.schema.Columns[i], &ti.cols[i]
		var f *frm.Field
		if def != nil {
			f = def.Field(sc.Name)
		}
		switch {
		case c.blob:
			if f != nil && f.TypeName() != "" {
				sc.Unsupported = "a " + f.TypeName() + " column: ndbgate does not read or write BLOB/TEXT"
			}
		case c.ndbType == ndbChar && c.charset == charset.BinaryID && fromSQL:
			// mysqld makes a CHAR of binary character set only for ENUM and
			// SET (CHAR(n) CHARACTER SET binary is a BINARY(n)).
			enumOrSet(sc, c, f, frmErr)
		case sc.Type == ndbclient.TypeChar || sc.Type == ndbclient.TypeVarchar:
			if charset.Of(c.charset) == charset.Unsupported {
				sc.Unsupported = fmt.Sprintf("a column of character set %s, which the row API does not convert (it does utf8mb4, utf8, latin1, ascii and binary)", charset.Name(c.charset))
			}
		}
	}
}

// enumOrSet names an ENUM or SET column's values from its field in the
// definition, or says why it cannot.
func enumOrSet(sc *ndbclient.Column, c *column, f *frm.Field, frmErr error) {
	refuse := func(why string) {
		sc.Unsupported = "an ENUM or SET column (NDB keeps the index or the bitmask; the names are in mysqld's table definition): " + why
	}
	switch {
	case frmErr != nil:
		refuse(fmt.Sprintf("the definition cannot be read: %v", frmErr))
		return
	case f == nil:
		refuse("the definition has no such column")
		return
	case !f.IsEnum() && !f.IsSet():
		return // bytes, as a table made through the NDB API has them
	}
	k := charset.Of(f.Charset)
	if k == charset.Unsupported {
		refuse(fmt.Sprintf("its names are in character set %s, which ndbgate does not convert", charset.Name(f.Charset)))
		return
	}
	names := make([]string, len(f.Names))
	for i, n := range f.Names {
		names[i] = string(k.AppendUTF8(nil, n))
	}
	if f.IsEnum() {
		// An ENUM of up to 255 values takes a byte, else two.
		if len(names) == 0 || c.length != 1 && c.length != 2 || c.length == 1 && len(names) > 255 || len(names) > 65535 {
			refuse(fmt.Sprintf("%d names in %d bytes", len(names), c.length))
			return
		}
		sc.Enum = names
	} else {
		// A SET of n members takes (n+7)/8 bytes, 8 above 4.
		if len(names) == 0 || len(names) > 64 || (len(names)+7)/8 > c.length || c.length > 8 {
			refuse(fmt.Sprintf("%d members in %d bytes", len(names), c.length))
			return
		}
		sc.Set = names
	}
	c.exact = true
}

// blobRefused is the error for an op that names a BLOB or TEXT column.
func blobRefused(ti *tableInfo, col int) error {
	sc := &ti.schema.Columns[col]
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s column %s is %s", ti.schema.FullName(), sc.Name, sc.Unsupported)
}

// blobDeleteRefused is the error for a delete on a table with a BLOB or
// TEXT column: NdbBlob deletes the column's parts only within a
// synchronous execute(), and this driver's flights are asynchronous, so the
// parts would be left behind in the blob table.
func blobDeleteRefused(ti *tableInfo) error {
	name := ""
	for i := range ti.cols {
		if ti.cols[i].blob {
			name = ti.schema.Columns[i].Name
			break
		}
	}
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s has a BLOB/TEXT column (%s): ndbgate does not delete its rows, as the column's parts would be left behind", ti.schema.FullName(), name)
}
