package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// logBuffer collects an engine's slog output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// persistCfg is an engine on dir with the test clock and a captured log.
func persistCfg(dir string, mode FsyncMode, clock *testClock, logs *logBuffer) Config {
	return Config{DataDir: dir, Fsync: mode, Now: clock.now, ReapInterval: -1, Partitions: 4,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), retryAfter: 20 * time.Millisecond}
}

// memDir is a temporary dir on tmpfs where there is one (/dev/shm), where
// fsync costs nothing: for tests that open hundreds of engines.
func memDir(t testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "ndbgate-test-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func openT(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.crash() })
	return e
}

// crash stops e as kill -9 would: frames the writer has not written are
// lost, what it wrote stays (the page cache outlives the process).
func (e *Engine) crash() {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		close(e.stop)
		e.bg.Wait()
		if e.wal != nil {
			e.wal.request(reqAbandon)
			_ = e.wal.dir.close()
		}
	})
}

// dump is every live row of every table, "db.table/key" -> the row bytes and
// item state.
func dump(e *Engine) map[string]string { return dumpMasked(e, 0xff) }

// dumpWritten is dump without the state reads set (fetched, token), which
// the log does not keep.
func dumpWritten(e *Engine) map[string]string { return dumpMasked(e, stStale) }

func dumpMasked(e *Engine, stateMask uint8) map[string]string {
	out := map[string]string{}
	now := e.now()
	for _, t := range *e.tables.Load() {
		for _, p := range t.parts {
			p.mu.Lock()
			for s := range p.slots {
				if sl := &p.slots[s]; sl.size != 0 && !p.expired(int32(s), now) {
					row := p.row(int32(s))
					out[t.schema.FullName()+"/"+string(rowKey(row))] = fmt.Sprintf("%x state=%d", row, sl.state&stateMask)
				}
			}
			p.mu.Unlock()
		}
	}
	return out
}

// mixedOps changes tbl and other in every way an op can, and checks each op.
func mixedOps(t *testing.T, e *Engine, tbl, other *ndbclient.Table, clock *testClock) {
	now := uint64(clock.now())
	for i := range 20 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: strings.Repeat("v", i), flags: uint64(i), cas: uint64(100 + i), math: u64(uint64(i))})
	}
	put(t, e, tbl, "ttl-long", item{value: "stays", expire: now + 1000})
	put(t, e, tbl, "ttl-short", item{value: "goes", expire: now + 5})
	del := writeOp(ndbclient.OpDelete, tbl, "k3")
	ins := writeOp(ndbclient.OpInsert, tbl, "new", set(colValue, ndbclient.String("inserted")))
	incr := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("k5"), AddColumn: colMath, Delta: 37}
	decr := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("k6"), AddColumn: colMath, Delta: 100, Subtract: true}
	vivify := &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("counter"), AddColumn: colMath, Create: true, Initial: 9}
	app := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key("k7"), AppendColumn: colValue, Data: []byte("-tail")}
	pre := &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key("k8"), AppendColumn: colValue, Data: []byte("head-"), Prepend: true}
	cas := &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: tbl, Key: key("k9"), CondColumn: colCas, CondValue: ndbclient.Uint(109),
		Set: []ndbclient.ColumnValue{set(colValue, ndbclient.String("swapped")), set(colCas, ndbclient.Uint(999))}}
	touch := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: key("k10"), KeepState: true,
		Set: []ndbclient.ColumnValue{set(colExpire, ndbclient.Uint(now+5))}}
	stale := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: key("k11"), MarkStale: true, KeepState: true,
		Set: []ndbclient.ColumnValue{set(colCas, ndbclient.Uint(5))}}
	run(t, e, del, ins, incr, decr, vivify, app, pre, cas, touch, stale)
	for _, op := range []*ndbclient.Op{del, ins, incr, decr, vivify, app, pre, cas, touch, stale} {
		require.NoError(t, op.Err, "%s %v", op.Kind, op.Key)
	}
	// A transaction, and one that fails (nothing of it may come back).
	a := writeOp(ndbclient.OpWrite, tbl, "txn-a", set(colValue, ndbclient.String("A")))
	a.TxnWithNext = true
	b := writeOp(ndbclient.OpWrite, tbl, "txn-b", set(colValue, ndbclient.String("B")))
	run(t, e, a, b)
	require.NoError(t, a.Err)
	c := writeOp(ndbclient.OpWrite, tbl, "txn-c", set(colValue, ndbclient.String("C")))
	c.TxnWithNext = true
	dup := writeOp(ndbclient.OpInsert, tbl, "k1")
	run(t, e, c, dup)
	require.Equal(t, ndbclient.CodeDuplicate, codeOf(dup))
	// delete_all, then rows written after it.
	for i := range 10 {
		put(t, e, other, fmt.Sprint("gone", i), item{value: "x"})
	}
	flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: other}
	run(t, e, flush)
	require.NoError(t, flush.Err)
	require.EqualValues(t, 10, flush.Affected)
	put(t, e, other, "after-flush", item{value: "y"})
}

func TestPersistRestartKeepsEverything(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			e := openT(t, persistCfg(dir, mode, clock, logs))
			tbl := mustCreate(t, e, memcacheTable("items", 1024))
			other := mustCreateKept(t, e, "other", 64)
			mixedOps(t, e, tbl, other, clock)
			want := dump(e)
			require.Contains(t, want, "test.items/\x02k7")
			require.NoError(t, e.Close())

			e2 := openT(t, persistCfg(dir, mode, clock, logs))
			assert.Equal(t, want, dump(e2))
			assert.True(t, e2.Restored(memcacheTable("items", 1024)))
			v, ok := getValue(t, e2, tbl, "k7")
			assert.True(t, ok)
			assert.Equal(t, strings.Repeat("v", 7)+"-tail", v)
			_, ok = getValue(t, e2, tbl, "txn-c")
			assert.False(t, ok, "a failed transaction's write came back")

			// Items that expire while the engine is down are not served.
			require.NoError(t, e2.Close())
			clock.advance(10)
			e3 := openT(t, persistCfg(dir, mode, clock, logs))
			got := dump(e3)
			assert.NotContains(t, got, "test.items/\tttl-short")
			assert.NotContains(t, got, "test.items/\x03k10") // touched to expire
			assert.Contains(t, got, "test.items/\bttl-long")
			assert.Len(t, got, len(want)-2)
		})
	}
}

