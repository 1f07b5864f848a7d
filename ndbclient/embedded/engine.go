// Package embedded is ndbgate's in-process storage engine: an ndbclient.Driver
// that models NDB's tables, partitions and operation set in pure Go.
//
// Rows live in pointer-free memory (see arena.go, index.go and slots.go), so
// millions of rows cost the garbage collector almost nothing.
//
// Choices where the ndbclient contract leaves room:
//   - An insert (or upsert creating a row) that leaves a column unset stores
//     NULL if the column is nullable, else its zero value (0, empty, zeroed
//     BINARY), as NDB's defaults would.
//   - CHAR is stored without trailing spaces (equivalent to padding on store
//     and trimming on read); BINARY is stored and read zero-padded.
//   - OpAdd wraps incr at the column's width (2^64 for BIGINT UNSIGNED).
//   - delete_all empties one partition at a time, like NDB's scan delete
//     (with a data dir, all at once: clear.go); it cannot be part of a
//     transaction.
//   - Rows a transaction evicted to make room stay evicted if it rolls back
//     (cache tables only; tables without eviction never lose rows).
//   - Memory charged per row is its arena chunk plus its slot and index share,
//     and the charges stay within Config.MemoryLimit exactly. Rows of tables
//     without eviction may take all of it: cache rows are evicted to make room
//     for them (least recently used first), never the other way round; cache
//     tables share what is left, the least recently used rows of any of them
//     going first. Under a limit the arena pages themselves stay within
//     pageCap (1.5 times the limit plus 64 KiB a partition, less the slot
//     arrays and indexes, which are charged as they are): a size class
//     that needs a page when they are at it takes a page that others freed
//     (partition.makeRoom), as memcached's slab page mover does. Pages live
//     outside the Go heap and go back to the OS when given up (a few are kept
//     for reuse), and on delete_all.
//
// Lock order:
//   - Engine.mu guards the table registry only. It is never held while a
//     partition lock is taken, nor taken while one is held; the hot path reads
//     the registry through atomic copy-on-write snapshots instead.
//   - Partition locks are taken in ascending gid (engine-wide partition number:
//     table creation order, then partition number). Plain batches hold one at a
//     time; a transaction takes all of its partitions in that order. The one
//     exception is making room (eviction, and emptying pages for another
//     partition), which only TryLocks other partitions and so never waits
//     while holding a lock.
package embedded

import (
	"hash/maphash"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Config configures an Engine. Zero values pick the defaults.
type Config struct {
	// Partitions is the partition count of tables that leave Table.Partitions
	// at 0. Default 16.
	Partitions int
	// Nodes is the number of simulated data nodes; partition p lives on node
	// p % Nodes. Default 1.
	Nodes int
	// MemoryLimit caps the bytes charged for rows (each row's arena chunk plus
	// its slot and index share); 0 means no limit. It also bounds the arena
	// pages the rows live in: at most 1.5 times the limit plus 64 KiB per
	// partition (see pageCap).
	MemoryLimit uint64
	// ReapInterval is how often the background reaper frees expired rows.
	// Default 1s; negative disables the reaper (expired rows are still misses
	// and are freed when touched).
	ReapInterval time.Duration
	// RoundTripDelay, for benchmarks only, makes Submit complete that long
	// later on another goroutine, as a data node round trip would, so the
	// dispatcher's batching and coalescing can be measured on one machine.
	// Never the default.
	RoundTripDelay time.Duration
	// Now returns the current Unix time in seconds. Tests inject a clock here.
	// The default is a clock a background goroutine sets as each second
	// begins (like memcached's current_time), which keeps it off the hot path.
	Now func() uint32

	// HugePages maps every partition's row pages as 2 MiB pages, aligned and
	// marked for transparent huge pages (hugepages.go), like memcached's -L:
	// fewer TLB misses per row, for 2 MiB of memory at a time per partition
	// that holds rows. Off by default.
	HugePages bool

	// DataDir, when set (Open only), keeps the tables and their rows there:
	// a log of every change and periodic snapshots (wal.go, snapshot.go;
	// loaded by recover.go). Empty: in memory only, at no cost on the hot
	// path.
	DataDir string
	// Fsync is when the log is fsynced (default everysec).
	Fsync FsyncMode
	// SnapshotInterval is how often a snapshot is taken when the log has
	// grown since the last one; 0 for never (then only SnapshotLogSize and
	// Close take one).
	SnapshotInterval time.Duration
	// SnapshotLogSize takes a snapshot once the log since the last one holds
	// this many bytes; 0 for no such trigger.
	SnapshotLogSize int64
	// Logger receives the data dir's messages (default slog.Default()).
	Logger *slog.Logger

	// logFileHook wraps each log file the engine opens (tests: failing writes).
	logFileHook func(logFile) logFile
	// cutBackHook runs when the log cannot be cut back, before a new log is
	// started; an error fails that too (tests).
	cutBackHook func() error
	// retryAfter replaces the log's retry interval (tests).
	retryAfter time.Duration
	// logQueueMax replaces logQueueMax (tests).
	logQueueMax int64
	// snapshotHook runs between a snapshot's rotation and its copy (tests).
	snapshotHook func()
	// applyHook runs as a batch starts applying, with a data dir (tests).
	applyHook func()
	// freeBytes replaces the data dir's free space (tests).
	freeBytes func() int64
}

// Engine is the embedded driver. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	seed  maphash.Seed
	now   func() uint32
	limit int64 // 0 = none

	mu      sync.Mutex // guards byName and nextGid, and serializes publication
	byName  map[string]*table
	nextGid uint32
	byPtr   atomic.Pointer[map[*ndbclient.Table]*table] // stored schema -> table
	tables  atomic.Pointer[[]*table]

	// Above: read by every op. Below: written by writes on every core. The
	// pad keeps them off each other's cache line (tableOf stalled on it).
	_ [64]byte

	used                                     atomic.Int64  // bytes charged
	metaBytes                                atomic.Int64  // of used, slot arrays' and indexes' (partition.meta; see pageCap)
	snapshotting                             atomic.Int32  // snapshots copying rows: slot arrays wait to shrink (settle)
	lostRows                                 atomic.Uint64 // rows a rollback could not put back (putBackRow)
	pageBytes                                atomic.Int64  // bytes of arena pages mapped (see pageCap)
	nparts                                   atomic.Int64  // partitions of all tables
	compacting                               atomic.Bool   // a copyCompact holds the page cap's overshoot
	pool                                     *pagePool
	evictions, expired, expiredOnAccess, oom atomic.Uint64

	clock     atomic.Uint32 // the default Now
	closed    atomic.Bool
	gate      sync.RWMutex // with a data dir: batches applying (read), Close (write)
	stop      chan struct{}
	bg        sync.WaitGroup // the reaper, the clock and the snapshotter
	closeOnce sync.Once
	closeErr  error

	log       *slog.Logger
	wal       *wal // nil without a data dir
	syncWait  bool // fsync always: writes complete once durable
	snapshots atomic.Uint64
}

// clockSlack is how far into each second the default clock is set, so that a
// timer firing a little early still lands in the new second.
const clockSlack = time.Millisecond

var _ ndbclient.Driver = (*Engine)(nil)

// New returns a running engine, in memory only (Config.DataDir is for
// Open); Close stops its reaper.
func New(cfg Config) *Engine {
	cfg.DataDir = ""
	e := makeEngine(cfg)
	e.start()
	return e
}

// makeEngine returns an engine whose background goroutines have not started.
func makeEngine(cfg Config) *Engine {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 16
	}
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = time.Second
	}
	e := &Engine{
		cfg:    cfg,
		seed:   maphash.MakeSeed(),
		now:    cfg.Now,
		limit:  int64(min(cfg.MemoryLimit, 1<<62)),
		byName: map[string]*table{},
		stop:   make(chan struct{}),
		pool:   &pagePool{},
	}
	runtime.AddCleanup(e, func(pp *pagePool) { pp.drain() }, e.pool)
	e.byPtr.Store(&map[*ndbclient.Table]*table{})
	e.tables.Store(&[]*table{})
	e.log = cfg.Logger
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.clock.Store(uint32(time.Now().Unix()))
		e.now = e.clock.Load
	}
	return e
}

// start starts the background goroutines.
func (e *Engine) start() {
	if e.cfg.Now == nil {
		e.bg.Go(e.tick)
	}
	if e.cfg.ReapInterval > 0 {
		e.bg.Go(func() { e.reaper(e.cfg.ReapInterval) })
	}
	if e.wal != nil {
		e.bg.Go(e.snapshotter)
	}
}

// tick sets the default clock once a second, just after the second begins:
// exact to the second, and one wake-up a second instead of the ten a 100 ms
// ticker made. Each timer that fires on an event loop's processor readies
// this goroutine there and can cost the loop its thread (bench/HISTORY.md,
// tenth pass).
func (e *Engine) tick() {
	t := time.NewTimer(untilNextSecond(time.Now()))
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			now := time.Now()
			e.clock.Store(uint32(now.Unix()))
			t.Reset(untilNextSecond(now))
		}
	}
}

// untilNextSecond is the time from now until clockSlack into the next second.
func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second + clockSlack).Sub(now)
}

func (e *Engine) Name() string { return "embedded" }

// Volatile reports that the rows are gone when the process ends
// (ndbclient.VolatileDriver): true unless they are kept in a data dir.
func (e *Engine) Volatile() bool { return e.wal == nil }

// MaxColumn is the largest value of integer column col over the rows of
// the table named like s (ndbclient.ColumnMaxer). It reads every row, one
// partition lock at a time: for start-up.
func (e *Engine) MaxColumn(s *ndbclient.Table, col int) uint64 {
	e.mu.Lock()
	t := e.byName[s.FullName()]
	e.mu.Unlock()
	if t == nil || col < 0 || col >= len(t.cols) {
		return 0
	}
	var most uint64
	var v ndbclient.Value
	for _, p := range t.parts {
		p.mu.Lock()
		for i := range p.slots {
			if p.slots[i].size == 0 {
				continue
			}
			t.decode(p.row(int32(i)), col, &v)
			if !v.IsNull() {
				most = max(most, v.Uint())
			}
		}
		p.mu.Unlock()
	}
	return most
}

func (e *Engine) Ready() error {
	if e.closed.Load() {
		return errClosed
	}
	return nil
}

// Close stops the background goroutines. Later batches fail with
// Unavailable. With a data dir it then takes a snapshot (if anything changed
// since the last one), fsyncs the log and lets go of the dir; the error says
// what of that failed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		close(e.stop)
		e.bg.Wait()
		if e.wal != nil {
			e.gate.Lock() // every batch past the closed check has logged
			e.gate.Unlock()
			e.closeErr = e.closeDataDir()
		}
	})
	return e.closeErr
}

// CreateTable stores a copy of s and returns it. Creating a table that exists
// with the same shape returns the stored one; a different shape is a
// SchemaError.
func (e *Engine) CreateTable(s *ndbclient.Table) (*ndbclient.Table, error) {
	if s == nil {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "no table given")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if t := e.byName[s.FullName()]; t != nil {
		if !t.sameShape(s) {
			if t.restored {
				return nil, ndbclient.Errorf(ndbclient.CodeSchemaError,
					"table %s in data dir %s has another shape than the one asked for (%s); start with the configuration that made it (the same item_size_max, columns and keys), or with another data dir",
					s.FullName(), e.cfg.DataDir, t.shapeDiff(s))
			}
			return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s already exists with a different shape", s.FullName())
		}
		return t.current(), nil
	}
	t, err := newTable(s, e.cfg.Partitions)
	if err != nil {
		return nil, err
	}
	if e.wal != nil {
		if err := e.logCreate(t); err != nil {
			return nil, err
		}
	}
	e.addTable(t)
	return t.schema, nil
}

// addTable makes t's partitions and publishes it. e.mu is held.
func (e *Engine) addTable(t *table) {
	t.e, t.id = e, len(*e.tables.Load())
	t.parts = make([]*partition, t.schema.Partitions)
	t.hints = make([]indexHint, len(t.parts))
	for i := range t.parts {
		t.parts[i] = newPartition(e, t, i, e.nextGid)
		e.nextGid++
	}
	e.nparts.Add(int64(len(t.parts)))
	e.byName[t.schema.FullName()] = t
	e.publishSchemas()
	tables := append(append([]*table(nil), *e.tables.Load()...), t)
	e.tables.Store(&tables)
}

// publishSchemas remakes byPtr from byName: each table's stored schema, and
// the one its expire column was bound in. e.mu is held.
func (e *Engine) publishSchemas() {
	byPtr := make(map[*ndbclient.Table]*table, len(e.byName))
	for _, t := range e.byName {
		byPtr[t.schema] = t
		if b := t.bound.Load(); b != nil {
			byPtr[b] = t
		}
	}
	e.byPtr.Store(&byPtr)
}

// BindExpireColumn makes column col the expire column of s's table, made
// without one (ndbclient.ExpiryBinder): from then on its expired rows are
// misses and the reaper frees them. The binding is the engine's while it
// runs; a data dir keeps the table as it was made, and the container that
// named the column binds it again at each start. It returns the table's
// schema with the column set, which ops carry. With byCaller the column is
// only known (ndbclient.Table.ExpiryByCaller): a lease's recache reads it,
// and expired rows stay, for the caller to replace or delete.
func (e *Engine) BindExpireColumn(s *ndbclient.Table, col int, byCaller bool) (*ndbclient.Table, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.byName[s.FullName()]
	switch {
	case t == nil:
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s does not exist", s.FullName())
	case t.expireColumn() == col && t.byCaller.Load() == byCaller:
		return t.current(), nil
	case t.expireColumn() == col:
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s keeps expiry in column %q for its caller and for itself alike", s.FullName(), t.cols[col].Name)
	case t.expireColumn() >= 0:
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s keeps expiry in column %q", s.FullName(), t.cols[t.expireColumn()].Name)
	case col < 0 || col >= len(t.cols):
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s has no column %d", s.FullName(), col)
	case t.cols[col].keyPos >= 0:
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: expire column %q cannot be in the primary key", s.FullName(), t.cols[col].Name)
	case !ndbclient.IsExpiryType(t.cols[col].Type):
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: expire column %q must be an integer or a TIMESTAMP", s.FullName(), t.cols[col].Name)
	}
	cp := *t.schema
	cp.ExpireColumn, cp.ExpiryByCaller = col, byCaller
	t.bound.Store(&cp)
	e.publishSchemas()         // before the column counts: an op carrying cp finds t
	t.byCaller.Store(byCaller) // before too: no row is taken for expired meanwhile
	t.expireCol.Store(int32(col))
	return &cp, nil
}

// allPartitions lists every partition of every table, in ascending gid.
func (e *Engine) allPartitions() []*partition {
	var out []*partition
	for _, t := range *e.tables.Load() {
		out = append(out, t.parts...)
	}
	return out
}

// Table returns the schema of database.name: as stored, or with the expire
// column BindExpireColumn gave it.
func (e *Engine) Table(database, name string) (*ndbclient.Table, error) {
	e.mu.Lock()
	t := e.byName[database+"."+name]
	e.mu.Unlock()
	if t == nil {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s.%s does not exist", database, name)
	}
	return t.current(), nil
}

// tableOf maps an op's schema pointer to the engine's table. The pointer
// CreateTable or Table returned is found without locking; another pointer to a
// table of the same name and shape also works, on a slower path.
func (e *Engine) tableOf(s *ndbclient.Table) (*table, error) {
	if t, ok := (*e.byPtr.Load())[s]; ok {
		return t, nil
	}
	if s == nil {
		return nil, ndbclient.Errorf(ndbclient.CodeInvalidArgument, "operation has no table")
	}
	e.mu.Lock()
	t := e.byName[s.FullName()]
	e.mu.Unlock()
	switch {
	case t == nil:
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s does not exist", s.FullName())
	case !t.sameShape(s):
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: the operation's schema differs from the stored one", s.FullName())
	}
	return t, nil
}

func (e *Engine) hash(key []byte) uint64 { return maphash.Bytes(e.seed, key) }

// LargestRow is the longest row the table named like s has stored
// (ndbclient.RowSizer); 0 for none or no such table.
func (e *Engine) LargestRow(s *ndbclient.Table) int {
	t, err := e.tableOf(s)
	if err != nil {
		return 0
	}
	return int(t.largest.Load())
}

// partIndex picks a key's partition from its hash h (or from the distribution
// key's own hash when that is a strict part of the primary key). The high
// half of the hash chooses the partition; the low half is the index tag, so
// keys of one partition still spread over its whole index.
func (t *table) partIndex(e *Engine, h uint64, key []ndbclient.Value) int {
	if t.dist != nil {
		var kb [keyStack]byte
		h = e.hash(t.appendDistKey(kb[:0], key))
	}
	return int((h >> 32) % uint64(len(t.parts)))
}

