package embedded

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// fakeDisk wraps log files to know how much of each was fsynced, and fails
// what a test asks for: every failEvery-th fsync (before it syncs), the next
// fsync after its bytes reached the disk (a failed fsync promises nothing
// either way), or every truncate. powerLoss then cuts each file to its
// fsynced length: what a power cut leaves, unlike crash(), which keeps the
// page cache.
type fakeDisk struct {
	mu         sync.Mutex
	files      map[string]*fakeFile
	failEvery  int  // every failEvery-th Sync fails (EIO) unsynced; 0: none
	syncs      int  // Syncs so far
	failed     int  // Syncs failed by failEvery
	noTruncate bool // Truncate fails (EIO)
	failSync   bool // the next Sync fails, its bytes on the disk all the same
}

type fakeFile struct {
	logFile
	d               *fakeDisk
	written, synced int64
}

func newFakeDisk() *fakeDisk { return &fakeDisk{files: map[string]*fakeFile{}} }

func (d *fakeDisk) set(noTruncate, failSync bool) {
	d.mu.Lock()
	d.noTruncate, d.failSync = noTruncate, failSync
	d.mu.Unlock()
}

// hook wraps a log file just created, its header (and first frame) fsynced.
func (d *fakeDisk) hook(f logFile) logFile {
	name := f.(*os.File).Name()
	st, err := os.Stat(name)
	if err != nil {
		panic(err)
	}
	ff := &fakeFile{logFile: f, d: d, written: st.Size(), synced: st.Size()}
	d.mu.Lock()
	d.files[name] = ff
	d.mu.Unlock()
	return ff
}

func (f *fakeFile) Write(p []byte) (int, error) {
	n, err := f.logFile.Write(p)
	f.d.mu.Lock()
	f.written += int64(n)
	f.d.mu.Unlock()
	return n, err
}

func (f *fakeFile) Sync() error {
	d := f.d
	d.mu.Lock()
	d.syncs++
	early := d.failEvery > 0 && d.syncs%d.failEvery == 0
	if early {
		d.failed++
	}
	d.mu.Unlock()
	if early {
		return syscall.EIO
	}
	err := f.logFile.Sync()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		f.synced = f.written
	}
	if d.failSync {
		d.failSync = false
		return syscall.EIO
	}
	return err
}

func (f *fakeFile) Truncate(size int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.noTruncate {
		return syscall.EIO
	}
	if err := f.logFile.Truncate(size); err != nil {
		return err
	}
	f.written, f.synced = size, min(f.synced, size)
	return nil
}

// powerLoss stops e and cuts each log file to what was fsynced.
func (d *fakeDisk) powerLoss(t *testing.T, e *Engine) {
	e.crash()
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, f := range d.files {
		require.NoError(t, os.Truncate(name, f.synced))
	}
}

func submitOne(e *Engine, op *ndbclient.Op) chan error {
	ch := make(chan error, 1)
	e.Submit(&ndbclient.Batch{Ops: []*ndbclient.Op{op}}, func(b *ndbclient.Batch, _ error) { ch <- b.Ops[0].Err })
	return ch
}

// TestPersistRefusedWriteNeverReplayedWhenTheLogCannotBeCut: with fsync
// always, a write whose fsync fails is refused; if the log then cannot be
// cut back, its frame is still in the file (here even on the disk). A
// restart, with nothing written since, must not bring it back: the log
// goes on in a new file that says where the old one ends. (The old code
// told the client "not stored" and left the frame to be replayed.)
func TestPersistRefusedWriteNeverReplayedWhenTheLogCannotBeCut(t *testing.T) {
	for _, more := range []bool{false, true} {
		t.Run(fmt.Sprint("writes after it: ", more), func(t *testing.T) {
			dir, clock, logs := memDir(t), newClock(), &logBuffer{}
			disk := newFakeDisk()
			cfg := persistCfg(dir, FsyncAlways, clock, logs)
			cfg.logFileHook = disk.hook
			e := openT(t, cfg)
			tbl := mustCreate(t, e, memcacheTable("items", 64))
			for i := range 5 {
				put(t, e, tbl, fmt.Sprint("acked", i), item{value: "v"})
			}
			put(t, e, tbl, "acked0", item{value: "v2"})
			disk.set(true, true)
			refused := writeOp(ndbclient.OpWrite, tbl, "refused", set(colValue, ndbclient.String("no")))
			over := writeOp(ndbclient.OpWrite, tbl, "acked1", set(colValue, ndbclient.String("no")))
			run(t, e, refused, over)
			require.Equal(t, ndbclient.CodeStorage, codeOf(refused))
			require.Equal(t, ndbclient.CodeStorage, codeOf(over))
			assert.Contains(t, logs.String(), "it goes on in a new file")
			if more {
				require.Eventually(t, func() bool { return !e.wal.failing() }, 5*time.Second, time.Millisecond)
				put(t, e, tbl, "later", item{value: "v"})
			}
			disk.powerLoss(t, e)

			e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
			_, ok := getValue(t, e2, tbl, "refused")
			assert.False(t, ok, "a refused write came back after a restart")
			v, _ := getValue(t, e2, tbl, "acked1")
			assert.Equal(t, "v", v, "a refused overwrite came back after a restart")
			v, _ = getValue(t, e2, tbl, "acked0")
			assert.Equal(t, "v2", v)
			for i := range 5 {
				_, ok := getValue(t, e2, tbl, fmt.Sprint("acked", i))
				assert.True(t, ok, "acked%d is gone", i)
			}
			_, ok = getValue(t, e2, tbl, "later")
			assert.Equal(t, more, ok)
			assert.Contains(t, logs.String(), "skipping the end of a log whose last writes failed")
		})
	}
}

