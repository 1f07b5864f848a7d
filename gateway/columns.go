package gateway

import (
	"bytes"
	"strconv"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A container's column mapping: memcache keys and values to column values
// and back. Memcached speaks bytes; containers may map keys and values onto
// typed columns. Several columns are joined with tabs, as in ndbmemcache.

// keyValues converts a memcache key into the container's primary-key values.
func (r *Request) keyValues(c *Container, key []byte, dst []ndbclient.Value) ([]ndbclient.Value, error) {
	if c.simple {
		return append(dst, ndbclient.Bytes(key)), nil
	}
	r.fields = splitFields(r.fields, key, len(c.KeyColumns))
	for i, col := range c.KeyColumns {
		v, err := textToValue(&c.Table.Columns[col], r.fields[i])
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// setValueColumns appends the value columns' assignments for text.
func (r *Request) setValueColumns(c *Container, o *ndbclient.Op, text []byte) error {
	if c.Large != nil {
		if len(text) > c.Large.max {
			return ndbclient.Errorf(ndbclient.CodeTooLarge, "a large value of %s holds %d bytes; the value has %d", c.Name, c.Large.max, len(text))
		}
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.ValueColumns[0], Value: ndbclient.Bytes(text)})
		return nil
	}
	if len(c.ValueColumns) == 1 && isBytesColumn(c.Table.Columns[c.ValueColumns[0]].Type) {
		if err := checkHolds(&c.Table.Columns[c.ValueColumns[0]], text); err != nil {
			return err
		}
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.ValueColumns[0], Value: ndbclient.Bytes(text)})
		return nil
	}
	r.fields = splitFields(r.fields, text, len(c.ValueColumns))
	for i, col := range c.ValueColumns {
		if err := checkHolds(&c.Table.Columns[col], r.fields[i]); err != nil {
			return err
		}
		v, err := textToValue(&c.Table.Columns[col], r.fields[i])
		if err != nil {
			return err
		}
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: col, Value: v})
	}
	return nil
}

// checkHolds refuses, as TooLarge, a value longer than its bytes column
// (ndbmemcache's demo_table holds 13,500 bytes, less than memcached's item
// size limit), here rather than in the backend, so that a store can drop
// the old item instead (Request.DropOnTooLarge).
func checkHolds(col *ndbclient.Column, text []byte) error {
	if isBytesColumn(col.Type) && col.Length > 0 && len(text) > col.Length {
		return ndbclient.Errorf(ndbclient.CodeTooLarge, "column %s holds %d bytes; the value has %d", col.Name, col.Length, len(text))
	}
	return nil
}

// setMath mirrors a canonical number into the math column, or NULLs it.
func setMath(c *Container, o *ndbclient.Op, text []byte) {
	if c.MathColumn < 0 {
		return
	}
	v := ndbclient.Null()
	if n, ok := parseCanonicalUint(text); ok {
		v = ndbclient.Uint(n)
	}
	o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.MathColumn, Value: v})
}

func setUint(o *ndbclient.Op, col int, v uint64) {
	if col >= 0 {
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: col, Value: ndbclient.Uint(v)})
	}
}

// setExpire sets o's expire column, when c has one, to at (Unix seconds, 0
// never), in the column's type.
func (c *Container) setExpire(o *ndbclient.Op, at uint64) {
	if col := c.ExpireColumn; col >= 0 {
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: col, Value: ndbclient.ExpiryValue(&c.Table.Columns[col], at)})
	}
}

// decodeText appends the memcache value of a row read with c.readProj or
// any c.getProj (all end with the math column). A non-NULL math column is
// authoritative: incr/decr change only it.
func decodeText(c *Container, row []ndbclient.Value, dst []byte) []byte {
	if c.MathColumn >= 0 {
		if m := row[len(row)-1]; !m.IsNull() {
			return strconv.AppendUint(dst, m.Uint(), 10)
		}
	}
	for i := range c.ValueColumns {
		if i > 0 {
			dst = append(dst, '\t')
		}
		dst = appendValueText(dst, row[i], c.Table.Columns[c.ValueColumns[i]].Type)
	}
	return dst
}

