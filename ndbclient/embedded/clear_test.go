package embedded

import (
	"fmt"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// TestDetachMovesEveryRowField: detach and putBack (clear.go) move a
// partition's rows field by field. A field added to partition must be
// placed here: if it holds row state, they must move it too.
func TestDetachMovesEveryRowField(t *testing.T) {
	moved := map[string]bool{"idx": true, "slots": true, "freeSlot": true, "lruHead": true, "lruTail": true,
		"arena": true, "charged": true, "metaCharged": true, "items": true, "tailAge": true}
	notRows := map[string]bool{"mu": true, "e": true, "t": true, "num": true, "gid": true, "build": true, "cat": true,
		"evac": true, "cands": true, "rooms": true, "lb": true, "logged": true, "_": true}
	for f := range reflect.TypeFor[partition]().Fields() {
		assert.True(t, moved[f.Name] || notRows[f.Name],
			"partition.%s is new: if it holds rows, detach and putBack (clear.go) must move it; then list it here", f.Name)
	}
}

// TestDetachAndPutBack: rows swapped out and put back are all there, and
// cost what they did; put back over a row written meanwhile, both stay.
func TestDetachAndPutBack(t *testing.T) {
	e := newEngine(t, Config{Partitions: 1})
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	for i := range 50 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: fmt.Sprint("v", i)})
	}
	want, used := dump(e), e.used.Load()
	tt, err := e.tableOf(tbl)
	require.NoError(t, err)
	p := tt.parts[0]
	now := e.now()

	p.mu.Lock()
	r := p.detach()
	p.mu.Unlock()
	assert.Empty(t, dump(e))
	assert.Equal(t, used, e.used.Load(), "detached rows are charged until freed")
	p.mu.Lock()
	p.putBack(&r, now)
	p.mu.Unlock()
	assert.Equal(t, want, dump(e))
	assert.Equal(t, used, e.used.Load())
	checkEngine(t, e) // the index hint follows the index back

	p.mu.Lock()
	r = p.detach()
	p.mu.Unlock()
	put(t, e, tbl, "k1", item{value: "newer"})
	put(t, e, tbl, "extra", item{value: "x"})
	p.mu.Lock()
	p.putBack(&r, now)
	p.mu.Unlock()
	v, ok := getValue(t, e, tbl, "k1")
	assert.True(t, ok)
	assert.Equal(t, "newer", v, "a row written after the detach stays")
	_, ok = getValue(t, e, tbl, "extra")
	assert.True(t, ok)
	assert.Len(t, dump(e), 51)
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl})
	assert.Zero(t, e.used.Load(), "memory left after the clear")
	assert.Zero(t, e.pageBytes.Load(), "pages left after the clear")
}

// syncGate makes a log file's next fsync, once armed, wait: entered gets a
// value when it starts, and it returns what release gives it (an error, or
// nil to fsync).
type syncGate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan error
}

func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}, 1), release: make(chan error, 1)}
}

func (g *syncGate) arm() { g.mu.Lock(); g.armed = true; g.mu.Unlock() }

func (g *syncGate) hook(f logFile) logFile { return &gatedFile{logFile: f, g: g} }

type gatedFile struct {
	logFile
	g *syncGate
}

func (f *gatedFile) Sync() error {
	f.g.mu.Lock()
	armed := f.g.armed
	f.g.armed = false
	f.g.mu.Unlock()
	if armed {
		f.g.entered <- struct{}{}
		if err := <-f.g.release; err != nil {
			return err
		}
	}
	return f.logFile.Sync()
}

// submitted submits ops as one batch; the channel gets the batch once it
// completes. Submit itself returns once the batch has applied.
func submitted(e *Engine, ops ...*ndbclient.Op) chan *ndbclient.Batch {
	ch := make(chan *ndbclient.Batch, 1)
	e.Submit(&ndbclient.Batch{Ops: ops}, func(b *ndbclient.Batch, _ error) { ch <- b })
	return ch
}