func TestPersistCrashKeepsAcknowledgedWrites(t *testing.T) {
	for _, snapshotEvery := range []int64{0, 2048} {
		t.Run(fmt.Sprint("snapshot_log_size=", snapshotEvery), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			cfg := persistCfg(dir, FsyncAlways, clock, logs)
			cfg.SnapshotLogSize = snapshotEvery
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 1024))
			other := mustCreateKept(t, e, "other", 64)
			mixedOps(t, e, tbl, other, clock)
			// Concurrent writers: each Execute returns once its change is
			// durable, so everything is on disk when they are done.
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for i := range 200 {
						k := fmt.Sprintf("w%d-%d", g, rng.IntN(50))
						if i%5 == 4 {
							run(t, e, writeOp(ndbclient.OpDelete, tbl, k))
						} else {
							put(t, e, tbl, k, item{value: fmt.Sprint(i), cas: uint64(i)})
						}
					}
				})
			}
			wg.Wait()
			want := dump(e)
			e.crash()
			e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			assert.Equal(t, want, dump(e2))
			if snapshotEvery > 0 {
				_, snaps, err := e2.wal.dir.files()
				require.NoError(t, err)
				assert.NotEmpty(t, snaps, "the log-size trigger took no snapshot")
				assert.Contains(t, logs.String(), "snapshot written")
			}
		})
	}
}

// TestPersistTornLogEveryOffset cuts the log at every byte and flips every
// byte of it, and checks that each time the engine starts, says where it
// cut, and holds exactly the writes whose frames end before the damage.
// Where they end comes from the file's size after each acknowledged write,
// not from the decoder.
func TestPersistTornLogEveryOffset(t *testing.T) {
	src, clock, logs := memDir(t), newClock(), &logBuffer{}
	e := openT(t, persistCfg(src, FsyncAlways, clock, logs))
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	logPath := filepath.Join(src, e.wal.dir.logName(e.wal.seq))
	size := func() int64 {
		st, err := os.Stat(logPath)
		require.NoError(t, err)
		return st.Size()
	}
	created := size() // the create frame is durable before CreateTable returns
	var ends []int64
	for i := range 6 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: strings.Repeat("x", i*3)})
		ends = append(ends, size())
	}
	e.crash()
	orig, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.EqualValues(t, ends[len(ends)-1], len(orig))

	// frameStart is where the frame holding byte pos begins (0: the header).
	bounds := append([]int64{fileHeaderLen, created}, ends...)
	frameStart := func(pos int64) int64 {
		start := int64(0)
		for _, b := range bounds {
			if b <= pos {
				start = b
			}
		}
		return start
	}
	check := func(t *testing.T, damaged []byte, pos int64, expectCut bool) {
		dir := memDir(t)
		path := filepath.Join(dir, filepath.Base(logPath))
		require.NoError(t, os.WriteFile(path, damaged, 0o600))
		logs := &logBuffer{}
		e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
		if expectCut {
			assert.Contains(t, logs.String(), "cutting it after the last good record")
			assert.Contains(t, logs.String(), "file="+path)
			assert.Contains(t, logs.String(), fmt.Sprintf("offset=%d dropped_bytes=%d", frameStart(pos), int64(len(damaged))-frameStart(pos)))
		} else {
			assert.NotContains(t, logs.String(), "cutting")
		}
		want := 0
		for _, end := range ends {
			if end <= pos {
				want++
			}
		}
		if frameStart(pos) < created {
			assert.Empty(t, *e.tables.Load(), "a table from a damaged frame")
			return
		}
		got := dump(e)
		assert.Len(t, got, want)
		for i := range want {
			assert.Contains(t, got, fmt.Sprintf("test.items/\x02k%d", i))
		}
		// The cut is for good: a second start finds a clean log.
		e.crash()
		logs2 := &logBuffer{}
		e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs2))
		assert.Len(t, dump(e2), want)
		assert.NotContains(t, logs2.String(), "cutting")
	}
	// Every byte but those deep inside the create frame (its JSON), of which
	// every 16th.
	var positions []int64
	for pos := range int64(len(orig)) {
		if pos < fileHeaderLen+16 || pos >= created-16 || pos%16 == 0 {
			positions = append(positions, pos)
		}
	}
	for _, cut := range positions {
		t.Run(fmt.Sprint("cut at ", cut), func(t *testing.T) {
			check(t, orig[:cut], cut, cut < fileHeaderLen || frameStart(cut) != cut)
		})
	}
	for _, pos := range positions {
		t.Run(fmt.Sprint("flip byte ", pos), func(t *testing.T) {
			damaged := slices.Clone(orig)
			damaged[pos] ^= 0x40
			check(t, damaged, pos, true)
		})
	}
}

func TestPersistCorruptSnapshotIsAnError(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	for i := range 50 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: "v"})
	}
	require.NoError(t, e.Close())
	_, snaps, err := (&dataDir{path: dir}).files()
	require.NoError(t, err)
	require.Len(t, snaps, 1)
	path := filepath.Join(dir, (&dataDir{}).snapName(snaps[0]))
	orig, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"flipped byte", func() []byte { b := slices.Clone(orig); b[len(b)/2] ^= 1; return b }()},
		{"truncated", orig[:len(orig)-3]},
		{"end record missing", orig[:len(orig)-frameHeaderLen-3]},
		{"bad header", append([]byte("NOTASNAP"), orig[8:]...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, c.data, 0o600))
			_, err := Open(persistCfg(dir, FsyncEverySec, clock, logs))
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "is corrupt at offset")
		})
	}
	// Put back, it loads.
	require.NoError(t, os.WriteFile(path, orig, 0o600))
	e2 := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	assert.Len(t, dump(e2), 50)
}

