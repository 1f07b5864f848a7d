package typecases

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse describes a column declared in MySQL's spelling, as ndbgate's YAML
// `tables:` takes it ("INT UNSIGNED", "DECIMAL(10,2)", "VARCHAR(40)",
// "TIME(3)", "BIT(17)"), in information_schema's words, ready for Gen
// (Setup done). Strings are utf8mb4, as the embedded engine declares them;
// ENUM, SET, TEXT and BLOB are not taken: their information_schema columns
// come from a mysqld (tests/sqloracle).
func Parse(table, name, spec string, nullable bool) (*Column, error) {
	s := strings.ToLower(strings.Join(strings.Fields(spec), " "))
	c := &Column{Table: table, Name: name, ColumnType: s, Nullable: nullable}
	if rest, ok := strings.CutSuffix(s, " unsigned"); ok {
		s, c.Unsigned = rest, true
	}
	var nums []int
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return nil, fmt.Errorf("type %q: unclosed parenthesis", spec)
		}
		for _, a := range strings.Split(s[i+1:len(s)-1], ",") {
			n, err := strconv.Atoi(strings.TrimSpace(a))
			if err != nil {
				return nil, fmt.Errorf("type %q: %q is not a number", spec, a)
			}
			nums = append(nums, n)
		}
		s = strings.TrimSpace(s[:i])
	}
	arg := func(i, def int) int {
		if i < len(nums) {
			return nums[i]
		}
		return def
	}
	c.DataType = s
	switch s {
	case "integer":
		c.DataType = "int"
	case "real":
		c.DataType = "double"
	case "numeric":
		c.DataType = "decimal"
	}
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "date", "year":
	case "decimal":
		c.Prec, c.Scale = arg(0, 10), arg(1, 0)
	case "char", "binary":
		c.MaxLen = arg(0, 1)
	case "varchar", "varbinary":
		if len(nums) != 1 {
			return nil, fmt.Errorf("type %q needs a length", spec)
		}
		c.MaxLen = nums[0]
	case "time", "datetime", "timestamp":
		c.FSP = arg(0, 0)
	case "bit":
		c.Bits = arg(0, 1)
	default:
		return nil, fmt.Errorf("type %q: typecases.Parse does not take it", spec)
	}
	switch c.DataType {
	case "char", "varchar":
		c.Charset, c.Collation = "utf8mb4", "utf8mb4_general_ci"
	case "binary", "varbinary":
		c.Charset = "binary"
	}
	if err := c.Setup(); err != nil {
		return nil, err
	}
	return c, nil
}