// notBlocked runs f and fails the test if it has not returned within a
// generous bound (it would wait forever behind a held lock), so that the
// test fails instead of hanging.
func notBlocked(t *testing.T, what string, f func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		t.Errorf("%s is blocked while the clear's fsync runs", what)
		return false
	}
}

// gated is an engine on a data dir with fsync always whose fsyncs the test
// holds and releases (gate), with a memcache table, and what reopens it.
type gated struct {
	e     *Engine
	gate  *syncGate
	tbl   *ndbclient.Table
	dir   string
	clock *testClock
	logs  *logBuffer
}

func gatedAlways(t *testing.T) gated {
	g := gated{gate: newSyncGate(), dir: memDir(t), clock: newClock(), logs: &logBuffer{}}
	cfg := persistCfg(g.dir, FsyncAlways, g.clock, g.logs)
	cfg.logFileHook = g.gate.hook
	g.e = openT(t, cfg)
	g.tbl = mustCreate(t, g.e, memcacheTable("items", 64))
	return g
}

// TestPersistClearDoesNotHoldTheTableThroughFsync: with fsync always, while
// a delete_all's frame is being fsynced, other clients read and write the
// table (the old delete_all held every partition until the fsync was done).
// A read that saw the clear completes only once the clear is durable, so
// that a crash cannot take back what it returned.
func TestPersistClearDoesNotHoldTheTableThroughFsync(t *testing.T) {
	g := gatedAlways(t)
	e, gate, tbl, dir, clock, logs := g.e, g.gate, g.tbl, g.dir, g.clock, g.logs
	for i := range 40 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: "old"})
	}
	gate.arm()
	flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
	flushed := submitted(e, flush)
	<-gate.entered // the clear's frame is being fsynced

	var read, written chan *ndbclient.Batch
	ok := notBlocked(t, "a read of the table", func() {
		read = submitted(e, readOp(tbl, "k7", colValue))
	}) && notBlocked(t, "a write to the table", func() {
		written = submitted(e, writeOp(ndbclient.OpWrite, tbl, "after", set(colValue, ndbclient.String("new"))))
	})
	if ok {
		select {
		case <-read:
			t.Errorf("the read completed before the clear it saw was durable")
		case <-time.After(50 * time.Millisecond):
		}
	}
	gate.release <- nil
	if !ok {
		return
	}
	assert.Equal(t, ndbclient.CodeNotFound, codeOf((<-read).Ops[0]), "the read sees the clear (it applied before its fsync)")
	b := <-flushed
	require.NoError(t, b.Ops[0].Err)
	assert.EqualValues(t, 40, b.Ops[0].Affected)
	require.NoError(t, (<-written).Ops[0].Err)
	want := dump(e)
	require.Len(t, want, 1)
	e.crash()
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	assert.Equal(t, want, dump(e2))
}