func TestPersistDataDirInUseAndShapeChecked(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	mustCreate(t, e, memcacheTable("items", 64))
	_, err := Open(persistCfg(dir, FsyncEverySec, clock, logs))
	require.ErrorContains(t, err, "in use by another ndbgate")
	require.NoError(t, e.Close())

	e2 := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	_, err = e2.CreateTable(memcacheTable("items", 128)) // item_size_max changed
	require.Error(t, err)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	assert.Contains(t, err.Error(), "in data dir "+dir)
	assert.Contains(t, err.Error(), "VARBINARY(64)")
	got, err := e2.CreateTable(memcacheTable("items", 64))
	require.NoError(t, err)
	assert.Equal(t, "items", got.Name)
}

// failingFile fails writes (and fsyncs) while fail is set, after writing
// part of what it was given, as a full disk does.
type failingFile struct {
	logFile
	mu   *sync.Mutex
	fail *bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	fail := *f.fail
	f.mu.Unlock()
	if fail {
		n, _ := f.logFile.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return f.logFile.Write(p)
}

func (f *failingFile) Sync() error {
	f.mu.Lock()
	fail := *f.fail
	f.mu.Unlock()
	if fail {
		return syscall.EIO
	}
	return f.logFile.Sync()
}

type diskSwitch struct {
	mu   sync.Mutex
	full bool
}

func (d *diskSwitch) set(full bool) { d.mu.Lock(); d.full = full; d.mu.Unlock() }

func (d *diskSwitch) hook(f logFile) logFile {
	return &failingFile{logFile: f, mu: &d.mu, fail: &d.full}
}

func TestPersistFullDiskRefusesAndKeepsState(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncAlways, FsyncEverySec, FsyncNo} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			disk := &diskSwitch{}
			cfg := persistCfg(dir, mode, clock, logs)
			cfg.logFileHook = disk.hook
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			put(t, e, tbl, "before", item{value: "kept"})
			disk.set(true)
			// The first write after the disk filled: with always it fails
			// itself; otherwise it is accepted, and the writer's failure
			// refuses the ones after it.
			var failed *ndbclient.Op
			require.Eventually(t, func() bool {
				op := writeOp(ndbclient.OpWrite, tbl, "during", set(colValue, ndbclient.String("refused")))
				run(t, e, op)
				if op.Err != nil {
					failed = op
					return true
				}
				return false
			}, 5*time.Second, time.Millisecond)
			assert.Equal(t, ndbclient.CodeStorage, codeOf(failed))
			assert.Contains(t, failed.Err.Error(), "data dir "+dir)
			if mode == FsyncAlways {
				_, ok := getValue(t, e, tbl, "during")
				assert.False(t, ok, "a write that failed to log is in memory")
			}
			v, ok := getValue(t, e, tbl, "before")
			assert.True(t, ok)
			assert.Equal(t, "kept", v)
			del := writeOp(ndbclient.OpDelete, tbl, "before")
			run(t, e, del)
			assert.Equal(t, ndbclient.CodeStorage, codeOf(del))
			flush := &ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}
			run(t, e, flush)
			assert.Equal(t, ndbclient.CodeStorage, codeOf(flush))
			_, err := e.CreateTable(memcacheTable("later", 64))
			assert.Equal(t, ndbclient.CodeStorage, ndbclient.CodeOf(err))
			assert.Contains(t, logs.String(), "the log cannot be written")
			assert.Positive(t, e.Stats().LogWriteErrors)

			disk.set(false)
			require.Eventually(t, func() bool {
				op := writeOp(ndbclient.OpWrite, tbl, "after", set(colValue, ndbclient.String("back")))
				run(t, e, op)
				return op.Err == nil
			}, 5*time.Second, time.Millisecond)
			assert.Contains(t, logs.String(), "the log is written again")
			want := dumpWritten(e)
			require.Zero(t, e.wal.request(reqRotate).err) // written and fsynced
			e.crash()
			e2 := openT(t, persistCfg(dir, mode, clock, logs))
			assert.Equal(t, want, dumpWritten(e2))
		})
	}
}

// TestPersistFailuresUnderLoadNeverDiverge toggles a failing disk under
// concurrent writers (single ops, batches, transactions) and checks that what
// memory holds at the end is what the log gives back.
func TestPersistFailuresUnderLoadNeverDiverge(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncAlways, FsyncEverySec} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			disk := &diskSwitch{}
			cfg := persistCfg(dir, mode, clock, logs)
			cfg.logFileHook = disk.hook
			cfg.retryAfter = 2 * time.Millisecond
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			counts := map[ndbclient.Code]int{}
			for g := range 4 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 2))
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						k := func() string { return fmt.Sprint("k", rng.IntN(64)) }
						var ops []*ndbclient.Op
						switch rng.IntN(4) {
						case 0:
							ops = append(ops, writeOp(ndbclient.OpWrite, tbl, k(), set(colValue, ndbclient.String(fmt.Sprint(g, "-", i)))))
						case 1:
							ops = append(ops, writeOp(ndbclient.OpDelete, tbl, k()))
						case 2:
							ops = append(ops, &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(k()), AddColumn: colMath, Delta: 1, Create: true})
							ops = append(ops, writeOp(ndbclient.OpWrite, tbl, k(), set(colValue, ndbclient.String("batch"))))
						case 3:
							a := writeOp(ndbclient.OpWrite, tbl, k(), set(colValue, ndbclient.String("txn")))
							a.TxnWithNext = true
							ops = append(ops, a, &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key(k()), AddColumn: colMath, Delta: 2, Create: true})
						}
						run(t, e, ops...)
						mu.Lock()
						for _, op := range ops {
							counts[codeOf(op)]++
						}
						mu.Unlock()
					}
				})
			}
			// At least 20 failing spells, and on until writes have failed.
			for i := 0; i < 20 || e.Stats().LogWriteErrors == 0 && i < 2000; i++ {
				time.Sleep(3 * time.Millisecond)
				disk.set(true)
				time.Sleep(3 * time.Millisecond)
				disk.set(false)
			}
			close(stop)
			wg.Wait()
			// Written and fsynced once the log is written again. A log seen
			// not failing may still fail: a write tried in the last spell
			// can be refused after the spell ends.
			require.Eventually(t, func() bool { return e.wal.request(reqRotate).err == nil }, 5*time.Second, time.Millisecond)
			want := dump(e)
			require.Zero(t, e.wal.request(reqRotate).err)
			e.crash()
			t.Logf("results: %v, log write errors: %d", counts, e.Stats().LogWriteErrors)
			assert.Positive(t, counts[ndbclient.CodeOK])
			// The test is only worth something if the log did fail under
			// the writers, and some of their writes were refused.
			assert.Positive(t, e.Stats().LogWriteErrors, "the log never failed")
			assert.Positive(t, counts[ndbclient.CodeStorage], "no write was refused")
			e2 := openT(t, persistCfg(dir, mode, clock, logs))
			assert.Equal(t, want, dump(e2))
		})
	}
}

