// Package rowapi is the protocol-neutral core of the RonDB-compatible row API:
// primary-key reads and writes on typed tables, with values as JSON text. The
// REST and gRPC front ends decode their requests into Ops, call Execute, and
// encode the Results; every request, however many operations, is one
// ndbclient batch (each operation its own transaction, so one missing row
// never fails its neighbours).
package rowapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ndbgate/ndbgate/gateway/auth"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Method is what an operation does to its row.
type Method uint8

const (
	MethodRead   Method = iota + 1 // pk-read
	MethodWrite                    // pk-write: insert or overwrite
	MethodInsert                   // pk-insert: Duplicate if the row exists
	MethodUpdate                   // pk-update: NotFound if it does not
	MethodDelete                   // pk-delete: NotFound if it does not
)

var methodNames = [...]string{"", "pk-read", "pk-write", "pk-insert", "pk-update", "pk-delete"}

func (m Method) String() string {
	if int(m) < len(methodNames) && m != 0 {
		return methodNames[m]
	}
	return "method?"
}

// ParseMethod maps a REST operation name (the last path element) to a Method.
func ParseMethod(s string) (Method, bool) {
	for i, n := range methodNames {
		if i > 0 && n == s {
			return Method(i), true
		}
	}
	return 0, false
}

// Field is a column and the JSON text of its value.
type Field struct {
	Column string
	Value  []byte
}

// Op is one row operation.
type Op struct {
	Method Method
	DB     string
	Table  string
	// Filters give the primary key: every key column exactly once.
	Filters []Field
	// Values are the non-key columns a write sets.
	Values []Field
	// ReadColumns name the columns a read returns; none means every non-key
	// column. ReturnTypes, when given, are per column ("default" only).
	ReadColumns []string
	ReturnTypes []string
	OperationID string
}

// Column is one returned column: its name and its value's JSON text.
type Column struct {
	Name  string
	Value []byte
}

// Result is one operation's outcome. Err is nil, a canonical *ndbclient.Error
// (NotFound for a missing row, SchemaError for an unknown database or table,
// InvalidArgument for a bad request, ...), or an auth error.
type Result struct {
	Err         error
	OperationID string
	Data        []Column // reads: in ReadColumns order
}

// Limits bound one request.
type Limits struct {
	MaxBatch      int // operations per Execute
	MaxFilters    int
	MaxColumns    int // read columns and write values
	MaxIdentifier int // database, table and column names, in bytes
}

// DefaultLimits are RonDB's.
var DefaultLimits = Limits{MaxBatch: 256, MaxFilters: 64, MaxColumns: 256, MaxIdentifier: 64}

// Invariants are what a row-API write must keep in a table that backs a
// memcache container (gateway.Service.RowInvariants makes them): without
// them a REST write would leave memcache's CAS as it was, and a later
// memcache cas would overwrite the acknowledged write.
type Invariants struct {
	Container string
	// Managed columns are the container's to set; a write naming one is
	// refused.
	Managed []string
	// Keep adds the container's own columns to a write's sets (a new CAS,
	// the counter made coherent with the value) and returns them.
	Keep func(t *ndbclient.Table, set []ndbclient.ColumnValue) []ndbclient.ColumnValue
}

// Service runs row operations on one ndbclient.Client.
type Service struct {
	cl     *ndbclient.Client
	limits Limits
	mu     sync.RWMutex
	tables map[tableKey]*tableInfo
	kept   map[tableKey]*Invariants // set before serving, read-only after
}

// New makes a Service; zero limits take DefaultLimits' values.
func New(cl *ndbclient.Client, l Limits) *Service {
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultLimits.MaxBatch
	}
	if l.MaxFilters <= 0 {
		l.MaxFilters = DefaultLimits.MaxFilters
	}
	if l.MaxColumns <= 0 {
		l.MaxColumns = DefaultLimits.MaxColumns
	}
	if l.MaxIdentifier <= 0 {
		l.MaxIdentifier = DefaultLimits.MaxIdentifier
	}
	return &Service{cl: cl, limits: l, tables: map[tableKey]*tableInfo{}, kept: map[tableKey]*Invariants{}}
}

// Keep makes writes to db.table keep inv. Call it before serving.
func (s *Service) Keep(db, table string, inv Invariants) {
	s.kept[tableKey{db, table}] = &inv
}