// Partition maps a key (primary-key order) to its partition; 0 for a key the
// table cannot hold.
func (e *Engine) Partition(s *ndbclient.Table, key []ndbclient.Value) int {
	t, err := e.tableOf(s)
	if err != nil || t.checkKey(key) != nil {
		return 0
	}
	var kb [keyStack]byte
	return t.partIndex(e, e.hash(t.appendKey(kb[:0], key)), key)
}

// NodeOf returns the simulated data node of a partition.
func (e *Engine) NodeOf(_ *ndbclient.Table, partition int) int {
	if partition < 0 {
		return 0
	}
	return partition % e.cfg.Nodes
}

// tryReserve charges n bytes if they fit under the limit.
func (e *Engine) tryReserve(n int64) bool {
	if e.limit == 0 {
		e.used.Add(n)
		return true
	}
	for {
		cur := e.used.Load()
		if cur+n > e.limit {
			return false
		}
		if e.used.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// pageCap bounds the bytes of arena pages (0: no limit, no bound): half as
// much again as the limit, and a first page for every partition. Rows are
// charged their chunk's size, but a free chunk serves only its own class (or
// a smaller one, split) until its page is emptied: the half is room for such
// chunks, so that pages need to move only when the mix of sizes shifts. At
// the cap, with the charges within the limit, about a third of the pages'
// bytes are free, and a partition that needs a page empties one
// (partition.makeRoom). Past the cap go only a compaction's page
// (copyCompact, one at a time: maxPage at most) and the rows a transaction's
// rollback restores (they fitted before). Pages of the engine's pool count.
// Slot arrays and indexes come off the cap, so that pages, slot arrays and
// indexes together stay within it (but for each partition's first metaFree
// bytes of them, with its first page): they are charged in the limit as chunks
// are, so the chunks' share of the limit shrinks with them, and the cap stays
// at least half as much again as the chunks can take.
func (e *Engine) pageCap() int64 {
	if e.limit == 0 {
		return 0
	}
	first := int64(e.firstPageSize())
	return max(e.limit+e.limit/2+e.nparts.Load()*first-e.metaBytes.Load(), first)
}

// takePages reserves n bytes of pages under the cap (force: regardless).
func (e *Engine) takePages(n int64, force bool) bool {
	limit := e.pageCap()
	if limit == 0 || force {
		e.pageBytes.Add(n)
		return true
	}
	for {
		cur := e.pageBytes.Load()
		if cur+n > limit {
			return false
		}
		if e.pageBytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// takePagesUpTo reserves want bytes of pages, or, near the cap, as much as
// fits (in whole OS pages) if that is at least need; it returns the bytes
// reserved, 0 for none.
func (e *Engine) takePagesUpTo(want, need int64, force bool) int64 {
	limit := e.pageCap()
	if limit == 0 || force {
		e.pageBytes.Add(want)
		return want
	}
	for {
		cur := e.pageBytes.Load()
		n := min(want, (limit-cur)&^(pageAlign-1))
		if n < need {
			return 0
		}
		if e.pageBytes.CompareAndSwap(cur, cur+n) {
			return n
		}
	}
}

// Stats reports engine figures. Expired counts expired rows freed (on access,
// by the reaper or by eviction); ExpiredOnAccess counts the ones freed on
// access.
func (e *Engine) Stats() ndbclient.DriverStats {
	st := ndbclient.DriverStats{
		Bytes:           uint64(max(e.used.Load(), 0)),
		LimitBytes:      uint64(e.limit),
		Evictions:       e.evictions.Load(),
		Expired:         e.expired.Load(),
		ExpiredOnAccess: e.expiredOnAccess.Load(),
		OutOfMemory:     e.oom.Load(),
		RowsLost:        e.lostRows.Load(),
		Nodes:           e.cfg.Nodes,
		LiveNodes:       e.cfg.Nodes,
		Connects:        1,
	}
	if w := e.wal; w != nil {
		st.LogBytes = uint64(max(w.sinceSnap.Load(), 0))
		st.Snapshots = e.snapshots.Load()
		st.LogWriteErrors = w.writeErrors.Load()
	}
	for _, t := range *e.tables.Load() {
		st.Tables++
		st.Partitions += len(t.parts)
		for _, p := range t.parts {
			st.Items += uint64(max(p.items.Load(), 0))
		}
	}
	return st
}
