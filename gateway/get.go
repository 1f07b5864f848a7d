package gateway

import "github.com/ndbgate/ndbgate/ndbclient"

// The get and gat stages: a local pass then a backend pass, the caching
// routes' local fill, and the empty item a meta get with N creates.

// pass is which client a get's current batch went to.
type pass uint8

const (
	passLocal pass = iota + 1
	passBackend
)

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
					t.fillStripe, t.fillGen = r.svc.fills.generation(t.key)
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
	o.TokenSent, o.MarkFetched = true, true // memcached bumps the item it vivified
	r.Flags = 0
	if !r.setItemExpiring(c, o, nil, r.Meta.VivifyExptime) {
		return
	}
	r.submitWrite(stageVivify, 0)
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

// omit is what key t's read leaves out (its container's getProj): what the
// answer does not use (Request.Omit), unless a local copy is made from the
// row (a caching key's copy keeps all of readProj). gat reads everything.
func (r *Request) omit(t *keyTarget) Omit {
	if r.Verb != VerbGet || t.route.Policy.Get == AccessCaching {
		return 0
	}
	return r.Omit & omitAll
}

// addGetOps appends key i's ops from op index n: a read, followed for gat by an
// expiry update in the same transaction. The read comes first because gat
// returns the item as it was, even when the new expiry makes it expire at once.
// It returns the next free op index.
func (r *Request) addGetOps(n, i int, t *keyTarget) int {
	c := t.route.Container
	touch := r.Verb == VerbGat && c.ExpireColumn >= 0 && c.Large == nil // largeGats
	o := r.op(n)
	o.Kind, o.Table = ndbclient.OpRead, c.Table
	var err error
	if o.Key, err = r.keyValues(c, t.key, o.Key); err != nil {
		r.Items[i].Err = err
		return n
	}
	o.Read = r.largeProjection(c, append(o.Read, c.getProj[r.omit(t)]...))
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
	c.setExpire(u, r.svc.expireAt(r.Exptime))
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
			t := &r.targets[o.Tag]
			it.Flags, it.Cas, it.Expire = rowMeta(t.route.Container, o.Row, r.omit(t))
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
	var fills []pendingFill
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
		if c.Large != nil && len(o.Row[0].B) > c.Large.inline {
			continue // the local cache keeps no parts
		}
		w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: c.Table, Key: o.Key}
		for k, col := range c.readProj {
			w.Set = append(w.Set, ndbclient.ColumnValue{Column: col, Value: o.Row[k]})
		}
		fills = append(fills, pendingFill{stripe: t.fillStripe, gen: t.fillGen, op: w})
	}
	if len(fills) > 0 {
		r.svc.fills.fill(r.svc.local, fills, r.Shard)
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