// Limits returns the limits in effect.
func (s *Service) Limits() Limits { return s.limits }

// Ready reports whether the backend can serve.
func (s *Service) Ready() error { return s.cl.Driver().Ready() }

// ndbUniqueViolation is NDB's error for a write that breaks a unique
// index (893); a primary key's is 630.
const ndbUniqueViolation = 893

// hiddenKey is the primary key mysqld gives NDB for a table made without
// one: a BIGINT UNSIGNED filled from mysqld's own auto-increment.
const hiddenKey = "$PK"

// reason is a canonical error's message without its code.
func reason(err error) string {
	var e *ndbclient.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// tableInfo is a table's schema with what the row API looks up per request.
type tableInfo struct {
	t       *ndbclient.Table
	byName  map[string]int
	isKey   []bool
	nonKeys []int
	// blob names a BLOB/TEXT column the backend does not drive (NDB: its
	// parts, which a delete would have to remove too; "" for none): the
	// row API does not delete such rows.
	blob string
}

type tableKey struct{ db, name string }

func (s *Service) table(db, name string) (*tableInfo, error) {
	k := tableKey{db, name}
	s.mu.RLock()
	ti, ok := s.tables[k]
	s.mu.RUnlock()
	if ok {
		return ti, nil
	}
	t, err := s.cl.Table(db, name)
	if err != nil {
		if ndbclient.CodeOf(err) != ndbclient.CodeSchemaError {
			return nil, err
		}
		if missingTable(err) {
			return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s.%s does not exist", db, name)
		}
		// The table exists in a shape the driver refuses (a BLOB or TEXT
		// column): its reason names the column.
		return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s.%s cannot be served: %s", db, name, reason(err))
	}
	for _, k := range t.PrimaryKey {
		if t.Columns[k].Name == hiddenKey {
			return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "table %s.%s has no primary key (NDB keys its rows by mysqld's hidden %s, which SQL cannot see or keep in step): give it a primary key", db, name, hiddenKey)
		}
	}
	ti = &tableInfo{t: t, byName: make(map[string]int, len(t.Columns)), isKey: make([]bool, len(t.Columns))}
	for i, c := range t.Columns {
		ti.byName[c.Name] = i
		if (c.Type == ndbclient.TypeBlob || c.Type == ndbclient.TypeText) && c.Unsupported != "" && ti.blob == "" {
			ti.blob = c.Name
		}
	}
	for _, k := range t.PrimaryKey {
		ti.isKey[k] = true
	}
	for i := range t.Columns {
		if !ti.isKey[i] {
			ti.nonKeys = append(ti.nonKeys, i)
		}
	}
	s.mu.Lock()
	s.tables[k] = ti
	s.mu.Unlock()
	return ti, nil
}

// missingTable tells a table that does not exist from one the backend
// refuses to serve (by its words: the embedded engine says "does not
// exist", NDB "No such table existed" (723) or, for a database, its
// dictionary's "No such table").
func missingTable(err error) bool {
	m := err.Error()
	return strings.Contains(m, "does not exist") || strings.Contains(m, "No such table")
}

func invalid(format string, args ...any) error {
	return ndbclient.Errorf(ndbclient.CodeInvalidArgument, format, args...)
}

// maxKeyColumns bounds a primary key's columns (NDB allows 32).
const maxKeyColumns = 32

// ErrBatchTooLarge is returned by Execute for a request over MaxBatch.
var ErrBatchTooLarge = errors.New("too many operations")

