//go:build ndbapi

package ndbapi

// Build: `make build-ndb NDB_HOME=...`, or CGO_CPPFLAGS / CGO_LDFLAGS for
// another layout (they come before the defaults below). The defaults are the
// package layouts: /usr/include/mysql/storage/ndb (RPM/DEB) and
// /usr/local/mysql/include/storage/ndb (tarball); a missing directory is ignored.

/*
#cgo CPPFLAGS: -I/usr/include/mysql/storage/ndb -I/usr/include/mysql/storage/ndb/ndbapi
#cgo CPPFLAGS: -I/usr/local/mysql/include/storage/ndb -I/usr/local/mysql/include/storage/ndb/ndbapi
#cgo CXXFLAGS: -std=c++17 -O2
#cgo LDFLAGS: -L/usr/lib64/mysql -L/usr/local/mysql/lib -lndbclient -lstdc++
#include <stdlib.h>
#include <errno.h>
#include <semaphore.h>
#include <time.h>
#include "shim.h"

// An executor waits for work on a semaphore, in C. On a Go channel, the
// waiter became the next goroutine of the submitting event loop's processor,
// which the loop keeps while it sleeps in a raw epoll_wait; another thread
// then had to steal it, a wake-up and a short sleep per flight.
static sem_t *ndbgate_sem_new(void) {
  sem_t *s = (sem_t *)malloc(sizeof(sem_t));
  if (s != NULL && sem_init(s, 0, 0) != 0) { free(s); s = NULL; }
  return s;
}
static void ndbgate_sem_post(sem_t *s) { sem_post(s); }
static void ndbgate_sem_wait(sem_t *s) { while (sem_wait(s) != 0 && errno == EINTR) {} }
// ndbgate_sem_wait_ms waits for a post, or ms milliseconds: 1 when posted.
static int ndbgate_sem_wait_ms(sem_t *s, int ms) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_nsec += (long)ms * 1000000L;
  t.tv_sec += t.tv_nsec / 1000000000L;
  t.tv_nsec %= 1000000000L;
  while (sem_timedwait(s, &t) != 0) {
    if (errno != EINTR) return 0;
  }
  return 1;
}
static void ndbgate_sem_free(sem_t *s) { sem_destroy(s); free(s); }
*/
import "C"

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ndbgate/ndbgate/internal/pollwindow"
	"github.com/ndbgate/ndbgate/internal/procs"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// Config selects the cluster.
type Config struct {
	Connectstring string // host:1186[,host2:1186]
	PoolSize      int    // cluster connections, each with its executor; default 2
	TimeoutSec    int    // connect and wait-until-ready timeout; default 30
	// BusyPoll: a lone flight that may poll (Batch.Lone and Batch.Poll,
	// run on its caller) polls up to this long for the data nodes' answer
	// before it sleeps (ndb.busy_poll), as long as the last such flights'
	// answers say pays (pollwindow); 0 is off.
	BusyPoll time.Duration
	// FlightWait: a flight waits this long for its answers (ndb.flight_wait);
	// a batch of it NDB has not answered by then completes later, when NDB
	// answers (owed.go), and the flight's other batches complete now. 0
	// waits for every answer.
	FlightWait time.Duration
	Log        *slog.Logger
}

// Driver is the NDB API driver. Each pool connection has one executor
// goroutine that owns the connection's Ndb object (used by one thread at a
// time, as NDB requires, though not always the same thread) and runs one
// flight at a time: one cgo call per flight. Inside the call the
// shim prepares the flight's transactions with executeAsynchPrepare and sends
// them with one sendPollNdb; Submit only queues to an executor.
type Driver struct {
	pool *C.ndbgate_pool
	// nodes is the data nodes the pool's connections know; it grows when
	// they are made again after data nodes were added (follow.go).
	nodes atomic.Int32
	execs []*executor
	// connectstring and timeoutSec make connections again (follow.go).
	connectstring string
	timeoutSec    int
	busyPoll      time.Duration // Config.BusyPoll
	flightWait    time.Duration // Config.FlightWait
	next          atomic.Uint32
	// releaseProcs gives back the Ps reserved for the executors.
	releaseProcs func()
	mu           sync.RWMutex // guards byName, refreshing, and writes of bySch
	byName       map[string]*tableInfo
	// bySch is read on every op, several times: a copy-on-write map that
	// readers load without a lock, which a shared RWMutex would make a
	// cache line every thread writes.
	bySch atomic.Pointer[map[*ndbclient.Table]*tableInfo]
	// refreshing: tables being looked up again after NDB said they changed.
	refreshing map[*tableInfo]bool
	closed     atomic.Bool
	// closeMu: Submit, ScanRows and NodeID hold it shared while they use
	// the pool; Close takes it to set closed, and again to free the pool,
	// but not while the executors finish (Close). closing makes a second
	// Close wait for the first. Lock order: closing, then closeMu.
	closeMu sync.RWMutex
	closing sync.Mutex
	running sync.WaitGroup

	// Cluster loss (watch): detached while every data node is lost and the
	// shim has let go of its NDB objects; detachedAt (unix nanoseconds) says
	// since when, backAt since when data nodes were reachable again without
	// a successful reattach. reconnects counts the recoveries.
	detached   atomic.Bool
	detachedAt atomic.Int64
	backAt     atomic.Int64
	reconnects atomic.Uint64
	// connectionsRemade counts pooled connections made again to learn added
	// data nodes; redescribed counts tables described again after NDB
	// reported them altered or reorganised (follow.go).
	connectionsRemade atomic.Uint64
	flightsOnCaller   atomic.Uint64 // flights run on a lone caller's goroutine
	batchesOwed       atomic.Uint64 // batches a flight returned without (owed.go)
	// owedOn counts the owed batches of each lane's data node (Batch.Node):
	// a flight waits less for a node that owes some (owed.go).
	owedOn      [owedNodes]atomic.Int32
	overlaps    atomic.Uint64 // flights begun on an executor already running one (Overlaps)
	redescribed atomic.Uint64
	stopWatch   chan struct{}
	watching    sync.WaitGroup
	log         *slog.Logger
}

type work struct {
	b    *ndbclient.Batch
	done func(*ndbclient.Batch, error)
}