// TestPersistFailedClearPutsRowsBack: a delete_all whose fsync fails is
// refused and every row is back, with writes that followed it (and failed
// with it) undone; a restart agrees. With everysec, a clear the failing log
// refuses removes nothing.
func TestPersistFailedClearPutsRowsBack(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	gate := newSyncGate()
	cfg := persistCfg(dir, FsyncAlways, clock, logs)
	cfg.logFileHook = gate.hook
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	other := mustCreate(t, e, memcacheTable("other", 64))
	for i := range 40 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: fmt.Sprint("v", i)})
	}
	put(t, e, other, "o", item{value: "kept"})
	want, used := dump(e), e.used.Load()

	gate.arm()
	flushed := submitted(e, &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl})
	<-gate.entered
	// Applied after the clear, before its fsync fails: they go with it.
	var over, added chan *ndbclient.Batch
	ok := notBlocked(t, "a write to the table", func() {
		over = submitted(e, writeOp(ndbclient.OpWrite, tbl, "k3", set(colValue, ndbclient.String("overwritten"))))
		added = submitted(e, writeOp(ndbclient.OpInsert, tbl, "added", set(colValue, ndbclient.String("new"))))
	})
	gate.release <- syscall.EIO
	if !ok {
		return
	}
	for _, ch := range []chan *ndbclient.Batch{flushed, over, added} {
		b := <-ch
		assert.Equal(t, ndbclient.CodeStorage, codeOf(b.Ops[0]), "%v", b.Ops[0].Kind)
		assert.Zero(t, b.Ops[0].Affected)
	}
	assert.Equal(t, want, dump(e), "a refused clear lost or changed rows")
	assert.Equal(t, used, e.used.Load())

	require.Eventually(t, func() bool { return !e.wal.failing() }, 5*time.Second, time.Millisecond)
	put(t, e, other, "later", item{value: "y"})
	want = dump(e)
	e.crash()
	e2 := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	assert.Equal(t, want, dump(e2))

	// everysec: the log fails, the clear is refused before it applies.
	disk := &diskSwitch{}
	e2.crash()
	cfg = persistCfg(dir, FsyncEverySec, clock, logs)
	cfg.logFileHook = disk.hook
	e3 := openT(t, cfg)
	disk.set(true)
	require.Eventually(t, func() bool {
		run(t, e3, writeOp(ndbclient.OpWrite, tbl, "k0", set(colValue, ndbclient.String("v0"))))
		return e3.wal.failing()
	}, 5*time.Second, time.Millisecond)
	flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
	run(t, e3, flush)
	assert.Equal(t, ndbclient.CodeStorage, codeOf(flush))
	assert.Equal(t, want, dump(e3))
}

// TestPersistReadWaitsForTheChangeItSaw: with fsync always, a read that
// sees a change not yet durable completes once the change is durable, and
// fails with it when its fsync fails and the change is rolled back: a crash
// or a failing disk can never take back what a read returned. (Found by
// tests/lin: reads saw an incr still in flight, then a kill -9 lost it.)
func TestPersistReadWaitsForTheChangeItSaw(t *testing.T) {
	g := gatedAlways(t)
	e, gate, tbl := g.e, g.gate, g.tbl
	put(t, e, tbl, "k", item{value: "durable"})

	for _, step := range []struct {
		value    string
		fsyncErr error
	}{{"first", nil}, {"second", syscall.EIO}} {
		gate.arm()
		wrote := submitted(e, writeOp(ndbclient.OpWrite, tbl, "k", set(colValue, ndbclient.String(step.value))))
		<-gate.entered // the write's frame is being fsynced
		read := submitted(e, readOp(tbl, "k", colValue))
		select {
		case b := <-read:
			gate.release <- nil
			t.Fatalf("the read completed (%v) before the change it saw was durable", b.Ops[0].Err)
		case <-time.After(50 * time.Millisecond):
		}
		gate.release <- step.fsyncErr
		w, r := (<-wrote).Ops[0], (<-read).Ops[0]
		if step.fsyncErr == nil {
			require.NoError(t, w.Err)
			require.NoError(t, r.Err)
			assert.Equal(t, step.value, r.Row[0].Str())
			continue
		}
		assert.Equal(t, ndbclient.CodeStorage, codeOf(w), "the write's fsync failed")
		assert.Equal(t, ndbclient.CodeStorage, codeOf(r), "the read saw a change that was rolled back")
		require.Eventually(t, func() bool { return !e.wal.failing() }, 5*time.Second, time.Millisecond)
		v, ok := getValue(t, e, tbl, "k")
		assert.True(t, ok)
		assert.Equal(t, "first", v, "the rolled-back write left the last durable value")
	}

	// A read of a partition with nothing pending completes inline.
	done := false
	e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k", colValue)}}, func(*ndbclient.Batch, error) { done = true })
	assert.True(t, done, "a read of durable rows waited")
}