// Execute runs ops as one batch and returns one Result per op, in order. who
// (nil when auth is off) must be granted each op's database. The error is for
// the request as a whole: over the batch limit, or the backend unavailable.
func (s *Service) Execute(ctx context.Context, who *auth.Principal, ops []Op) ([]Result, error) {
	if len(ops) > s.limits.MaxBatch {
		return nil, invalid("%d operations is more than the limit of %d per request", len(ops), s.limits.MaxBatch)
	}
	results := make([]Result, len(ops))
	nops := make([]ndbclient.Op, len(ops))
	infos := make([]*tableInfo, len(ops))
	projs := make([][]int, len(ops))
	b := &ndbclient.Batch{Ops: make([]*ndbclient.Op, 0, len(ops))}
	var keys []ndbclient.Value // key values of every op, carved from shared chunks
	for i := range ops {
		op := &ops[i]
		results[i].OperationID = op.OperationID
		if len(keys) < maxKeyColumns {
			keys = make([]ndbclient.Value, min(8, len(ops)-i)*maxKeyColumns)
		}
		ti, proj, err := s.prepare(who, op, &nops[i], keys[:maxKeyColumns])
		if err == nil {
			keys = keys[min(len(ti.t.PrimaryKey), len(keys)):]
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		infos[i], projs[i] = ti, proj
		b.Ops = append(b.Ops, &nops[i])
	}
	if len(b.Ops) > 0 {
		if err := s.cl.Execute(ctx, b); err != nil {
			return nil, err
		}
	}
	// Returned values share one buffer and one slice of columns: a reslice
	// keeps earlier values valid when the buffer grows.
	var data []Column
	var buf []byte
	for i := range ops {
		if results[i].Err != nil {
			continue
		}
		no := &nops[i]
		if no.Err != nil {
			results[i].Err = describeErr(&ops[i], no.Err)
			continue
		}
		if ops[i].Method != MethodRead {
			continue
		}
		cols := infos[i].t.Columns
		if cap(data)-len(data) < len(projs[i]) {
			data = make([]Column, 0, max(64, len(projs[i])))
		}
		start := len(data)
		for _, c := range projs[i] {
			data = append(data, Column{Name: cols[c].Name})
		}
		var err error
		for j, c := range projs[i] {
			from := len(buf)
			if buf, err = AppendValue(buf, &cols[c], no.Row[j]); err != nil {
				break
			}
			data[start+j].Value = buf[from:len(buf):len(buf)]
		}
		if err != nil {
			results[i].Err = err
			data = data[:start]
			continue
		}
		results[i].Data = data[start:len(data):len(data)]
	}
	return results, nil
}

// describeErr gives a backend error the words a client needs: which row of
// which table.
func describeErr(op *Op, err error) error {
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeNotFound:
		return ndbclient.Errorf(ndbclient.CodeNotFound, "%s: no row with this primary key in %s.%s", op.Method, op.DB, op.Table)
	case ndbclient.CodeDuplicate:
		var e *ndbclient.Error
		if errors.As(err, &e) && e.NativeCode == ndbUniqueViolation {
			return ndbclient.Errorf(ndbclient.CodeDuplicate, "%s: another row of %s.%s has these values of a unique key", op.Method, op.DB, op.Table)
		}
		return ndbclient.Errorf(ndbclient.CodeDuplicate, "%s: a row with this primary key already exists in %s.%s", op.Method, op.DB, op.Table)
	}
	return err
}