type executor struct {
	d    *Driver
	conn int
	sem  *C.sem_t // one post per queued work, and one at close
	mu   sync.Mutex
	// queue, closed and busy are guarded by mu. busy: a flight is running
	// on the executor's Ndb object, on its goroutine or on a lone caller's
	// (Submit); the state below belongs to that flight.
	queue  []work
	closed bool
	busy   bool
	// running counts flights in runFlight: more than one is a broken
	// exclusion (Driver.Overlaps).
	running atomic.Int32
	// lone: the flight running is a lone caller's (Submit) that may poll
	// (Batch.Poll), which polls for its answers for as long as pollWin
	// says; the executor that lone flights claim (the first) sizes pollWin
	// from those flights' round trips.
	lone    bool
	pollWin pollwindow.Window
	req     []byte
	resp    []byte
	// errBuf takes the shim's error text: a field, not a local, because a
	// local handed to cgo escapes, and it cost every flight 512 bytes of
	// heap and the gateway a collection every few thousand requests.
	errBuf [512]C.char
	state  stateFlight
	owing  // batches owed, and the scratch of flights of sections (owed.go)
}

// Open connects to the cluster.
func Open(cfg Config) (*Driver, error) {
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 2
	}
	if cfg.TimeoutSec <= 0 {
		cfg.TimeoutSec = 30
	}
	cs := C.CString(cfg.Connectstring)
	defer C.free(unsafe.Pointer(cs))
	var errBuf [512]C.char
	p := C.ndbgate_open(cs, C.int(cfg.PoolSize), C.int(cfg.TimeoutSec), &errBuf[0], C.int(len(errBuf)))
	if p == nil {
		return nil, ndbclient.Errorf(ndbclient.CodeUnavailable, "NDB cluster %s: %s", cfg.Connectstring, C.GoString(&errBuf[0]))
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	d := &Driver{pool: p, connectstring: cfg.Connectstring, timeoutSec: cfg.TimeoutSec,
		busyPoll: cfg.BusyPoll, flightWait: cfg.FlightWait,
		byName: map[string]*tableInfo{}, refreshing: map[*tableInfo]bool{},
		stopWatch: make(chan struct{}), log: cfg.Log}
	d.nodes.Store(int32(C.ndbgate_data_nodes(p)))
	d.watching.Add(1)
	go d.watch()
	for i := 0; i < cfg.PoolSize; i++ {
		e := &executor{d: d, conn: i, sem: C.ndbgate_sem_new(), pollWin: pollwindow.New(cfg.BusyPoll)}
		e.owed = map[uint32]owedBatch{}
		if e.sem == nil {
			panic("ndbapi: sem_init failed")
		}
		d.execs = append(d.execs, e)
		d.running.Add(1)
		go e.run()
	}
	// Each executor keeps a P through its cgo calls (internal/procs): with
	// none spare, the runtime takes it back on every wait. On NDB 7.5.0 this
	// cut the gateway's CPU per op by about 15 % with 64 clients.
	d.releaseProcs = procs.Reserve(len(d.execs))
	d.watching.Add(1)
	go d.follow()
	return d, nil
}

func (d *Driver) Name() string { return "ndbapi" }

// Table describes database.name from the NDB dictionary (cached).
func (d *Driver) Table(database, name string) (*ndbclient.Table, error) {
	key := database + "." + name
	d.mu.RLock()
	ti := d.byName[key]
	d.mu.RUnlock()
	if ti != nil {
		return ti.schema, nil
	}
	cdb, ctab := C.CString(database), C.CString(name)
	defer C.free(unsafe.Pointer(cdb))
	defer C.free(unsafe.Pointer(ctab))
	out := make([]byte, 64<<10)
	var errBuf [512]C.char
	id := C.ndbgate_describe(d.pool, cdb, ctab, (*C.uchar)(unsafe.Pointer(&out[0])), C.int(len(out)), &errBuf[0], C.int(len(errBuf)))
	if id < 0 {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s", C.GoString(&errBuf[0]))
	}
	ti, err := decodeDescribe(database, name, int(id), out)
	if err != nil {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "%v", err)
	}
	d.storeLanes(ti, ti.schema.Partitions)
	d.mu.Lock()
	d.byName[key] = ti
	bySch := make(map[*ndbclient.Table]*tableInfo, len(d.tables())+1)
	maps.Copy(bySch, d.tables())
	bySch[ti.schema] = ti
	d.bySch.Store(&bySch)
	d.mu.Unlock()
	return ti.schema, nil
}

// CreateTable checks that the table exists with the columns asked for: NDB
// tables are created with SQL (deploy/), never by the gateway.
func (d *Driver) CreateTable(want *ndbclient.Table) (*ndbclient.Table, error) {
	got, err := d.Table(want.Database, want.Name)
	if err != nil {
		return nil, err
	}
	for _, wc := range want.Columns {
		found := false
		for _, gc := range got.Columns {
			if gc.Name == wc.Name {
				found = true
				break
			}
		}
		if !found {
			return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s.%s has no column %s (create it with the SQL in deploy/)", want.Database, want.Name, wc.Name)
		}
	}
	return got, nil
}

// CreateNDBTable creates want in the NDB dictionary if no table of its name
// exists (an existing one is left as it is: CreateTable then checks its
// columns). It is for clusters without a MySQL server, such as a test
// cluster; tables made this way are invisible to a mysqld, which keeps its
// own metadata. Strings get NDB's default character set, binary.
func (d *Driver) CreateNDBTable(want *ndbclient.Table) (created bool, err error) {
	spec, err := encodeCreate(want)
	if err != nil {
		return false, ndbclient.Errorf(ndbclient.CodeSchemaError, "%v", err)
	}
	cdb, ctab := C.CString(want.Database), C.CString(want.Name)
	defer C.free(unsafe.Pointer(cdb))
	defer C.free(unsafe.Pointer(ctab))
	var errBuf [512]C.char
	rc := C.ndbgate_create_table(d.pool, cdb, ctab, (*C.uchar)(unsafe.Pointer(&spec[0])), C.int(len(spec)), &errBuf[0], C.int(len(errBuf)))
	if rc < 0 {
		return false, ndbclient.Errorf(ndbclient.CodeSchemaError, "create %s: %s", want.FullName(), C.GoString(&errBuf[0]))
	}
	return rc == 0, nil
}

