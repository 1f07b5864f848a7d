package rowapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

func newService(t *testing.T) *Service {
	e := embedded.New(embedded.Config{Partitions: 4, Nodes: 2})
	t.Cleanup(func() { _ = e.Close() })
	tbl := &ndbclient.Table{Database: "shop", Name: "orders", ExpireColumn: -1}
	for _, c := range []struct{ name, typ string }{{"id", "BIGINT UNSIGNED"}, {"region", "VARCHAR(8)"}, {"note", "VARCHAR(20)"}, {"price", "DECIMAL(8,2)"}, {"qty", "INT"}} {
		col := ndbclient.Column{Name: c.name, Nullable: c.name == "note"}
		require.NoError(t, ndbclient.ParseColumnType(c.typ, &col))
		tbl.Columns = append(tbl.Columns, col)
	}
	tbl.PrimaryKey = []int{0, 1}
	_, err := e.CreateTable(tbl)
	require.NoError(t, err)
	return New(ndbclient.NewClient(e), Limits{MaxBatch: 8})
}

func f(col, v string) Field { return Field{Column: col, Value: []byte(v)} }

func key(id string) []Field { return []Field{f("id", id), f("region", `"eu"`)} }

func TestExecute(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	res, err := s.Execute(ctx, nil, []Op{
		{Method: MethodInsert, DB: "shop", Table: "orders", Filters: key("1"), Values: []Field{f("price", "9.5"), f("qty", "3")}, OperationID: "a"},
		{Method: MethodWrite, DB: "shop", Table: "orders", Filters: key("2"), Values: []Field{f("price", `"1.25"`), f("qty", "-1"), f("note", `"hi"`)}},
		{Method: MethodInsert, DB: "shop", Table: "orders", Filters: key("3"), Values: []Field{f("price", "1")}},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	assert.Equal(t, "a", res[0].OperationID)
	require.NoError(t, res[1].Err)
	assert.ErrorContains(t, res[2].Err, `NOT NULL column "qty" needs a value`)

	res, err = s.Execute(ctx, nil, []Op{
		{Method: MethodRead, DB: "shop", Table: "orders", Filters: key("1"), OperationID: "r1"},
		{Method: MethodRead, DB: "shop", Table: "orders", Filters: key("2"), ReadColumns: []string{"qty", "note"}},
		{Method: MethodRead, DB: "shop", Table: "orders", Filters: key("9")},
		{Method: MethodInsert, DB: "shop", Table: "orders", Filters: key("1"), Values: []Field{f("price", "1"), f("qty", "1")}},
		{Method: MethodUpdate, DB: "shop", Table: "orders", Filters: key("9"), Values: []Field{f("qty", "1")}},
		{Method: MethodDelete, DB: "shop", Table: "orders", Filters: key("2")},
		{Method: MethodRead, DB: "shop", Table: "nope", Filters: key("1")},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	assert.Equal(t, []Column{{"note", []byte("null")}, {"price", []byte("9.50")}, {"qty", []byte("3")}}, res[0].Data)
	assert.Equal(t, "r1", res[0].OperationID)
	assert.Equal(t, []Column{{"qty", []byte("-1")}, {"note", []byte(`"hi"`)}}, res[1].Data)
	assert.Equal(t, ndbclient.CodeNotFound, ndbclient.CodeOf(res[2].Err))
	assert.Equal(t, ndbclient.CodeDuplicate, ndbclient.CodeOf(res[3].Err))
	assert.Equal(t, ndbclient.CodeNotFound, ndbclient.CodeOf(res[4].Err))
	assert.NoError(t, res[5].Err)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(res[6].Err))
	assert.ErrorContains(t, res[6].Err, "table shop.nope does not exist")

	// Nothing stored was lost to the refusals.
	res, err = s.Execute(ctx, nil, []Op{{Method: MethodRead, DB: "shop", Table: "orders", Filters: key("1"), ReadColumns: []string{"qty"}}})
	require.NoError(t, err)
	assert.Equal(t, "3", string(res[0].Data[0].Value))
}

func TestExecuteRefusals(t *testing.T) {
	s := newService(t)
	read := func(o Op) error {
		o.DB, o.Table = "shop", "orders"
		if o.Method == 0 {
			o.Method = MethodRead
		}
		res, err := s.Execute(context.Background(), nil, []Op{o})
		require.NoError(t, err)
		return res[0].Err
	}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Filters: []Field{f("id", "1")}}, `primary key column "region" of shop.orders is missing`},
		{Op{Filters: append(key("1"), f("qty", "1"))}, `filter column "qty" is not part of the primary key`},
		{Op{Filters: append(key("1"), f("id", "2"))}, `filter column "id" is given twice`},
		{Op{Filters: []Field{f("id", `"x"`), f("region", `"eu"`)}}, `column "id" (BIGINT UNSIGNED): wants an integer, got a string`},
		{Op{Filters: []Field{f("id", "-1"), f("region", `"eu"`)}}, "out of range"},
		{Op{Filters: key("1"), ReadColumns: []string{"zzz"}}, `column "zzz" does not exist in shop.orders`},
		{Op{Filters: key("1"), ReadColumns: []string{"qty", "qty"}}, "given twice"},
		{Op{Filters: key("1"), ReadColumns: []string{"qty"}, ReturnTypes: []string{"base64"}}, "dataReturnType"},
		{Op{Method: MethodWrite, Filters: key("1"), Values: []Field{f("id", "2")}}, "part of the primary key"},
		{Op{Method: MethodUpdate, Filters: key("1")}, "needs at least one value"},
		{Op{Method: MethodWrite, Filters: key("1"), Values: []Field{f("qty", "1.5")}}, "wants an integer"},
		{Op{Method: MethodWrite, Filters: key("1"), Values: []Field{f("qty", "1"), f("price", "1"), f("note", `"`+string(make([]byte, 21))+`"`)}}, "not a valid JSON string"},
	} {
		err := read(tc.op)
		require.Error(t, err, tc.want)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err), tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	_, err := s.Execute(context.Background(), nil, make([]Op, 9))
	assert.ErrorContains(t, err, "9 operations is more than the limit of 8")
	res, err := s.Execute(context.Background(), nil, []Op{{Method: MethodRead, DB: string(make([]byte, 65)), Table: "t"}})
	require.NoError(t, err)
	assert.ErrorContains(t, res[0].Err, "longer than 64")
}