// TestPersistRefusalWaitsUntilTheLogIsCut: if the log can neither be cut
// back nor go on in a new file, the failed write's client is not told
// anything (a restart could still replay it) until one of them works.
func TestPersistRefusalWaitsUntilTheLogIsCut(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	disk := newFakeDisk()
	var mu sync.Mutex
	stuck := true
	cfg := persistCfg(dir, FsyncAlways, clock, logs)
	cfg.logFileHook = disk.hook
	cfg.retryAfter = time.Millisecond
	cfg.cutBackHook = func() error {
		mu.Lock()
		defer mu.Unlock()
		if stuck {
			return errors.New("no new log either")
		}
		return nil
	}
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	put(t, e, tbl, "acked", item{value: "v"})
	disk.set(true, true)
	res := submitOne(e, writeOp(ndbclient.OpWrite, tbl, "refused", set(colValue, ndbclient.String("no"))))
	require.Eventually(t, e.wal.failing, 5*time.Second, time.Millisecond)
	ticks := e.wal.ticks.Load()
	require.Eventually(t, func() bool { return e.wal.ticks.Load() >= ticks+3 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-res:
		t.Fatalf("the write was answered (%v) while a restart could replay it", err)
	default:
	}
	mu.Lock()
	stuck = false
	mu.Unlock()
	assert.Equal(t, ndbclient.CodeStorage, ndbclient.CodeOf(<-res))
	_, ok := getValue(t, e, tbl, "refused")
	assert.False(t, ok)
	disk.powerLoss(t, e)
	e2 := openT(t, persistCfg(dir, FsyncAlways, clock, logs))
	_, ok = getValue(t, e2, tbl, "refused")
	assert.False(t, ok, "a refused write came back after a restart")
	_, ok = getValue(t, e2, tbl, "acked")
	assert.True(t, ok)
}

// TestPersistEverySecGoesOnWhenTheLogCannotBeCut: with everysec, a log that
// cannot be cut back after a failed fsync goes on in a new file, where what
// was acknowledged is written again (the old code refused writes until a
// truncate worked); a restart replays each acknowledged write once, in order.
func TestPersistEverySecGoesOnWhenTheLogCannotBeCut(t *testing.T) {
	dir, clock, logs := memDir(t), newClock(), &logBuffer{}
	disk := newFakeDisk()
	cfg := persistCfg(dir, FsyncEverySec, clock, logs)
	cfg.logFileHook = disk.hook
	e := openT(t, cfg)
	tbl := mustCreate(t, e, memcacheTable("items", 64))
	put(t, e, tbl, "k", item{value: "1"})
	require.Zero(t, e.wal.request(reqRotate).err)
	disk.set(true, true)
	put(t, e, tbl, "k", item{value: "2"})
	put(t, e, tbl, "j", item{value: "x"})
	// The error count rises before the log starts refusing: wait for the
	// new file, and then for writes to be taken again.
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "it goes on in a new file") }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return !e.wal.failing() }, 5*time.Second, time.Millisecond, "the log never took writes again")
	assert.Positive(t, e.Stats().LogWriteErrors)
	put(t, e, tbl, "after", item{value: "y"})
	want := dumpWritten(e)
	require.Zero(t, e.wal.request(reqRotate).err)
	disk.powerLoss(t, e)
	e2 := openT(t, persistCfg(dir, FsyncEverySec, clock, logs))
	assert.Equal(t, want, dumpWritten(e2))
}
