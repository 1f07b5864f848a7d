package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/ndbgate/ndbgate/internal/typecases"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

// The type cases of tests/sqloracle (internal/typecases: the same
// generator, edge values and comparison), on the embedded engine, so that
// `make test` checks the row API's type encoding without NDB or mysqld:
// every value is written through REST pk-write, read back through REST
// pk-read and gRPC RonDBREST.PKRead, and compared with the JSON the
// documented encoding says comes back.
//
// The tables are tests/sql/types.sql's, as far as the embedded engine can
// declare them in YAML `tables:` (ndbclient.ParseColumnType). Left out,
// because the engine cannot declare them:
//   - DECIMAL UNSIGNED (types.sql's du9_3): UNSIGNED is for integers only;
//   - character sets and collations (utf8mb4_bin, binary CHAR/VARCHAR,
//     latin1): CHAR and VARCHAR are utf8mb4;
//   - ENUM and SET: their names come from a mysqld's table definition;
//   - TEXT, BLOB and JSON.
// Keys of several types are partkey's and composite's, in one table.

const typeCasesDB = "sqltypes"

// typeCaseTable is a table declared for the test: its columns in MySQL's
// spelling, the primary key first.
type typeCaseTable struct {
	name string
	key  [][2]string // name, type
	cols [][2]string // name, type; nullable
}

var typeCaseTables = []typeCaseTable{
	{name: "ints", key: [][2]string{{"id", "INT UNSIGNED"}}, cols: [][2]string{
		{"i8", "TINYINT"}, {"u8", "TINYINT UNSIGNED"}, {"i16", "SMALLINT"}, {"u16", "SMALLINT UNSIGNED"},
		{"i24", "MEDIUMINT"}, {"u24", "MEDIUMINT UNSIGNED"}, {"i32", "INT"}, {"u32", "INT UNSIGNED"},
		{"i64", "BIGINT"}, {"u64", "BIGINT UNSIGNED"}}},
	{name: "nums", key: [][2]string{{"id", "INT UNSIGNED"}}, cols: [][2]string{
		{"f", "FLOAT"}, {"d", "DOUBLE"}, {"d5_2", "DECIMAL(5,2)"}, {"d10_0", "DECIMAL(10,0)"},
		{"d10_2", "DECIMAL(10,2)"}, {"d15_5", "DECIMAL(15,5)"}, {"d16_4", "DECIMAL(16,4)"},
		{"d30_10", "DECIMAL(30,10)"}, {"d65_30", "DECIMAL(65,30)"}}},
	{name: "temporal", key: [][2]string{{"id", "INT UNSIGNED"}}, cols: [][2]string{
		{"dt", "DATE"}, {"yr", "YEAR"},
		{"t0", "TIME(0)"}, {"t1", "TIME(1)"}, {"t2", "TIME(2)"}, {"t3", "TIME(3)"}, {"t4", "TIME(4)"}, {"t5", "TIME(5)"}, {"t6", "TIME(6)"},
		{"dt0", "DATETIME(0)"}, {"dt1", "DATETIME(1)"}, {"dt2", "DATETIME(2)"}, {"dt3", "DATETIME(3)"},
		{"dt4", "DATETIME(4)"}, {"dt5", "DATETIME(5)"}, {"dt6", "DATETIME(6)"},
		{"ts0", "TIMESTAMP(0)"}, {"ts1", "TIMESTAMP(1)"}, {"ts2", "TIMESTAMP(2)"}, {"ts3", "TIMESTAMP(3)"},
		{"ts4", "TIMESTAMP(4)"}, {"ts5", "TIMESTAMP(5)"}, {"ts6", "TIMESTAMP(6)"}}},
	{name: "strs", key: [][2]string{{"id", "INT UNSIGNED"}}, cols: [][2]string{
		{"c_u", "CHAR(10)"}, {"v_u", "VARCHAR(40)"}, {"c_1", "CHAR(1)"}, {"v_300", "VARCHAR(300)"},
		{"bin", "BINARY(8)"}, {"vbin", "VARBINARY(300)"}}},
	{name: "bits", key: [][2]string{{"id", "INT UNSIGNED"}}, cols: [][2]string{
		{"b1", "BIT(1)"}, {"b17", "BIT(17)"}, {"b64", "BIT(64)"}}},
	{name: "keys", key: [][2]string{
		{"k_i", "BIGINT"}, {"k_s", "VARCHAR(20)"}, {"k_d", "DATE"}, {"k_dec", "DECIMAL(12,3)"},
		{"k_dt", "DATETIME(3)"}, {"k_bin", "VARBINARY(16)"}, {"k_c", "CHAR(8)"}, {"k_u8", "TINYINT UNSIGNED"}},
		cols: [][2]string{{"val", "VARCHAR(40)"}, {"amount", "DECIMAL(20,6)"}}},
}

