package gateway

import (
	"sync/atomic"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// What a request is: verbs, outcomes, items, and the reusable Request with
// its inputs, outputs and buffers.

// Verb is a protocol-neutral key-value request kind with memcached's meaning.
type Verb uint8

const (
	VerbGet     Verb = iota + 1 // get/gets: read keys
	VerbGat                     // gat/gats: read keys and set their expiry
	VerbSet                     // write
	VerbAdd                     // insert; exists -> NotStored
	VerbReplace                 // update; missing -> NotStored
	VerbAppend                  // append data; missing -> NotStored
	VerbPrepend                 // prepend data; missing -> NotStored
	VerbCas                     // update if cas matches: Exists / NotFound
	VerbDelete                  // delete: Deleted / NotFound
	VerbIncr                    // atomic add: Number / NotFound
	VerbDecr                    // atomic subtract clamped at 0
	VerbTouch                   // set expiry: Touched / NotFound
	VerbUnlink                  // delete without counting: a refused set removes the stale item
	numVerbs
)

// NumVerbs sizes per-verb tables.
const NumVerbs = int(numVerbs)

// Outcome is the memcached-level result of a request.
type Outcome uint8

const (
	OutcomeNone Outcome = iota
	OutcomeStored
	OutcomeNotStored
	OutcomeExists
	OutcomeNotFound
	OutcomeDeleted
	OutcomeTouched
	OutcomeNumber // incr/decr: Number holds the new value
	OutcomeValues // get/gat, and a set of several keys: Items hold per-key results
	OutcomeError  // Err holds a canonical ndbclient error
)

// Item is one key's result of a get.
type Item struct {
	Key    []byte // as the client sent it (with any prefix)
	Value  []byte
	Flags  uint32
	Cas    uint64
	Expire uint32 // unix seconds, 0 never
	Hit    bool
	Err    error // a per-key backend failure (not a miss)
	// Meta is the item's state before this get; Won says this get took its
	// recache token (meta protocol, Meta.Lease).
	Meta ndbclient.ItemMeta
	Won  bool
}

// MetaOptions are the meta protocol's extras (memcached's mg/ms/md/ma flags).
type MetaOptions struct {
	Lease   bool  // get: hand out the recache token of stale items (every mg)
	NoBump  bool  // get u: leave LRU position, fetched mark and access time alone
	Recache int64 // get R: also win the token when the TTL left is below this (0 off)
	// Vivify: a get (N) creates an empty item on a miss and wins its token; an
	// append creates the item from its data; an incr creates it with Initial.
	Vivify        bool
	VivifyExptime int64
	NewCas        uint64 // E: the new version's cas instead of a generated one
	HasNewCas     bool
	// Invalidate: a cas store (ms C I) with an older cas still stores, marked
	// stale; a delete (md I) marks the item stale with a new cas instead.
	Invalidate bool
	ClearValue bool // delete x: empty the value but keep the item
	SetTTL     bool // delete I / incr: also set Exptime on success
	WantSize   bool // store: report the stored value's size in Size
	// GatMissIsGet: a gat's misses count as get misses, not touch misses,
	// in the stats, as memcached 1.6.18 counts an mg with T (its hits
	// count as touches, as a text gat's do).
	GatMissIsGet bool
	// CasFailIsMiss: a delete whose cas did not match counts in
	// delete_misses, as memcached 1.6.18's md does (its binary delete
	// counts it nowhere).
	CasFailIsMiss bool
	// CompareZeroCas: a delete compares a Cas of 0 too (md C0, which
	// memcached checks: no item has cas 0) rather than taking 0 for none.
	CompareZeroCas bool
	// Uncounted: the get adds to no item counter, as memcached 1.6.18's
	// me (meta debug) does.
	Uncounted bool
}

// Omit is a set of item fields a get's answer does not use (Request.Omit).
type Omit uint8

const (
	OmitCas    Omit = 1 << iota // Item.Cas
	OmitExpire                  // Item.Expire
	omitAll    = OmitCas | OmitExpire
)

// Request is one reusable key-value request. A front end owns it: it fills the
// inputs, calls Service.Do, and reads the outputs in Done. Buffers are kept
// across uses so the steady state allocates nothing. A Request is not safe for
// concurrent use and must not be reused before Done has been called.
type Request struct {
	// Inputs.
	Verb    Verb
	Flags   uint32
	Exptime int64  // memcached form: 0 never, <0 expired, <=30d relative, else absolute
	Cas     uint64 // VerbCas compare value
	Delta   uint64 // incr/decr
	// Create makes incr/decr store Initial (with Exptime) when the key is
	// missing, as memcached's binary protocol does, instead of NOT_FOUND.
	Create  bool
	Initial uint64
	// Meta holds the meta protocol's extras; zero for the other protocols.
	Meta MetaOptions
	// Route, when set (Service.RouteOf), sends every key to that route's
	// container as it is, without key-prefix matching: the KV APIs name the
	// container in the request.
	Route *Route
	// Done is called exactly once per Do, inline or from another goroutine.
	Done func(*Request)
	// Shard is the caller's metrics shard: its event loop's, or 0 (shared)
	// for callers with none (internal/shardmetrics). Reset keeps it.
	Shard int
	// Turn, when set, is the turn of the caller's event loop: the
	// request's batches wait there until the loop runs them, and so do
	// those of later stages while the request completes on the loop
	// (ndbclient.Batch.Turn). Set it only on the loop's goroutine.
	Turn *ndbclient.Turn
	// Lone says the caller has nothing else to do until the request
	// completes; its batches carry it to the driver (ndbclient.Batch.Lone).
	Lone bool
	// Poll says, with Lone, that the caller sends its next request as soon
	// as this one is answered (a memcache client alone on its loop), so
	// the driver may poll for the answer rather than sleep
	// (ndbclient.Batch.Poll).
	Poll bool
	// Bulk says the caller already has many keys in flight: its batches
	// queue behind other callers' (ndbclient.Batch.Bulk).
	Bulk bool
	// Omit names what a get's answer does not use (a memcache text get uses
	// neither cas nor expiry, a binary get no expiry): its reads skip those
	// columns, and its items' Cas or Expire are 0.
	Omit Omit
	// DropOnTooLarge makes a store whose value its container's columns
	// cannot hold delete the key's old item before it fails with TooLarge,
	// as memcached's refused set does. A failed REST or gRPC write changes
	// nothing, so only memcache asks for it.
	DropOnTooLarge bool

	// Outputs.
	Outcome Outcome
	Items   []Item
	Number  uint64 // incr/decr result
	NewCas  uint64 // cas of a successful store or incr
	Size    int    // stored value's size (Meta.WantSize)
	Expire  uint32 // incr/decr: the item's expiry after the change (unix s, 0 never)
	Created bool   // incr/decr with Create or Meta.Vivify: the key was missing, and Initial is stored
	Err     error

	keyBuf  []byte
	keyEnds []int
	value   []byte
	// sets holds, for a set of several keys (AddSet), each key's end of
	// its value in value, flags and exptime.
	sets []keySet

	svc     *Service
	targets []keyTarget
	ops     []ndbclient.Op
	batch   ndbclient.Batch
	// abandoned: the client went away; every later stage's batch is
	// abandoned too (Abandon).
	abandoned atomic.Bool
	stage     stage
	pass      pass
	used      int // op slots used by this request's get passes
	spans     []textSpan

	backendFrom, backendTo int // op slots of the get's backend pass
	attempts               int
	// refused is the TooLarge a store answers after deleting the old item
	// instead (DropOnTooLarge).
	refused error
	fields  [][]byte
	textBuf []byte
	onBatch func(*ndbclient.Batch, error)
	// from and to are the ops of the batch last submitted.
	from, to int
	// lg is the progress of a large value's stages (large.go); nil until
	// the request first meets a container with large values.
	lg *largeState
}

// keySet is one key's item in a set of several keys.
type keySet struct {
	valueEnd int
	flags    uint32
	exptime  int64
}

// keyTarget is where one key of the request goes.
type keyTarget struct {
	route *Route
	key   []byte // the key with the route's prefix removed
	// fillStripe and fillGen are the key's fill stripe and its generation
	// as of the backend read of a caching get (fillGuard).
	fillStripe int
	fillGen    uint64
}

// NewRequest makes a request bound to s.
func (s *Service) NewRequest() *Request {
	r := &Request{svc: s}
	r.onBatch = r.batchDone
	return r
}

// Reset clears inputs and outputs, keeping buffers.
func (r *Request) Reset() {
	r.Verb, r.Flags, r.Exptime, r.Cas, r.Delta = 0, 0, 0, 0, 0
	r.Create, r.Initial, r.Meta, r.Route, r.Lone, r.Poll, r.Bulk, r.Omit, r.Turn = false, 0, MetaOptions{}, nil, false, false, false, 0, nil
	r.DropOnTooLarge, r.refused = false, nil
	r.Outcome, r.Number, r.NewCas, r.Err = OutcomeNone, 0, 0, nil
	r.Size, r.Expire, r.Created = 0, 0, false
	r.Items = r.Items[:0]
	r.keyBuf = r.keyBuf[:0]
	r.keyEnds = r.keyEnds[:0]
	r.value = r.value[:0]
	r.sets = r.sets[:0]
	r.targets = r.targets[:0]
	r.attempts = 0
	r.abandoned.Store(false)
}

// Abandon says the client went away: what the request still has queued for
// the backend, and any later stage, is dropped unsent. Safe from any
// goroutine; the request still completes.
func (r *Request) Abandon() {
	r.abandoned.Store(true)
	r.batch.Abandon()
}

// AddKey copies a key into the request.
func (r *Request) AddKey(k []byte) {
	r.keyBuf = append(r.keyBuf, k...)
	r.keyEnds = append(r.keyEnds, len(r.keyBuf))
}

// NumKeys is the number of keys added.
func (r *Request) NumKeys() int { return len(r.keyEnds) }

// Key returns key i.
func (r *Request) Key(i int) []byte {
	start := 0
	if i > 0 {
		start = r.keyEnds[i-1]
	}
	return r.keyBuf[start:r.keyEnds[i]]
}

// SetValue copies the data of a store.
func (r *Request) SetValue(v []byte) { r.value = append(r.value[:0], v...) }

// AddSet adds one key of a set of several (VerbSet only), with its own
// value, flags and exptime: the keys are stored in one backend batch, each
// on its own, and Items hold each key's result (Service.Do). A request takes
// either AddSet or AddKey with SetValue, not both.
func (r *Request) AddSet(key, value []byte, flags uint32, exptime int64) {
	r.AddKey(key)
	r.value = append(r.value, value...)
	r.sets = append(r.sets, keySet{valueEnd: len(r.value), flags: flags, exptime: exptime})
}

// setValue is key i's value of a set of several keys.
func (r *Request) setValue(i int) []byte {
	start := 0
	if i > 0 {
		start = r.sets[i-1].valueEnd
	}
	return r.value[start:r.sets[i].valueEnd]
}

// Value returns the data of a store.
func (r *Request) Value() []byte { return r.value }

func (r *Request) fail(err error) {
	r.Outcome = OutcomeError
	r.Err = err
}

// op returns the i-th reusable op, growing the op slice when needed.
func (r *Request) op(i int) *ndbclient.Op {
	for len(r.ops) <= i {
		r.ops = append(r.ops, ndbclient.Op{})
	}
	o := &r.ops[i]
	o.Reset()
	return o
}

// MaxKeyLen is memcached's key limit.
const MaxKeyLen = 250

// ValidKey applies memcached's key rules (1..250 bytes, no spaces or control
// characters) for the front ends whose framing would allow other keys (REST,
// gRPC): every key they write can then be read over the memcache port.
func ValidKey(key []byte) error {
	if len(key) == 0 {
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "key is empty")
	}
	if len(key) > MaxKeyLen {
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "key is %d bytes; memcached keys are at most %d", len(key), MaxKeyLen)
	}
	for i, c := range key {
		if c <= ' ' || c == 0x7f {
			return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "key has a space or control character at byte %d; memcached keys cannot", i)
		}
	}
	return nil
}