// DropNDBTable drops database.name from the NDB dictionary; false when there
// was no such table. For tests of schema changes while serving, from a
// driver other than the serving one (see alterable).
func (d *Driver) DropNDBTable(database, name string) (dropped bool, err error) {
	if err := d.alterable(database, name); err != nil {
		return false, err
	}
	cdb, ctab := C.CString(database), C.CString(name)
	defer C.free(unsafe.Pointer(cdb))
	defer C.free(unsafe.Pointer(ctab))
	var errBuf [512]C.char
	rc := C.ndbgate_drop_table(d.pool, cdb, ctab, &errBuf[0], C.int(len(errBuf)))
	if rc < 0 {
		return false, ndbclient.Errorf(ndbclient.CodeSchemaError, "drop %s.%s: %s", database, name, C.GoString(&errBuf[0]))
	}
	return rc == 0, nil
}

// AddNDBColumn adds a nullable column of type typ (a fixed-size type) to
// database.name online, as ALTER TABLE ... ADD COLUMN ... ALGORITHM=INPLACE
// does. For tests of schema changes while serving, from a driver other than
// the serving one (see alterable).
func (d *Driver) AddNDBColumn(database, name, column string, typ ndbclient.ColumnType) error {
	if err := d.alterable(database, name); err != nil {
		return err
	}
	if !(typ >= ndbclient.TypeInt8 && typ <= ndbclient.TypeDouble || typ == ndbclient.TypeDate || typ == ndbclient.TypeYear) {
		// The shim sets a type only: no length, precision or charset.
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "add column %s to %s.%s: only integer, FLOAT, DOUBLE, DATE and YEAR columns can be added here", column, database, name)
	}
	nt, _, _, _, err := ndbTypeOf(ndbclient.Column{Name: column, Type: typ, Nullable: true})
	if err != nil {
		return err
	}
	cdb, ctab, ccol := C.CString(database), C.CString(name), C.CString(column)
	defer C.free(unsafe.Pointer(cdb))
	defer C.free(unsafe.Pointer(ctab))
	defer C.free(unsafe.Pointer(ccol))
	var errBuf [512]C.char
	if C.ndbgate_add_column(d.pool, cdb, ctab, ccol, C.int(nt), &errBuf[0], C.int(len(errBuf))) < 0 {
		return ndbclient.Errorf(ndbclient.CodeSchemaError, "add column %s to %s.%s: %s", column, database, name, C.GoString(&errBuf[0]))
	}
	return nil
}

// alterable refuses a schema change to a table this driver has described:
// the change invalidates the dictionary objects its flights use, under
// them. A serving gateway sees another driver's change through NDB's
// schema-version errors and describes the table again.
func (d *Driver) alterable(database, name string) error {
	d.mu.RLock()
	described := d.byName[database+"."+name] != nil
	d.mu.RUnlock()
	if described {
		return ndbclient.Errorf(ndbclient.CodeInvalidArgument, "%s.%s is in use by this driver: change its schema from another one", database, name)
	}
	return nil
}

func (d *Driver) info(t *ndbclient.Table) (*tableInfo, error) {
	ti, gone, err := d.lookup(t)
	if err != nil {
		return nil, err
	}
	if gone != nil {
		if time.Since(gone.at) > goneRetry {
			d.refreshLater(t) // it may have been created again
		}
		return nil, gone.err
	}
	return ti, nil
}

// described is info without the gone check: a flight that ran decodes its
// results even if a refresh marked the table gone meanwhile.
func (d *Driver) described(t *ndbclient.Table) (*tableInfo, error) {
	ti, _, err := d.lookup(t)
	return ti, err
}

func (d *Driver) lookup(t *ndbclient.Table) (ti *tableInfo, gone *goneTable, err error) {
	ti = d.tables()[t]
	if ti == nil {
		return nil, nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s.%s was not described by this driver", t.Database, t.Name)
	}
	return ti, ti.gone.Load(), nil
}

// tables is the described tables by schema; nil before the first.
func (d *Driver) tables() map[*ndbclient.Table]*tableInfo {
	if m := d.bySch.Load(); m != nil {
		return *m
	}
	return nil
}

// goneRetry is how often a table that vanished from the dictionary is looked
// up again while requests keep asking for it.
const goneRetry = 5 * time.Second

// refreshLater looks t up again in the dictionary on its own goroutine (not on
// an executor: the refresh waits for the flights under way), once at a time.
func (d *Driver) refreshLater(t *ndbclient.Table) {
	d.mu.Lock()
	ti := d.tables()[t]
	if ti == nil || d.refreshing[ti] {
		d.mu.Unlock()
		return
	}
	d.refreshing[ti] = true
	d.mu.Unlock()
	go d.refresh(ti)
}

// refresh replaces the shim's table objects of ti. The gateway's containers
// keep using ti.schema, so a new shape that moved or changed a column they
// may use marks the table gone until a restart; columns added at the end are
// fine.
func (d *Driver) refresh(ti *tableInfo) {
	_ = d.describeAgain(ti)
	d.mu.Lock()
	delete(d.refreshing, ti)
	d.mu.Unlock()
}

// describeAgain looks ti up anew and records the outcome in ti.gone (nil
// when it can be served); it returns that outcome.
func (d *Driver) describeAgain(ti *tableInfo) error {
	db, name := ti.schema.Database, ti.schema.Name
	cdb, ctab := C.CString(db), C.CString(name)
	defer C.free(unsafe.Pointer(cdb))
	defer C.free(unsafe.Pointer(ctab))
	out := make([]byte, 64<<10)
	var errBuf [512]C.char
	id := C.ndbgate_refresh(d.pool, C.int(ti.id), cdb, ctab, (*C.uchar)(unsafe.Pointer(&out[0])), C.int(len(out)), &errBuf[0], C.int(len(errBuf)))
	var gone error
	if id < 0 {
		gone = ndbclient.Errorf(ndbclient.CodeSchemaError, "%s.%s: %s", db, name, C.GoString(&errBuf[0]))
	} else if cur, err := decodeDescribe(db, name, int(id), out); err != nil {
		gone = ndbclient.Errorf(ndbclient.CodeSchemaError, "%v", err)
	} else if err := compatible(ti, cur); err != nil {
		gone = ndbclient.Errorf(ndbclient.CodeSchemaError, "%v; restart ndbgate to serve the new shape", err)
	} else {
		// A reorganisation (ALTER TABLE ... REORGANIZE PARTITION) changes the
		// partition count and where the primaries are.
		if before := int(ti.partitionCount.Load()); before != cur.schema.Partitions {
			d.log.LogAttrs(context.Background(), slog.LevelInfo, "NDB: table reorganised; routing by its new partitions",
				slog.String("table", db+"."+name), slog.Int("partitions_before", before), slog.Int("partitions", cur.schema.Partitions))
		}
		d.storeLanes(ti, cur.schema.Partitions)
		d.redescribed.Add(1)
	}
	if gone != nil {
		ti.gone.Store(&goneTable{err: gone, at: time.Now()})
	} else {
		ti.gone.Store(nil)
	}
	return gone
}

