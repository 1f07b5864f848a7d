package gateway

import (
	"strconv"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// The write stages: plain stores and deletes, the invalidating cas store,
// append and incr with their read-modify-write and create fallbacks, and a
// set of several keys; first the single-key helpers they share.

// firstOp prepares op 0 for the request's single key.
func (r *Request) firstOp(kind ndbclient.OpKind) (*ndbclient.Op, *Container, bool) {
	t := &r.targets[0]
	c := t.route.Container
	o := r.op(0)
	o.Kind, o.Table = kind, c.Table
	var err error
	if o.Key, err = r.keyValues(c, t.key, o.Key); err != nil {
		r.fail(err)
		r.finish()
		return nil, nil, false
	}
	return o, c, true
}

// setItemExpiring appends the assignments of a full store expiring at
// exptime (value, flags, cas, expiry, math), or fails and finishes r.
func (r *Request) setItemExpiring(c *Container, o *ndbclient.Op, text []byte, exptime int64) bool {
	cas, err := r.itemColumns(c, o, text, r.Flags, exptime)
	if err != nil {
		r.fail(err)
		r.finish()
		return false
	}
	r.NewCas, r.Size = cas, len(text)
	return true
}

// itemColumns appends the assignments of a full store of one item to o:
// value, flags, a new cas (returned), expiry, math.
func (r *Request) itemColumns(c *Container, o *ndbclient.Op, text []byte, flags uint32, exptime int64) (uint64, error) {
	if err := r.setValueColumns(c, o, text); err != nil {
		return 0, err
	}
	setUint(o, c.FlagsColumn, uint64(flags))
	cas := r.newCas()
	setUint(o, c.CasColumn, cas)
	c.setExpire(o, r.svc.expireAt(exptime))
	setMath(c, o, text)
	return cas, nil
}

// newCas is the cas of the version a write creates: the client's (meta E) or
// the next of this gateway's unique sequence.
func (r *Request) newCas() uint64 {
	if r.Meta.HasNewCas {
		return r.Meta.NewCas
	}
	return r.svc.nextCas()
}

func (r *Request) startWrite() {
	var kind ndbclient.OpKind
	switch r.Verb {
	case VerbSet:
		kind = ndbclient.OpWrite
	case VerbAdd:
		kind = ndbclient.OpInsert
	case VerbReplace, VerbTouch:
		kind = ndbclient.OpUpdate
	case VerbCas:
		kind = ndbclient.OpCondUpdate
	case VerbDelete, VerbUnlink:
		kind = ndbclient.OpDelete
		if r.Meta.Invalidate || r.Meta.ClearValue {
			kind = ndbclient.OpUpdate // md I / x keep the item
		}
	}
	o, c, ok := r.firstOp(kind)
	if !ok {
		return
	}
	switch r.Verb {
	case VerbTouch:
		if c.ExpireColumn < 0 {
			// Nothing to change; an existence check gives memcached's answer.
			o.Kind = ndbclient.OpRead
		}
		c.setExpire(o, r.svc.expireAt(r.Exptime))
		o.KeepState, o.MarkFetched = true, true // memcached's touch bumps the item
	case VerbCas:
		if c.CasColumn < 0 {
			r.fail(ndbclient.Errorf(ndbclient.CodeSchemaError, "container %s has no cas column", c.Name))
			r.finish()
			return
		}
		o.CondColumn, o.CondValue = c.CasColumn, ndbclient.Uint(r.Cas)
		fallthrough
	case VerbSet, VerbAdd, VerbReplace:
		cas, err := r.itemColumns(c, o, r.value, r.Flags, r.Exptime)
		switch {
		case err == nil:
			r.NewCas, r.Size = cas, len(r.value)
		case r.dropsRefused(err):
			o.Kind, o.Set, o.HasCond = ndbclient.OpDelete, o.Set[:0], false
		default:
			r.fail(err)
			r.finish()
			return
		}
	case VerbDelete:
		if (r.Cas != 0 || r.Meta.CompareZeroCas) && c.CasColumn >= 0 { // binary and meta protocols: delete only this version
			o.CondColumn, o.CondValue, o.HasCond = c.CasColumn, ndbclient.Uint(r.Cas), true
			if o.Kind == ndbclient.OpUpdate {
				o.Kind = ndbclient.OpCondUpdate
			}
		}
		if o.Kind != ndbclient.OpDelete && !r.markDeleted(c, o) {
			return
		}
	}
	r.submitWrite(stageWrite, 0)
}

func (r *Request) writeDone() {
	err := r.ops[0].Err
	code := ndbclient.CodeOf(err)
	switch {
	case r.refused != nil: // the old item is deleted, or was missing
		r.fail(r.refused)
	case code == ndbclient.CodeOK:
		switch r.Verb {
		case VerbDelete, VerbUnlink:
			r.Outcome = OutcomeDeleted
		case VerbTouch:
			r.Outcome = OutcomeTouched
		default:
			r.Outcome = OutcomeStored
		}
	case code == ndbclient.CodeNotFound && r.Verb == VerbReplace:
		r.Outcome = OutcomeNotStored
	case code == ndbclient.CodeNotFound:
		r.Outcome = OutcomeNotFound
	case code == ndbclient.CodeDuplicate && r.Verb == VerbAdd:
		r.Outcome = OutcomeNotStored
	case code == ndbclient.CodeConditionFailed && r.Verb == VerbCas && r.Meta.Invalidate && r.Cas != 0:
		// (memcached takes a cas of 0 for no older version: ms I C0 is EX.)
		r.startStaleCheck()
		return
	case code == ndbclient.CodeConditionFailed && (r.Verb == VerbCas || r.Verb == VerbDelete):
		r.Outcome = OutcomeExists
	default:
		r.fail(err)
	}
	if r.Outcome != OutcomeStored {
		r.NewCas = 0
	}
	r.finish()
}

// dropsRefused says whether a store refused with err deletes the key's old
// item instead (DropOnTooLarge), and keeps the refusal as its answer:
// memcached's set drops the item a too-large value would replace, before it
// replies, so that no client reads the value the set meant to replace.
func (r *Request) dropsRefused(err error) bool {
	if !r.DropOnTooLarge || ndbclient.CodeOf(err) != ndbclient.CodeTooLarge {
		return false
	}
	r.refused = err
	return true
}

// markDeleted fills the update of a meta delete that keeps the item: x empties
// the value (a new version, cas kept unless E), I marks it stale with a new cas
// (and a new TTL with T).
func (r *Request) markDeleted(c *Container, o *ndbclient.Op) bool {
	o.KeepState = !r.Meta.ClearValue
	o.MarkStale = r.Meta.Invalidate
	if r.Meta.ClearValue {
		if err := r.setValueColumns(c, o, nil); err != nil {
			r.fail(err)
			r.finish()
			return false
		}
		setUint(o, c.FlagsColumn, 0)
		setMath(c, o, nil)
		if !r.Meta.Invalidate {
			c.setExpire(o, r.svc.expireAt(r.Exptime))
		}
	}
	if r.Meta.Invalidate && r.Meta.SetTTL {
		c.setExpire(o, r.svc.expireAt(r.Exptime))
	}
	if r.Meta.Invalidate || r.Meta.HasNewCas {
		setUint(o, c.CasColumn, r.newCas())
	}
	return true
}

// ---- invalidating cas store (meta set C.. I) ----

// startStaleCheck reads the item's cas after a cas store failed: with I, a
// supplied cas older than the item's still stores, marked stale.
func (r *Request) startStaleCheck() {
	if !r.attempt() {
		return
	}
	o, c, ok := r.firstOp(ndbclient.OpRead)
	if !ok {
		return
	}
	o.Read = append(o.Read, c.CasColumn)
	if c.ExpireColumn >= 0 {
		o.Read = append(o.Read, c.ExpireColumn)
	}
	o.NoBump = true
	r.submit(r.writeClient(), stageStaleCheck, 0, 1)
}

func (r *Request) staleCheckDone() {
	o := &r.ops[0]
	switch ndbclient.CodeOf(o.Err) {
	case ndbclient.CodeOK:
	case ndbclient.CodeNotFound:
		r.Outcome, r.NewCas = OutcomeNotFound, 0
		r.finish()
		return
	default:
		r.fail(o.Err)
		r.NewCas = 0
		r.finish()
		return
	}
	current := o.Row[0].Uint()
	// As memcached: the stale version keeps the item's expiry (a unix time,
	// or 0 for none) and a recache token already handed out.
	expire, tokenSent := int64(0), o.Meta.TokenSent
	if len(o.Row) > 1 {
		expire = int64(ndbclient.ExpirySeconds(o.Row[1]))
	}
	switch {
	case current == r.Cas: // changed back meanwhile: an ordinary cas store
		r.startWrite()
		return
	case current < r.Cas:
		r.Outcome, r.NewCas = OutcomeExists, 0
		r.finish()
		return
	}
	u, c, ok := r.firstOp(ndbclient.OpCondUpdate)
	if !ok {
		return
	}
	u.CondColumn, u.CondValue = c.CasColumn, ndbclient.Uint(current)
	u.MarkStale, u.TokenSent = true, tokenSent
	if !r.setItemExpiring(c, u, r.value, expire) {
		return
	}
	r.submitWrite(stageStaleStore, 0)
}

func (r *Request) staleStoreDone() {
	switch err := r.ops[0].Err; ndbclient.CodeOf(err) {
	case ndbclient.CodeOK:
		r.Outcome = OutcomeStored
	case ndbclient.CodeConditionFailed:
		r.startStaleCheck()
		return
	case ndbclient.CodeNotFound:
		r.Outcome, r.NewCas = OutcomeNotFound, 0
	default:
		r.fail(err)
		r.NewCas = 0
	}
	r.finish()
}

// ---- append / prepend ----

// startAppend appends in one atomic op. A container with a math column is
// conditioned on math being NULL: a numeric value changed by incr lives only in
// the math column, so that case takes the read-modify-write path.
func (r *Request) startAppend() {
	t := &r.targets[0]
	c := t.route.Container
	if !c.simple || r.Cas != 0 || c.Large != nil { // a cas check (meta set C) needs the cas read; a large value its parts
		r.startReadModify()
		return
	}
	o, _, ok := r.firstOp(ndbclient.OpAppend)
	if !ok {
		return
	}
	o.AppendColumn, o.Data, o.Prepend = c.ValueColumns[0], r.value, r.Verb == VerbPrepend
	if c.MathColumn >= 0 {
		o.HasCond, o.CondColumn, o.CondValue = true, c.MathColumn, ndbclient.Null()
		o.Set = append(o.Set, ndbclient.ColumnValue{Column: c.MathColumn, Value: ndbclient.Null()})
	}
	r.NewCas = r.newCas()
	setUint(o, c.CasColumn, r.NewCas)
	if r.Meta.WantSize {
		o.Read = append(o.Read, c.ValueColumns[0])
	}
	r.submit(r.writeClient(), stageAppend, 0, 1)
}

func (r *Request) appendDone() {
	err := r.ops[0].Err
	switch ndbclient.CodeOf(err) {
	case ndbclient.CodeOK:
		r.Outcome = OutcomeStored
		if o := &r.ops[0]; len(o.Row) > 0 {
			r.Size = len(o.Row[0].B)
		}
	case ndbclient.CodeNotFound:
		if r.Meta.Vivify {
			r.startCreate()
			return
		}
		r.Outcome, r.NewCas = OutcomeNotStored, 0
	case ndbclient.CodeConditionFailed:
		r.startReadModify()
		return
	default:
		r.fail(err)
		r.NewCas = 0
	}
	r.finish()
}

// ---- incr / decr ----

// startIncr adds atomically to the math column. Without one, or when the math
// column is NULL because the value was stored in a non-canonical form such as
// "007", it falls back to a read-modify-write conditioned on the old cas.
func (r *Request) startIncr() {
	c := r.targets[0].route.Container
	if c.MathColumn < 0 || c.Large != nil && c.Large.expire >= 0 { // the gateway keeps that expiry: it reads first
		r.startReadModify()
		return
	}
	o, _, ok := r.firstOp(ndbclient.OpAdd)
	if !ok {
		return
	}
	o.AddColumn, o.Delta, o.Subtract = c.MathColumn, r.Delta, r.Verb == VerbDecr
	o.Read = append(o.Read, c.MathColumn)
	if c.ExpireColumn >= 0 {
		o.Read = append(o.Read, c.ExpireColumn)
	}
	if r.Cas != 0 && c.CasColumn >= 0 { // meta arithmetic C
		o.HasCond, o.CondColumn, o.CondValue = true, c.CasColumn, ndbclient.Uint(r.Cas)
	}
	r.NewCas = r.newCas()
	setUint(o, c.CasColumn, r.NewCas)
	if r.Meta.SetTTL {
		c.setExpire(o, r.svc.expireAt(r.Exptime))
	}
	o.KeepState = true
	r.submit(r.writeClient(), stageIncr, 0, 1)
}

func (r *Request) incrDone() {
	o := &r.ops[0]
	switch ndbclient.CodeOf(o.Err) {
	case ndbclient.CodeOK:
		r.Outcome, r.Number = OutcomeNumber, o.Row[0].Uint()
		if len(o.Row) > 1 {
			r.Expire = uint32(ndbclient.ExpirySeconds(o.Row[1]))
		}
	case ndbclient.CodeConditionFailed:
		r.Outcome, r.NewCas = OutcomeExists, 0
	case ndbclient.CodeNotFound:
		if r.Create {
			r.startCreate()
			return
		}
		r.Outcome, r.NewCas = OutcomeNotFound, 0
	case ndbclient.CodeNotNumeric:
		r.startReadModify()
		return
	default:
		r.fail(o.Err)
		r.NewCas = 0
	}
	r.finish()
}

// ---- read-modify-write (incr fallback, append on numbers, typed containers) ----

func (r *Request) startReadModify() {
	if !r.attempt() {
		return
	}
	o, c, ok := r.firstOp(ndbclient.OpRead)
	if !ok {
		return
	}
	o.Lock = ndbclient.LockExclusive
	o.Read = r.largeProjection(c, append(o.Read, c.readProj...))
	o.NoBump = true // memcached's append and incr leave the item unfetched
	r.submit(r.writeClient(), stageReadModify, 0, 1)
}

func (r *Request) readModifyDone() {
	rd := &r.ops[0]
	switch ndbclient.CodeOf(rd.Err) {
	case ndbclient.CodeOK:
	case ndbclient.CodeNotFound:
		if r.Create && (r.Verb == VerbIncr || r.Verb == VerbDecr) || r.Meta.Vivify && (r.Verb == VerbAppend || r.Verb == VerbPrepend) {
			r.startCreate()
			return
		}
		r.Outcome, r.NewCas = OutcomeNotFound, 0
		if r.Verb == VerbAppend || r.Verb == VerbPrepend {
			r.Outcome = OutcomeNotStored
		}
		r.finish()
		return
	default:
		r.fail(rd.Err)
		r.NewCas = 0
		r.finish()
		return
	}
	c := r.targets[0].route.Container
	_, readCas, readExpire := rowMeta(c, rd.Row, 0)
	old := decodeText(c, rd.Row, r.textBuf[:0])
	arith := r.Verb == VerbIncr || r.Verb == VerbDecr
	// memcached finds an empty value non-numeric before it compares the
	// cas, and a value that is not a number after.
	if arith && len(old) == 0 {
		r.fail(ndbclient.Errorf(ndbclient.CodeNotNumeric, "key %q: the value is empty", r.Key(0)))
		r.NewCas = 0
		r.finish()
		return
	}
	if r.Cas != 0 && c.CasColumn >= 0 && readCas != r.Cas { // meta C on append/arithmetic
		r.Outcome, r.NewCas = OutcomeExists, 0
		r.finish()
		return
	}
	r.Expire = readExpire
	var text []byte
	switch r.Verb {
	case VerbIncr, VerbDecr:
		n, ok := parseLooseUint(old)
		if !ok {
			r.fail(ndbclient.Errorf(ndbclient.CodeNotNumeric, "key %q: the value is not a decimal number", r.Key(0)))
			r.NewCas = 0
			r.finish()
			return
		}
		if r.Verb == VerbIncr {
			n += r.Delta // wraps at 2^64, as memcached does
		} else if n < r.Delta {
			n = 0
		} else {
			n -= r.Delta
		}
		r.Number = n
		text = strconv.AppendUint(old[len(old):], n, 10)
	case VerbAppend:
		text = append(old, r.value...)
	case VerbPrepend:
		text = append(append(old[len(old):], r.value...), old...)
	}
	r.textBuf = text[:0]
	if len(text) > r.svc.itemMax {
		r.fail(ndbclient.ErrTooLarge)
		r.NewCas = 0
		r.finish()
		return
	}
	// The condition: the cas read above if the container has one, else the old
	// value itself. The read's key and row stay in op 0; the update is op 1.
	u := r.op(1)
	u.Kind, u.Table = ndbclient.OpCondUpdate, c.Table
	u.Key = append(u.Key, rd.Key...)
	if c.CasColumn >= 0 {
		u.CondColumn, u.CondValue = c.CasColumn, ndbclient.Uint(readCas)
	} else {
		u.CondColumn, u.CondValue = c.ValueColumns[0], rd.Row[0]
	}
	if err := r.setValueColumns(c, u, text); err != nil {
		r.fail(err)
		r.finish()
		return
	}
	setMath(c, u, text)
	r.NewCas = r.newCas()
	setUint(u, c.CasColumn, r.NewCas)
	if r.Meta.SetTTL && (r.Verb == VerbIncr || r.Verb == VerbDecr) {
		r.Expire = uint32(r.svc.expireAt(r.Exptime))
		c.setExpire(u, uint64(r.Expire))
	}
	u.KeepState = r.Verb == VerbIncr || r.Verb == VerbDecr
	r.Size = len(text)
	r.submitWrite(stageWriteModify, 1)
}

func (r *Request) writeModifyDone() {
	u := &r.ops[1]
	switch ndbclient.CodeOf(u.Err) {
	case ndbclient.CodeOK:
		if r.Verb == VerbIncr || r.Verb == VerbDecr {
			r.Outcome = OutcomeNumber
		} else {
			r.Outcome = OutcomeStored
		}
	case ndbclient.CodeConditionFailed:
		r.startReadModify() // raced with another writer: read again
		return
	case ndbclient.CodeNotFound:
		r.Outcome, r.NewCas = OutcomeNotFound, 0
		if r.Verb == VerbAppend || r.Verb == VerbPrepend {
			r.Outcome = OutcomeNotStored
		}
	default:
		r.fail(u.Err)
		r.NewCas = 0
	}
	r.finish()
}

// ---- creating a missing key: incr/decr with an initial value (binary, meta
// N J), append with autovivify (meta N) ----

// startCreate inserts the initial value (or an append's data). If another
// client created the key in the meantime, the incr or append is retried.
func (r *Request) startCreate() {
	if !r.attempt() {
		return
	}
	o, c, ok := r.firstOp(ndbclient.OpInsert)
	if !ok {
		return
	}
	exptime := r.Exptime
	if r.Meta.Vivify && !r.Meta.SetTTL {
		exptime = r.Meta.VivifyExptime
	}
	var text []byte
	if r.Verb == VerbAppend || r.Verb == VerbPrepend {
		text = r.value
		exptime = r.Meta.VivifyExptime
	} else {
		text = strconv.AppendUint(r.textBuf[:0], r.Initial, 10)
		r.Flags = 0
	}
	if !r.setItemExpiring(c, o, text, exptime) {
		return
	}
	r.Expire = uint32(r.svc.expireAt(exptime))
	r.submitWrite(stageCreate, 0)
}

func (r *Request) createDone() {
	o := &r.ops[0]
	switch ndbclient.CodeOf(o.Err) {
	case ndbclient.CodeOK:
		r.Outcome, r.Number, r.Created = OutcomeNumber, r.Initial, true
		if r.Verb == VerbAppend || r.Verb == VerbPrepend {
			r.Outcome, r.Created = OutcomeStored, false
		}
	case ndbclient.CodeDuplicate:
		if r.Verb == VerbAppend || r.Verb == VerbPrepend {
			r.startAppend()
		} else {
			r.startIncr()
		}
		return
	default:
		r.fail(o.Err)
		r.NewCas = 0
	}
	r.finish()
}

// ---- a set of several keys ----

// startSets stores the keys of a set of several (AddSet) in one batch, each
// an op of its own: a pipelining client's run of sets costs one request.
// Item i is key i's result: Hit when stored, with the new version's Cas, or
// Err. A key that cannot be stored as it is (no route, a key or value its
// container refuses) fails alone.
func (r *Request) startSets() {
	r.Items = r.Items[:0]
	n := 0
	var cl *ndbclient.Client
	for i := range r.targets {
		r.Items = append(r.Items, Item{Key: r.Key(i)})
		it := &r.Items[i]
		t := &r.targets[i]
		if t.route == nil {
			it.Err = errNoRoute
			continue
		}
		if t.route.Refused != nil {
			it.Err = t.route.Refused
			continue
		}
		if t.route.Policy.Set == AccessDisabled { // routes changed since the run began
			it.Err = errSetDisabled
			continue
		}
		if t.route.Container.Large != nil { // likewise: SetsCanShareABatch
			it.Err = errSetLarge
			continue
		}
		if c := r.clientOf(t); cl == nil {
			cl = c
		} else if c != cl {
			it.Err = errMixedSets
			continue
		}
		c := t.route.Container
		o := r.op(n)
		o.Kind, o.Table, o.Tag = ndbclient.OpWrite, c.Table, i
		var err error
		if o.Key, err = r.keyValues(c, t.key, o.Key); err == nil {
			it.Cas, err = r.itemColumns(c, o, r.setValue(i), r.sets[i].flags, r.sets[i].exptime)
			if err != nil && r.dropsRefused(err) {
				it.Err = err // answered once the delete is done (setsDone)
				o.Kind, o.Set = ndbclient.OpDelete, o.Set[:0]
				err = nil
			}
		}
		if err != nil {
			it.Err = err
			continue
		}
		n++
	}
	if n == 0 {
		r.batch.Reset() // setsDone reads the ops of the batch
		r.setsDone()
		return
	}
	r.submit(cl, stageSets, 0, n)
}

// errMixedSets refuses a key of a set of several whose route writes through
// another client than the first key's: one request is one batch.
var errMixedSets = ndbclient.Errorf(ndbclient.CodeInvalidArgument, "keys of one multi-key set must share a write path (local or backend)")

// errSetLarge refuses a key of a set of several whose container keeps large
// values: their writes take stages of their own.
var errSetLarge = ndbclient.Errorf(ndbclient.CodeTemporary, "the key prefix's container keeps large values, which a set of several keys cannot write; send the set again")

// errSetDisabled refuses a key of a set of several whose policy disables sets.
var errSetDisabled = ndbclient.Errorf(ndbclient.CodeInvalidArgument, "the key prefix's policy disables sets")

func (r *Request) setsDone() {
	for _, o := range r.batch.Ops {
		it := &r.Items[o.Tag]
		switch {
		case it.Err != nil: // refused, its old item deleted instead (dropsRefused)
		case o.Err != nil:
			it.Err, it.Cas = o.Err, 0
			continue
		default:
			it.Hit = true
		}
		if t := r.targets[o.Tag]; r.dropsLocalCopy(&t) {
			r.invalidateLocal(t)
		}
	}
	r.Outcome = OutcomeValues
	r.finish()
}
