package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Large values: a container whose value column is shorter than its items
// keeps the longer ones in a table of parts, as ndbmemcache's external
// values do, so that the rows ndbmemcache wrote are read here and the other
// way round. The row holds NULL in the value column and the value's id and
// length in its ext_id and ext_size columns; the parts table holds the value
// in parts of its content column's length, keyed (id, part).
//
// A write never changes parts in place: it numbers the new value's parts
// from the parts table's auto-increment sequence, writes them and the row in
// one transaction conditioned on the cas it read first, and deletes the old
// parts only once the row no longer names them. A read takes the row, then
// reads the row again with its parts under shared locks in one transaction,
// and tries again if the row changed in between. Readers so never see a value
// half written, by ndbgate or by ndbmemcache, which rewrites parts in place
// under the row's exclusive lock.

// LargeValues is where a container keeps values longer than its value column.
type LargeValues struct {
	Parts *ndbclient.Table
	// IDColumn and SizeColumn are the container table's ext_id and ext_size.
	IDColumn, SizeColumn int

	idCol, partCol, contentCol int // the parts table's
	// expire is the container's expire column, -1 for none: the gateway
	// checks it (the backend only knows it: ndbclient.Table.ExpiryByCaller),
	// so that a write over an expired item frees its parts.
	expire   int
	inline   int // the longest value the row holds itself
	partSize int
	max      int     // the longest value: maxParts parts
	ids      idStock // the parts table's ids drawn ahead (largeids.go)
}

// errExpired is a large value's read that found its row expired: a miss.
var errExpired = ndbclient.Errorf(ndbclient.CodeNotFound, "expired")

// maxParts is the most parts a value may have (ndbmemcache's
// EXTERN_VAL_MAX_PARTS).
const maxParts = 256

// Names of the columns ndbmemcache's external values use.
const (
	LargeIDColumn      = "ext_id"
	LargeSizeColumn    = "ext_size"
	largePartIDColumn  = "id"
	largePartColumn    = "part"
	largeContentColumn = "content"
)

// ExternalValuesTable is ndbmemcache's table of large values' parts
// (ndb_memcache_metadata.sql's external_values), for an engine that makes
// its tables itself.
func ExternalValuesTable(db, name string) *ndbclient.Table {
	return &ndbclient.Table{
		Database: db, Name: name, ExpireColumn: -1, PrimaryKey: []int{0, 1}, OrderedPrimaryKey: true,
		Columns: []ndbclient.Column{
			{Name: largePartIDColumn, Type: ndbclient.TypeUint32, AutoIncrement: true},
			{Name: largePartColumn, Type: ndbclient.TypeInt16},
			{Name: largeContentColumn, Type: ndbclient.TypeVarbinary, Length: 13950},
		},
	}
}

// KeepLargeValues makes c keep values longer than its value column in
// parts, as ndbmemcache's large_values_table does. c's table needs ext_id
// and ext_size (unsigned integers), one bytes value column and a cas
// column (ndbgate conditions each large write on it), and must not expire
// rows in the backend (c keeps its own expiry: ContainerSpec.LargeValues);
// parts needs ndbmemcache's id, part and content.
func (c *Container) KeepLargeValues(parts *ndbclient.Table) error {
	t := c.Table
	fail := func(format string, a ...any) error {
		return ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q: large values in %s: %s", c.Name, parts.FullName(), fmt.Sprintf(format, a...))
	}
	if len(c.ValueColumns) != 1 || !isBytesColumn(t.Columns[c.ValueColumns[0]].Type) {
		return fail("needs exactly one value column, of CHAR, VARCHAR, BINARY or VARBINARY")
	}
	if c.CasColumn < 0 {
		return fail("needs a cas column: each write of a large value is conditioned on it")
	}
	if t.ExpireColumn >= 0 && !t.ExpiryByCaller {
		// The backend would make an expired row a miss, and free or
		// replace it without the parts it names.
		return fail("its table %s expires rows by column %q in the backend (another container's, or made so), so an expired item's parts would never be freed; give the table's containers no expire column, or this one its own table", t.FullName(), t.Columns[t.ExpireColumn].Name)
	}
	lv := &LargeValues{Parts: parts, inline: t.Columns[c.ValueColumns[0]].Length, expire: c.ExpireColumn}
	unsigned := func(tb *ndbclient.Table, name string) (int, error) {
		i := tb.ColumnIndex(name)
		if i < 0 {
			return -1, fail("%s has no column %s", tb.FullName(), name)
		}
		if ct := tb.Columns[i].Type; !ct.IsInteger() {
			return -1, fail("%s.%s is %s, not an integer", tb.FullName(), name, ct)
		}
		return i, nil
	}
	var err error
	if lv.IDColumn, err = unsigned(t, LargeIDColumn); err != nil {
		return err
	}
	if lv.SizeColumn, err = unsigned(t, LargeSizeColumn); err != nil {
		return err
	}
	for _, i := range []int{lv.IDColumn, lv.SizeColumn} {
		if !t.Columns[i].Nullable {
			return fail("%s must be nullable: NULL marks a value the row holds itself", t.Columns[i].Name)
		}
	}
	if lv.idCol, err = unsigned(parts, largePartIDColumn); err != nil {
		return err
	}
	if lv.partCol, err = unsigned(parts, largePartColumn); err != nil {
		return err
	}
	if len(parts.PrimaryKey) != 2 || parts.PrimaryKey[0] != lv.idCol || parts.PrimaryKey[1] != lv.partCol {
		return fail("its primary key must be (%s, %s)", largePartIDColumn, largePartColumn)
	}
	lv.contentCol = parts.ColumnIndex(largeContentColumn)
	if lv.contentCol < 0 || !isBytesColumn(parts.Columns[lv.contentCol].Type) || parts.Columns[lv.contentCol].Length <= 0 {
		return fail("needs a VARBINARY column %s", largeContentColumn)
	}
	lv.partSize = parts.Columns[lv.contentCol].Length
	lv.max = maxParts * lv.partSize
	c.Large = lv
	c.widest = lv.max
	return nil
}