// Execute runs the batch and waits.
func (d *Driver) Execute(ctx context.Context, b *ndbclient.Batch) error {
	ch := make(chan error, 1)
	d.Submit(b, func(_ *ndbclient.Batch, err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		<-ch // the flight owns b's ops until it completes
		return ctx.Err()
	}
}

// Submit queues the flight on an executor (a bounded queue: Overloaded when
// full): a small flight on the first, a larger one on the next in turn.
// done runs on the executor's goroutine.
func (d *Driver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.closeMu.RLock()
	if d.closed.Load() {
		d.closeMu.RUnlock()
		for _, op := range b.Ops {
			op.Err = ndbclient.ErrUnavailable
		}
		done(b, ndbclient.ErrUnavailable)
		return
	}
	if e := d.loneExecutor(b.Shard); b.Lone && e.claimIdle() {
		// The caller has nothing else to do: run the flight here, with no
		// thread hand-off either way (Batch.Lone).
		bs, dones := [1]*ndbclient.Batch{b}, [1]func(*ndbclient.Batch, error){done}
		var buf [1]completion
		out := e.runOnCaller(bs[:], dones[:], buf[:0])
		d.closeMu.RUnlock()
		deliver(out)
		return
	}
	e := d.execs[0]
	e.mu.Lock()
	if len(b.Ops) >= smallFlightOps || len(e.queue) >= smallFlightsQueued {
		e.mu.Unlock()
		e = d.execs[int(d.next.Add(1))%len(d.execs)]
		e.mu.Lock()
	}
	if len(e.queue) >= executorQueueMax {
		e.mu.Unlock()
		d.closeMu.RUnlock()
		for _, op := range b.Ops {
			op.Err = ndbclient.ErrOverloaded
		}
		done(b, ndbclient.ErrOverloaded)
		return
	}
	e.queue = append(e.queue, work{b, done})
	e.mu.Unlock()
	C.ndbgate_sem_post(e.sem)
	d.closeMu.RUnlock()
}

// loneExecutor is the executor whose Ndb object a lone flight of the caller
// with metrics shard shard borrows: event loop i's (shard i+1) is executor i
// modulo the pool, so that two loops can each run their turn's flight at
// once; callers with no loop (shard 0) take the first.
func (d *Driver) loneExecutor(shard int) *executor {
	if shard > 0 {
		return d.execs[(shard-1)%len(d.execs)]
	}
	return d.execs[0]
}

// Overlaps counts flights begun on an executor that was already running one,
// on its goroutine or a lone caller's. Two at once would share one Ndb
// object, which NDB does not allow: it is 0 unless executor.busy's
// exclusion is broken, and the live tests assert it.
func (d *Driver) Overlaps() uint64 { return d.overlaps.Load() }

// claimIdle takes the executor for a flight on the caller's goroutine, if
// it has no flight running or queued.
func (e *executor) claimIdle() bool {
	e.mu.Lock()
	ok := !e.busy && !e.closed && len(e.queue) == 0
	if ok {
		e.busy = true
	}
	e.mu.Unlock()
	return ok
}

// release ends a flight run on a caller's goroutine, and wakes the executor
// for what was queued meanwhile, or to collect what the flight left owed
// (owed.go).
func (e *executor) release() {
	e.mu.Lock()
	e.busy = false
	queued := len(e.queue) > 0
	e.mu.Unlock()
	if queued || e.owedCount.Load() > 0 {
		C.ndbgate_sem_post(e.sem)
	}
}

// smallFlightOps: flights of fewer ops all go to the first executor, larger
// ones round-robin. A small flight costs little in NDB and its thread
// wake-ups dominate: one executor finds the next small flight queued as it
// finishes one, where two each sleep and wake per flight. On NDB 7.5.0 (two
// data nodes, pool 2) this gave 1.15x ops/s at pipeline 1 (1.08-1.54 over
// 5 trials) and left pipeline 16 and 100-key gets level or better (1.03x);
// bench/HISTORY.md, "Session 20".
// Past smallFlightsQueued waiting on the first executor (more flights at
// once than the default one per data node), small flights spread too.
const (
	smallFlightOps     = 8
	smallFlightsQueued = 4
)

// yieldEvery: an executor reschedules itself this often (procs.Yield). Its
// goroutine lives in cgo calls and never blocks in Go, so without it the
// runtime's monitor sees it run on one scheduling tick for 10 ms, takes its
// P during a call, and, having taken one, polls every 20 µs for the next
// millisecond and more: about 3,500 monitor wake-ups a second under load
// on NDB 7.5.0, 5 % of the gateway's CPU in 100-key gets. The epoll loops
// yield for the same reason (transport/runtime_linux.go, rule 3).
const yieldEvery = 2 * time.Millisecond

// An executor waiting for work wakes every idleWaitMillis to yield, up to
// idleWaits times in a row (100 ms): past that it is idle, and the monitor
// taking its P then costs nothing that matters.
const (
	idleWaitMillis = 5
	idleWaits      = 20
)

// executorQueueMax bounds the flights queued on one executor.
const executorQueueMax = 1024

func (e *executor) run() {
	defer e.d.running.Done()
	defer C.ndbgate_sem_free(e.sem)
	yielded, idle := time.Now(), 0
	for {
		// Owed batches: collect what NDB has answered every owedPollMillis
		// while waiting (owed.go).
		if e.owedCount.Load() > 0 {
			if C.ndbgate_sem_wait_ms(e.sem, C.int(owedPollMillis)) == 0 {
				e.collectOwed()
				if time.Since(yielded) >= yieldEvery {
					procs.Yield()
					yielded = time.Now()
				}
				continue
			}
		} else if idle < idleWaits {
			// Yield every few milliseconds, at work or waiting (yieldEvery),
			// until idle for idleWaits waits in a row: an idle executor then
			// waits without waking.
			if C.ndbgate_sem_wait_ms(e.sem, C.int(idleWaitMillis)) == 0 {
				idle++
				procs.Yield()
				yielded = time.Now()
				continue
			}
		} else {
			C.ndbgate_sem_wait(e.sem)
		}
		idle = 0
		// Run what is queued. A post may find the executor busy with a lone
		// caller's flight, which posts again when it ends if work is left:
		// so the queue is drained here, not taken one item a post.
		for {
			if time.Since(yielded) >= yieldEvery {
				procs.Yield()
				yielded = time.Now()
			}
			e.mu.Lock()
			if e.busy || len(e.queue) == 0 {
				closed := e.closed && !e.busy && len(e.queue) == 0
				e.mu.Unlock()
				if closed {
					return
				}
				break
			}
			w := e.queue[0]
			e.queue[0] = work{}
			e.queue = e.queue[1:]
			e.busy = true
			e.mu.Unlock()
			bs, dones := [1]*ndbclient.Batch{w.b}, [1]func(*ndbclient.Batch, error){w.done}
			var buf [1]completion
			out := e.runGroup(bs[:], dones[:], buf[:0])
			if e.owedCount.Load() > 0 {
				out = e.collect(false, out) // answered in this flight's polls
			}
			e.mu.Lock()
			e.busy = false
			e.mu.Unlock()
			deliver(out)
		}
	}
}

// runStateful runs ops that keep item state in a state column (state.go):
// a read before and conditional updates after may add calls to the flight's.
func (e *executor) runStateful(ops []*ndbclient.Op, now uint32) error {
	st := &e.state
	defer st.release()
	if pre := st.preReads(ops); pre != nil {
		if err := e.call(pre, nil, now); err != nil {
			return e.fail(ops, err)
		}
		if ops = st.applyPreReads(ops); len(ops) == 0 {
			return nil
		}
	}
	err := e.call(ops, st.extra, now)
	if err == nil {
		e.stateSteps(ops, now)
	}
	return err
}

// stateSteps records the state that ops' answers leave (afterFlight, from
// the state columns they read), with the conditional updates it takes.
func (e *executor) stateSteps(ops []*ndbclient.Op, now uint32) {
	st := &e.state
	st.afterFlight(ops)
	for attempt := 0; len(st.steps) > 0 && attempt < stateAttempts; attempt++ {
		// A step that fails, or that its node does not answer in time
		// (owed, its answer dropped), changes no answer: the op was served.
		if !e.callStep(st.stepOps(ops), now) || !st.afterSteps(ops) {
			break
		}
	}
}

// fail gives every op err, which the flight returns.
func (e *executor) fail(ops []*ndbclient.Op, err error) error {
	for _, op := range ops {
		op.Err = err
	}
	return err
}

// call encodes ops, makes the one cgo call, and decodes.
func (e *executor) call(ops []*ndbclient.Op, extra []stateExtra, now uint32) error {
	var err error
	e.req, err = encodeFlight(e.req[:0], ops, extra, e.d.info, now)
	if err != nil {
		for _, op := range ops {
			op.Err = err
		}
		return nil
	}
	n, err := e.execute(nil, 0)
	if err != nil {
		return e.fail(ops, err)
	}
	err = decodeResults(e.resp[:n], ops, extra, e.d.described)
	for _, t := range staleSchema(ops) {
		e.d.refreshLater(t)
	}
	return err
}

// execute makes the cgo call for the flight encodeFlight wrote into e.req,
// with nsec sections of sectionWords numbers (none: nil, 0) and wait the
// flight's wait; it returns the bytes of e.resp written.
func (e *executor) execute(sections []C.uint, wait time.Duration) (int, error) {
	bound := int(binary.LittleEndian.Uint32(e.req[len(e.req)-4:])) + len(sections)/sectionWords
	if cap(e.resp) < bound {
		e.resp = make([]byte, bound)
	}
	e.resp = e.resp[:cap(e.resp)]
	var sec *C.uint
	if len(sections) > 0 {
		sec = &sections[0]
	}
	var pollUs C.int
	var start time.Time
	if e.lone {
		pollUs, start = C.int(e.pollWin.Nanos()/int64(time.Microsecond)), time.Now()
	}
	n := C.ndbgate_execute(e.d.pool, C.int(e.conn),
		(*C.uchar)(unsafe.Pointer(&e.req[0])), C.int(len(e.req)),
		(*C.uchar)(unsafe.Pointer(&e.resp[0])), C.int(len(e.resp)), pollUs,
		C.int(wait/time.Microsecond), sec, C.int(len(sections)/sectionWords), &e.errBuf[0], C.int(len(e.errBuf)))
	if e.lone {
		e.pollWin.Observe(int64(time.Since(start)))
	}
	if n < 0 {
		return 0, ndbclient.Errorf(ndbclient.CodeInternal, "NDB shim: %s", C.GoString(&e.errBuf[0]))
	}
	return int(n), nil
}

// Partition computes a key's partition with NDB's own hash.
func (d *Driver) Partition(t *ndbclient.Table, key []ndbclient.Value) int {
	ti, err := d.info(t)
	if err != nil || len(key) == 0 || len(key) > 32 {
		return 0
	}
	sc := partitionScratchPool.Get().(*partitionScratch)
	defer partitionScratchPool.Put(sc)
	buf, lens := sc.buf[:0], sc.lens[:0]
	for i, k := range key {
		start := len(buf)
		if buf, err = appendNative(buf, &ti.cols[t.PrimaryKey[i]], k); err != nil {
			return 0
		}
		lens = append(lens, C.int(len(buf)-start))
	}
	sc.buf, sc.lens = buf, lens
	if len(buf) == 0 {
		return 0
	}
	memo := ti.partitions.Load()
	var h uint64
	if memo != nil {
		if len(lens) == 1 {
			h = memo.hash(buf)
		} else {
			sc.ints = sc.ints[:0]
			for _, n := range lens {
				sc.ints = append(sc.ints, int(n))
			}
			h = memo.hash(buf, sc.ints...)
		}
	}
	return max(d.place(ti, memo, h, buf, lens), 0)
}

// place is the partition of a key whose native columns are buf, of lengths
// lens, and whose memo hash is h (memo may be nil): the memo's answer, else
// NDB's, which the memo then keeps. -1 when NDB cannot place it.
func (d *Driver) place(ti *tableInfo, memo *partitionMemo, h uint64, buf []byte, lens []C.int) int {
	if memo != nil {
		if p := memo.get(h); p != noPartition {
			return p
		}
	}
	p := int(C.ndbgate_partition(d.pool, C.int(ti.id), (*C.uchar)(unsafe.Pointer(&buf[0])), &lens[0], C.int(len(lens))))
	if p >= 0 && memo != nil {
		memo.put(h, p)
	}
	return p
}

// Partitions computes the partitions of a batch's keys (PartitionBatcher)
// in two passes: the first encodes each key, hashes it for the memo and
// prefetches its memo entry, the second reads the entries, so that the
// batch's memo misses overlap (one miss a key was about 10 % of the
// gateway's CPU in 100-key gets). Keys the memo does not know are hashed
// by NDB, as Partition does; keys of several columns are left to Partition.
func (d *Driver) Partitions(ops []*ndbclient.Op) {
	sc := partitionScratchPool.Get().(*partitionScratch)
	defer partitionScratchPool.Put(sc)
	buf, keys := sc.buf[:0], sc.keys[:0]
	var (
		table *ndbclient.Table
		ti    *tableInfo
		memo  *partitionMemo
	)
	for i, op := range ops {
		if i > 0 && ops[i-1].TxnWithNext || op.Kind == ndbclient.OpDeleteAll || op.Table == nil || len(op.Key) != 1 {
			continue
		}
		if op.Table != table {
			table, ti, memo = op.Table, nil, nil
			if info, err := d.info(op.Table); err == nil {
				ti, memo = info, info.partitions.Load()
			}
		}
		if memo == nil {
			continue
		}
		start := len(buf)
		var err error
		if buf, err = appendNative(buf, &ti.cols[op.Table.PrimaryKey[0]], op.Key[0]); err != nil || len(buf) == start {
			buf = buf[:start]
			continue
		}
		h := memo.hash(buf[start:])
		memo.prefetch(h)
		keys = append(keys, batchKey{op: i, start: start, end: len(buf), h: h, ti: ti, memo: memo})
	}
	lens := sc.lens[:0]
	for _, k := range keys {
		lens = append(lens[:0], C.int(k.end-k.start))
		if p := d.place(k.ti, k.memo, k.h, buf[k.start:k.end], lens); p >= 0 {
			ops[k.op].SetKeyPartition(p)
		}
	}
	clear(keys) // drop the table pointers
	sc.buf, sc.lens, sc.keys = buf, lens, keys[:0]
}

// batchKey is one key of Partitions: its native bytes in the scratch buffer
// and its memo hash.
type batchKey struct {
	op, start, end int
	h              uint64
	ti             *tableInfo
	memo           *partitionMemo
}

// partitionScratch holds a key's native encoding while Partition hashes
// it: the dispatcher asks once per key, and two allocations a key showed in
// profiles of 100-key gets.
type partitionScratch struct {
	buf  []byte
	lens []C.int
	ints []int      // lens for the memo's hash
	keys []batchKey // Partitions' keys
}

var partitionScratchPool = sync.Pool{New: func() any {
	return &partitionScratch{buf: make([]byte, 0, 512), lens: make([]C.int, 0, 32), ints: make([]int, 0, 32)}
}}

// NodeOf returns the lane (0..nodes-1) of the data node holding a
// partition's primary replica, from the table's current lane map.
func (d *Driver) NodeOf(t *ndbclient.Table, partition int) int {
	ti, err := d.info(t)
	if err != nil || partition < 0 {
		return 0
	}
	lanes := ti.lanes.Load()
	if lanes == nil || partition >= len(*lanes) {
		return 0
	}
	return (*lanes)[partition]
}

// storeLanes makes ti's lane map for n partitions and publishes it.
func (d *Driver) storeLanes(ti *tableInfo, n int) {
	lanes := d.primaryLanes(ti.id, n)
	ti.lanes.Store(&lanes)
	ti.partitionCount.Store(int32(n))
	// A reorganisation moves keys between partitions: forget them all.
	ti.partitions.Store(newPartitionMemo(partitionMemoEntries))
}

// primaryLanes maps each partition to a dispatcher lane: the data nodes that
// hold primary replicas, in node-id order. NDB node ids are arbitrary (1..),
// lanes are 0..nodes-1. Made when the table is described and again when it
// is looked up after a schema change or reorganisation. After a node restart
// primaries may move, which only makes the lane a worse hint (NDB still
// routes right).
func (d *Driver) primaryLanes(id, n int) []int {
	nodes := int(d.nodes.Load())
	if n <= 0 || nodes <= 1 {
		return nil
	}
	ids := make([]int, n)
	var distinct []int
	for p := range ids {
		ids[p] = int(C.ndbgate_primary_node(d.pool, C.int(id), C.int(p)))
		if ids[p] > 0 && !slices.Contains(distinct, ids[p]) {
			distinct = append(distinct, ids[p])
		}
	}
	slices.Sort(distinct)
	lanes := make([]int, n)
	for p, id := range ids {
		if i := slices.Index(distinct, id); i >= 0 {
			lanes[p] = i % nodes
		}
	}
	return lanes
}

// Stats: Connects is 1 plus the recoveries from losing every data node;
// Items counts the rows of every described table: one small scan per table
// (each fragment returns its count), so a scrape or a stats command costs a
// round trip per table.
func (d *Driver) Stats() ndbclient.DriverStats {
	live := int(C.ndbgate_live_nodes(d.pool))
	found := uint64(C.ndbgate_expired_found(d.pool))
	var hinted, onPrimary C.ulonglong
	C.ndbgate_hint_stats(d.pool, &hinted, &onPrimary)
	d.mu.RLock()
	tables := len(d.byName)
	ids := make([]int, 0, len(d.tables()))
	partitions := 0
	for _, ti := range d.tables() {
		ids = append(ids, ti.id)
		partitions += int(ti.partitionCount.Load())
	}
	d.mu.RUnlock()
	var items uint64
	for _, id := range ids {
		var rows C.ulonglong
		var errBuf [256]C.char
		if !d.detached.Load() && C.ndbgate_row_count(d.pool, C.int(id), &rows, &errBuf[0], C.int(len(errBuf))) == 0 {
			items += uint64(rows)
		}
	}
	return ndbclient.DriverStats{Nodes: int(d.nodes.Load()), Tables: tables, Partitions: partitions, LiveNodes: live,
		Connects: 1 + d.reconnects.Load(), HintedTransactions: uint64(hinted), TransactionsOnPrimary: uint64(onPrimary),
		ConnectionsRemade: d.connectionsRemade.Load(), TablesRedescribed: d.redescribed.Load(), Items: items,
		FlightsOnCaller: d.flightsOnCaller.Load(), FlightsPolled: uint64(C.ndbgate_polled_flights(d.pool)),
		BatchesOwed: d.batchesOwed.Load(),
		// No reaper and no eviction: every expired row counted was found by a command.
		Expired: found, ExpiredOnAccess: found}
}

// WakePollGroups wakes each connection's NDB wait group that a busy poll
// made, as another thread waking its waiter would, and returns how many it
// woke. For tests, with no flight running: NDB 7.5 then returns at once
// from every later wait of that group (shim_execute.cpp, pollFor).
func (d *Driver) WakePollGroups() int { return int(C.ndbgate_wake_poll_groups(d.pool)) }

// ScanRows reads every row of t (ndbclient.RowScanner) with one
// committed-read scan on the first connection's dictionary Ndb, as Stats
// counts rows, outside the executors and their lanes. The shim writes the
// values of read into a Go buffer that holds limit rows of the columns'
// largest values, up to scanBufferStart; rows that need more are scanned
// again into a buffer of the size the shim reported (scan.go). ctx is looked
// at once, before the scan.
func (d *Driver) ScanRows(ctx context.Context, t *ndbclient.Table, read []int, limit int) ([][]ndbclient.Value, error) {
	if err := ctx.Err(); err != nil {
		return nil, ndbclient.Errorf(ndbclient.CodeTemporary, "scan of %s: %v", t.FullName(), err)
	}
	d.closeMu.RLock() // Close frees the pool
	defer d.closeMu.RUnlock()
	if d.closed.Load() {
		return nil, ndbclient.ErrUnavailable
	}
	if d.detached.Load() {
		return nil, ndbclient.Errorf(ndbclient.CodeUnavailable, "scan of %s: every data node was lost %s ago; reconnecting",
			t.FullName(), time.Since(time.Unix(0, d.detachedAt.Load())).Round(time.Second))
	}
	ti, err := d.info(t)
	if err != nil {
		return nil, err
	}
	cols, err := scanColumns(t, ti, read)
	if err != nil {
		return nil, err
	}
	var colp *C.ushort
	if len(cols) > 0 {
		colp = (*C.ushort)(unsafe.Pointer(&cols[0]))
	}
	bound := scanBound(ti.cols, read, limit)
	size := firstScanBuffer(bound)
	for attempt := 1; ; attempt++ {
		buf := make([]byte, size)
		var outlen, nrows C.int
		var ndbErr [3]C.int
		var errBuf [256]C.char
		rc := C.ndbgate_scan_rows(d.pool, C.int(ti.id), colp, C.int(len(cols)), C.int(scanLimit(limit)),
			(*C.uchar)(unsafe.Pointer(&buf[0])), C.int(len(buf)), &outlen, &nrows, &ndbErr[0], &errBuf[0], C.int(len(errBuf)))
		switch rc {
		case C.NDBGATE_SCAN_OK:
			return decodeScanRows(buf[:int(outlen)], ti.cols, read, int(nrows))
		case C.NDBGATE_SCAN_TOO_MANY:
			return nil, ndbclient.Errorf(ndbclient.CodeTooLarge, "table %s has more than %d rows", t.FullName(), limit)
		case C.NDBGATE_SCAN_SHORT:
			if attempt == scanAttempts {
				return nil, ndbclient.Errorf(ndbclient.CodeTemporary, "scan of %s: its rows grew past each of %d buffers (%d bytes needed)",
					t.FullName(), scanAttempts, int(outlen))
			}
			size = nextScanBuffer(int(outlen), bound)
		default:
			err := mapError(int(ndbErr[0]), uint8(ndbErr[1]), uint8(ndbErr[2]), fmt.Sprintf("scan of %s: %s", t.FullName(), C.GoString(&errBuf[0])))
			again, err := staleError(t, err)
			if again {
				d.refreshLater(t)
			}
			return nil, err
		}
	}
}

// sequenceCache is how many values of a table's sequence the driver
// reserves from NDB at a time, as ndbmemcache does (QueryPlan.cc): a round
// trip per ten values, and at most ten skipped when the driver closes or a
// table is described again.
const sequenceCache = 10

// NextAutoIncrement takes the next value of t's NDB auto-increment sequence
// (ndbclient.Sequencer), the one mysqld's AUTO_INCREMENT column and
// ndbmemcache draw from, with Ndb::getAutoIncrementValue on the first
// connection's dictionary Ndb, as ScanRows scans. The sequence hands out
// no value twice, but a range reserved is not told of a value mysqld
// inserted explicitly meanwhile, as in ndbmemcache. NDB reports an ALTER
// (copying ones too: Temporary until the table is described again) but not
// another client's drop, and the sequence outlives its table: values keep
// coming until an op on the table fails. ctx is looked at once, before;
// NDB bounds the wait itself (a synchronous execute).
func (d *Driver) NextAutoIncrement(ctx context.Context, t *ndbclient.Table) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, ndbclient.Errorf(ndbclient.CodeTemporary, "auto-increment of %s: %v", t.FullName(), err)
	}
	d.closeMu.RLock() // Close frees the pool
	defer d.closeMu.RUnlock()
	if d.closed.Load() {
		return 0, ndbclient.ErrUnavailable
	}
	if d.detached.Load() {
		return 0, ndbclient.Errorf(ndbclient.CodeUnavailable, "auto-increment of %s: every data node was lost %s ago; reconnecting",
			t.FullName(), time.Since(time.Unix(0, d.detachedAt.Load())).Round(time.Second))
	}
	ti, err := d.info(t)
	if err != nil {
		return 0, err
	}
	// NDB makes a table's sequence only with an AUTO_INCREMENT column; one
	// left by a dropped table of the same id may still be there.
	if !slices.ContainsFunc(ti.schema.Columns, func(c ndbclient.Column) bool { return c.AutoIncrement }) {
		return 0, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s has no AUTO_INCREMENT column, so no sequence", t.FullName())
	}
	var v C.ulonglong
	var ndbErr [3]C.int
	var errBuf [256]C.char
	if C.ndbgate_next_auto_increment(d.pool, C.int(ti.id), C.uint(sequenceCache), &v, &ndbErr[0], &errBuf[0], C.int(len(errBuf))) != 0 {
		err := mapError(int(ndbErr[0]), uint8(ndbErr[1]), uint8(ndbErr[2]), fmt.Sprintf("auto-increment of %s: %s", t.FullName(), C.GoString(&errBuf[0])))
		again, err := staleError(t, err)
		if again {
			d.refreshLater(t)
		}
		return 0, err
	}
	return uint64(v), nil
}