func TestPersistAlwaysSubmitCompletesAfterFsync(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	assert.False(t, e.CompletesInline())
	read := readOp(tbl, "absent", colValue)
	inline := false
	e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{read}}, func(*ndbclient.Batch, error) { inline = true })
	assert.True(t, inline, "a read waits for no fsync")

	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		op := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("k", i), set(colValue, ndbclient.String("v")))
		e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, err error) {
			defer wg.Done()
			assert.NoError(t, err)
			assert.NoError(t, b.Ops[0].Err)
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, e.wal.syncs.Load(), uint64(51), "more fsyncs than frames")
	want := dump(e)
	e.crash() // what the writer has not written is lost: every acknowledged write must be written
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	assert.Equal(t, want, dump(e2))
	assert.Len(t, want, 50)
}

func TestPersistOffByDefault(t *testing.T) {
	e, err := Open(Config{ReapInterval: -1})
	require.NoError(t, err)
	defer e.Close()
	assert.Nil(t, e.wal)
	assert.True(t, e.CompletesInline())
	e2 := New(Config{DataDir: t.TempDir(), ReapInterval: -1})
	defer e2.Close()
	assert.Nil(t, e2.wal, "New keeps to memory; a data dir needs Open")
}

func TestPersistTablesComeBackInOrder(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	names := []string{"a", "b", "c"}
	for _, n := range names {
		tbl := mustCreate(t, e, memcacheTable(n, 64))
		put(t, e, tbl, "k", item{value: n})
	}
	// A table with a distribution key that is part of the primary key.
	s := &ndbclient.Table{Database: "test", Name: "dist", Columns: []ndbclient.Column{
		{Name: "a", Type: ndbclient.TypeVarchar, Length: 20}, {Name: "b", Type: ndbclient.TypeInt32}, {Name: "v", Type: ndbclient.TypeVarchar, Length: 20, Nullable: true},
	}, PrimaryKey: []int{0, 1}, DistributionKey: []int{1}, ExpireColumn: -1}
	dist := mustCreate(t, e, s)
	for i := range 30 {
		op := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: dist, Key: []ndbclient.Value{ndbclient.String(fmt.Sprint("x", i)), ndbclient.Int(int64(i))},
			Set: []ndbclient.ColumnValue{set(2, ndbclient.String(fmt.Sprint("v", i)))}}
		run(t, e, op)
		require.NoError(t, op.Err)
	}
	want := dump(e)
	e.crash() // no snapshot: the log alone
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	assert.Equal(t, want, dump(e2))
	for i, tb := range *e2.tables.Load() {
		assert.Equal(t, i, tb.id)
	}
	// Rows are found by key: the partitions come from the new hash seed.
	for i := range 30 {
		op := &ndbclient.Op{Kind: ndbclient.OpRead, Table: dist, Key: []ndbclient.Value{ndbclient.String(fmt.Sprint("x", i)), ndbclient.Int(int64(i))}, Read: []int{2}}
		run(t, e2, op)
		require.NoError(t, op.Err)
		assert.Equal(t, fmt.Sprint("v", i), op.Row[0].Str())
	}
	// The reads marked the rows fetched: the snapshot at Close keeps that.
	want2 := dump(e2)
	assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(want2)))
	require.NoError(t, e2.Close())
	e3 := openT(t, persistCfg(dir, FsyncAlways, clock, logs)) // from the snapshot
	assert.Equal(t, want2, dump(e3))
}

func TestPersistReplayRespectsMemoryLimit(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	tbl := mustCreateKept(t, e, "kept", 4096)
	for i := range 400 {
		put(t, e, tbl, fmt.Sprint("k", i), item{value: strings.Repeat("x", 4000)})
	}
	require.NoError(t, e.Close())
	cfg := persistCfg(dir, FsyncEverySec, clock, logs)
	cfg.MemoryLimit = 1 << 20
	_, err := Open(cfg)
	require.ErrorContains(t, err, "do not fit embedded.memory_limit")
}

func TestPersistExecuteWaitsInAlwaysMode(t *testing.T) {
	dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	op := writeOp(ndbclient.OpWrite, tbl, "k", set(colValue, ndbclient.String("v")))
	require.NoError(t, e.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}}))
	e.wal.mu.Lock()
	resolved, lsn := e.wal.resolved, e.wal.lsn
	e.wal.mu.Unlock()
	assert.Equal(t, lsn, resolved, "Execute returned before its frame was durable")
}