// KeepLargeValuesIn is KeepLargeValues with the parts table named
// "schema.table" (ndbmemcache's large_values_table), found by table, on a
// backend that numbers parts (ndbclient.Sequencer).
func (c *Container) KeepLargeValuesIn(name string, backend *ndbclient.Client, table func(db, name string) (*ndbclient.Table, error)) error {
	db, tn, ok := strings.Cut(name, ".")
	if !ok {
		return ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q: large_values_table %q is not schema.table", c.Name, name)
	}
	if _, ok := backend.Driver().(ndbclient.Sequencer); !ok {
		return ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q: large values need a backend that numbers their parts (%s does not)", c.Name, backend.Driver().Name())
	}
	parts, err := table(db, tn)
	if err != nil {
		return fmt.Errorf("container %q: large_values_table: %w", c.Name, err)
	}
	return c.KeepLargeValues(parts)
}

// keepsItsExpiry refuses a container with large values whose table the
// backend expires rows of: another container bound an expire column to it
// after KeepLargeValues checked (the embedded engine's binding shows only
// in the table it now describes).
func (c *Container) keepsItsExpiry(backend *ndbclient.Client) error {
	if c.Large == nil || backend == nil {
		return nil
	}
	t, err := backend.Table(c.Table.Database, c.Table.Name)
	if err != nil || t.ExpireColumn < 0 || t.ExpiryByCaller {
		return nil
	}
	return ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q keeps large values, and its expiry, itself, but another container has the backend expire rows of %s by column %q, so an expired item's parts would never be freed: give that container no expire column, or this one its own table", c.Name, t.FullName(), t.Columns[t.ExpireColumn].Name)
}

// ServesPolicy refuses a policy that would write c's items to the local
// cache only: the local cache keeps no parts.
func (c *Container) ServesPolicy(p Policy) error {
	if c.Large != nil && (p.Set == AccessLocal || p.Get == AccessLocal) {
		return ndbclient.Errorf(ndbclient.CodeSchemaError, "container %q keeps large values in %s, so its gets and sets must reach the backend (policy %s)", c.Name, c.Large.Parts.FullName(), p)
	}
	return nil
}

// partKey is the parts table's key of part k of value id.
func (lv *LargeValues) partKey(dst []ndbclient.Value, id uint64, k int) []ndbclient.Value {
	return append(dst, intValue(&lv.Parts.Columns[lv.idCol], id), intValue(&lv.Parts.Columns[lv.partCol], uint64(k)))
}

func intValue(col *ndbclient.Column, n uint64) ndbclient.Value {
	if col.Type.IsSigned() {
		return ndbclient.Int(int64(n))
	}
	return ndbclient.Uint(n)
}

// parts is how many parts a value of n bytes takes.
func (lv *LargeValues) parts(n int) int { return (n + lv.partSize - 1) / lv.partSize }

// header is what a row says of its value: held in the row, or in parts.
type header struct {
	cas  uint64
	id   uint64
	size int
	long bool // in parts: size and id are set
}

// readHeader reads a row's header from ext_id and ext_size at row[at:].
func readHeader(row []ndbclient.Value, at int) (id uint64, size int, long bool) {
	if row[at].IsNull() || row[at+1].IsNull() {
		return 0, 0, false
	}
	return row[at].Uint(), int(row[at+1].Uint()), true
}

// largeState is a request's progress through a large value's stages.
type largeState struct {
	// resume is the stage whose handler runs once the large value's own
	// stages are done; from and to are its ops.
	resume   stage
	from, to int
	// reads: the reads of long values whose parts are being read.
	reads []largeRead
	// partless: the reads whose parts read found a row missing, in the
	// attempt before. Read again with the same header, a part is gone
	// (evicted): a miss.
	partless []largeRead

	// The write: op w is the row's, which the large stages change and
	// put back (kind, cond, set) before trying again.
	w            int
	kind         ndbclient.OpKind
	hasCond      bool
	condCol      int
	condVal      ndbclient.Value
	nset         int
	valueAt      int // index of the value column's assignment in Set, -1 none
	value        []byte
	old          header
	upsert, ours bool // set became an insert or cond update of our own making
	expired      bool // the row the header read found had expired
	touched      bool // the request handled a large value: drop big buffers
	reading      bool // the request reads a container with large values
}

// largeRead is a read that found its value in parts.
type largeRead struct {
	op   int // index in r.ops
	head header
	at   int // first op of its parts transaction
}

// touches says whether write o needs the large stages: it deletes a row
// that may name parts, or sets the value column, or the container keeps
// expiry.
func (lv *LargeValues) touches(c *Container, o *ndbclient.Op) bool {
	if o.Kind == ndbclient.OpDelete || lv.expire >= 0 {
		return true // with expiry, every write must learn whether the row it finds is expired
	}
	for _, s := range o.Set {
		if s.Column == c.ValueColumns[0] {
			return o.Kind != ndbclient.OpInsert || len(s.Value.B) > lv.inline
		}
	}
	return false
}

// large is the request's large-value state, made when first needed: most
// requests never touch a large value.
func (r *Request) large() *largeState {
	if r.lg == nil {
		r.lg = &largeState{}
	}
	return r.lg
}

// ---- reads ----

// largeProjection appends the row's ext_id and ext_size, and its expiry
// if c has one, to a read of c.
func (r *Request) largeProjection(c *Container, read []int) []int {
	if c.Large == nil {
		return read
	}
	r.large().reading = true
	read = append(read, c.Large.IDColumn, c.Large.SizeColumn)
	if c.Large.expire >= 0 {
		read = append(read, c.Large.expire)
	}
	return read
}

// extra is how many columns largeProjection appends for lv.
func (lv *LargeValues) extra() int {
	if lv.expire >= 0 {
		return 3
	}
	return 2
}

// expired reports whether a row's expiry, read from lv.expire, is past.
func (r *Request) expired(v ndbclient.Value) bool {
	at := ndbclient.ExpirySeconds(v)
	return at != 0 && int64(at) <= r.svc.now().Unix()
}

// largeReads runs after a stage of reads (get, read-modify): each read of a
// container with large values loses its ext_id and ext_size, and those
// whose values are in parts have them read. It returns true when it
// submitted that read: largePartsDone resumes the stage.
func (r *Request) largeReads(st stage, from, to int) bool {
	r.lg.reads = r.lg.reads[:0]
	if r.Verb == VerbGat && st == stageGet {
		r.gatExpiresRepeats(from, to)
	}
	for j := from; j < to; j++ {
		o := &r.ops[j]
		if o.Kind != ndbclient.OpRead || o.Err != nil {
			continue
		}
		rt := r.targets[o.Tag].route
		if rt == nil || rt.Container.Large == nil || o.Table != rt.Container.Table {
			continue
		}
		c := rt.Container
		at := len(o.Row) - c.Large.extra()
		if c.Large.expire >= 0 && r.expired(o.Row[at+2]) {
			// Kept until a write replaces or deletes it, parts and all.
			o.Err, o.Row = errExpired, o.Row[:0]
			continue
		}
		id, size, long := readHeader(o.Row, at)
		if long && size > c.Large.max {
			// Written by another client: not read, so memory stays bounded.
			o.Err = ndbclient.Errorf(ndbclient.CodeInternal, "the row names a large value of %d bytes, more than %s's %d", size, c.Name, c.Large.max)
			continue
		}
		if long {
			cas, _ := readCas(c, o) // 0 when the read left the cas out
			lr := largeRead{op: j, head: header{cas: cas.Uint(), id: id, size: size, long: true}}
			if slices.ContainsFunc(r.lg.partless, func(p largeRead) bool { return p.op == j && p.head == lr.head }) {
				// Nobody rewrites a header's parts without changing its
				// cas or id, so a part is gone: the embedded engine
				// evicted it, as it may evict any row of an evicting
				// container. The item is lost, as an evicted item is.
				o.Err, o.Row = ndbclient.Errorf(ndbclient.CodeNotFound, "large value %d of %s: a part is gone", id, c.Large.Parts.FullName()), o.Row[:0]
				continue
			}
			r.lg.reads = append(r.lg.reads, lr)
		}
		o.Row = o.Row[:at]
	}
	if st != stageGet || r.pass != passLocal {
		// Used: the local cache's rows name no parts, so a local pass
		// keeps the note for the backend pass after it.
		r.lg.partless = r.lg.partless[:0]
	}
	r.lg.resume, r.lg.from, r.lg.to = st, from, to
	if len(r.lg.reads) == 0 {
		return r.submitGats(max(to, 2))
	}
	r.lg.touched = true
	first := max(to, 2)
	n := first
	for i := range r.lg.reads {
		lr := &r.lg.reads[i]
		lr.at = n
		n += 1 + r.targets[r.ops[lr.op].Tag].route.Container.Large.parts(lr.head.size)
	}
	r.op(n - 1) // grow once: the pointers below stay valid
	// Each value's row again under a shared lock, and its parts read
	// simple, in one transaction. A simple read waits for a writer's lock,
	// so it finds what that writer committed, and holds none after: as
	// ndbmemcache reads parts, with nothing for the data nodes to release
	// at commit (locked parts cost them about 3x ndbmemcache's CPU a get,
	// bench/RESULTS.md, session 59). A writer that changes parts in place
	// (ndbmemcache, under the row's exclusive lock) cannot commit while the
	// row's lock is held, and one that committed first changed the row's
	// cas, id or size, which largePartsDone compares with the first read's;
	// ndbgate's writers put a value in new parts and free the old ones
	// after their commit.
	for _, lr := range r.lg.reads {
		src := &r.ops[lr.op]
		c := r.targets[src.Tag].route.Container
		lv := c.Large
		h := r.op(lr.at)
		h.Kind, h.Table, h.Tag, h.Lock, h.NoBump, h.TxnWithNext = ndbclient.OpRead, c.Table, src.Tag, ndbclient.LockShared, true, true
		h.Key = append(h.Key, src.Key...)
		h.Read = append(h.Read, c.CasColumn, lv.IDColumn, lv.SizeColumn)
		np := lv.parts(lr.head.size)
		for k := 0; k < np; k++ {
			p := r.op(lr.at + 1 + k)
			p.Kind, p.Table, p.Tag, p.Lock = ndbclient.OpRead, lv.Parts, src.Tag, ndbclient.LockSimple
			p.Key = lv.partKey(p.Key, lr.head.id, k)
			p.Read = append(p.Read, lv.contentCol)
			p.TxnWithNext = k < np-1
		}
	}
	cl := r.writeClient()
	if st == stageGet {
		cl = r.svc.backend // the local cache keeps no large values
	}
	r.submit(cl, stageLargeParts, first, n)
	return true
}

// submitGats submits a gat's expiry updates of the large-value items its
// reads (r.lg.from to r.lg.to) found, at r.ops[n:], once those reads are
// done, parts and all: a read tried again must not find an item the gat
// itself already expired. It reports whether there were any
// (stageLargeGats resumes the read stage).
func (r *Request) submitGats(n int) bool {
	if r.Verb != VerbGat || r.lg.resume != stageGet {
		return false
	}
	gats := 0
	for j := r.lg.from; j < r.lg.to; j++ {
		if o := &r.ops[j]; o.Kind == ndbclient.OpRead && o.Err == nil && r.keepsExpiry(o) {
			gats++
		}
	}
	if gats == 0 {
		return false
	}
	r.op(n + gats - 1) // grow once
	end := r.largeGats(r.lg.from, r.lg.to, n)
	cl := r.svc.backend // where the reads went
	if r.pass == passLocal {
		cl = r.svc.local
	}
	r.submit(cl, stageLargeGats, n, end)
	return true
}

// keepsExpiry reports whether read o is of a container whose expiry the
// gateway keeps (LargeValues.expire).
func (r *Request) keepsExpiry(o *ndbclient.Op) bool {
	rt := r.targets[o.Tag].route
	return rt != nil && rt.Container.Large != nil && rt.Container.Large.expire >= 0 && o.Table == rt.Container.Table
}

// gatExpiresRepeats makes a gat's later reads of a key it found misses
// when the gat's expiry is already past: memcached serves a gat's keys in
// turn, so the first finds the item and expires it. The gat's updates
// (largeGats) come after all its reads.
func (r *Request) gatExpiresRepeats(from, to int) {
	at := r.svc.expireAt(r.Exptime)
	if at == 0 || int64(at) > r.svc.now().Unix() {
		return
	}
	var found map[string]bool
	for j := from; j < to; j++ {
		o := &r.ops[j]
		if o.Kind != ndbclient.OpRead || o.Err != nil || !r.keepsExpiry(o) {
			continue
		}
		t := &r.targets[o.Tag]
		if at := len(o.Row) - t.route.Container.Large.extra(); r.expired(o.Row[at+2]) {
			continue // a miss on its own
		}
		k := t.route.Container.Name + "\x00" + string(t.key)
		if found[k] {
			o.Err, o.Row = errExpired, o.Row[:0]
			continue
		}
		if found == nil {
			found = map[string]bool{}
		}
		found[k] = true
	}
}

// readCas is the cas read o returned, if its projection has c's cas column.
func readCas(c *Container, o *ndbclient.Op) (ndbclient.Value, bool) {
	for k, col := range o.Read {
		if col == c.CasColumn && k < len(o.Row) {
			return o.Row[k], true
		}
	}
	return ndbclient.Value{}, false
}

// largeGats puts a gat's expiry update of each item its reads found at
// r.ops[n:], and returns the next free op index. The backend does not
// know the expiry, so the update cannot share the read's transaction (as
// addGetOps does for other containers): it would bring an expired item
// back. It is conditioned on the cas read instead: an item changed since
// keeps the expiry its writer gave it.
func (r *Request) largeGats(from, to, n int) int {
	if r.Verb != VerbGat {
		return n
	}
	for j := from; j < to; j++ {
		o := &r.ops[j]
		if o.Kind != ndbclient.OpRead || o.Err != nil || !r.keepsExpiry(o) {
			continue
		}
		c := r.targets[o.Tag].route.Container
		u := r.op(n)
		n++
		u.Kind, u.Table, u.Tag = ndbclient.OpUpdate, c.Table, o.Tag
		u.Key = append(u.Key[:0], o.Key...)
		u.KeepState, u.NoBump = true, true // the read records the access
		if cas, ok := readCas(c, o); ok {
			u.Kind, u.CondColumn, u.CondValue = ndbclient.OpCondUpdate, c.CasColumn, cas
		}
		c.setExpire(u, r.svc.expireAt(r.Exptime))
	}
	return n
}

// largePartsDone puts each value read from parts in its read's row, or
// starts the stage again when a row changed or went since it was read, or
// a part its row names is missing.
func (r *Request) largePartsDone() {
	again := false
	for _, lr := range r.lg.reads {
		src := &r.ops[lr.op]
		c := r.targets[src.Tag].route.Container
		lv := c.Large
		h := &r.ops[lr.at]
		switch ndbclient.CodeOf(h.Err) {
		case ndbclient.CodeOK:
		case ndbclient.CodeNotFound:
			// The row is gone, or a part's miss failed the run (NDB 7.5
			// keeps a simple read's miss its own; noted partless in case
			// another version does not): the next attempt's first read
			// tells.
			r.lg.partless = append(r.lg.partless, lr)
			again = true
			continue
		default:
			src.Err, src.Row = h.Err, src.Row[:0]
			continue
		}
		id, size, long := readHeader(h.Row, 1)
		if !long || id != lr.head.id || size != lr.head.size || lr.head.cas != 0 && h.Row[0].Uint() != lr.head.cas {
			again = true // a writer came between the two reads
			continue
		}
		var perr error
		v := make([]byte, 0, size)
		for k := 0; k < lv.parts(size) && perr == nil; k++ {
			p := &r.ops[lr.at+1+k]
			if perr = p.Err; perr == nil {
				v = append(v, p.Row[0].B...)
			}
		}
		switch {
		case ndbclient.CodeOf(perr) == ndbclient.CodeNotFound:
			// A part the row still names is gone (evicted, on the
			// embedded engine): if the next attempt reads the same
			// header, the item is lost (largeReads).
			r.lg.partless = append(r.lg.partless, lr)
			again = true
			continue
		case perr != nil:
			src.Err, src.Row = perr, src.Row[:0]
			continue
		case len(v) != size:
			src.Err = ndbclient.Errorf(ndbclient.CodeInternal, "large value %d of %s: its parts hold %d bytes, its row says %d", id, lv.Parts.FullName(), len(v), size)
			src.Row = src.Row[:0]
			continue
		}
		src.Row[0] = ndbclient.Bytes(v)
	}
	if again {
		r.largeReadAgain()
		return
	}
	if r.submitGats(r.to) {
		return
	}
	r.resumeStage()
}

// largeReadAgain starts a read stage again after a writer changed a row
// between its two reads.
func (r *Request) largeReadAgain() {
	if !r.attempt() {
		return
	}
	if r.lg.resume == stageGet {
		r.startGet()
		return
	}
	r.attempts-- // startReadModify counts its own
	r.startReadModify()
}

// resumeStage runs the handler of the stage the large stages interrupted,
// on that stage's ops.
func (r *Request) resumeStage() {
	r.stage = r.lg.resume
	r.batch.Ops = r.batch.Ops[:0]
	for i := r.lg.from; i < r.lg.to; i++ {
		r.batch.Ops = append(r.batch.Ops, &r.ops[i])
	}
	r.stageDone()
}

// ---- writes ----

// submitWrite submits op i, a single key's write, as stage st: through the
// large stages when it writes or deletes a large value's row.
func (r *Request) submitWrite(st stage, i int) {
	c := r.targets[0].route.Container
	if c.Large == nil || !c.Large.touches(c, &r.ops[i]) {
		r.submit(r.writeClient(), st, i, i+1)
		return
	}
	o := &r.ops[i]
	lg := r.large()
	lg.touched = true
	lg.resume, lg.from, lg.to, lg.w = st, i, i+1, i
	lg.kind, lg.hasCond, lg.condCol, lg.condVal, lg.nset = o.Kind, o.HasCond, o.CondColumn, o.CondValue, len(o.Set)
	lg.valueAt, lg.value = -1, nil
	for k, s := range o.Set {
		if s.Column == c.ValueColumns[0] {
			lg.valueAt, lg.value = k, s.Value.B
		}
	}
	r.largeWriteStart()
}

// largeWriteStart reads the row's header, unless the write is an insert
// into a container without expiry, which has no old parts to free (with
// expiry, an expired row may hold the key).
func (r *Request) largeWriteStart() {
	lg := r.lg
	lg.upsert, lg.ours, lg.old, lg.expired = false, false, header{}, false
	c := r.targets[0].route.Container
	if lg.kind == ndbclient.OpInsert && c.Large.expire < 0 {
		r.largeWriteBuild()
		return
	}
	r.op(lg.w + 1)
	w, p := &r.ops[lg.w], &r.ops[lg.w+1]
	p.Kind, p.Table, p.NoBump = ndbclient.OpRead, c.Table, true
	p.Key = append(p.Key, w.Key...)
	p.Read = append(p.Read, c.CasColumn, c.Large.IDColumn, c.Large.SizeColumn)
	if c.Large.expire >= 0 {
		p.Read = append(p.Read, c.Large.expire)
	}
	r.submit(r.writeClient(), stageLargeHeader, lg.w+1, lg.w+2)
}

// largeHeaderDone turns the write into one conditioned on the cas the row
// had, so that the parts it frees are the ones the row named.
func (r *Request) largeHeaderDone() {
	lg := r.lg
	c := r.targets[0].route.Container
	w, p := &r.ops[lg.w], &r.ops[lg.w+1]
	switch ndbclient.CodeOf(p.Err) {
	case ndbclient.CodeOK:
		lg.old.cas = p.Row[0].Uint()
		lg.old.id, lg.old.size, lg.old.long = readHeader(p.Row, 1)
		lg.expired = c.Large.expire >= 0 && r.expired(p.Row[3])
	case ndbclient.CodeNotFound:
		switch w.Kind {
		case ndbclient.OpInsert:
		case ndbclient.OpWrite:
			w.Kind, lg.upsert = ndbclient.OpInsert, true
		default:
			w.Err = p.Err
			r.resumeStage()
			return
		}
		r.largeWriteBuild()
		return
	default:
		w.Err = p.Err
		r.resumeStage()
		return
	}
	cas := ndbclient.Uint(lg.old.cas)
	// An expired row is no item: a set or add replaces it, a delete
	// removes it (and answers not found), the rest find nothing. Either
	// way the write is conditioned on the cas read, and frees its parts.
	switch {
	case lg.expired && (w.Kind == ndbclient.OpInsert || w.Kind == ndbclient.OpWrite):
		w.Kind, w.HasCond, w.CondColumn, w.CondValue, lg.ours = ndbclient.OpCondUpdate, false, c.CasColumn, cas, true
		r.largeWriteBuild()
		return
	case lg.expired && w.Kind == ndbclient.OpDelete:
		w.HasCond, w.CondColumn, w.CondValue, lg.ours = true, c.CasColumn, cas, true
		r.largeWriteBuild()
		return
	case lg.expired:
		w.Err = errExpired
		r.resumeStage()
		return
	case w.Kind == ndbclient.OpInsert:
		w.Err = ndbclient.Errorf(ndbclient.CodeDuplicate, "the key exists")
		r.resumeStage()
		return
	}
	switch {
	case w.Kind == ndbclient.OpCondUpdate || w.HasCond:
		// The caller's own condition: a cas the row no longer has fails
		// here as it would in the backend.
		if w.CondColumn == c.CasColumn && w.CondValue.Uint() != lg.old.cas {
			w.Err = ndbclient.Errorf(ndbclient.CodeConditionFailed, "cas mismatch")
			r.resumeStage()
			return
		}
		if w.CondColumn != c.CasColumn {
			w.Err = ndbclient.Errorf(ndbclient.CodeInternal, "a large value's write is conditioned on another column than cas")
			r.resumeStage()
			return
		}
	case w.Kind == ndbclient.OpDelete:
		w.HasCond, w.CondColumn, w.CondValue, lg.ours = true, c.CasColumn, cas, true
	default: // set, replace, md x: changed only if the row still has this cas
		w.Kind, w.CondColumn, w.CondValue, lg.ours = ndbclient.OpCondUpdate, c.CasColumn, cas, true
	}
	r.largeWriteBuild()
}

// largeWriteBuild puts a long value's parts in the write's transaction,
// numbered from the parts table's sequence, or clears ext_id and ext_size
// for a value the row holds itself.
func (r *Request) largeWriteBuild() {
	lg := r.lg
	c := r.targets[0].route.Container
	w := &r.ops[lg.w]
	if lg.valueAt < 0 || len(lg.value) <= c.Large.inline {
		if lg.valueAt >= 0 {
			w.Set = append(w.Set, ndbclient.ColumnValue{Column: c.Large.IDColumn, Value: ndbclient.Null()},
				ndbclient.ColumnValue{Column: c.Large.SizeColumn, Value: ndbclient.Null()})
		}
		r.submit(r.writeClient(), stageLargeWrite, lg.w, lg.w+1)
		return
	}
	seq, ok := r.writeClient().Driver().(ndbclient.Sequencer)
	if !ok {
		w.Err = ndbclient.Errorf(ndbclient.CodeSchemaError, "the backend cannot number large values' parts")
		r.resumeStage()
		return
	}
	// An id drawn ahead goes on at once, on the loop; else the sequence,
	// which may wait for the cluster, is asked off the loop.
	id, ok := c.Large.ids.take(r.svc.now().UnixNano())
	c.Large.ids.refill(seq, c.Large.Parts, r.svc.now)
	if ok {
		r.largeWriteParts(id, nil)
		return
	}
	r.Turn = nil
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), largeSequenceWait)
		id, err := seq.NextAutoIncrement(ctx, c.Large.Parts)
		cancel()
		r.largeWriteParts(id, err)
	}()
}

// largeSequenceWait bounds the wait for a large value's id.
const largeSequenceWait = 10 * time.Second

func (r *Request) largeWriteParts(id uint64, err error) {
	lg := r.lg
	c := r.targets[0].route.Container
	lv := c.Large
	if err != nil {
		r.ops[lg.w].Err = err
		r.resumeStage()
		return
	}
	np := lv.parts(len(lg.value))
	r.op(lg.w + np)
	w := &r.ops[lg.w]
	w.Set[lg.valueAt].Value = ndbclient.Null()
	w.Set = append(w.Set, ndbclient.ColumnValue{Column: lv.IDColumn, Value: ndbclient.Uint(id)},
		ndbclient.ColumnValue{Column: lv.SizeColumn, Value: ndbclient.Uint(uint64(len(lg.value)))})
	w.TxnWithNext = true
	for k := 0; k < np; k++ {
		p := r.op(lg.w + 1 + k)
		end := min((k+1)*lv.partSize, len(lg.value))
		p.Kind, p.Table = ndbclient.OpInsert, lv.Parts
		p.Key = lv.partKey(p.Key, id, k)
		p.Set = append(p.Set, ndbclient.ColumnValue{Column: lv.contentCol, Value: ndbclient.Bytes(lg.value[k*lv.partSize : end])})
		p.TxnWithNext = k < np-1
	}
	r.submit(r.writeClient(), stageLargeWrite, lg.w, lg.w+1+np)
}

// largeWriteDone tries again when a write of our own making lost a race,
// and frees the parts the row named before a write that replaced them.
func (r *Request) largeWriteDone() {
	lg := r.lg
	w := &r.ops[lg.w]
	code := ndbclient.CodeOf(w.Err)
	lost := code == ndbclient.CodeConditionFailed && lg.ours || code == ndbclient.CodeDuplicate && lg.upsert ||
		code == ndbclient.CodeNotFound && lg.kind == ndbclient.OpWrite || // a set whose row went away: insert it
		code == ndbclient.CodeNotFound && lg.expired && lg.kind == ndbclient.OpInsert // so did the expired row an add replaced
	if lost {
		if !r.attempt() {
			return
		}
		w.Kind, w.HasCond, w.CondColumn, w.CondValue, w.Set, w.TxnWithNext, w.Err = lg.kind, lg.hasCond, lg.condCol, lg.condVal, w.Set[:lg.nset], false, nil
		if lg.valueAt >= 0 {
			w.Set[lg.valueAt].Value = ndbclient.Bytes(lg.value)
		}
		r.largeWriteStart()
		return
	}
	if code == ndbclient.CodeOK && lg.expired && lg.kind == ndbclient.OpDelete {
		w.Err = errExpired // removed, but it was no item
	}
	replaced := lg.kind == ndbclient.OpDelete || lg.valueAt >= 0 // not a touch, which keeps the value
	if code != ndbclient.CodeOK || !lg.old.long || !replaced {
		r.resumeStage()
		return
	}
	// The row no longer names the old parts: nobody can read them now.
	// They are freed after the reply (largefree.go), or before it while
	// too many writes' frees are in flight.
	lv := r.targets[0].route.Container.Large
	np := min(lv.parts(lg.old.size), maxParts) // a row another client wrote may claim more
	if r.svc.freeLater(r.writeClient(), lv, lg.old.id, np, r.Shard) {
		r.resumeStage()
		return
	}
	r.op(lg.w + np)
	partDeletes(r.ops[lg.w+1:lg.w+1+np], lv, lg.old.id, true)
	r.submit(r.writeClient(), stageLargeFree, lg.w+1, lg.w+1+np)
}

// largeFreeDone resumes the write's stage once the old parts are freed.
// A part already gone (freed by ndbmemcache, or never written) is no error,
// nor is a failure to free: the value was written, and only space is lost.
// The dispatcher logs the backend's failures. Deletes that failed in one
// transaction are tried again each on its own first (freeAgain).
func (r *Request) largeFreeDone() {
	if ops := r.ops[r.from:r.to]; freeAgain(ops) {
		lg := r.lg
		partDeletes(ops, r.targets[0].route.Container.Large, lg.old.id, false)
		r.submit(r.writeClient(), stageLargeFree, r.from, r.to)
		return
	}
	r.resumeStage()
}

// LocalTable is the table a local cache makes for c's copies: c's own,
// with the expiry the gateway keeps for large values given to the local
// engine, which holds no parts and so may free an expired copy itself.
func LocalTable(c *Container) *ndbclient.Table {
	if c.Large == nil || c.Large.expire < 0 {
		return c.Table
	}
	t := *c.Table
	t.ExpireColumn, t.ExpiryByCaller = c.Large.expire, false
	return &t
}