// prepare checks op and turns it into an ndbclient op; proj is a read's
// projection.
func (s *Service) prepare(who *auth.Principal, op *Op, no *ndbclient.Op, keyBuf []ndbclient.Value) (*tableInfo, []int, error) {
	l := s.limits
	if op.Method < MethodRead || op.Method > MethodDelete {
		return nil, nil, invalid("unknown operation")
	}
	for _, id := range [...]struct{ what, v string }{{"database", op.DB}, {"table", op.Table}} {
		if id.v == "" {
			return nil, nil, invalid("%s name is missing", id.what)
		}
		if len(id.v) > l.MaxIdentifier {
			return nil, nil, invalid("%s name is longer than %d bytes", id.what, l.MaxIdentifier)
		}
	}
	if err := who.Allow(op.DB); err != nil {
		return nil, nil, err
	}
	if len(op.Filters) > l.MaxFilters {
		return nil, nil, invalid("%d filters is more than the limit of %d", len(op.Filters), l.MaxFilters)
	}
	if len(op.ReadColumns) > l.MaxColumns || len(op.Values) > l.MaxColumns {
		return nil, nil, invalid("more than %d columns in one operation", l.MaxColumns)
	}
	ti, err := s.table(op.DB, op.Table)
	if err != nil {
		return nil, nil, err
	}
	t := ti.t
	no.Reset()
	no.Table = t
	if len(t.PrimaryKey) > len(keyBuf) {
		keyBuf = make([]ndbclient.Value, len(t.PrimaryKey))
	}
	no.Key = keyBuf[:len(t.PrimaryKey):len(t.PrimaryKey)]
	found := make([]bool, len(t.PrimaryKey))
	for _, f := range op.Filters {
		c, err := ti.column(f.Column, l)
		if err != nil {
			return nil, nil, err
		}
		k := keyPos(t, c)
		if k < 0 {
			return nil, nil, invalid("filter column %q is not part of the primary key of %s.%s (key: %s)", f.Column, op.DB, op.Table, keyNames(t))
		}
		if found[k] {
			return nil, nil, invalid("filter column %q is given twice", f.Column)
		}
		if t.Columns[c].Unsupported != "" {
			return nil, nil, unsupported(&t.Columns[c])
		}
		found[k] = true
		if no.Key[k], err = DecodeValue(&t.Columns[c], f.Value); err != nil {
			return nil, nil, err
		}
	}
	for k, ok := range found {
		if !ok {
			return nil, nil, invalid("primary key column %q of %s.%s is missing from the filters (key: %s)", t.Columns[t.PrimaryKey[k]].Name, op.DB, op.Table, keyNames(t))
		}
	}
	switch op.Method {
	case MethodRead:
		no.Kind, no.Lock = ndbclient.OpRead, ndbclient.LockCommitted
		if len(op.Values) > 0 {
			return nil, nil, invalid("pk-read takes no values")
		}
		proj := ti.nonKeys
		if len(op.ReadColumns) > 0 {
			proj = make([]int, 0, len(op.ReadColumns))
			for i, name := range op.ReadColumns {
				c, err := ti.column(name, l)
				if err != nil {
					return nil, nil, err
				}
				if slices.Contains(proj, c) {
					return nil, nil, invalid("read column %q is given twice", name)
				}
				if t.Columns[c].Unsupported != "" {
					return nil, nil, unsupported(&t.Columns[c])
				}
				if i < len(op.ReturnTypes) && op.ReturnTypes[i] != "" && op.ReturnTypes[i] != "default" {
					return nil, nil, invalid("read column %q: dataReturnType %q is not supported (use \"default\")", name, op.ReturnTypes[i])
				}
				proj = append(proj, c)
			}
		}
		if len(op.ReadColumns) == 0 {
			// Every non-key column: one the row API cannot show is refused
			// rather than silently left out.
			for _, c := range proj {
				if u := t.Columns[c].Unsupported; u != "" {
					return nil, nil, invalid("column %q is %s; name the columns to read in readColumns", t.Columns[c].Name, u)
				}
			}
		}
		no.Read = proj
		return ti, proj, nil
	case MethodDelete:
		no.Kind = ndbclient.OpDelete
		if len(op.Values) > 0 || len(op.ReadColumns) > 0 {
			return nil, nil, invalid("pk-delete takes no values or read columns")
		}
		if ti.blob != "" {
			return nil, nil, invalid("pk-delete: %s has a BLOB/TEXT column (%s); ndbgate does not delete its rows, as the column's parts would be left behind", t.FullName(), ti.blob)
		}
		return ti, nil, nil
	}
	if len(op.ReadColumns) > 0 {
		return nil, nil, invalid("%s takes no read columns", op.Method)
	}
	no.Kind = map[Method]ndbclient.OpKind{MethodWrite: ndbclient.OpWrite, MethodInsert: ndbclient.OpInsert, MethodUpdate: ndbclient.OpUpdate}[op.Method]
	inv := s.kept[tableKey{op.DB, op.Table}]
	set := make([]ndbclient.ColumnValue, 0, len(op.Values)+2)
	seen := make(map[int]bool, len(op.Values))
	for _, f := range op.Values {
		c, err := ti.column(f.Column, l)
		if err != nil {
			return nil, nil, err
		}
		if ti.isKey[c] {
			return nil, nil, invalid("value column %q is part of the primary key; give it as a filter", f.Column)
		}
		if seen[c] {
			return nil, nil, invalid("value column %q is given twice", f.Column)
		}
		if inv != nil && slices.Contains(inv.Managed, f.Column) {
			return nil, nil, invalid("value column %q is kept by memcache container %q: ndbgate sets it on every write", f.Column, inv.Container)
		}
		seen[c] = true
		v, err := DecodeValue(&t.Columns[c], f.Value)
		if err != nil {
			return nil, nil, err
		}
		set = append(set, ndbclient.ColumnValue{Column: c, Value: v})
	}
	if op.Method == MethodUpdate && len(set) == 0 {
		return nil, nil, invalid("pk-update needs at least one value")
	}
	if inv != nil {
		set = inv.Keep(t, set)
		for _, cv := range set { // the columns the container sets itself
			seen[cv.Column] = true
		}
	}
	if op.Method != MethodUpdate {
		// A new row must give every NOT NULL column; say which is missing
		// rather than let the engine refuse the row.
		for _, c := range ti.nonKeys {
			if !seen[c] && !t.Columns[c].Nullable && op.Method == MethodInsert {
				if u := t.Columns[c].Unsupported; u != "" {
					return nil, nil, invalid("%s: NOT NULL column %q is %s, so ndbgate cannot insert rows into %s", op.Method, t.Columns[c].Name, u, t.FullName())
				}
				return nil, nil, invalid("%s: NOT NULL column %q needs a value", op.Method, t.Columns[c].Name)
			}
		}
	}
	no.Set = set
	return ti, nil, nil
}

