package typecases

import (
	"encoding/base64"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParse(t *testing.T) {
	for spec, want := range map[string]Column{
		"INT UNSIGNED":   {DataType: "int", Unsigned: true, Cmp: CmpExact},
		"integer":        {DataType: "int", Cmp: CmpExact},
		"DECIMAL(10,2)":  {DataType: "decimal", Prec: 10, Scale: 2, Cmp: CmpExact},
		"DECIMAL(16,4)":  {DataType: "decimal", Prec: 16, Scale: 4, Cmp: CmpString},
		"DECIMAL":        {DataType: "decimal", Prec: 10, Cmp: CmpExact},
		"FLOAT":          {DataType: "float", Cmp: CmpFloat32},
		"double":         {DataType: "double", Cmp: CmpFloat64},
		"CHAR":           {DataType: "char", MaxLen: 1, Charset: "utf8mb4", Collation: "utf8mb4_general_ci", Cmp: CmpString},
		"VARCHAR(40)":    {DataType: "varchar", MaxLen: 40, Charset: "utf8mb4", Collation: "utf8mb4_general_ci", Cmp: CmpString},
		"VARBINARY(300)": {DataType: "varbinary", MaxLen: 300, Charset: "binary", Cmp: CmpString},
		"TIME(3)":        {DataType: "time", FSP: 3, Cmp: CmpString},
		"TIMESTAMP":      {DataType: "timestamp", Cmp: CmpString},
		"BIT(17)":        {DataType: "bit", Bits: 17, Cmp: CmpString},
		"YEAR":           {DataType: "year", Cmp: CmpExact},
	} {
		c, err := Parse("t", "c", spec, true)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		want.Table, want.Name, want.Nullable, want.ColumnType = "t", "c", true, strings.ToLower(spec)
		if c.DataType != want.DataType || c.Unsigned != want.Unsigned || c.Prec != want.Prec || c.Scale != want.Scale ||
			c.MaxLen != want.MaxLen || c.FSP != want.FSP || c.Bits != want.Bits || c.Charset != want.Charset ||
			c.Collation != want.Collation || c.Cmp != want.Cmp || c.ColumnType != want.ColumnType {
			t.Errorf("%s: got %+v, want %+v", spec, *c, want)
		}
	}
	for _, spec := range []string{"ENUM('a')", "TEXT", "VARCHAR", "DECIMAL(x)"} {
		if _, err := Parse("t", "c", spec, false); err == nil {
			t.Errorf("%s: taken", spec)
		}
	}
}

// Every drawn value is one the type holds, in JSON the encoding allows,
// and equal to itself under SameJSON.
func TestDrawnValues(t *testing.T) {
	specs := []string{"TINYINT", "TINYINT UNSIGNED", "MEDIUMINT", "BIGINT", "BIGINT UNSIGNED", "FLOAT", "DOUBLE",
		"DECIMAL(5,2)", "DECIMAL(10,0)", "DECIMAL(65,30)", "DATE", "YEAR", "TIME(0)", "TIME(6)", "DATETIME(3)",
		"TIMESTAMP(6)", "CHAR(10)", "VARCHAR(300)", "BINARY(8)", "VARBINARY(16)", "BIT(1)", "BIT(64)"}
	r := rand.New(rand.NewSource(1))
	for _, spec := range specs {
		c, err := Parse("t", "c", spec, true)
		if err != nil {
			t.Fatal(err)
		}
		nulls := 0
		for i := 0; i < 2000; i++ {
			v := c.Gen(r)
			if i%2 == 0 {
				v = c.Draw(r, true)
			}
			if v.In == "null" {
				nulls++
				if v.Want != "null" || v.SQL != nil {
					t.Errorf("%s: NULL %+v", spec, v)
				}
				continue
			}
			if !json.Valid([]byte(v.In)) || !json.Valid([]byte(v.Want)) {
				t.Fatalf("%s: not JSON: %+v", spec, v)
			}
			if !SameJSON(c.Cmp, v.Want, v.Want) {
				t.Errorf("%s: %s differs from itself", spec, v.Want)
			}
			switch c.DataType {
			case "char", "varchar":
				s, _ := DecodeJSONString(v.Want)
				if n := utf8.RuneCountInString(s); n > c.MaxLen || (c.DataType == "char" && strings.HasSuffix(s, " ")) {
					t.Errorf("%s: %q", spec, s)
				}
			case "binary", "varbinary", "bit":
				s, _ := DecodeJSONString(v.Want)
				b, err := base64.StdEncoding.DecodeString(s)
				n := c.MaxLen
				if c.DataType == "bit" {
					n = (c.Bits + 7) / 8
				}
				if err != nil || len(b) > n || (c.DataType != "varbinary" && len(b) != n) {
					t.Errorf("%s: %s (%d bytes): %v", spec, v.Want, len(b), err)
				}
			case "decimal":
				s := strings.Trim(v.Want, `"`)
				_, fp, _ := strings.Cut(s, ".")
				if len(fp) != c.Scale {
					t.Errorf("%s: %s has not %d fraction digits", spec, s, c.Scale)
				}
			}
		}
		if nulls == 0 {
			t.Errorf("%s: nullable, but no NULL drawn", spec)
		}
	}
}

func TestSameJSON(t *testing.T) {
	for _, c := range []struct {
		k         CmpKind
		want, got string
		equal     bool
	}{
		{CmpString, `"é"`, `"\u00e9"`, true},
		{CmpString, `"a"`, `"a "`, false},
		{CmpString, `"1"`, `1`, false},
		{CmpFloat64, `0`, `-0`, false},
		{CmpFloat64, `1e300`, `1e+300`, true},
		{CmpFloat32, `0.1`, `0.10000000149011612`, true},
		{CmpFloat32, `1`, `"1"`, false},
		{CmpExact, `12.50`, `12.5`, false},
		{CmpExact, `null`, `null`, true},
		{CmpExact, `null`, `0`, false},
	} {
		if got := SameJSON(c.k, c.want, c.got); got != c.equal {
			t.Errorf("SameJSON(%d, %s, %s) = %v", c.k, c.want, c.got, got)
		}
	}
}

// The same seed draws the same values: a failure found once is found again.
func TestDeterministic(t *testing.T) {
	c, _ := Parse("t", "c", "VARCHAR(40)", true)
	a, b := rand.New(rand.NewSource(7)), rand.New(rand.NewSource(7))
	for i := 0; i < 100; i++ {
		if x, y := c.Gen(a), c.Gen(b); x.In != y.In {
			t.Fatalf("draw %d: %s, then %s", i, x.In, y.In)
		}
	}
}