// NodeID is the node id of the pool's first cluster connection, an API
// node (ndbclient.NodeIdentifier); 0 once closed.
func (d *Driver) NodeID() int {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed.Load() {
		return 0
	}
	return int(C.ndbgate_node_id(d.pool))
}

func (d *Driver) Ready() error {
	if d.detached.Load() {
		return ndbclient.Errorf(ndbclient.CodeUnavailable, "every data node was lost %s ago; reconnecting",
			time.Since(time.Unix(0, d.detachedAt.Load())).Round(time.Second))
	}
	var errBuf [256]C.char
	if C.ndbgate_ready(d.pool, &errBuf[0], C.int(len(errBuf))) != 0 {
		return ndbclient.Errorf(ndbclient.CodeUnavailable, "%s", C.GoString(&errBuf[0]))
	}
	return nil
}

// wedgedAfter is how long data nodes may be reachable again while the
// driver still cannot attach to them before Health reports it: a restart of
// the process would then help, which liveness probes are for.
const wedgedAfter = time.Minute

// Health reports a driver that cannot recover by itself.
func (d *Driver) Health() error {
	if back := d.backAt.Load(); d.detached.Load() && back != 0 && time.Since(time.Unix(0, back)) > wedgedAfter {
		return ndbclient.Errorf(ndbclient.CodeUnavailable, "data nodes are reachable again but the driver could not attach for %s",
			time.Since(time.Unix(0, back)).Round(time.Second))
	}
	return nil
}

