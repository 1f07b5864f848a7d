package ndbclient

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseColumnType reads a column type in MySQL's spelling, as a config file or
// a CREATE TABLE would give it: "INT UNSIGNED", "VARCHAR(64)", "DECIMAL(10,2)",
// "BIT(8)", "DATETIME(6)". It fills Type, Length, Chars, Precision and Scale of
// col. CHAR and VARCHAR lengths are characters of utf8mb4, MySQL's default.
func ParseColumnType(spec string, col *Column) error {
	s := strings.ToUpper(strings.Join(strings.Fields(spec), " "))
	unsigned := false
	if rest, ok := strings.CutSuffix(s, " UNSIGNED"); ok {
		s, unsigned = rest, true
	}
	name, args := s, ""
	if i := strings.IndexByte(s, '('); i >= 0 {
		if !strings.HasSuffix(s, ")") {
			return fmt.Errorf("type %q: unclosed parenthesis", spec)
		}
		name, args = strings.TrimSpace(s[:i]), s[i+1:len(s)-1]
	}
	nums, err := typeArgs(args)
	if err != nil {
		return fmt.Errorf("type %q: %v", spec, err)
	}
	want := func(min, max int) error {
		if len(nums) < min || len(nums) > max {
			if max == 0 {
				return fmt.Errorf("type %q takes no length", spec)
			}
			return fmt.Errorf("type %q needs %d..%d numbers in parentheses", spec, min, max)
		}
		return nil
	}
	ints := map[string][2]ColumnType{
		"TINYINT": {TypeInt8, TypeUint8}, "SMALLINT": {TypeInt16, TypeUint16},
		"MEDIUMINT": {TypeInt24, TypeUint24}, "INT": {TypeInt32, TypeUint32},
		"INTEGER": {TypeInt32, TypeUint32}, "BIGINT": {TypeInt64, TypeUint64},
	}
	if pair, ok := ints[name]; ok {
		col.Type = pair[0]
		if unsigned {
			col.Type = pair[1]
		}
		return want(0, 1) // display width, ignored as MySQL 8 does
	}
	if unsigned {
		return fmt.Errorf("type %q: UNSIGNED applies to integer types only", spec)
	}
	switch name {
	case "FLOAT":
		col.Type = TypeFloat
		return want(0, 0)
	case "DOUBLE", "REAL":
		col.Type = TypeDouble
		return want(0, 0)
	case "DECIMAL", "NUMERIC":
		col.Type, col.Precision, col.Scale = TypeDecimal, 10, 0
		if err := want(0, 2); err != nil {
			return err
		}
		if len(nums) > 0 {
			col.Precision = nums[0]
		}
		if len(nums) > 1 {
			col.Scale = nums[1]
		}
		if col.Precision < 1 || col.Precision > 65 || col.Scale > 30 || col.Scale > col.Precision {
			return fmt.Errorf("type %q: DECIMAL(M,D) needs 1 <= M <= 65, D <= 30 and D <= M", spec)
		}
		return nil
	case "CHAR", "BINARY":
		col.Type, col.Length = TypeChar, 1
		if name == "BINARY" {
			col.Type = TypeBinary
		}
		if err := want(0, 1); err != nil {
			return err
		}
		if len(nums) == 1 {
			col.Length = nums[0]
		}
		if col.Length < 1 || col.Length > 255 {
			return fmt.Errorf("type %q: length must be 1..255", spec)
		}
		if col.Type == TypeChar {
			col.Chars, col.Length = col.Length, 4*col.Length // utf8mb4
		}
		return nil
	case "VARCHAR", "VARBINARY":
		col.Type = TypeVarchar
		if name == "VARBINARY" {
			col.Type = TypeVarbinary
		}
		if err := want(1, 1); err != nil {
			return err
		}
		col.Length = nums[0]
		if col.Length < 1 || col.Length > 65535 {
			return fmt.Errorf("type %q: length must be 1..65535", spec)
		}
		if col.Type == TypeVarchar {
			if col.Length > 16383 {
				return fmt.Errorf("type %q: VARCHAR of utf8mb4 holds at most 16383 characters", spec)
			}
			col.Chars, col.Length = col.Length, 4*col.Length
		}
		return nil
	case "BIT":
		col.Type, col.Length = TypeBit, 1
		if err := want(0, 1); err != nil {
			return err
		}
		if len(nums) == 1 {
			col.Length = nums[0]
		}
		if col.Length < 1 || col.Length > 64 {
			return fmt.Errorf("type %q: BIT length must be 1..64", spec)
		}
		return nil
	case "DATE", "YEAR":
		col.Type = TypeDate
		if name == "YEAR" {
			col.Type = TypeYear
		}
		return want(0, 0)
	case "DATETIME", "TIME", "TIMESTAMP":
		col.Type = map[string]ColumnType{"DATETIME": TypeDatetime, "TIME": TypeTime, "TIMESTAMP": TypeTimestamp}[name]
		if err := want(0, 1); err != nil {
			return err
		}
		if len(nums) == 1 {
			if nums[0] > 6 {
				return fmt.Errorf("type %q: fractional seconds precision must be 0..6", spec)
			}
			col.Scale = nums[0]
		}
		return nil
	}
	return fmt.Errorf("type %q is not supported (integers, FLOAT, DOUBLE, DECIMAL, CHAR, VARCHAR, BINARY, VARBINARY, BIT, DATE, DATETIME, TIME, TIMESTAMP, YEAR)", spec)
}

func typeArgs(args string) ([]int, error) {
	if strings.TrimSpace(args) == "" {
		return nil, nil
	}
	var out []int
	for _, a := range strings.Split(args, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a length", strings.TrimSpace(a))
		}
		out = append(out, n)
	}
	return out, nil
}
