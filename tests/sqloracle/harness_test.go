package sqloracle

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ndbgate/ndbgate/internal/typecases"
	"github.com/ndbgate/ndbgate/protocols/grpc/kvpb"
	"github.com/ndbgate/ndbgate/protocols/grpc/rdrspb"
)

const database = "ndbgate_sqltypes"

// env is what the test needs from outside, or a skip.
type env struct {
	connectstring, bin, dsn string
}

func needEnv(t *testing.T) env {
	e := env{os.Getenv("NDBGATE_TEST_CONNECTSTRING"), os.Getenv("NDBGATE_BIN"), os.Getenv("NDBGATE_TEST_MYSQL_DSN")}
	if e.connectstring == "" || e.bin == "" || e.dsn == "" {
		t.Skip("needs NDBGATE_TEST_CONNECTSTRING, NDBGATE_BIN (ndbgate built with the NDB driver) and NDBGATE_TEST_MYSQL_DSN (e.g. root@unix(/tmp/mysql.sock)/): see tests/sql/README.md")
	}
	return e
}

// openSQL opens the mysqld with the session the oracle needs: utf8mb4,
// strict, TIMESTAMP in UTC. multi allows the multi-statement types.sql.
func openSQL(t *testing.T, dsn, db string, multi bool) *sql.DB {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("NDBGATE_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = db
	cfg.MultiStatements = multi
	cfg.ParseTime = false
	cfg.Collation = "utf8mb4_general_ci"
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("mysql: %v", err)
	}
	d := sql.OpenDB(c)
	d.SetMaxOpenConns(4)
	t.Cleanup(func() { _ = d.Close() })
	if err := d.Ping(); err != nil {
		t.Fatalf("mysql ping (%s): %v", dsn, err)
	}
	return d
}

// loadTypesSQL runs tests/sql/types.sql.
func loadTypesSQL(t *testing.T, dsn string) {
	script, err := os.ReadFile(filepath.Join("..", "sql", "types.sql"))
	if err != nil {
		t.Fatal(err)
	}
	d := openSQL(t, dsn, "", true)
	if _, err := d.Exec(string(script)); err != nil {
		t.Fatalf("loading tests/sql/types.sql: %v", err)
	}
	_ = d.Close()
}

// table is one table of ndbgate_sqltypes.
type table struct {
	Name string
	Cols []*column
	Key  []*column // primary key, in key order
}

