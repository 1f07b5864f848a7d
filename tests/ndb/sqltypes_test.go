//go:build ndbapi

package ndb

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway/rowapi"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// mysqlClient is NDBGATE_TEST_MYSQL, the mysql client command line of a
// mysqld on the cluster (e.g. "/opt/mysql/bin/mysql -uroot -S
// /tmp/mysql.sock"), or skips the test.
func mysqlClient(t *testing.T) []string {
	cmd := strings.Fields(os.Getenv("NDBGATE_TEST_MYSQL"))
	if len(cmd) == 0 {
		t.Skip("NDBGATE_TEST_MYSQL not set: no mysqld to make tables in SQL")
	}
	if _, err := exec.LookPath(cmd[0]); err != nil {
		t.Skipf("NDBGATE_TEST_MYSQL: %v", err)
	}
	for i, a := range cmd {
		if a == "-S" && i+1 < len(cmd) {
			if _, err := os.Stat(cmd[i+1]); err != nil {
				t.Skipf("NDBGATE_TEST_MYSQL: no socket: %v", err)
			}
		}
	}
	return cmd
}

// sql runs statements through the mysql client (utf8mb4, batch mode, no
// column names) and returns the rows, each split at tabs.
func sql(t *testing.T, client []string, stmts string) [][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append(append([]string(nil), client[1:]...), "--default-character-set=utf8mb4", "-N", "-B", "-e", stmts)
	out, err := exec.CommandContext(ctx, client[0], args...).CombinedOutput()
	require.NoError(t, err, "mysql: %s", out)
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line != "" {
			rows = append(rows, strings.Split(line, "\t"))
		}
	}
	return rows
}

// sqlTypesColumns are the columns TestSQLTypes compares, with how SELECT
// shows each as text to compare: the UTF-8 of a string, ENUM or SET in hex,
// a binary string's bytes in hex, a DECIMAL as text.
var sqlTypesColumns = []struct{ name, kind string }{
	{"c_l1", "str"}, {"v_l1", "str"}, {"c_u4", "str"}, {"v_u4", "str"}, {"v_u3", "str"}, {"v_as", "str"},
	{"c_bin", "bin"}, {"v_bin", "bin"},
	{"e", "str"}, {"e_u4", "str"}, {"e40", "str"}, {"e_big", "str"}, {"s", "str"}, {"s_u4", "str"},
	{"d10", "dec"}, {"d30", "dec"},
}

func selectExpr(name, kind string) string {
	switch kind {
	case "str":
		return fmt.Sprintf("IFNULL(HEX(CONVERT(%s USING utf8mb4)),'NULL')", name)
	case "bin":
		return fmt.Sprintf("IFNULL(HEX(%s),'NULL')", name)
	}
	return fmt.Sprintf("IFNULL(CAST(%s AS CHAR),'NULL')", name)
}

// jsonAsSelect turns the row API's JSON value into what selectExpr shows.
func jsonAsSelect(t *testing.T, kind string, raw []byte) string {
	if string(raw) == "null" {
		return "NULL"
	}
	switch kind {
	case "str":
		var s string
		require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
		return strings.ToUpper(hex.EncodeToString([]byte(s)))
	case "bin":
		var s string
		require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
		b, err := base64.StdEncoding.DecodeString(s)
		require.NoError(t, err)
		return strings.ToUpper(hex.EncodeToString(b))
	}
	return strings.Trim(string(raw), `"`)
}

func enumList(prefix string, n int) string {
	var names []string
	for i := 1; i <= n; i++ {
		names = append(names, fmt.Sprintf("'%s%d'", prefix, i))
	}
	return strings.Join(names, ",")
}