func TestExecuteGrants(t *testing.T) {
	s := newService(t)
	keys, err := auth.Parse([]byte(`keys: [{name: a, key: "0123456789abcdef", grants: [other]}]`))
	require.NoError(t, err)
	who, err := keys.Authenticate("0123456789abcdef")
	require.NoError(t, err)
	res, err := s.Execute(context.Background(), who, []Op{{Method: MethodRead, DB: "shop", Table: "orders", Filters: key("1")}})
	require.NoError(t, err)
	assert.ErrorIs(t, res[0].Err, auth.ErrDenied)
}

// refusingDriver describes one table as the NDB driver does a table with a
// BLOB column: a schema error that names the column.
type refusingDriver struct{ ndbclient.Driver }

func (d refusingDriver) Table(db, name string) (*ndbclient.Table, error) {
	if name == "docs" {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s.%s: column body: NDB column type 21 (BLOB/TEXT) is not supported by this driver yet", db, name)
	}
	return d.Driver.Table(db, name)
}

// A table that exists but cannot be served is a 400 that says why; a
// missing one stays a 404; a table made without a primary key (mysqld's
// hidden $PK) is refused rather than served by a key SQL cannot see.
func TestTablesRefusedSayWhy(t *testing.T) {
	e := embedded.New(embedded.Config{Partitions: 4})
	t.Cleanup(func() { _ = e.Close() })
	_, err := e.CreateTable(&ndbclient.Table{Database: "app", Name: "nopk", ExpireColumn: -1, PrimaryKey: []int{1},
		Columns: []ndbclient.Column{{Name: "v", Type: ndbclient.TypeInt32, Nullable: true}, {Name: "$PK", Type: ndbclient.TypeUint64}}})
	require.NoError(t, err)
	s := New(ndbclient.NewClient(refusingDriver{e}), Limits{MaxBatch: 8})
	read := func(table string, filters ...Field) error {
		res, err := s.Execute(context.Background(), nil, []Op{{Method: MethodRead, DB: "app", Table: table, Filters: filters}})
		require.NoError(t, err)
		return res[0].Err
	}
	err = read("docs", f("id", "1"))
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, "table app.docs cannot be served: app.docs: column body")
	err = read("nopk", f("$PK", "1"))
	assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, "table app.nopk has no primary key")
	err = read("absent", f("id", "1"))
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.ErrorContains(t, err, "table app.absent does not exist")
}

func TestDuplicateSaysWhichKey(t *testing.T) {
	op := &Op{Method: MethodWrite, DB: "app", Table: "users"}
	uniq := describeErr(op, &ndbclient.Error{Code: ndbclient.CodeDuplicate, NativeCode: 893, Message: "Constraint violation e.g. duplicate value in unique index"})
	assert.Equal(t, ndbclient.CodeDuplicate, ndbclient.CodeOf(uniq))
	assert.ErrorContains(t, uniq, "another row of app.users has these values of a unique key")
	pk := describeErr(op, &ndbclient.Error{Code: ndbclient.CodeDuplicate, NativeCode: 630, Message: "Tuple already existed when attempting to insert"})
	assert.ErrorContains(t, pk, "a row with this primary key already exists in app.users")
}