// TestPersistFlushUnderLoadAlwaysAnswers runs writers and delete_alls
// through the dispatcher with lanes (one flight per node, as serve.go once
// configured them for fsync always): a delete_all queued behind a write was
// submitted from the log writer when that write became durable, and waited
// for the writer, i.e. for itself. Every op must now complete.
func TestPersistFlushUnderLoadAlwaysAnswers(t *testing.T) {
	for _, lanes := range []bool{true, false} {
		t.Run(fmt.Sprint("lanes=", lanes), func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			c := ndbclient.NewClientWith(e, ndbclient.DispatchConfig{Lanes: lanes, FlightsPerNode: 1, Coalesce: true})
			submit := func(op *ndbclient.Op) error {
				ch := make(chan error, 1)
				c.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, err error) {
					if err == nil {
						err = b.Ops[0].Err
					}
					ch <- err
				})
				select {
				case err := <-ch:
					return err
				case <-time.After(30 * time.Second):
					return fmt.Errorf("no answer: the engine is stuck")
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := range 4 {
				wg.Go(func() {
					for i := range 200 {
						if err := submit(writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("k", g, "-", i%16), set(colValue, ndbclient.String("v")))); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			flushes := 0
			wg.Go(func() {
				for range 30 {
					if err := submit(&ndbclient.Op{Kind: ndbclient.OpDeleteAll, Table: tbl}); err != nil {
						errs <- err
						return
					}
					flushes++
				}
			})
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			assert.Equal(t, 30, flushes)
			// What memory holds is what the log gives back.
			want := dump(e)
			e.crash()
			e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			assert.Equal(t, want, dump(e2))
		})
	}
}

// slowFile is a log file whose writes take a while, as a slow disk's.
type slowFile struct{ logFile }

func (f slowFile) Write(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	return f.logFile.Write(p)
}

// TestPersistSlowDiskBoundsTheLogQueue: with everysec and no, writes are
// acknowledged before they reach the disk; a disk slower than the writes
// must not grow what waits for it without bound. Over the bound, writes are
// refused with Overloaded before they apply, and memory still matches the
// log.
func TestPersistSlowDiskBoundsTheLogQueue(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncEverySec, FsyncNo} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			cfg := persistCfg(dir, mode, clock, logs)
			cfg.logFileHook = func(f logFile) logFile { return slowFile{f} }
			const queueMax = 32 << 10
			cfg.logQueueMax = queueMax
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 512))
			var most atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if q := e.wal.queued.Load(); q > most.Load() {
						most.Store(q)
					}
					runtime.Gosched()
				}
			}()
			var wg sync.WaitGroup
			var overloaded atomic.Int64
			const writers = 4
			for g := range writers {
				wg.Go(func() {
					for i := range 1500 {
						op := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint("k", g, "-", i%50), set(colValue, ndbclient.String(strings.Repeat("v", 200))))
						run(t, e, op)
						switch codeOf(op) {
						case ndbclient.CodeOK:
						case ndbclient.CodeOverloaded:
							overloaded.Add(1)
						default:
							t.Errorf("unexpected %v", op.Err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			<-sampled
			t.Logf("most queued: %d bytes; %d writes refused", most.Load(), overloaded.Load())
			assert.Positive(t, overloaded.Load(), "the slow disk never held writes back")
			assert.LessOrEqual(t, most.Load(), int64(queueMax+writers*1024), "the log's queue passed its bound")
			want := dumpWritten(e)
			require.Zero(t, e.wal.request(reqRotate).err)
			e.crash()
			e2 := openT(t, persistCfg(dir, mode, clock, logs))
			assert.Equal(t, want, dumpWritten(e2))
		})
	}
}

// TestPersistRecoveryLeavesNoGap: a crash while a log file was being created
// leaves it empty or with a torn header; the start after removes it. The
// log it then creates must take that number, or the start after that finds
// a gap and refuses. The same when a corrupt log's later files are dropped.
func TestPersistRecoveryLeavesNoGap(t *testing.T) {
	logNames := func(dir string) []string {
		m, err := filepath.Glob(filepath.Join(dir, "log-*"))
		require.NoError(t, err)
		return slices.DeleteFunc(m, func(s string) bool { return strings.HasSuffix(s, ".dropped") })
	}
	for _, damage := range []string{"empty newest", "torn header", "bad header mid-log", "bad frame mid-log"} {
		t.Run(damage, func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			cfg := persistCfg(dir, FsyncAlways, clock, logs)
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			put(t, e, tbl, "a", item{value: "1"})
			e.crash()
			e = openT(t, cfg) // a second log
			put(t, e, tbl, "b", item{value: "2"})
			e.crash()
			names := logNames(dir)
			require.Len(t, names, 2)
			var seq uint64
			_, err := fmt.Sscanf(filepath.Base(names[1]), "log-%x", &seq)
			require.NoError(t, err)
			switch damage {
			case "empty newest": // the crash came before the header was written
				require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", seq+1)), nil, 0o600))
			case "torn header":
				require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("log-%016x", seq+1)), []byte("NDBGLO"), 0o600))
			case "bad header mid-log": // the first log's header is damaged: the second is dropped
				b, err := os.ReadFile(names[0])
				require.NoError(t, err)
				b[0] ^= 0xff
				require.NoError(t, os.WriteFile(names[0], b, 0o600))
			case "bad frame mid-log": // the first log is cut at its last frame: the second is dropped
				b, err := os.ReadFile(names[0])
				require.NoError(t, err)
				b[len(b)-1] ^= 0xff
				require.NoError(t, os.WriteFile(names[0], b, 0o600))
			}
			e = openT(t, cfg)
			tbl = mustCreate(t, e, memcacheTable("items", 64)) // gone with the first log in the last case
			put(t, e, tbl, "c", item{value: "3"})
			want := dumpWritten(e)
			e.crash()
			e = openT(t, cfg)
			assert.Equal(t, want, dumpWritten(e))
			e.crash()
			e = openT(t, cfg)
			assert.Equal(t, want, dumpWritten(e))
		})
	}
}