// watchInterval is how often watch looks at the cluster.
const watchInterval = 100 * time.Millisecond

// resumeAnyway bounds how long a reattach waits for every table to be
// described again before it serves with those that failed marked gone.
const resumeAnyway = 30 * time.Second

// watch follows the cluster. When every data node is lost, the NDB API
// reconnects only once its global dictionary cache is empty, so the driver
// lets go of every NDB object it holds (flights fail at once, Unavailable).
// Once data nodes are back it makes new ones and describes each table again.
func (d *Driver) watch() {
	defer d.watching.Done()
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stopWatch:
			return
		case <-t.C:
		}
		d.checkCluster()
	}
}

func (d *Driver) checkCluster() {
	live := int(C.ndbgate_live_nodes(d.pool))
	if !d.detached.Load() {
		if live > 0 {
			return
		}
		C.ndbgate_detach(d.pool)
		d.detachedAt.Store(time.Now().UnixNano())
		d.backAt.Store(0)
		d.detached.Store(true)
		d.log.LogAttrs(context.Background(), slog.LevelWarn, "NDB: every data node lost; released the dictionary objects so the API can reconnect")
		return
	}
	if live == 0 {
		return
	}
	if d.backAt.Load() == 0 {
		d.backAt.Store(time.Now().UnixNano())
	}
	var errBuf [256]C.char
	if C.ndbgate_reattach(d.pool, &errBuf[0], C.int(len(errBuf))) != 0 {
		return
	}
	d.mu.RLock()
	tables := make([]*tableInfo, 0, len(d.tables()))
	for _, ti := range d.tables() {
		tables = append(tables, ti)
	}
	d.mu.RUnlock()
	giveUp := time.Since(time.Unix(0, d.backAt.Load())) > resumeAnyway
	for _, ti := range tables {
		if err := d.describeAgain(ti); err != nil && !giveUp {
			return // the dictionary may not answer yet: try again next tick
		}
	}
	C.ndbgate_resume(d.pool)
	d.detached.Store(false)
	d.reconnects.Add(1)
	d.log.LogAttrs(context.Background(), slog.LevelInfo, "NDB: data nodes back; attached again",
		slog.Int("live_data_nodes", live), slog.Duration("unavailable_for", time.Since(time.Unix(0, d.detachedAt.Load()))))
}