// rowMeta returns flags, cas and expiry (unix seconds, 0 never) of a row read
// with c.getProj[omit]; what omit names is 0.
func rowMeta(c *Container, row []ndbclient.Value, omit Omit) (flags uint32, cas uint64, expire uint32) {
	i := len(c.ValueColumns)
	flags = c.StaticFlags
	if c.FlagsColumn >= 0 {
		flags = uint32(row[i].Uint())
		i++
	}
	if c.CasColumn >= 0 && omit&OmitCas == 0 {
		cas = row[i].Uint()
		i++
	}
	if c.ExpireColumn >= 0 && omit&OmitExpire == 0 {
		expire = uint32(ndbclient.ExpirySeconds(row[i]))
	}
	return flags, cas, expire
}

// textToValue converts one memcache text field into a column value.
func textToValue(col *ndbclient.Column, text []byte) (ndbclient.Value, error) {
	t := col.Type
	switch {
	case t.IsBytes():
		return ndbclient.Bytes(text), nil
	case t.IsSigned():
		n, err := strconv.ParseInt(string(text), 10, 64)
		if err != nil {
			return ndbclient.Value{}, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %s wants an integer", col.Name)
		}
		return ndbclient.Int(n), nil
	case t.IsInteger():
		n, err := strconv.ParseUint(string(text), 10, 64)
		if err != nil {
			return ndbclient.Value{}, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %s wants an unsigned integer", col.Name)
		}
		return ndbclient.Uint(n), nil
	case t == ndbclient.TypeFloat || t == ndbclient.TypeDouble:
		f, err := strconv.ParseFloat(string(text), 64)
		if err != nil {
			return ndbclient.Value{}, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "column %s wants a number", col.Name)
		}
		return ndbclient.Float(f), nil
	}
	return ndbclient.Value{}, ndbclient.Errorf(ndbclient.CodeSchemaError, "column %s of type %s cannot hold memcache data", col.Name, t)
}

// appendValueText appends a column value's memcache text form: a FLOAT
// column's value with the fewest digits that read back as that float32, as
// mysql prints it.
func appendValueText(dst []byte, v ndbclient.Value, t ndbclient.ColumnType) []byte {
	switch v.Kind {
	case ndbclient.KindBytes:
		return append(dst, v.B...)
	case ndbclient.KindInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case ndbclient.KindUint:
		return strconv.AppendUint(dst, v.Uint(), 10)
	case ndbclient.KindFloat:
		if t == ndbclient.TypeFloat {
			return strconv.AppendFloat(dst, v.Float(), 'g', -1, 32)
		}
		return strconv.AppendFloat(dst, v.Float(), 'g', -1, 64)
	}
	return dst // NULL is empty text
}

// splitFields splits text into exactly n tab-separated fields into dst. Missing
// trailing fields are empty; extra tabs stay in the last field.
func splitFields(dst [][]byte, text []byte, n int) [][]byte {
	dst = dst[:0]
	for i := 0; i < n-1; i++ {
		j := bytes.IndexByte(text, '\t')
		if j < 0 {
			dst = append(dst, text)
			text = text[len(text):]
			continue
		}
		dst = append(dst, text[:j])
		text = text[j+1:]
	}
	return append(dst, text)
}

// parseCanonicalUint parses a decimal number written exactly as memcached's incr
// would write it (no sign, spaces or leading zeros). Only such values are mirrored
// into the math column, so a get that reads the math column returns the same bytes.
func parseCanonicalUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// parseLooseUint parses a value as memcached's incr does (safe_strtoull
// over the item's data, which "\r\n" ends): strtoull's leading white space
// and sign, then digits, followed by white space or nothing; whatever
// follows that white space is ignored ("12 ab" is 12). strtoull negates
// after a '-', and memcached refuses the result only when it is negative as
// a signed number ("-0" is 0).
func parseLooseUint(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && isCSpace(b[i]) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	j := i
	var n uint64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		d := uint64(b[j] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false // strtoull's ERANGE
		}
		n = n*10 + d
		j++
	}
	if j == i || j < len(b) && !isCSpace(b[j]) {
		return 0, false
	}
	if neg {
		n = -n
		if int64(n) < 0 {
			return 0, false
		}
	}
	return n, true
}

// isCSpace is C's isspace in the C locale.
func isCSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }
