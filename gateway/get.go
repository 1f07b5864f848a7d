package gateway

import (
	"strconv"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// A request runs as a small state machine: each stage submits one batch and
// continues in batchDone, so the same code serves drivers that complete inline
// and drivers that complete later on another goroutine.
type stage uint8

const (
	stageGet stage = iota + 1
	stageWrite
	stageAppend
	stageIncr
	stageReadModify  // read value, cas and math for a read-modify-write
	stageWriteModify // conditional update of a read-modify-write
	stageCreate      // insert of an incr/decr's initial value, or of an append's data
	stageVivify      // insert of the empty item of a meta get with N
	stageStaleCheck  // read of the cas an invalidating meta set compares against
	stageStaleStore  // store of an invalidating meta set with an older cas
	stageSets        // the stores of a set of several keys (AddSet)
)

// pass is which client a get's current batch went to.
type pass uint8

const (
	passLocal pass = iota + 1
	passBackend
)

// maxModifyAttempts bounds read-modify-write retries when racing writers keep
// changing the row between the read and the conditional update.
const maxModifyAttempts = 16

// errTooManyChanges ends a request whose stages kept losing races.
var errTooManyChanges = ndbclient.Errorf(ndbclient.CodeTemporary, "too many concurrent changes to the key")

// attempt counts one more start of a stage that can be retried after a lost
// race (a read-modify-write, a create, a vivify, a stale check). Past
// maxModifyAttempts it fails the request with Temporary, finishes it, and
// returns false: the stage must not start.
func (r *Request) attempt() bool {
	r.attempts++
	if r.attempts <= maxModifyAttempts {
		return true
	}
	r.fail(errTooManyChanges)
	r.NewCas = 0
	r.finish()
	return false
}

func (r *Request) submit(cl *ndbclient.Client, st stage, from, to int) {
	r.stage = st
	r.batch.Reset()
	r.batch.Shard = r.Shard
	if r.abandoned.Load() {
		r.batch.Abandon()
	}
	for i := from; i < to; i++ {
		r.batch.Ops = append(r.batch.Ops, &r.ops[i])
	}
	cl.Submit(&r.batch, r.onBatch)
}

func (r *Request) batchDone(_ *ndbclient.Batch, err error) {
	if err != nil {
		r.fail(err)
		r.finish()
		return
	}
	switch r.stage {
	case stageGet:
		r.getDone()
	case stageWrite:
		r.writeDone()
	case stageAppend:
		r.appendDone()
	case stageIncr:
		r.incrDone()
	case stageReadModify:
		r.readModifyDone()
	case stageWriteModify:
		r.writeModifyDone()
	case stageCreate:
		r.createDone()
	case stageVivify:
		r.vivifyDone()
	case stageStaleCheck:
		r.staleCheckDone()
	case stageStaleStore:
		r.staleStoreDone()
	case stageSets:
		r.setsDone()
	}
}

// finish invalidates local copies of written caching keys and reports.
func (r *Request) finish() {
	if r.Verb != VerbGet && r.Verb != VerbGat && len(r.targets) == 1 && len(r.sets) == 0 { // setsDone invalidates its own
		if t := r.targets[0]; r.dropsLocalCopy(&t) && r.Outcome != OutcomeNotStored {
			r.invalidateLocal(t)
		}
	}
	r.svc.count(r)
	r.Done(r)
}

// invalidateLocal drops a caching key from the in-process cache. The local cache
// is the embedded engine, which completes inline, so this never waits on I/O.
func (r *Request) invalidateLocal(t keyTarget) {
	o := &ndbclient.Op{}
	c := t.route.Container
	o.Kind, o.Table = ndbclient.OpDelete, c.Table
	var keyVals [4]ndbclient.Value
	var err error
	o.Key, err = r.keyValues(c, t.key, keyVals[:0])
	if err != nil {
		return
	}
	r.svc.fills.drop(r.svc.local, t.key, o, r.Shard)
}

// keyValues converts a memcache key into the container's primary-key values.
func (r *Request) keyValues(c *Container, key []byte, dst []ndbclient.Value) ([]ndbclient.Value, error) {
	if c.simple {
		return append(dst, ndbclient.Bytes(key)), nil
	}
	r.fields = splitFields(r.fields, key, len(c.KeyColumns))
	for i, col := range c.KeyColumns {
		v, err := textToValue(&c.Table.Columns[col], r.fields[i])
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// setValueColumns appends the value columns' assignments for text.
func (r *Request) setValueColumns(c *Container, o *ndbclient.Op, text []byte) error {
	if len(c.ValueColumns) == 1 && isBytesColumn(c.Table.Columns[c.ValueColumns[0]].Type) {
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.ValueColumns[0], Value: ndbclient.Bytes(text)})
		return nil
	}
	r.fields = splitFields(r.fields, text, len(c.ValueColumns))
	for i, col := range c.ValueColumns {
		v, err := textToValue(&c.Table.Columns[col], r.fields[i])
		if err != nil {
			return err
		}
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: col, Value: v})
	}
	return nil
}

// setMath mirrors a canonical number into the math column, or NULLs it.
func setMath(c *Container, o *ndbclient.Op, text []byte) {
	if c.MathColumn < 0 {
		return
	}
	v := ndbclient.Null()
	if n, ok := parseCanonicalUint(text); ok {
		v = ndbclient.Uint(n)
	}
	o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.MathColumn, Value: v})
}

func setUint(o *ndbclient.Op, col int, v uint64) {
	if col >= 0 {
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: col, Value: ndbclient.Uint(v)})
	}
}

// decodeText appends the memcache value of a row read with c.readProj. A
// non-NULL math column is authoritative: incr/decr change only it.
func decodeText(c *Container, row []ndbclient.Value, dst []byte) []byte {
	if c.MathColumn >= 0 {
		if m := row[len(row)-1]; !m.IsNull() {
			return strconv.AppendUint(dst, m.Uint(), 10)
		}
	}
	for i := range c.ValueColumns {
		if i > 0 {
			dst = append(dst, '\t')
		}
		dst = appendValueText(dst, row[i], c.Table.Columns[c.ValueColumns[i]].Type)
	}
	return dst
}

// rowMeta returns flags, cas and expiry (unix seconds, 0 never) of a row read
// with c.readProj.
func rowMeta(c *Container, row []ndbclient.Value) (flags uint32, cas uint64, expire uint32) {
	i := len(c.ValueColumns)
	flags = c.StaticFlags
	if c.FlagsColumn >= 0 {
		flags = uint32(row[i].Uint())
		i++
	}
	if c.CasColumn >= 0 {
		cas = row[i].Uint()
		i++
	}
	if c.ExpireColumn >= 0 {
		expire = uint32(row[i].Uint())
	}
	return flags, cas, expire
}

// ---- get / gat ----

func (r *Request) startGet() {
	r.Items = r.Items[:0]
	for i := range r.targets {
		r.Items = append(r.Items, Item{Key: r.Key(i)})
		if rt := r.targets[i].route; rt != nil && rt.Refused != nil {
			r.Items[i].Err = rt.Refused
		}
	}
	r.pass, r.used, r.backendFrom, r.backendTo = 0, 0, 0, 0
	r.nextGetPass()
}

// nextGetPass submits the next non-empty pass: local (local-only and caching
// keys), then backend (ndb-only keys and caching misses). Each pass uses fresh op
// slots after the previous ones, so earlier hits' row buffers stay intact.
func (r *Request) nextGetPass() {
	for r.pass < passBackend {
		r.pass++
		from := r.used
		n := from
		for i := range r.targets {
			t := &r.targets[i]
			if t.route == nil || t.route.Refused != nil || !r.inPass(t.route.Policy, &r.Items[i]) {
				continue
			}
			n = r.addGetOps(n, i, t)
		}
		if n == from {
			continue
		}
		r.used = n
		cl := r.svc.local
		if r.pass == passBackend {
			cl = r.svc.backend
			r.backendFrom, r.backendTo = from, n
			for j := from; j < n; j++ {
				if t := &r.targets[r.ops[j].Tag]; t.route.Policy.Get == AccessCaching {
					t.fillGen = r.svc.fills.generation(t.key)
				}
			}
		}
		r.submit(cl, stageGet, from, n)
		return
	}
	r.fillLocal()
	r.decodeItems()
	if r.Meta.Vivify && len(r.Items) == 1 && !r.Items[0].Hit && r.Items[0].Err == nil && r.targets[0].route != nil {
		r.startVivify()
		return
	}
	r.Outcome = OutcomeValues
	r.finish()
}

// startVivify creates the empty item a meta get with N asks for on a miss and
// takes its recache token; if another client created it first, the get runs again.
func (r *Request) startVivify() {
	if !r.attempt() {
		return
	}
	o, c, ok := r.firstOp(ndbclient.OpInsert)
	if !ok {
		return
	}
	o.TokenSent = true
	r.Flags = 0
	if !r.setItemExpiring(c, o, nil, r.Meta.VivifyExptime) {
		return
	}
	r.submit(r.writeClient(), stageVivify, 0, 1)
}

func (r *Request) vivifyDone() {
	o := &r.ops[0]
	switch ndbclient.CodeOf(o.Err) {
	case ndbclient.CodeOK:
		it := &r.Items[0]
		it.Hit, it.Won, it.Value, it.Flags, it.Cas = true, true, nil, 0, r.NewCas
		it.Expire = uint32(r.svc.expireAt(r.Meta.VivifyExptime))
		it.Meta = ndbclient.ItemMeta{LastAccess: uint32(r.svc.now().Unix())}
		r.Outcome = OutcomeValues
	case ndbclient.CodeDuplicate:
		r.startGet()
		return
	default:
		r.fail(o.Err)
	}
	r.NewCas = 0
	r.finish()
}

func (r *Request) inPass(p Policy, it *Item) bool {
	if r.pass == passLocal {
		return p.Get == AccessLocal || p.Get == AccessCaching
	}
	return p.Get == AccessNDB || (p.Get == AccessCaching && !it.Hit && it.Err == nil)
}

// addGetOps appends key i's ops from op index n: a read, followed for gat by an
// expiry update in the same transaction. The read comes first because gat
// returns the item as it was, even when the new expiry makes it expire at once.
// It returns the next free op index.
func (r *Request) addGetOps(n, i int, t *keyTarget) int {
	c := t.route.Container
	touch := r.Verb == VerbGat && c.ExpireColumn >= 0
	o := r.op(n)
	o.Kind, o.Table = ndbclient.OpRead, c.Table
	var err error
	if o.Key, err = r.keyValues(c, t.key, o.Key); err != nil {
		r.Items[i].Err = err
		return n
	}
	o.Read = append(o.Read, c.readProj...)
	o.Tag = i // the item the read is for
	o.NoBump, o.Lease = r.Meta.NoBump, r.Meta.Lease
	if r.Meta.Recache > 0 {
		o.RecacheAt = uint32(r.svc.expireAt(r.Meta.Recache))
	}
	if !touch {
		return n + 1
	}
	o.Lock, o.TxnWithNext = ndbclient.LockExclusive, true
	u := r.op(n + 1)
	u.Kind, u.Table = ndbclient.OpUpdate, c.Table
	u.Key = append(u.Key[:0], o.Key...)
	u.KeepState = true
	u.NoBump = true // the read records the access
	setUint(u, c.ExpireColumn, r.svc.expireAt(r.Exptime))
	return n + 2
}

func (r *Request) getDone() {
	for _, o := range r.batch.Ops {
		if o.Kind != ndbclient.OpRead {
			continue
		}
		it := &r.Items[o.Tag]
		switch ndbclient.CodeOf(o.Err) {
		case ndbclient.CodeOK:
			it.Hit = true
			it.Flags, it.Cas, it.Expire = rowMeta(r.targets[o.Tag].route.Container, o.Row)
			it.Meta, it.Won = o.Meta, o.Won
			if r.Verb == VerbGat {
				it.Expire = uint32(r.svc.expireAt(r.Exptime))
			}
		case ndbclient.CodeNotFound:
		default:
			it.Err = o.Err
		}
	}
	r.nextGetPass()
}

// fillLocal copies caching keys found in the backend into the local cache,
// each unless a write dropped the key's copy since the read (fillGuard). The
// local cache is the embedded engine, which completes inline.
func (r *Request) fillLocal() {
	if r.svc.local == nil || r.backendTo == r.backendFrom {
		return
	}
	for j := r.backendFrom; j < r.backendTo; j++ {
		o := &r.ops[j]
		if o.Kind != ndbclient.OpRead || o.Err != nil {
			continue
		}
		t := &r.targets[o.Tag]
		if t.route.Policy.Get != AccessCaching {
			continue
		}
		c := t.route.Container
		w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: c.Table, Key: o.Key}
		for k, col := range c.readProj {
			w.Set = append(w.Set, ndbclient.ColumnValue{Column: col, Value: o.Row[k]})
		}
		r.svc.fills.fill(r.svc.local, t.key, t.fillGen, w, r.Shard)
	}
}

// decodeItems renders each hit's value text. Values of the simple container
// point straight into the op's row buffer; others are built in textBuf, and their
// slices are taken only once textBuf has stopped growing.
func (r *Request) decodeItems() {
	r.textBuf = r.textBuf[:0]
	r.spans = r.spans[:0]
	for j := 0; j < r.used; j++ {
		o := &r.ops[j]
		if o.Kind != ndbclient.OpRead || o.Err != nil {
			continue
		}
		it := &r.Items[o.Tag]
		c := r.targets[o.Tag].route.Container
		if c.simple && (c.MathColumn < 0 || o.Row[len(o.Row)-1].IsNull()) {
			it.Value = o.Row[0].B
			continue
		}
		start := len(r.textBuf)
		r.textBuf = decodeText(c, o.Row, r.textBuf)
		r.spans = append(r.spans, textSpan{item: o.Tag, start: start, end: len(r.textBuf)})
	}
	for _, sp := range r.spans {
		r.Items[sp.item].Value = r.textBuf[sp.start:sp.end:sp.end]
	}
}

type textSpan struct{ item, start, end int }