// TestPersistFlippedFrameLength: a frame length flipped to span the rest of
// the file makes a snapshot corrupt (an error) and cuts a log there, as a
// bad checksum does; big frames are checked before they are allocated.
func TestPersistFlippedFrameLength(t *testing.T) {
	defer func(old int64) { bigFrame = old }(bigFrame)
	bigFrame = 16
	for _, kind := range []string{"snap", "log"} {
		t.Run(kind, func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			cfg := persistCfg(dir, FsyncAlways, clock, logs)
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			for i := range 20 {
				put(t, e, tbl, fmt.Sprint("k", i), item{value: "v"})
			}
			if kind == "snap" {
				require.NoError(t, e.Close())
			} else {
				e.crash()
			}
			m, err := filepath.Glob(filepath.Join(dir, kind+"-*"))
			require.NoError(t, err)
			require.NotEmpty(t, m)
			name := m[len(m)-1]
			b, err := os.ReadFile(name)
			require.NoError(t, err)
			// The second frame's length: the first frame starts after the
			// file header; its length says where the second starts.
			first := fileHeaderLen + frameHeaderLen + int(binary.LittleEndian.Uint32(b[fileHeaderLen:]))
			require.Less(t, first+frameHeaderLen, len(b), "one frame only")
			binary.LittleEndian.PutUint32(b[first:], uint32(len(b)-first-frameHeaderLen))
			require.NoError(t, os.WriteFile(name, b, 0o600))
			e2, err := Open(cfg)
			if kind == "snap" {
				require.ErrorContains(t, err, "is corrupt at offset "+fmt.Sprint(first))
				return
			}
			require.NoError(t, err)
			t.Cleanup(func() { e2.crash() })
			assert.Contains(t, logs.String(), "cutting it after the last good record")
			assert.EqualValues(t, first, fileLen(t, name))
		})
	}
}

func fileLen(t *testing.T, name string) int64 {
	st, err := os.Stat(name)
	require.NoError(t, err)
	return st.Size()
}

// TestPersistSnapshotDiscardedAfterRollback: k=v1 is durable; a snapshot
// rotates; a delete of k is applied and appended, the snapshot copies k's
// partition without k, and then the delete's write fails and is rolled back
// (its client told it failed). The snapshot must not be kept: with it, and
// the older logs removed, k would be gone after a crash.
func TestPersistSnapshotDiscardedAfterRollback(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	disk := &diskSwitch{}
	cfg := persistCfg(dir, FsyncAlways, clock, logs)
	cfg.logFileHook = disk.hook
	cfg.retryAfter = time.Hour // the log stays failed for the test
	var delErr chan error
	var tbl *ndbclient.Table
	var e *Engine
	cfg.snapshotHook = func() {
		disk.set(true)
		del := writeOp(ndbclient.OpDelete, tbl, "k")
		delErr = make(chan error, 1)
		e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{del}}, func(b *ndbclient.Batch, _ error) { delErr <- b.Ops[0].Err })
		// The delete has applied: the copy will not see k.
	}
	e = openT(t, cfg)
	tbl = mustCreate(t, e, memcacheTable("items", 64))
	put(t, e, tbl, "k", item{value: "v1"})
	err := e.snapshot()
	require.Error(t, err, "a snapshot that copied a rolled-back change was kept")
	assert.Contains(t, err.Error(), "rolled back")
	assert.Equal(t, ndbclient.CodeStorage, ndbclient.CodeOf(<-delErr))
	v, ok := getValue(t, e, tbl, "k")
	require.True(t, ok, "the failed delete was not rolled back")
	assert.Equal(t, "v1", v)
	e.crash()
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	v, ok = getValue(t, e2, tbl, "k")
	assert.True(t, ok, "a durable value is gone after a crash")
	assert.Equal(t, "v1", v)
}

// TestPersistAlwaysAcksOnlyWhatIsFsynced: with fsync always, a write is
// acknowledged only once fsynced: after a power cut (files cut to what was
// fsynced), every acknowledged write is there, and none that failed. Every
// third fsync fails, so an acknowledgement that ran ahead of its fsync is
// caught: the frame is then neither durable nor rolled back.
func TestPersistAlwaysAcksOnlyWhatIsFsynced(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	disk := newFakeDisk()
	disk.failEvery = 3
	cfg := persistCfg(dir, FsyncAlways, clock, logs)
	cfg.logFileHook = disk.hook
	cfg.retryAfter = time.Millisecond
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	acked, refused := map[string]bool{}, map[string]bool{}
	for i := range 90 {
		k := fmt.Sprint("k", i)
		op := writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.String("v")))
		ch := make(chan error, 1)
		e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, _ error) { ch <- b.Ops[0].Err })
		switch err := <-ch; ndbclient.CodeOf(err) {
		case ndbclient.CodeOK:
			acked[k] = true
		case ndbclient.CodeStorage:
			refused[k] = true
			require.Eventually(t, func() bool { return !e.wal.failing() }, 5*time.Second, time.Millisecond)
		default:
			t.Fatalf("%s: %v", k, err)
		}
	}
	disk.mu.Lock()
	failed := disk.failed
	disk.mu.Unlock()
	t.Logf("%d acknowledged, %d refused, %d fsyncs failed", len(acked), len(refused), failed)
	require.Positive(t, failed, "no fsync failed")
	require.NotEmpty(t, acked)
	disk.powerLoss(t, e)
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	for k := range acked {
		_, ok := getValue(t, e2, tbl, k)
		assert.True(t, ok, "%s was acknowledged and is gone after a power cut", k)
	}
	for k := range refused {
		_, ok := getValue(t, e2, tbl, k)
		assert.False(t, ok, "%s failed and is there after a power cut", k)
	}
}

// TestPersistWriteRacingCloseIsLoggedOrRefused: writes that race Close are
// either refused or in the log: with everysec and no, one that applied
// after the log stopped taking frames was acknowledged and lost.
func TestPersistWriteRacingCloseIsLoggedOrRefused(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncEverySec, FsyncNo, FsyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			total := 0
			defer func() { assert.Positive(t, total, "no write was acknowledged") }()
			for trial := range 20 {
				dir, clock, logs := memDir(t), newClock(), &logBuffer{}
				e := openT(t, persistCfg(dir, mode, clock, logs))
				tbl := mustCreate(t, e, memcacheTable("items", 64))
				var mu sync.Mutex
				var acked []string
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Go(func() {
						for i := 0; ; i++ {
							k := fmt.Sprint("k", g, "-", i)
							op := writeOp(ndbclient.OpWrite, tbl, k, set(colValue, ndbclient.String("v")))
							ch := make(chan error, 1)
							e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, _ error) { ch <- b.Ops[0].Err })
							if err := <-ch; err != nil {
								return // closed
							}
							mu.Lock()
							acked = append(acked, k)
							mu.Unlock()
						}
					})
				}
				time.Sleep(time.Duration(trial%5) * time.Millisecond)
				require.NoError(t, e.Close())
				wg.Wait()
				total += len(acked)
				e2 := openT(t, persistCfg(dir, mode, clock, logs))
				for _, k := range acked {
					if _, ok := getValue(t, e2, tbl, k); !ok {
						t.Fatalf("trial %d: %s was acknowledged and is not in the data dir (%d acknowledged)", trial, k, len(acked))
					}
				}
				e2.crash()
			}
		})
	}
}