// Close refuses new flights, lets the executors run those queued, and frees
// the pool. It does not hold closeMu while the executors finish: a
// flight's completion may submit the next flight of a node's lane, which
// must be refused (ErrUnavailable), not wait for Close. Held, it made a
// shutdown after a flood of pipelined gets wait forever (session 50).
func (d *Driver) Close() error {
	d.closing.Lock()
	defer d.closing.Unlock()
	d.closeMu.Lock()
	if d.closed.Swap(true) {
		d.closeMu.Unlock()
		return nil
	}
	close(d.stopWatch)
	for _, e := range d.execs {
		e.mu.Lock()
		e.closed = true // queued flights still run
		e.mu.Unlock()
		C.ndbgate_sem_post(e.sem)
	}
	d.closeMu.Unlock()
	d.watching.Wait()
	d.running.Wait()
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	for _, e := range d.execs {
		e.abandonOwed()
	}
	d.releaseProcs()
	C.ndbgate_close(d.pool)
	return nil
}

var (
	_ ndbclient.Driver         = (*Driver)(nil)
	_ ndbclient.RowScanner     = (*Driver)(nil)
	_ ndbclient.NodeIdentifier = (*Driver)(nil)
	_ ndbclient.Sequencer      = (*Driver)(nil)
)

// String is for logs.
func (d *Driver) String() string {
	return fmt.Sprintf("ndbapi(%d connections, %d data nodes)", len(d.execs), d.nodes.Load())
}