func (tb *table) col(name string) *column {
	for _, c := range tb.Cols {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (tb *table) nonKey() []*column {
	var out []*column
	for _, c := range tb.Cols {
		if !c.Key {
			out = append(out, c)
		}
	}
	return out
}

// readSchema describes ndbgate_sqltypes from information_schema.
func readSchema(t *testing.T, db *sql.DB) map[string]*table {
	rows, err := db.Query(`SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE,
		COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''), COALESCE(CHARACTER_MAXIMUM_LENGTH, 0),
		COALESCE(NUMERIC_PRECISION, 0), COALESCE(NUMERIC_SCALE, 0), COALESCE(DATETIME_PRECISION, 0), COLUMN_KEY
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION`, database)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	tables := map[string]*table{}
	for rows.Next() {
		c := &column{}
		var nullable, colKey string
		var maxLen int64
		if err := rows.Scan(&c.Table, &c.Name, &c.DataType, &c.ColumnType, &nullable, &c.Charset, &c.Collation, &maxLen, &c.Prec, &c.Scale, &c.FSP, &colKey); err != nil {
			t.Fatal(err)
		}
		c.Nullable = nullable == "YES"
		c.Unique = colKey == "UNI"
		c.Unsigned = strings.Contains(c.ColumnType, "unsigned")
		c.MaxLen = int(maxLen)
		if c.DataType == "bit" {
			c.Bits = c.Prec
		}
		if c.DataType == "binary" || c.DataType == "varbinary" {
			c.Charset = "binary"
		}
		if err := c.Setup(); err != nil {
			t.Fatal(err)
		}
		tb := tables[c.Table]
		if tb == nil {
			tb = &table{Name: c.Table}
			tables[c.Table] = tb
		}
		tb.Cols = append(tb.Cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	krows, err := db.Query(`SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE TABLE_SCHEMA = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY TABLE_NAME, ORDINAL_POSITION`, database)
	if err != nil {
		t.Fatal(err)
	}
	defer krows.Close()
	for krows.Next() {
		var tn, cn string
		if err := krows.Scan(&tn, &cn); err != nil {
			t.Fatal(err)
		}
		c := tables[tn].col(cn)
		c.Key = true
		tables[tn].Key = append(tables[tn].Key, c)
	}
	for _, tb := range tables {
		for _, c := range tb.Cols {
			if c.DataType == "enum" || c.DataType == "set" {
				c.Members = members(t, db, tb.Name, c)
			}
		}
	}
	return tables
}

var quoted = regexp.MustCompile(`'((?:[^']|'')*)'`)

// members lists an ENUM's or SET's members. information_schema shows
// them in utf8mb3 (a 4-byte character becomes '?'), so they are read back
// from a scratch copy of the column: ENUM by index, SET by bit.
func members(t *testing.T, db *sql.DB, tn string, c *column) []string {
	n := len(quoted.FindAllString(c.ColumnType, -1))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	scratch := "sqloracle_members"
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("CREATE TEMPORARY TABLE %s ENGINE=MEMORY SELECT `%s` AS m FROM `%s`.`%s` WHERE 1=0", scratch, c.Name, database, tn)); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "DROP TEMPORARY TABLE "+scratch) //nolint:errcheck
	var out []string
	for i := 0; i < n; i++ {
		v := uint64(i + 1)
		if c.DataType == "set" {
			v = 1 << i
		}
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+scratch); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+scratch+" VALUES (?)", v); err != nil {
			t.Fatal(err)
		}
		var m string
		if err := conn.QueryRowContext(ctx, "SELECT m FROM "+scratch).Scan(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// freePort returns a free TCP port on 127.0.0.1.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// gateway is a running ndbgate and its clients.
type gateway struct {
	rest, memcache string
	http           *http.Client
	rows           rdrspb.RonDBRESTClient
	kv             kvpb.KVClient
}

// containerYAML serves ndbgate_sqltypes.kv as the memcache container
// "sqlkv", for every key (no prefix); the default container is not used.
const containerYAML = `containers:
  - name: sqlkv
    database: ndbgate_sqltypes
    table: kv
    key_columns: [mkey]
    value_columns: [v_str, v_int, v_u64, v_dec, v_date, v_dt, v_dbl, v_flt]
    flags_column: flags
    cas_column: cas
key_prefixes:
  - {prefix: "", container: sqlkv, policy: ndb-only}
`

const containerName = "sqlkv"

// kvValueColumns are the container's value columns, in order.
var kvValueColumns = []string{"v_str", "v_int", "v_u64", "v_dec", "v_date", "v_dt", "v_dbl", "v_flt"}

// startGateway starts ndbgate on free ports and waits for /readyz.
func startGateway(t *testing.T, e env) *gateway {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ndbgate.yaml")
	if err := os.WriteFile(cfg, []byte(containerYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gateway{rest: freePort(t), memcache: freePort(t), http: &http.Client{Timeout: 10 * time.Second}}
	grpcAddr := freePort(t)
	logPath := filepath.Join(dir, "ndbgate.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(e.bin, "serve", "--config", cfg, "--ndb-connectstring", e.connectstring, "--ndb-pool-size", "1",
		"--memcache", g.memcache, "--rest", g.rest, "--grpc", grpcAddr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", e.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("ndbgate's log (last 4 KiB):\n%s", tail(b, 4096))
			}
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("ndbgate exited before it was ready (%v):\n%s", err, tail(b, 4096))
		default:
		}
		resp, err := g.http.Get("http://" + g.rest + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("ndbgate not ready after 60 s:\n%s", tail(b, 4096))
		}
		time.Sleep(200 * time.Millisecond)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	g.rows, g.kv = rdrspb.NewRonDBRESTClient(conn), kvpb.NewKVClient(conn)
	return g
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// restReply is a row-API reply: its status, its data's JSON per column,
// and its error.
type restReply struct {
	Status int
	Data   map[string]string
	Code   string
	Msg    string
	Body   string
}

func (r *restReply) String() string {
	if r.Status == 200 {
		return "HTTP 200"
	}
	return fmt.Sprintf("HTTP %d %s: %s", r.Status, r.Code, r.Msg)
}

type field struct {
	Column string          `json:"column"`
	Value  json.RawMessage `json:"value"`
}

type readColumn struct {
	Column string `json:"column"`
}

type pkRequest struct {
	Filters     []field      `json:"filters"`
	Values      []field      `json:"values,omitempty"`
	ReadColumns []readColumn `json:"readColumns,omitempty"`
}

// post sends one row-API call and decodes its reply.
func (g *gateway) post(path string, body any) (*restReply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	resp, err := g.http.Post("http://"+g.rest+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return decodeReply(resp.StatusCode, raw)
}

func decodeReply(status int, raw []byte) (*restReply, error) {
	var out struct {
		Data  map[string]json.RawMessage `json:"data"`
		Error *struct{ Code, Message string }
	}
	rep := &restReply{Status: status, Body: string(raw)}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, fmt.Errorf("HTTP %d, body not JSON: %v: %s", status, err, typecases.Shorten(string(raw)))
		}
	}
	if out.Data != nil {
		rep.Data = map[string]string{}
		for k, v := range out.Data {
			rep.Data[k] = string(v)
		}
	}
	if out.Error != nil {
		rep.Code, rep.Msg = out.Error.Code, out.Error.Message
	}
	return rep, nil
}

// batchOp is one operation of /0.1.0/batch.
type batchOp struct {
	Method string    `json:"method"`
	URL    string    `json:"relative-url"`
	Body   pkRequest `json:"body"`
}

// batch sends /0.1.0/batch and returns each operation's reply.
func (g *gateway) batch(ops []batchOp) ([]*restReply, error) {
	b, err := json.Marshal(map[string]any{"operations": ops})
	if err != nil {
		return nil, err
	}
	resp, err := g.http.Post("http://"+g.rest+"/0.1.0/batch", "application/json", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("batch: HTTP %d: %s", resp.StatusCode, typecases.Shorten(string(raw)))
	}
	var out struct {
		Result []struct {
			Code int             `json:"code"`
			Body json.RawMessage `json:"body"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("batch reply: %v: %s", err, typecases.Shorten(string(raw)))
	}
	if len(out.Result) != len(ops) {
		return nil, fmt.Errorf("batch: %d results for %d operations", len(out.Result), len(ops))
	}
	reps := make([]*restReply, len(ops))
	for i, r := range out.Result {
		if reps[i], err = decodeReply(r.Code, r.Body); err != nil {
			return nil, err
		}
	}
	return reps, nil
}

// memcacheConn is a memcached text-protocol connection.
type memcacheConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialMemcache(t *testing.T, addr string) *memcacheConn {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &memcacheConn{c: c, r: bufio.NewReader(c)}
}

func (m *memcacheConn) line() (string, error) {
	_ = m.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	s, err := m.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("memcache: line without CRLF: %q", s)
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

// mcItem is one item of a get reply.
type mcItem struct {
	Flags uint32
	Value []byte
}

// get runs "get k1 k2 ..." and returns the items found.
func (m *memcacheConn) get(keys []string) (map[string]mcItem, error) {
	if _, err := fmt.Fprintf(m.c, "get %s\r\n", strings.Join(keys, " ")); err != nil {
		return nil, err
	}
	out := map[string]mcItem{}
	for {
		l, err := m.line()
		if err != nil {
			return nil, err
		}
		if l == "END" {
			return out, nil
		}
		f := strings.Fields(l)
		if len(f) < 4 || f[0] != "VALUE" {
			return nil, fmt.Errorf("memcache get: unexpected line %q", l)
		}
		flags, err1 := strconv.ParseUint(f[2], 10, 32)
		n, err2 := strconv.Atoi(f[3])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("memcache get: %q: %v", l, err)
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(m.r, data); err != nil {
			return nil, err
		}
		if !bytes.HasSuffix(data, []byte("\r\n")) {
			return nil, fmt.Errorf("memcache get: value of %s not followed by CRLF", f[1])
		}
		out[f[1]] = mcItem{Flags: uint32(flags), Value: data[:n]}
	}
}

// set runs "set key flags 0 len" and returns the reply line.
func (m *memcacheConn) set(key string, flags uint32, value []byte) (string, error) {
	if _, err := fmt.Fprintf(m.c, "set %s %d 0 %d\r\n%s\r\n", key, flags, len(value), value); err != nil {
		return "", err
	}
	return m.line()
}

// metric reads a counter from /metrics (0 when absent).
func (g *gateway) metric(t *testing.T, name string) float64 {
	resp, err := g.http.Get("http://" + g.rest + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, l)
			}
			return f
		}
	}
	return 0
}