// TestPersistCloseWaitsForApplyingBatches: a batch past the closed check
// when Close begins is held (by a test hook) until Close has finished, or
// for a while if Close waits for it. Before, Close finished the log first
// and the batch applied after: acknowledged, not logged.
func TestPersistCloseWaitsForApplyingBatches(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncEverySec, FsyncNo} {
		t.Run(mode.String(), func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			cfg := persistCfg(dir, mode, clock, logs)
			hold, held := make(chan struct{}), make(chan struct{})
			var once sync.Once
			cfg.applyHook = func() {
				once.Do(func() { close(held); <-hold })
			}
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			op := writeOp(ndbclient.OpWrite, tbl, "late", set(colValue, ndbclient.String("v")))
			res := make(chan error, 1)
			go e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, _ error) { res <- b.Ops[0].Err })
			<-held
			closed := make(chan struct{})
			go func() { _ = e.Close(); close(closed) }()
			select {
			case <-closed: // Close did not wait: the write now applies after it
			case <-time.After(200 * time.Millisecond): // Close waits for the write
			}
			close(hold)
			<-closed
			err := <-res
			e2 := openT(t, persistCfg(dir, mode, clock, logs))
			_, ok := getValue(t, e2, tbl, "late")
			if err == nil {
				assert.True(t, ok, "the write was acknowledged and is not in the data dir")
			} else {
				assert.False(t, ok)
			}
		})
	}
}

// TestPersistEverySecFsyncsOncePerTick: under a steady stream of writes,
// everysec fsyncs once per tick (here every 20ms), not once per pass over
// the frames the writer takes.
func TestPersistEverySecFsyncsOncePerTick(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	e := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				put(t, e, tbl, fmt.Sprint("k", g, "-", i%100), item{value: "v"})
			}
		})
	}
	require.Eventually(t, func() bool { return e.wal.ticks.Load() >= 10 }, 10*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()
	syncs, ticks := e.wal.syncs.Load(), e.wal.ticks.Load()
	t.Logf("%d fsyncs in %d ticks", syncs, ticks)
	assert.LessOrEqual(t, syncs, ticks+1, "more fsyncs than ticks")
	assert.Positive(t, syncs)
}

// TestPersistReplayFitsOnlyAtTheEnd: the memory limit applies to the state
// a start ends with, not to the states the replay passes through. A
// snapshot copies rows newer than its log's start, so replaying the log over
// it passes through states that never existed: here 600 rows of a table
// that never held more than 300 (and the limit fits 300, not 600).
func TestPersistReplayFitsOnlyAtTheEnd(t *testing.T) {
	for _, eviction := range []bool{false, true} { // evicting, it lost rows of the end state
		t.Run(fmt.Sprint("eviction=", eviction), func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			cfg := persistCfg(dir, FsyncEverySec, clock, logs)
			cfg.MemoryLimit = 2 << 20
			var tbl *ndbclient.Table
			var e *Engine
			value := strings.Repeat("x", 4000)
			cfg.snapshotHook = func() { // after the rotation: the log gets these, the copy the end state
				for i := range 300 {
					put(t, e, tbl, fmt.Sprint("old", i), item{value: value})
				}
				for i := range 300 {
					del := writeOp(ndbclient.OpDelete, tbl, fmt.Sprint("old", i))
					run(t, e, del)
					require.NoError(t, del.Err)
				}
				for i := range 300 {
					put(t, e, tbl, fmt.Sprint("new", i), item{value: value})
				}
			}
			e = openT(t, cfg)
			s := memcacheTable("t", 4096)
			s.Eviction = eviction
			tbl = mustCreate(t, e, s)
			require.NoError(t, e.snapshot())
			want := dumpWritten(e)
			require.Len(t, want, 300)
			e.crash()
			cfg.snapshotHook = nil
			e2, err := Open(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { e2.crash() })
			assert.Equal(t, want, dumpWritten(e2))
		})
	}
}

// TestPersistRestartLoopKeepsOneLog: starts that write nothing, ended by a
// crash (no snapshot at Close), leave one log besides the snapshot's, not one
// per start; a log a recovery set aside goes with the next snapshot.
func TestPersistRestartLoopKeepsOneLog(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	cfg := persistCfg(dir, FsyncEverySec, clock, logs)
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	put(t, e, tbl, "k", item{value: "v"})
	require.NoError(t, e.Close()) // a snapshot, and its log
	for range 5 {
		e = openT(t, cfg)
		e.crash()
	}
	m, err := filepath.Glob(filepath.Join(dir, "log-*"))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(m), 2, "%v: the snapshot's log and this run's only", m)
	e = openT(t, cfg)
	v, ok := getValue(t, e, tbl, "k")
	assert.True(t, ok)
	assert.Equal(t, "v", v)

	set := filepath.Join(dir, "log-0000000000000000.dropped")
	require.NoError(t, os.WriteFile(set, []byte("set aside"), 0o600))
	put(t, e, tbl, "k2", item{value: "v"})
	require.NoError(t, e.snapshot())
	_, err = os.Stat(set)
	assert.ErrorIs(t, err, fs.ErrNotExist, "a .dropped log older than the snapshot stays")
}

