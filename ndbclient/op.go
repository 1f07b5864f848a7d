package ndbclient

import "sync/atomic"

// OpKind is the kind of one operation.
type OpKind uint8

const (
	// OpRead reads the row with Key, returning the Read projection in Row.
	OpRead OpKind = iota + 1
	// OpInsert creates the row from Key and Set; Duplicate if it exists.
	OpInsert
	// OpUpdate changes the Set columns; NotFound if the row does not exist.
	OpUpdate
	// OpWrite is an upsert: insert, or overwrite the Set columns of the existing row.
	OpWrite
	// OpDelete removes the row; NotFound if it does not exist.
	OpDelete
	// OpCondUpdate is OpUpdate that applies only if column CondColumn equals
	// CondValue (ConditionFailed otherwise). NDB: an interpreted program. This is CAS.
	OpCondUpdate
	// OpAdd adds Delta to the unsigned column AddColumn atomically (Subtract for
	// decr). Incr wraps at 2^64; decr clamps at 0. A NULL column is NotNumeric.
	// With Create, a missing row is inserted with AddColumn = Initial and the Set
	// columns. Set columns are also applied on success (e.g. a new cas). Row
	// receives the Read projection after the change. With HasCond,
	// ConditionFailed unless CondColumn equals CondValue.
	OpAdd
	// OpAppend appends (or with Prepend, prepends) Data to the bytes column
	// AppendColumn and applies Set: one transaction of an exclusive read plus an
	// update. NotFound if the row is missing; TooLarge if the result would not fit.
	// With HasCond, ConditionFailed unless CondColumn equals CondValue (NULL
	// matches NULL). Row receives the Read projection after the change.
	OpAppend
	// OpDeleteAll removes every row of Table (flush): a scan with delete. Key is unused.
	OpDeleteAll
)

var opNames = [...]string{"", "read", "insert", "update", "write", "delete", "cond_update", "add", "append", "delete_all"}

func (k OpKind) String() string {
	if int(k) < len(opNames) && k != 0 {
		return opNames[k]
	}
	return "op?"
}

// LockMode is the lock a read takes. Plain reads use LockCommitted (NDB's
// LM_CommittedRead: no lock, latest committed value).
type LockMode uint8

const (
	LockCommitted LockMode = iota
	LockShared
	LockExclusive
	// LockSimple (NDB's LM_SimpleRead) waits for a writer's lock on the
	// row, so it reads what that writer committed, as LockShared does, but
	// holds no lock after the read: nothing to release at commit, and no
	// lock cycle with a writer of another row of the transaction. Its miss
	// is its own, as a committed read's: it does not fail a linked run (NDB
	// 7.5 commits the run), and its Err says so.
	LockSimple
)

// ColumnValue is one assignment of a value to a column.
type ColumnValue struct {
	Column int
	Value  Value
}

// Op is one operation and, after completion, its result. An Op and the slices it
// points to belong to the caller; they are reused across requests to keep the hot
// path free of allocation. Drivers must not retain them after completion.
//
// Field order is for the cache: what a driver reads or writes for every op
// (kind, flags, table, key, projection, sets, error, row) comes first, in
// the first three cache lines, and the inputs of fewer kinds after. An NDB
// executor reads ops that another core has just built, so each line it
// touches is a miss.
type Op struct {
	Kind OpKind
	Lock LockMode
	// HasCond: OpAdd, OpAppend and OpDelete check CondColumn (OpCondUpdate
	// always does). An OpAdd of a NULL column fails NotNumeric before its
	// condition is checked.
	HasCond bool
	// Subtract: OpAdd subtracts Delta (memcached's decr: stops at 0).
	Subtract bool
	// Create: OpAdd of a missing row inserts Initial.
	Create bool
	// Prepend: OpAppend puts Data before the value.
	Prepend bool
	// TxnWithNext makes this op and the next one in the batch a single transaction:
	// all commit or none does. A run of ops so linked is one transaction. Keep
	// transactions short; an op's own failure fails the whole run.
	TxnWithNext bool

	// partition is the key's partition plus one, as the dispatcher hashed it
	// to choose the run's node; 0 when it did not. See KeyPartition.
	partition int32
	// nodeStart: see StartsNode.
	nodeStart bool

	Table *Table
	// Key holds the primary-key values, in Table.PrimaryKey order.
	Key []Value
	// Read is the projection returned in Row (column indexes). Reads with an empty
	// projection only check existence.
	Read []int
	// Set holds the columns written by insert/update/write/cond-update/add/append.
	Set []ColumnValue

	// Results, set by the driver.
	Err error
	// Affected counts rows changed (OpDeleteAll: rows removed). A failed op
	// changed none, except an OpDeleteAll that failed part way: it counts the
	// rows it removed before the failure.
	Affected uint64
	// Row holds the Read projection's values. Drivers append into Row[:0], so a
	// caller that keeps Row's capacity avoids allocation. Bytes values point into
	// RowBuf (or into the caller's own buffers); valid until the op is reused.
	Row    []Value
	RowBuf []byte

	CondColumn int // OpCondUpdate always checks it; OpAdd, OpAppend and OpDelete when HasCond
	CondValue  Value

	AddColumn int // OpAdd
	Delta     uint64
	Initial   uint64

	AppendColumn int // OpAppend
	Data         []byte

	// Item state, memcached's per-item bookkeeping. The embedded engine keeps
	// it with each item; the NDB driver in the table's StateColumn, and
	// there a read records its access at most once a minute, as memcached's
	// item time. Without a state column drivers ignore these inputs and
	// leave Meta zero and Won false. Writes start a row's state afresh
	// unless KeepState, and record their access (on NDB, an update that
	// keeps the state records it once a minute, as a read).
	NoBump    bool // read: no LRU bump, no fetched mark, no last-access update; kept-state update: no last-access update
	Lease     bool // read hit: try to win the recache token (see Won)
	KeepState bool // update: keep the row's state (touch)
	MarkStale bool // update: mark the row stale and release its token
	TokenSent bool // insert/write: the new row's token is already taken (vivify)
	// MarkFetched: a write or kept-state update marks the row fetched, as
	// memcached's touch and an mg's vivify bump the item.
	MarkFetched bool
	RecacheAt   uint32 // with Lease: also win if the row expires before this (unix s)

	// Meta is the row's state before a read (or, on the embedded engine,
	// before a write's change). A result, as is Won.
	Meta ItemMeta
	// Won: the read took the row's recache token, because the row is stale or
	// expires before RecacheAt and nobody holds the token yet.
	Won bool

	// Tag is the caller's own: the dispatcher and the drivers never read or
	// write it. A caller keeps in it what finds its record of the op when the
	// batch completes (the gateway: the index of the key a read is for).
	// Reset clears it.
	Tag int
}