// TestSQLTypes: tables made in SQL through a mysqld, rows inserted in SQL,
// read through the NDB driver and the row API, compared with SELECT; rows
// written through the row API, compared in SQL, byte for byte, with the
// ones mysqld wrote. Needs NDBGATE_TEST_MYSQL; it uses the database
// ndbgate_types.
func TestSQLTypes(t *testing.T) {
	cs := connectstring(t)
	my := mysqlClient(t)
	sql(t, my, `CREATE DATABASE IF NOT EXISTS ndbgate_types;
DROP TABLE IF EXISTS ndbgate_types.sqltypes;
CREATE TABLE ndbgate_types.sqltypes (
  id INT NOT NULL PRIMARY KEY,
  c_l1 CHAR(10) CHARACTER SET latin1,
  v_l1 VARCHAR(20) CHARACTER SET latin1,
  c_u4 CHAR(10) CHARACTER SET utf8mb4,
  v_u4 VARCHAR(20) CHARACTER SET utf8mb4,
  v_u3 VARCHAR(20) CHARACTER SET utf8,
  v_as VARCHAR(20) CHARACTER SET ascii,
  c_bin BINARY(6),
  v_bin VARBINARY(20),
  e ENUM('a','b','c'),
  e_u4 ENUM('café','naïve','😀') CHARACTER SET utf8mb4,
  e40 ENUM(`+enumList("w", 40)+`),
  e_big ENUM(`+enumList("v", 300)+`),
  s SET('x','y','z'),
  s_u4 SET('α','β','γ','δ','ε','ζ','η','θ','ι') CHARACTER SET utf8mb4,
  d10 DECIMAL(10,2),
  d30 DECIMAL(30,5),
  doc TEXT
) ENGINE=NDBCLUSTER;
SET sql_mode = 'STRICT_ALL_TABLES';
INSERT INTO ndbgate_types.sqltypes VALUES
 (1, 'café', 'naïve', 'café', 'naïve 😀', 'naïve', 'plain', 0x00FF10, 0xDEADBEEF, 'c', '😀', 'w3', 'v260', 'x,z', 'α,ι', 12345678.91, '1234567890123456789012345.12345', 'text'),
 (2, 'ab  ', 'ab  ', 'ab  ', 'ab  ', 'ab ', 'ab ', 0x20, 0x2000, 'a', 'café', 'w32', 'v288', 'y', 'θ', -0.5, '-0.00001', NULL),
 (3, '', '', '', '', '', '', '', '', NULL, NULL, NULL, NULL, '', '', 0, 0, ''),
 (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (5, CONVERT(UNHEX('818D8F909D') USING latin1), '€‰Šœÿ', '😀😀', 'tab	nl\\\\', '€', '~', 0xFFFFFFFFFFFF, '', 'b', 'naïve', 'w40', 'v300', 'x,y,z', 'α,β,γ,δ,ε,ζ,η,θ,ι', 99999999.99, '-9999999999999999999999999.99999', NULL);
DROP TABLE IF EXISTS ndbgate_types.l1key;
CREATE TABLE ndbgate_types.l1key (k VARCHAR(20) CHARACTER SET latin1 NOT NULL PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4) ENGINE=NDBCLUSTER;
INSERT INTO ndbgate_types.l1key VALUES ('clé', 'à la'), ('CAFÉ', 'x');`)

	d := openDriver(t, cs, 1)
	svc := rowapi.New(ndbclient.NewClient(d), rowapi.Limits{})
	ctx := context.Background()
	field := func(col, v string) rowapi.Field { return rowapi.Field{Column: col, Value: []byte(v)} }
	run := func(ops ...rowapi.Op) []rowapi.Result {
		t.Helper()
		for i := range ops {
			ops[i].DB = "ndbgate_types"
			if ops[i].Table == "" {
				ops[i].Table = "sqltypes"
			}
		}
		res, err := svc.Execute(ctx, nil, ops)
		require.NoError(t, err)
		return res
	}
	var names []string
	var exprs []string
	for _, c := range sqlTypesColumns {
		names = append(names, c.name)
		exprs = append(exprs, selectExpr(c.name, c.kind))
	}
	compare := func(ids []int) map[int][]rowapi.Column {
		t.Helper()
		want := map[string][]string{}
		for _, row := range sql(t, my, "SELECT id, "+strings.Join(exprs, ", ")+" FROM ndbgate_types.sqltypes ORDER BY id") {
			want[row[0]] = row[1:]
		}
		got := map[int][]rowapi.Column{}
		compared := 0
		for _, id := range ids {
			res := run(rowapi.Op{Method: rowapi.MethodRead, Filters: []rowapi.Field{field("id", fmt.Sprint(id))}, ReadColumns: names})
			require.NoError(t, res[0].Err, "row %d", id)
			w, ok := want[fmt.Sprint(id)]
			require.True(t, ok, "row %d in SQL", id)
			for i, c := range sqlTypesColumns {
				assert.Equal(t, w[i], jsonAsSelect(t, c.kind, res[0].Data[i].Value), "row %d column %s: %s", id, c.name, res[0].Data[i].Value)
				compared++
			}
			got[id] = res[0].Data
		}
		t.Logf("compared %d values of %d rows with SELECT", compared, len(ids))
		return got
	}
	read := compare([]int{1, 2, 3, 4, 5})

	// Spot checks of the JSON itself, as the issue reported it.
	byName := func(cols []rowapi.Column, name string) string {
		for _, c := range cols {
			if c.Name == name {
				return string(c.Value)
			}
		}
		return "?"
	}
	assert.Equal(t, `"café"`, byName(read[1], "c_l1"))
	assert.Equal(t, `"c"`, byName(read[1], "e"))
	assert.Equal(t, `"x,z"`, byName(read[1], "s"))
	assert.Equal(t, `"😀"`, byName(read[1], "e_u4"))
	assert.Equal(t, `"v260"`, byName(read[1], "e_big"))
	assert.Equal(t, `"w32"`, byName(read[2], "e40"), "index 32 is a space byte: not trimmed")
	assert.Equal(t, `"ab"`, byName(read[2], "c_l1"), "CHAR: trailing spaces trimmed, as SELECT shows")
	assert.Equal(t, `"ab  "`, byName(read[2], "v_l1"), "VARCHAR: trailing spaces kept")
	assert.Equal(t, `12345678.91`, byName(read[1], "d10"), "DECIMAL(10,2): a number")
	assert.Equal(t, `"1234567890123456789012345.12345"`, byName(read[1], "d30"), "DECIMAL(30,5): a string")

	// Writes: each row again under id+10, from the JSON just read. What the
	// row API stores is what mysqld stored, byte for byte.
	var writes []rowapi.Op
	for id, cols := range read {
		var vals []rowapi.Field
		for _, c := range cols {
			vals = append(vals, rowapi.Field{Column: c.Name, Value: c.Value})
		}
		writes = append(writes, rowapi.Op{Method: rowapi.MethodInsert, Filters: []rowapi.Field{field("id", fmt.Sprint(id+10))}, Values: vals})
	}
	for i, r := range run(writes...) {
		require.NoError(t, r.Err, "write %d", i)
	}
	var same []string
	for _, c := range sqlTypesColumns {
		same = append(same, fmt.Sprintf("IF(a.%[1]s <=> b.%[1]s AND HEX(a.%[1]s) <=> HEX(b.%[1]s), '', '%[1]s')", c.name))
	}
	diffs := sql(t, my, "SELECT a.id, CONCAT_WS(' ', "+strings.Join(same, ", ")+") FROM ndbgate_types.sqltypes a JOIN ndbgate_types.sqltypes b ON b.id = a.id + 10 ORDER BY a.id")
	require.Len(t, diffs, 5)
	for _, row := range diffs {
		diff := ""
		if len(row) > 1 {
			diff = strings.TrimSpace(row[1])
		}
		assert.Empty(t, diff, "row %s written through the row API differs in SQL in: %s", row[0], diff)
	}
	compare([]int{11, 12, 13, 14, 15})
	// The latin1 bytes themselves, as mysqld would have written them.
	assert.Equal(t, [][]string{{"636166E9", "80898A9CFF", "818D8F909D"}},
		sql(t, my, "SELECT HEX(a.c_l1), HEX(b.v_l1), HEX(b.c_l1) FROM ndbgate_types.sqltypes a, ndbgate_types.sqltypes b WHERE a.id = 11 AND b.id = 15"))

	// A latin1 primary key: the filter is converted before NDB hashes it.
	res := run(rowapi.Op{Method: rowapi.MethodRead, Table: "l1key", Filters: []rowapi.Field{field("k", `"clé"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Table: "l1key", Filters: []rowapi.Field{field("k", `"€uro"`)}, Values: []rowapi.Field{field("v", `"😀"`)}})
	require.NoError(t, res[0].Err)
	assert.Equal(t, `"à la"`, string(res[0].Data[0].Value))
	require.NoError(t, res[1].Err)
	assert.Equal(t, [][]string{{"8075726F", "F09F9880"}}, sql(t, my, "SELECT HEX(k), HEX(v) FROM ndbgate_types.l1key WHERE k = '€uro'"))

	// Refusals: each says which column and why, and fails only its own op.
	res = run(
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("v_l1", `"zażółć"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("v_u3", `"😀"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("v_as", `"é"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("e", `"d"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("s", `"x,w"`)}},
		rowapi.Op{Method: rowapi.MethodWrite, Filters: []rowapi.Field{field("id", "21")}, Values: []rowapi.Field{field("doc", `"x"`)}},
		rowapi.Op{Method: rowapi.MethodRead, Filters: []rowapi.Field{field("id", "1")}, ReadColumns: []string{"doc"}},
		rowapi.Op{Method: rowapi.MethodRead, Filters: []rowapi.Field{field("id", "1")}},
		rowapi.Op{Method: rowapi.MethodDelete, Filters: []rowapi.Field{field("id", "1")}},
		rowapi.Op{Method: rowapi.MethodUpdate, Filters: []rowapi.Field{field("id", "1")}, Values: []rowapi.Field{field("v_u4", `"still served"`)}},
	)
	for i, want := range []string{
		`column "v_l1" (VARCHAR(20)): character U+017C 'ż' cannot be stored in latin1`,
		`column "v_u3" (VARCHAR(20)): character U+1F600 '😀' cannot be stored in utf8`,
		`column "v_as" (VARCHAR(20)): character U+00E9 'é' cannot be stored in ascii`,
		`column "e" (ENUM): "d" is not one of its values ("a", "b", "c")`,
		`column "s" (SET): "w" is not one of its members ("x", "y", "z")`,
		`column "doc" is a TEXT column`,
		`column "doc" is a TEXT column`,
		`column "doc" is a TEXT column: ndbgate does not read or write BLOB/TEXT; name the columns to read in readColumns`,
		`pk-delete: ndbgate_types.sqltypes has a BLOB/TEXT column (doc)`,
	} {
		require.Error(t, res[i].Err, want)
		assert.Equal(t, ndbclient.CodeInvalidArgument, ndbclient.CodeOf(res[i].Err), want)
		assert.ErrorContains(t, res[i].Err, want)
	}
	require.NoError(t, res[9].Err, "the table's other columns are served")
	assert.Equal(t, [][]string{{"still served", "text"}}, sql(t, my, "SELECT v_u4, doc FROM ndbgate_types.sqltypes WHERE id = 1"))
	assert.Equal(t, [][]string{{"0"}}, sql(t, my, "SELECT COUNT(*) FROM ndbgate_types.sqltypes WHERE id = 21"))
}

// A TIMESTAMP expire column made in SQL, as ndb_memcache_metadata.sql makes
// demo_table_tabs' (`expire_time TIMESTAMP NULL`), and one with a fraction:
// rows mysqld wrote expire by the time SQL gave them, and the expiry the
// driver writes is the time SQL reads (UNIX_TIMESTAMP, in UTC).
func TestTimestampExpiryOfASQLTable(t *testing.T) {
	cs := connectstring(t)
	my := mysqlClient(t)
	sql(t, my, `CREATE DATABASE IF NOT EXISTS ndbgate_types;
SET time_zone = '+00:00';
DROP TABLE IF EXISTS ndbgate_types.sqltabs0, ndbgate_types.sqltabs3;
CREATE TABLE ndbgate_types.sqltabs0 (mkey INT NOT NULL PRIMARY KEY, val VARCHAR(60), expire_time TIMESTAMP NULL) ENGINE=NDBCLUSTER;
CREATE TABLE ndbgate_types.sqltabs3 (mkey INT NOT NULL PRIMARY KEY, val VARCHAR(60), expire_time TIMESTAMP(3) NULL) ENGINE=NDBCLUSTER;
INSERT INTO ndbgate_types.sqltabs0 VALUES (1, 'past', NOW() - INTERVAL 1 HOUR), (2, 'future', NOW() + INTERVAL 1 HOUR), (3, 'never', NULL);
INSERT INTO ndbgate_types.sqltabs3 VALUES (1, 'past', NOW(3) - INTERVAL 1 HOUR), (2, 'future', NOW(3) + INTERVAL 1 HOUR), (3, 'never', NULL),
  (4, 'this second, and a fraction', FROM_UNIXTIME(UNIX_TIMESTAMP() - 2) + INTERVAL 0.999 SECOND);`)
	d := openDriver(t, cs, 1)
	c := ndbclient.NewClient(d)
	run := func(op *ndbclient.Op) error {
		t.Helper()
		require.NoError(t, c.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
		return op.Err
	}
	for _, name := range []string{"sqltabs0", "sqltabs3"} {
		t.Run(name, func(t *testing.T) {
			tbl, err := d.Table("ndbgate_types", name)
			require.NoError(t, err)
			require.Equal(t, ndbclient.TypeTimestamp, tbl.Columns[2].Type)
			tbl.ExpireColumn = 2 // as a container binds it
			key := func(id int64) []ndbclient.Value { return []ndbclient.Value{ndbclient.Int(id)} }
			for id, alive := range map[int64]bool{1: false, 2: true, 3: true, 4: false} {
				if id == 4 && name == "sqltabs0" {
					continue
				}
				for _, lock := range []ndbclient.LockMode{ndbclient.LockCommitted, ndbclient.LockShared} {
					err := run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(id), Lock: lock, Read: []int{1}})
					if alive {
						assert.NoError(t, err, "row %d, lock %v", id, lock)
					} else {
						assert.ErrorIs(t, err, ndbclient.ErrNotFound, "row %d, lock %v", id, lock)
					}
				}
			}
			at := uint64(time.Now().Unix() + 100)
			col := &tbl.Columns[2]
			for id, exp := range map[int64]uint64{5: at, 6: 1, 7: 0} {
				require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(id),
					Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String("from ndbgate")}, {Column: 2, Value: ndbclient.ExpiryValue(col, exp)}}}))
			}
			got := sql(t, my, "SELECT mkey, IFNULL(UNIX_TIMESTAMP(expire_time), 'NULL') FROM ndbgate_types."+name+" WHERE mkey >= 5 ORDER BY mkey")
			frac := map[string]string{"sqltabs0": "", "sqltabs3": ".000"}[name]
			assert.Equal(t, [][]string{{"5", fmt.Sprint(at) + frac}, {"6", "1" + frac}, {"7", "NULL"}}, got, "SQL reads the times the driver wrote")
			require.NoError(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(5), Read: []int{1}}), "alive for 100 s")
			assert.ErrorIs(t, run(&ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(6), Read: []int{1}}), ndbclient.ErrNotFound)
		})
	}
}
