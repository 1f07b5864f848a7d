package gateway

import (
	"bytes"
	"strconv"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Memcached speaks bytes; containers may map keys and values onto typed columns.
// Several columns are joined with tabs, as in ndbmemcache.

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

// parseLooseUint parses a value the way memcached's incr does (strtoull): leading
// spaces, digits, then only trailing white space.
func parseLooseUint(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	j := i
	var n uint64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		d := uint64(b[j] - '0')
		if n > (1<<64-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
		j++
	}
	if j == i {
		return 0, false
	}
	for ; j < len(b); j++ {
		switch b[j] {
		case ' ', '\t', '\r', '\n':
		default:
			return 0, false
		}
	}
	return n, true
}