// KeyPartition is the partition of the op's key when the dispatcher has
// computed it (Driver.Partition) to route the op. A driver may start the
// op's transaction on it instead of hashing the key again: on NDB the hash
// is an MD5 over the key's padded, collated form, a large share of a read's
// cost in the gateway.
func (o *Op) KeyPartition() (int, bool) { return int(o.partition) - 1, o.partition > 0 }

// SetKeyPartition records the partition of the op's key (p >= 0), as the
// dispatcher does when it routes the op.
func (o *Op) SetKeyPartition(p int) { o.partition = int32(p) + 1 }

// StartsNode reports that the op begins another data node's ops in its
// flight: a turn's flight carries several nodes' rounds, in node order
// (Turn). A driver that lets neighbouring ops share a transaction must not
// join this one to the op before it, whose transaction another node runs.
func (o *Op) StartsNode() bool { return o.nodeStart }

// Reset clears results and inputs but keeps slice capacity.
func (o *Op) Reset() {
	*o = Op{Key: o.Key[:0], Read: o.Read[:0], Set: o.Set[:0], Row: o.Row[:0], RowBuf: o.RowBuf[:0]}
}

// ItemMeta is a row's cache bookkeeping (memcached's item flags and time).
type ItemMeta struct {
	LastAccess uint32 // unix seconds of the last read or write
	Fetched    bool   // read at least once since written
	Stale      bool   // marked stale by an invalidation
	TokenSent  bool   // a client holds the recache token
}

// Batch is a list of operations executed together. Each op has its own result;
// one op failing does not fail the others unless they share a transaction.
type Batch struct {
	Ops []*Op
	// Shard is the caller's metrics shard: its event loop's, or 0 (shared)
	// for callers with none (internal/shardmetrics). Reset keeps it.
	Shard int
	// Lone says the caller has nothing else to do until the batch completes
	// (the only command its event loop has in this turn), so a driver may
	// run it on the caller's goroutine rather than hand it to another
	// thread: two thread wake-ups fewer. Reset clears it.
	Lone bool
	// Poll says, with Lone, that the caller sends its next request as soon
	// as this one is answered (a memcache client alone on its loop), so a
	// driver may poll for the answer rather than sleep (ndb.busy_poll).
	// Reset clears it.
	Poll bool
	// Bulk says the caller already has many operations in flight (a deep
	// pipeline): its rounds go through its nodes' lanes, never in its
	// turn's flight, and queue there behind those of callers that have
	// few, so that one client's flood does not hold up the others'
	// requests. Reset clears it.
	Bulk bool
	// Turn, when set, is the caller's event loop turn: the batch's first
	// rounds wait there until the loop runs them at the turn's end
	// (Turn.Run). Reset clears it.
	Turn *Turn
	// OneNode says every op goes to the data node of lane Node (NodeOf), so
	// a driver that finds that node slow to answer need not wait for it
	// (ndb.flight_wait). The dispatcher sets both; Reset clears OneNode.
	OneNode bool
	Node    int
	// abandoned: nobody waits for the answer any more (the client hung up),
	// so rounds still queued for it are dropped unsent.
	abandoned atomic.Bool
}

// Reset empties the batch, keeping capacity and Shard.
func (b *Batch) Reset() {
	b.Ops, b.Lone, b.Poll, b.Bulk, b.Turn, b.OneNode = b.Ops[:0], false, false, false, nil, false
	b.abandoned.Store(false)
}

// Abandon says nobody will read the batch's results: what of it still waits
// in a node's queue completes at once with ErrAbandoned instead of being
// sent. Ops already sent run; the caller's completion still runs. Safe from
// any goroutine.
func (b *Batch) Abandon() { b.abandoned.Store(true) }

// Abandoned reports whether Abandon was called since the last Reset.
func (b *Batch) Abandoned() bool { return b.abandoned.Load() }