func (ti *tableInfo) column(name string, l Limits) (int, error) {
	if name == "" {
		return 0, invalid("column name is missing")
	}
	if len(name) > l.MaxIdentifier {
		return 0, invalid("column name is longer than %d bytes", l.MaxIdentifier)
	}
	c, ok := ti.byName[name]
	if !ok {
		return 0, invalid("column %q does not exist in %s", name, ti.t.FullName())
	}
	return c, nil
}

func keyPos(t *ndbclient.Table, c int) int {
	for k, pk := range t.PrimaryKey {
		if pk == c {
			return k
		}
	}
	return -1
}

func keyNames(t *ndbclient.Table) string {
	s := ""
	for i, pk := range t.PrimaryKey {
		if i > 0 {
			s += ", "
		}
		s += t.Columns[pk].Name
	}
	return s
}

// Stats is what RonDB's stat call reports, filled with ndbgate's nearest
// figures (see Service.Stats).
type Stats struct {
	AllocationsCount, DeallocationsCount, BuffersCount, FreeBuffers                             int64
	NdbObjectsCreationCount, NdbObjectsDeletionCount, NdbObjectsTotalCount, NdbObjectsFreeCount int64
}

// Stats maps the engine's figures onto RonDB's stat fields: rows stand for
// NDB objects and bytes for buffers, so a dashboard built for RonDB shows
// something that moves.
func (s *Service) Stats() Stats {
	st := s.cl.Driver().Stats()
	return Stats{
		AllocationsCount:        int64(st.Items + st.Evictions + st.Expired),
		DeallocationsCount:      int64(st.Evictions + st.Expired),
		BuffersCount:            int64(st.Bytes),
		FreeBuffers:             int64(max(st.LimitBytes, st.Bytes) - st.Bytes),
		NdbObjectsCreationCount: int64(st.Tables),
		NdbObjectsTotalCount:    int64(st.Tables),
		NdbObjectsFreeCount:     int64(st.Partitions),
	}
}

// String is for logs.
func (o *Op) String() string { return fmt.Sprintf("%s %s.%s", o.Method, o.DB, o.Table) }

// HTTPStatus maps a result's error onto the HTTP-style status RonDB's API
// reports, and a code name: the one mapping behind REST replies and the
// per-operation codes of gRPC's RonDBREST.Batch.
func HTTPStatus(err error) (int, string) {
	switch {
	case err == nil:
		return 200, "OK"
	case errors.Is(err, auth.ErrNoKey), errors.Is(err, auth.ErrBadKey):
		return 401, "Unauthenticated"
	case errors.Is(err, auth.ErrDenied):
		return 403, "PermissionDenied"
	}
	code := ndbclient.CodeOf(err)
	switch code {
	case ndbclient.CodeInvalidArgument, ndbclient.CodeNotNumeric, ndbclient.CodeTooLarge:
		return 400, code.String()
	case ndbclient.CodeNotFound, ndbclient.CodeSchemaError:
		return 404, code.String()
	case ndbclient.CodeDuplicate:
		return 409, code.String()
	case ndbclient.CodeConditionFailed:
		return 412, code.String()
	case ndbclient.CodeOverloaded:
		return 429, code.String()
	case ndbclient.CodeOutOfMemory, ndbclient.CodeTemporary, ndbclient.CodeUnavailable:
		return 503, code.String()
	case ndbclient.CodeUnknownResult:
		return 504, code.String()
	case ndbclient.CodeStorage:
		return 507, code.String() // Insufficient Storage
	}
	return 500, ndbclient.CodeInternal.String()
}