// typeCaseRows is how many rows each table gets: a third drawn in the
// generator's edge mode, the rest as tests/sqloracle draws them (edge
// values a third of the time, NULL a tenth).
const typeCaseRows = 300

func typeCasesConfig() string {
	var b strings.Builder
	b.WriteString("tables:\n")
	for _, tb := range typeCaseTables {
		var key []string
		for _, k := range tb.key {
			key = append(key, k[0])
		}
		fmt.Fprintf(&b, "  - database: %s\n    name: %s\n    primary_key: [%s]\n    columns:\n", typeCasesDB, tb.name, strings.Join(key, ", "))
		for _, k := range tb.key {
			fmt.Fprintf(&b, "      - {name: %s, type: %q}\n", k[0], k[1])
		}
		for _, c := range tb.cols {
			fmt.Fprintf(&b, "      - {name: %s, type: %q, nullable: true}\n", c[0], c[1])
		}
	}
	return b.String()
}

// tcTable is a declared table with its columns described for the generator.
type tcTable struct {
	name      string
	key, cols []*typecases.Column
}

func (tb *tcTable) all() []*typecases.Column {
	return append(append([]*typecases.Column(nil), tb.key...), tb.cols...)
}

// tcMismatch is one value ndbgate did not give back as the encoding says.
type tcMismatch struct {
	front, table, column, typ, key, sent, want, got string
}

func (m tcMismatch) String() string {
	return fmt.Sprintf("%s: %s.%s %s (key %s): sent %s, want %s, got %s", m.front, m.table, m.column, m.typ,
		typecases.Shorten(m.key), typecases.Shorten(m.sent), typecases.Shorten(m.want), typecases.Shorten(m.got))
}

// tcRun is the state of one run: the gateway's clients and the tallies.
type tcRun struct {
	t        *testing.T
	rest     string
	hc       *http.Client
	rows     rdrspb.RonDBRESTClient
	misses   []tcMismatch
	compared map[string]int // family -> values compared
	failed   map[string]int // family -> mismatches
}

func (o *tcRun) check(front string, tb *tcTable, c *typecases.Column, key string, v typecases.Value, got string, present bool) {
	fam := c.Family()
	o.compared[fam]++
	if !present {
		got = "(column missing from the reply)"
	}
	if present && typecases.SameJSON(c.Cmp, v.Want, got) {
		return
	}
	o.failed[fam]++
	o.misses = append(o.misses, tcMismatch{front, tb.name, c.Name, c.ColumnType, key, v.In, v.Want, got})
}

// miss records a failure that is not one value's (a write or read refused).
func (o *tcRun) miss(front string, tb *tcTable, c *typecases.Column, key string, v typecases.Value, got string) {
	fam := c.Family()
	o.compared[fam]++
	o.failed[fam]++
	o.misses = append(o.misses, tcMismatch{front, tb.name, c.Name, c.ColumnType, key, v.In, v.Want, got})
}

type tcField struct {
	Column string          `json:"column"`
	Value  json.RawMessage `json:"value"`
}

type tcReadColumn struct {
	Column string `json:"column"`
}

// post sends a row-API request and returns its status, its data (column
// -> JSON) and its body.
func (o *tcRun) post(op string, tb *tcTable, body any) (int, map[string]string, string) {
	o.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(o.t, err)
	resp, err := o.hc.Post("http://"+o.rest+"/0.1.0/"+typeCasesDB+"/"+tb.name+"/"+op, "application/json", bytes.NewReader(b))
	require.NoError(o.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(o.t, err)
	var out struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			o.t.Fatalf("%s %s: HTTP 200 with a body that is not JSON: %v: %s", op, tb.name, err, abbrev(string(raw)))
		}
	}
	data := map[string]string{}
	for k, v := range out.Data {
		data[k] = string(v)
	}
	return resp.StatusCode, data, string(raw)
}