// TestPersistSnapshotNeedsRoom: a snapshot the disk has no room for (its
// estimated size plus headroom for the log) is not started: it would fill
// the disk and make the log fail. The log keeps everything.
func TestPersistSnapshotNeedsRoom(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	cfg := persistCfg(dir, FsyncAlways, clock, logs)
	var free atomic.Int64
	free.Store(1 << 20)
	cfg.freeBytes = free.Load
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	put(t, e, tbl, "k", item{value: "v"})
	err := e.snapshot()
	require.ErrorContains(t, err, "not enough free space for a snapshot")
	m, err := filepath.Glob(filepath.Join(dir, "snap-*"))
	require.NoError(t, err)
	assert.Empty(t, m, "a snapshot file was written")
	free.Store(1 << 40)
	require.NoError(t, e.snapshot())
	want := dumpWritten(e)
	e.crash()
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	assert.Equal(t, want, dumpWritten(e2))
}

// appendEntry encodes en as the log writer would.
func appendEntry(dst []byte, en *entry) []byte {
	switch en.kind {
	case entPut:
		return appendPut(dst, int(en.table), en.state, en.used, en.data)
	case entDelete:
		return appendDelete(dst, int(en.table), en.data)
	case entClear:
		return appendClear(dst, int(en.table))
	case entCreate:
		return appendCreate(dst, int(en.table), en.data)
	}
	return appendEnd(dst, en.table, en.rows)
}

// downgradeDir rewrites every log and snapshot in dir as a version 1 file
// (walrec.go): magic "...1", rows in the version 1 encoding. tables are the
// engine's tables, by number.
func downgradeDir(t *testing.T, dir string, tables []*table) (files int) {
	names, err := filepath.Glob(filepath.Join(dir, "*-*"))
	require.NoError(t, err)
	for _, name := range names {
		magic := logMagic
		if strings.HasPrefix(filepath.Base(name), "snap-") {
			magic = snapMagic
		}
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		fr := newFrameReader(bytes.NewReader(data), int64(len(data)))
		seq, v1, err := fr.readHeader(magic)
		require.NoError(t, err)
		require.False(t, v1, "%s: written in version 2", name)
		magic[7] = '1'
		out := appendFileHeader(nil, magic, seq)
		for {
			p, err := fr.next()
			if err != nil {
				break
			}
			ents, err := decodeEntries(nil, p)
			require.NoError(t, err)
			start := len(out)
			out = beginFrame(out)
			for i := range ents {
				if en := &ents[i]; en.kind == entPut {
					en.data = encodeV1(tables[en.table], en.data)
				}
				out = appendEntry(out, &ents[i])
			}
			endFrame(out, start)
		}
		require.NoError(t, os.WriteFile(name, out, 0o600))
		files++
	}
	return files
}

// A data dir written before rows were made compact (version 1 files) loads
// to the same rows, from a snapshot and from a log, and later runs go on
// from it in version 2.
func TestPersistReadsVersion1Files(t *testing.T) {
	for _, closeFirst := range []bool{true, false} { // true: a snapshot; false: the log only
		t.Run(fmt.Sprint("snapshot=", closeFirst), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			tbl := mustCreate(t, e, memcacheTable("items", 1024))
			other := mustCreateKept(t, e, "other", 64)
			codec := mustCreate(t, e, rowCodecTable(20))
			mixedOps(t, e, tbl, other, clock)
			n3 := ndbclient.Int(-3)
			run(t, e, &ndbclient.Op{Kind: ndbclient.OpWrite, Table: codec,
				Key: []ndbclient.Value{ndbclient.Bytes([]byte("key")), ndbclient.Uint(1)},
				Set: []ndbclient.ColumnValue{set(1, ndbclient.Uint(9)), set(5, n3), set(3, ndbclient.String("var")), set(7, ndbclient.Bytes([]byte("last")))}})
			want := dump(e)
			tables := *e.tables.Load()
			if closeFirst {
				require.NoError(t, e.Close())
			} else {
				e.crash()
			}
			require.Positive(t, downgradeDir(t, dir, tables))

			e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			assert.Equal(t, want, dump(e2), "version 1 files load to the same rows")
			put(t, e2, tbl, "after", item{value: "v2"})
			want = dump(e2)
			e2.crash()
			e3 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			assert.Equal(t, want, dump(e3), "version 1 files and a version 2 log")
			require.NoError(t, e3.Close())
		})
	}
}

// Rows of two bytes (a one-byte key and nothing else, or a last variable
// column that is empty) are valid rows: a restart loads them from the
// snapshot and from the log.
func TestPersistTwoByteRows(t *testing.T) {
	keyOnly := &ndbclient.Table{Database: "test", Name: "keyonly", Columns: []ndbclient.Column{
		{Name: "id", Type: ndbclient.TypeInt8},
	}, PrimaryKey: []int{0}, ExpireColumn: -1}
	emptyLast := &ndbclient.Table{Database: "test", Name: "emptylast", Columns: []ndbclient.Column{
		{Name: "id", Type: ndbclient.TypeUint8},
		{Name: "v", Type: ndbclient.TypeVarbinary, Length: 10},
	}, PrimaryKey: []int{0}, ExpireColumn: -1}
	for _, closeFirst := range []bool{true, false} { // true: a snapshot; false: the log only
		t.Run(fmt.Sprint("snapshot=", closeFirst), func(t *testing.T) {
			dir, clock, logs := t.TempDir(), newClock(), &logBuffer{}
			e := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			ko := mustCreate(t, e, keyOnly)
			el := mustCreate(t, e, emptyLast)
			for i := range 3 {
				op1 := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: ko, Key: []ndbclient.Value{ndbclient.Int(int64(i))}}
				op2 := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: el, Key: []ndbclient.Value{ndbclient.Uint(uint64(i))},
					Set: []ndbclient.ColumnValue{set(1, ndbclient.Bytes([]byte(strings.Repeat("x", i))))}}
				run(t, e, op1, op2)
				require.NoError(t, op1.Err)
				require.NoError(t, op2.Err)
			}
			want := dump(e)
			require.Len(t, want, 6)
			if closeFirst {
				require.NoError(t, e.Close())
			} else {
				e.crash()
			}
			e2, err := Open(persistCfg(dir, FsyncAlways, clock, logs))
			require.NoError(t, err, "log: %s", logs)
			t.Cleanup(e2.crash)
			assert.Equal(t, want, dump(e2))
			assert.NotContains(t, logs.String(), "level=WARN", "nothing dropped")
		})
	}
}
