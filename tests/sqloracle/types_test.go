package sqloracle

// The mapping from each MySQL type to ndbgate's documented JSON encoding,
// and the random values drawn per type, are internal/typecases', shared
// with tests/e2e's run of the same cases on the embedded engine. What is
// SQL's alone is here: how SQL's reading of a column becomes that JSON.
//
// SQL's side is read through the binary protocol (a prepared SELECT), which
// gives FLOAT and DOUBLE exactly; temporal columns are read as
// CAST(col AS CHAR), MySQL's own text. The SQL session runs with time_zone
// '+00:00', so TIMESTAMP is UTC as ndbgate gives it.

import (
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/ndbgate/ndbgate/internal/typecases"
)

type (
	column   = typecases.Column
	genValue = typecases.Value
)

// sqlExpr is what the SELECT reads for the column.
func sqlExpr(c *column) string {
	switch c.DataType {
	case "date", "time", "datetime", "timestamp":
		return fmt.Sprintf("CAST(`%s` AS CHAR)", c.Name)
	}
	return "`" + c.Name + "`"
}

// fromSQL turns what the driver scanned for sqlExpr into ndbgate's JSON.
func fromSQL(c *column, v any) (string, error) {
	if v == nil {
		return "null", nil
	}
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "year":
		switch x := v.(type) {
		case int64:
			return strconv.FormatInt(x, 10), nil
		case uint64:
			return strconv.FormatUint(x, 10), nil
		case []byte: // BIGINT UNSIGNED above 2^63 comes as text
			return string(x), nil
		}
	case "float":
		if x, ok := v.(float32); ok {
			return strconv.FormatFloat(float64(x), 'g', -1, 32), nil
		}
	case "double":
		if x, ok := v.(float64); ok {
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	case "decimal":
		if x, ok := v.([]byte); ok {
			if c.Cmp == typecases.CmpString {
				return typecases.JSONString(string(x)), nil
			}
			return string(x), nil
		}
	case "char", "varchar", "text", "tinytext", "mediumtext", "longtext", "enum", "set",
		"date", "time", "datetime", "timestamp":
		if x, ok := v.([]byte); ok {
			return typecases.JSONString(string(x)), nil
		}
	case "binary", "varbinary", "bit", "blob", "tinyblob", "mediumblob", "longblob":
		if x, ok := v.([]byte); ok {
			return typecases.JSONString(base64.StdEncoding.EncodeToString(x)), nil
		}
	}
	return "", fmt.Errorf("column %s.%s (%s): unexpected %T %v from SQL", c.Table, c.Name, c.ColumnType, v, v)
}