// TestTypeCasesEmbedded: every column type the embedded engine declares,
// a few hundred values each (edge values included), written through REST
// pk-write and read back through REST pk-read and gRPC PKRead.
func TestTypeCasesEmbedded(t *testing.T) {
	embeddedOnly(t, "the live run of these cases is tests/sqloracle, against SQL on tables mysqld made")
	var tables []*tcTable
	for _, d := range typeCaseTables {
		tb := &tcTable{name: d.name}
		for i, list := range [][][2]string{d.key, d.cols} {
			for _, c := range list {
				col, err := typecases.Parse(d.name, c[0], c[1], i == 1)
				require.NoError(t, err)
				col.Key = i == 0
				if i == 0 {
					tb.key = append(tb.key, col)
				} else {
					tb.cols = append(tb.cols, col)
				}
			}
		}
		tables = append(tables, tb)
	}
	grpcAddr := freePort(t)
	s := startServer(t, "--config", writeFile(t, "typecases.yaml", typeCasesConfig()), "--grpc", grpcAddr)
	o := &tcRun{t: t, rest: s.restAddr, hc: &http.Client{Timeout: 10 * time.Second},
		rows: rdrspb.NewRonDBRESTClient(dialGRPC(t, grpcAddr, nil)), compared: map[string]int{}, failed: map[string]int{}}

	const seed = 20240229
	r := rand.New(rand.NewSource(seed))
	start := time.Now()
	for _, tb := range tables {
		o.runTable(r, tb)
	}
	elapsed := time.Since(start)

	var fams []string
	total, bad := 0, 0
	for f, n := range o.compared {
		fams = append(fams, f)
		total += n
		bad += o.failed[f]
	}
	sort.Strings(fams)
	var summary strings.Builder
	for _, f := range fams {
		fmt.Fprintf(&summary, "  %-22s %6d values, %d not as the encoding says\n", f, o.compared[f], o.failed[f])
	}
	t.Logf("seed %d, %d rows a table, in %v:\n%stotal: %d values, %d not as the encoding says", seed, typeCaseRows,
		elapsed.Round(time.Millisecond), summary.String(), total, bad)
	for i, m := range o.misses {
		if i == 50 {
			t.Errorf("... and %d more", len(o.misses)-50)
			break
		}
		t.Errorf("%s", m)
	}
}

// tcRow is one drawn row: column name -> value.
type tcRow map[string]typecases.Value

func (rw tcRow) keyText(tb *tcTable) string {
	var b []string
	for _, c := range tb.key {
		b = append(b, c.Name+"="+rw[c.Name].In)
	}
	return strings.Join(b, ", ")
}

func (rw tcRow) filters(tb *tcTable) []tcField {
	var f []tcField
	for _, c := range tb.key {
		f = append(f, tcField{Column: c.Name, Value: json.RawMessage(rw[c.Name].In)})
	}
	return f
}

func (o *tcRun) runTable(r *rand.Rand, tb *tcTable) {
	used := map[string]bool{}
	for i := 0; i < typeCaseRows; i++ {
		edge := i%3 == 0
		rw := tcRow{}
		for {
			for _, c := range tb.key {
				rw[c.Name] = drawKey(r, c, i, edge)
			}
			var id []string
			for _, c := range tb.key {
				id = append(id, rw[c.Name].Want)
			}
			if k := strings.Join(id, "\x1f"); !used[k] {
				used[k] = true
				break
			}
		}
		for _, c := range tb.cols {
			if edge {
				rw[c.Name] = c.Draw(r, true)
			} else {
				rw[c.Name] = c.Gen(r)
			}
		}
		if o.writeRow(tb, rw) {
			o.readRow(tb, rw)
		}
	}
}

// drawKey draws a key column's value: never NULL; a string ends in the
// row's number, so keys stay distinct whatever the engine's collation.
func drawKey(r *rand.Rand, c *typecases.Column, n int, edge bool) typecases.Value {
	switch c.DataType {
	case "char", "varchar":
		suffix := "~" + strconv.Itoa(n)
		s := typecases.RandString(r, edge, c.MaxLen-utf8.RuneCountInString(suffix), false) + suffix
		return typecases.Value{SQL: s, In: typecases.JSONString(s), Want: typecases.JSONString(s), Text: s}
	case "int":
		if c.Unsigned && c.Name == "id" {
			s := strconv.Itoa(n + 1)
			return typecases.Value{SQL: s, In: s, Want: s, Text: s}
		}
	}
	return c.Draw(r, edge)
}