// A table shaped as the NDB driver describes one made in SQL: latin1 and
// utf8mb4 strings, an ENUM and a SET (CHARs of binary character set with
// names), and a TEXT column the driver cannot serve. The embedded engine
// stores the bytes; the row API converts them.
func TestExecuteSQLTable(t *testing.T) {
	e := embedded.New(embedded.Config{Partitions: 2, Nodes: 1})
	t.Cleanup(func() { _ = e.Close() })
	tbl := &ndbclient.Table{Database: "d", Name: "sql", ExpireColumn: -1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{
			{Name: "k", Type: ndbclient.TypeVarchar, Length: 10, Chars: 10, Charset: 8},
			{Name: "l1", Type: ndbclient.TypeVarchar, Length: 20, Chars: 20, Charset: 8, Nullable: true},
			{Name: "u4", Type: ndbclient.TypeVarchar, Length: 80, Chars: 20, Charset: 45, Nullable: true},
			{Name: "e", Type: ndbclient.TypeChar, Length: 1, Chars: 1, Charset: 63, Enum: []string{"a", "b", "c"}, Nullable: true},
			{Name: "s", Type: ndbclient.TypeChar, Length: 1, Chars: 1, Charset: 63, Set: []string{"x", "y", "z"}, Nullable: true},
			{Name: "doc", Type: ndbclient.TypeText, Charset: 8, Nullable: true, Unsupported: "a TEXT column: ndbgate does not read or write BLOB/TEXT"},
		}}
	_, err := e.CreateTable(tbl)
	require.NoError(t, err)
	cl := ndbclient.NewClient(e)
	s := New(cl, Limits{})
	ctx := context.Background()
	op := func(m Method, k string, vals []Field, read ...string) Op {
		return Op{Method: m, DB: "d", Table: "sql", Filters: []Field{f("k", k)}, Values: vals, ReadColumns: read}
	}
	res, err := s.Execute(ctx, nil, []Op{
		op(MethodWrite, `"clé"`, []Field{f("l1", `"café"`), f("u4", `"naïve 😀"`), f("e", `"c"`), f("s", `"z,x"`)}),
		op(MethodWrite, `"k2"`, []Field{f("l1", `"zł"`)}),
		op(MethodWrite, `"k3"`, []Field{f("doc", `"text"`)}),
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	assert.ErrorContains(t, res[1].Err, `column "l1" (VARCHAR(20)): character U+0142 'ł' cannot be stored in latin1`)
	assert.ErrorContains(t, res[2].Err, `column "doc" is a TEXT column`)

	// Stored as MySQL stores them: latin1 bytes, the ENUM's index, the SET's bits.
	raw := &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.Bytes([]byte("cl\xe9"))}, Read: []int{1, 2, 3, 4}}
	require.NoError(t, cl.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{raw}}))
	require.NoError(t, raw.Err)
	assert.Equal(t, []byte("caf\xe9"), raw.Row[0].B)
	assert.Equal(t, []byte("naïve 😀"), raw.Row[1].B)
	assert.Equal(t, []byte{3}, raw.Row[2].B)
	assert.Equal(t, []byte{5}, raw.Row[3].B)

	res, err = s.Execute(ctx, nil, []Op{
		op(MethodRead, `"clé"`, nil, "l1", "u4", "e", "s"),
		op(MethodRead, `"clé"`, nil),
		op(MethodRead, `"clé"`, nil, "doc"),
		op(MethodDelete, `"clé"`, nil),
		op(MethodInsert, `"k4"`, []Field{f("e", `"d"`)}),
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	assert.Equal(t, []Column{{"l1", []byte(`"café"`)}, {"u4", []byte(`"naïve 😀"`)}, {"e", []byte(`"c"`)}, {"s", []byte(`"x,z"`)}}, res[0].Data)
	assert.ErrorContains(t, res[1].Err, `column "doc" is a TEXT column: ndbgate does not read or write BLOB/TEXT; name the columns to read in readColumns`)
	assert.ErrorContains(t, res[2].Err, `column "doc" is a TEXT column`)
	assert.ErrorContains(t, res[3].Err, "pk-delete: d.sql has a BLOB/TEXT column (doc)")
	assert.ErrorContains(t, res[4].Err, `"d" is not one of its values ("a", "b", "c")`)
	for _, r := range res[1:] {
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(r.Err))
	}
}