// writeRow writes rw through REST pk-write; when that is refused, each
// column is written alone to find which value ndbgate refuses.
func (o *tcRun) writeRow(tb *tcTable, rw tcRow) bool {
	var vals []tcField
	for _, c := range tb.cols {
		vals = append(vals, tcField{Column: c.Name, Value: json.RawMessage(rw[c.Name].In)})
	}
	code, _, body := o.post("pk-write", tb, map[string]any{"filters": rw.filters(tb), "values": vals})
	if code == http.StatusOK {
		return true
	}
	key := rw.keyText(tb)
	code1, _, body1 := o.post("pk-write", tb, map[string]any{"filters": rw.filters(tb), "values": []tcField{}})
	if code1 != http.StatusOK {
		for _, c := range tb.key {
			o.miss("REST pk-write (key alone)", tb, c, key, rw[c.Name], fmt.Sprintf("HTTP %d %s", code1, body1))
		}
		return false
	}
	found := false
	for _, c := range tb.cols {
		code1, _, body1 := o.post("pk-write", tb, map[string]any{"filters": rw.filters(tb),
			"values": []tcField{{Column: c.Name, Value: json.RawMessage(rw[c.Name].In)}}})
		if code1 != http.StatusOK {
			found = true
			o.miss("REST pk-write", tb, c, key, rw[c.Name], fmt.Sprintf("HTTP %d %s", code1, body1))
		}
	}
	if !found {
		o.miss("REST pk-write (whole row)", tb, tb.key[0], key, rw[tb.key[0].Name], fmt.Sprintf("HTTP %d %s", code, body))
	}
	return false
}

// readRow reads rw back: REST pk-read of every non-key column (readColumns
// omitted), and gRPC PKRead of every column, keys included, named in
// reverse order.
func (o *tcRun) readRow(tb *tcTable, rw tcRow) {
	key := rw.keyText(tb)
	code, data, body := o.post("pk-read", tb, map[string]any{"filters": rw.filters(tb)})
	if code != http.StatusOK {
		for _, c := range tb.cols {
			o.miss("REST pk-read", tb, c, key, rw[c.Name], fmt.Sprintf("HTTP %d %s", code, body))
		}
	} else {
		o.compareRead("REST pk-read", tb, tb.cols, rw, data)
	}

	cols := tb.all()
	slices.Reverse(cols)
	req := &rdrspb.PKReadRequestProto{DB: proto.String(typeCasesDB), Table: proto.String(tb.name)}
	for _, c := range cols {
		req.ReadColumns = append(req.ReadColumns, &rdrspb.ReadColumnProto{Column: proto.String(c.Name)})
	}
	for _, c := range tb.key {
		req.Filters = append(req.Filters, &rdrspb.FilterProto{Column: proto.String(c.Name), Value: proto.String(rw[c.Name].In)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := o.rows.PKRead(ctx, req)
	if err == nil && resp.GetCode() != 0 && resp.GetCode() != http.StatusOK {
		err = fmt.Errorf("code %d", resp.GetCode())
	}
	if err != nil {
		for _, c := range cols {
			o.miss("gRPC PKRead", tb, c, key, rw[c.Name], err.Error())
		}
		return
	}
	got := map[string]string{}
	for k, v := range resp.GetData() {
		if v.Name == nil {
			got[k] = "null"
		} else {
			got[k] = v.GetName()
		}
	}
	o.compareRead("gRPC PKRead", tb, cols, rw, got)
}

func (o *tcRun) compareRead(front string, tb *tcTable, cols []*typecases.Column, rw tcRow, got map[string]string) {
	key := rw.keyText(tb)
	for _, c := range cols {
		g, ok := got[c.Name]
		o.check(front, tb, c, key, rw[c.Name], g, ok)
	}
	for name, g := range got {
		if !slices.ContainsFunc(cols, func(c *typecases.Column) bool { return c.Name == name }) {
			o.misses = append(o.misses, tcMismatch{front, tb.name, name, "?", key, "(not asked for)", "(absent)", g})
		}
	}
}
