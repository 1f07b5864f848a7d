package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// The log: every committed change is appended, under its partition's lock,
// as a frame to an in-memory buffer (wal.buf); one writer goroutine moves
// the buffer to the current log file and fsyncs it as the policy says.
//
//   - always: a write is acknowledged once its frame is fsynced. Submit
//     completes later, from the writer (group commit: one fsync covers every
//     frame appended while the last one ran). An op that only saw a change
//     completes once the change is durable too (partition.logged), so a
//     crash never takes back what a read returned.
//   - everysec: write() as frames come, fsync once a second.
//   - no: write() as frames come; the OS decides when they reach the disk.
//
// When a write or fsync fails (disk full, I/O error), the file is cut back to
// its last good length, so it never holds a torn frame before a good one, and:
//   - always: every change not yet durable is rolled back, newest first, with
//     every partition locked (before-images kept in wal.undo for exactly this);
//     their ops fail with CodeStorage. New writes are refused for retryAfter,
//     then tried again;
//   - everysec, no: what was acknowledged stays in memory and in the buffer
//     and is written again every retryAfter; new writes are refused (before
//     they apply) until that succeeds.
// Either way memory never holds a change the log will not. If the file
// cannot be cut back, the log goes on in a new file whose first entry says
// where the old one ends (cutBack), and with always the rollback (and its
// clients) wait until then: no refused frame is ever replayed.
//
// Lock order: partition locks (ascending gid), then wal.mu, then wal.cmu. The
// writer never holds wal.mu while taking a partition lock; it takes every
// partition lock only to roll back (always mode), and first completes the
// appenders that wait for it holding Engine.mu (CreateTable). A delete_all's
// clearedRows.mu is taken before wal.mu by its goroutine and after it by the
// writer, which reaches it only once that goroutine's append is done.
//
// The writer never runs a Submit's callback: a callback may submit more work
// (the dispatcher does), and work that waits for the writer must not run on
// it. It hands them to the completer goroutine (wal.cq), in order.

// FsyncMode is when the log is fsynced.
type FsyncMode uint8

const (
	FsyncEverySec FsyncMode = iota // the default
	FsyncAlways
	FsyncNo
)

// ParseFsync parses always, everysec or no.
func ParseFsync(s string) (FsyncMode, error) {
	switch s {
	case "everysec", "":
		return FsyncEverySec, nil
	case "always":
		return FsyncAlways, nil
	case "no":
		return FsyncNo, nil
	}
	return 0, fmt.Errorf("fsync %q: use always, everysec or no", s)
}

func (m FsyncMode) String() string {
	switch m {
	case FsyncAlways:
		return "always"
	case FsyncNo:
		return "no"
	}
	return "everysec"
}

// logQueueMax bounds the bytes of log the writer has not yet made durable
// (buf and out): over it, a mutation is refused with CodeOverloaded before it
// applies (a slow disk must not grow memory, nor what a crash loses, without
// bound). Concurrent appenders may overshoot it by a frame each. With
// everysec, out is fsynced early once it holds a quarter of it, so that the
// bound is not a throughput limit on a disk that keeps up.
const logQueueMax = 64 << 20

// retryAfter is how long writes are refused after the log failed, and how
// often a failing log is tried again (Config.retryAfter in tests).
const retryAfter = time.Second

// logFile is what the log writes to: an *os.File opened for appending, or a
// test's failing stand-in.
type logFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// waiter is a Submit waiting for its frames to be durable (always), or, with
// b nil, an appender the writer itself resolves (CreateTable's channel): its
// done must never wait.
type waiter struct {
	lsn  uint64
	b    *ndbclient.Batch
	done func(*ndbclient.Batch, error)
}

type wal struct {
	e    *Engine
	dir  *dataDir
	mode FsyncMode
	log  *slog.Logger

	// refuse is set while the log fails: mutations are refused before they
	// apply. Read without a lock on the hot path.
	refuse atomic.Pointer[ndbclient.Error]
	// queued is len(buf)+len(out): log bytes not yet durable (logQueueMax).
	queued   atomic.Int64
	queueMax int64

	mu       sync.Mutex
	buf      []byte  // frames appended, not yet taken by the writer
	undo     undoLog // always: before-images of buf's changes, in order
	lsn      uint64  // frames appended so far
	resolved uint64  // always: frames durable or rolled back
	// settled is resolved, for the ops that only saw a change: a read of a
	// partition whose last frame is settled completes without taking mu.
	settled atomic.Uint64
	failed  *ndbclient.Error
	waiters []waiter
	closing bool

	wake    chan struct{} // buf became non-empty
	reqs    chan walReq
	stopped chan struct{}

	// The completer's queue: Submits whose frames are resolved.
	cmu      sync.Mutex
	cq       []waiter
	cwake    chan struct{}
	cstopped chan struct{}

	// Owned by the writer goroutine.
	f         logFile
	seq       uint64
	base      int64   // file length up to which the file is good: synced, or for no, written
	out       []byte  // frames taken from buf and not yet done (synced, or for no, written)
	written   int     // bytes of out in the file
	outLSN    uint64  // lsn at the end of out
	outUndo   undoLog // always: before-images of out's changes
	spare     []byte
	ready     []waiter
	needTrunc bool // the file may hold a torn frame past base
	failedAt  time.Time
	dirty     bool          // written since the last fsync (everysec)
	every     time.Duration // retryAfter, and everysec's fsync interval
	// rollbackDue (always) is the error of a failed write whose frames are
	// still in the file (it could not be cut back): their rollback, and
	// their clients, wait until a restart cannot replay them (cutBack).
	rollbackDue *ndbclient.Error

	// sinceSnap is the bytes of log since the last snapshot, replayed ones
	// included; past snapLogSize, and past the last snapshot's size (so that
	// a large data set is not rewritten for every few changes), the writer
	// asks for a snapshot.
	sinceSnap   atomic.Int64
	snapBytes   atomic.Int64
	snapLogSize int64
	snapTrigger chan struct{}

	writeErrors, syncs, overloaded, ticks atomic.Uint64
	// rollbacks counts rollbackAll runs: a snapshot whose copy may hold a
	// change rolled back since its rotation is discarded.
	rollbacks atomic.Uint64
}

// walReq asks the writer to rotate (start the next log file), to finish
// (write everything, for Close) or to abandon (stop where it is, as a crash
// would: tests).
type walReq struct {
	kind  int
	reply chan walReply
}

const (
	reqRotate = iota
	reqFinish
	reqAbandon
)

type walReply struct {
	seq       uint64 // the new file's sequence number
	rollbacks uint64 // wal.rollbacks at the rotation
	pending   int64  // log bytes since the last snapshot when the file began
	err       error
}

func newWAL(e *Engine, d *dataDir, seq uint64, f logFile, mode FsyncMode) *wal {
	w := &wal{
		e: e, dir: d, mode: mode, log: e.log, f: f, seq: seq, base: fileHeaderLen,
		wake: make(chan struct{}, 1), reqs: make(chan walReq), stopped: make(chan struct{}),
		cwake: make(chan struct{}, 1), cstopped: make(chan struct{}),
		snapLogSize: e.cfg.SnapshotLogSize, snapTrigger: make(chan struct{}, 1), every: retryAfter,
	}
	if e.cfg.retryAfter > 0 {
		w.every = e.cfg.retryAfter
	}
	w.queueMax = logQueueMax
	if e.cfg.logQueueMax > 0 {
		w.queueMax = e.cfg.logQueueMax
	}
	go w.run()
	go w.completer()
	return w
}

// completer runs the Submits' callbacks the writer hands over, until the
// writer has stopped and the queue is empty.
func (w *wal) completer() {
	defer close(w.cstopped)
	var batch []waiter
	for {
		stopped := false
		select {
		case <-w.cwake:
		case <-w.stopped:
			stopped = true
		}
		for {
			w.cmu.Lock()
			batch, w.cq = w.cq, batch[:0]
			w.cmu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, wt := range batch {
				wt.done(wt.b, nil)
			}
			clear(batch)
		}
		if stopped {
			return
		}
	}
}

// refusing is the error a mutation gets before it applies, or nil.
func (w *wal) refusing() error {
	if err := w.refuse.Load(); err != nil {
		return err
	}
	if w.queued.Load() >= w.queueMax {
		w.overloaded.Add(1)
		return errLogBehind
	}
	return nil
}

var errLogBehind = &ndbclient.Error{Code: ndbclient.CodeOverloaded,
	Message: "the data dir's log is behind (the disk is slower than the writes); the change was not applied, try again"}

// logBatch collects what a run of ops under one lock hold logs: one frame
// of entries and, with fsync always, the before-images that undo them.
type logBatch struct {
	frame []byte
	undo  undoLog
}

func (lb *logBatch) reset() {
	lb.frame = lb.frame[:0]
	lb.undo.reset()
}

// logChange adds op's change (just applied to slot s, or a delete of key) to
// the batch's frame.
func (lb *logBatch) logChange(p *partition, op *ndbclient.Op, key []byte, s int32) {
	if len(lb.frame) == 0 {
		lb.frame = beginFrame(lb.frame)
	}
	if op.Kind == ndbclient.OpDelete {
		lb.frame = appendDelete(lb.frame, p.t.id, key)
		return
	}
	sl := &p.slots[s]
	lb.frame = appendPut(lb.frame, p.t.id, sl.state, sl.used, p.row(s))
}

// commit appends the batch's frame, if any, and returns its lsn. The caller
// holds the locks of the partitions it changed. In always mode, a log that
// has failed refuses the frame: the caller must roll back what it applied
// (lb.undo) and fail its ops with the error.
func (w *wal) commit(lb *logBatch) (uint64, error) {
	if len(lb.frame) == 0 {
		return 0, nil
	}
	endFrame(lb.frame, 0)
	lsn, _, err := w.append(lb.frame, &lb.undo, false)
	lb.frame = lb.frame[:0]
	if err != nil {
		return 0, err
	}
	return lsn, nil
}

// commitOrUndo is commit for plain ops: a refused frame's changes are rolled
// back here and their ops fail.
func (w *wal) commitOrUndo(lb *logBatch, now uint32) uint64 {
	lsn, err := w.commit(lb)
	if err != nil {
		lb.undo.rollbackFailing(now, err)
	}
	lb.undo.reset()
	return lsn
}

// append adds a frame (header filled in) to the buffer. In always mode it
// takes u's before-images, and refuses the frame once the log has failed;
// with wait it also returns a channel that gets the frame's outcome.
func (w *wal) append(frame []byte, u *undoLog, wait bool) (uint64, chan error, error) {
	w.mu.Lock()
	if w.failed != nil && (w.mode == FsyncAlways || wait) {
		err := w.failed
		w.mu.Unlock()
		return 0, nil, err
	}
	if w.closing {
		w.mu.Unlock()
		return 0, nil, errClosed
	}
	lsn, wakeup := w.enqueueLocked(frame)
	if u != nil && w.mode == FsyncAlways {
		w.undo.take(u)
	}
	var ch chan error
	if wait && w.mode == FsyncAlways {
		ch = make(chan error, 1)
		w.waiters = append(w.waiters, waiter{lsn: lsn, done: func(_ *ndbclient.Batch, err error) { ch <- err }})
	}
	w.mu.Unlock()
	if wakeup {
		w.signal()
	}
	return lsn, ch, nil
}

// enqueueLocked adds frame to the buffer and returns its lsn, and whether
// the buffer was empty (the writer may be asleep). The caller holds mu.
func (w *wal) enqueueLocked(frame []byte) (lsn uint64, wakeup bool) {
	wakeup = len(w.buf) == 0
	w.buf = append(w.buf, frame...)
	w.queued.Add(int64(len(frame)))
	w.sinceSnap.Add(int64(len(frame)))
	w.lsn++
	return w.lsn, wakeup
}

// signal wakes the writer if it sleeps.
func (w *wal) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// appendWait appends a frame that must be durable before its change applies
// (always mode; in the others it returns at once): CreateTable, whose change
// keeps no before-image.
func (w *wal) appendWait(frame []byte) error {
	_, ch, err := w.append(frame, nil, true)
	if err != nil || ch == nil {
		return err
	}
	return <-ch
}

// await calls done once the frames up to lsn are durable, or rolled back
// (their ops then carry the error). Always mode only.
func (w *wal) await(lsn uint64, b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	w.mu.Lock()
	if lsn <= w.resolved {
		w.mu.Unlock()
		done(b, nil)
		return
	}
	w.waiters = append(w.waiters, waiter{lsn: lsn, b: b, done: done})
	w.mu.Unlock()
}

// settle blocks until every frame appended so far is durable or rolled
// back (always mode; the others never roll back).
func (w *wal) settle() {
	if w.mode != FsyncAlways {
		return
	}
	w.mu.Lock()
	lsn := w.lsn
	w.mu.Unlock()
	// As a Submit, not a blocking appender: those are resolved before a
	// rollback, Submits after it.
	w.awaitSync(lsn, &ndbclient.Batch{})
}

// awaitSync blocks until the frames up to lsn are resolved (Execute).
func (w *wal) awaitSync(lsn uint64, b *ndbclient.Batch) {
	ch := make(chan struct{})
	w.await(lsn, b, func(*ndbclient.Batch, error) { close(ch) })
	<-ch
}

// run is the writer goroutine.
func (w *wal) run() {
	defer close(w.stopped)
	tick := time.NewTicker(w.every) // everysec's fsync, and retries
	defer tick.Stop()
	for {
		select {
		case <-w.wake:
			if w.failing() {
				continue // the tick retries
			}
			w.flush(w.mode == FsyncAlways)
		case <-tick.C:
			w.ticks.Add(1)
			if w.failing() {
				w.retry()
				continue
			}
			w.flush(w.mode != FsyncNo)
		case r := <-w.reqs:
			switch r.kind {
			case reqRotate:
				r.reply <- w.rotate()
			case reqFinish:
				r.reply <- walReply{err: w.finish()}
				return
			case reqAbandon:
				_ = w.f.Close()
				r.reply <- walReply{}
				return
			}
		}
	}
}

func (w *wal) failing() bool { return w.refuse.Load() != nil }

// flushPasses bounds the passes one flush runs (each a flushOnce), so that
// under a steady stream of frames the writer still gets back to its loop
// (rotations, ticks); what is left is picked up right after.
const flushPasses = 8

// flush moves the buffer to the file, and fsyncs it if sync is set, pass
// after pass while frames keep coming (in always mode each pass is one
// group commit). On everysec's tick (sync in everysec mode) the passes only
// write, and one fsync covers them all.
func (w *wal) flush(sync bool) {
	onceAtEnd := sync && w.mode == FsyncEverySec
	for range flushPasses {
		more, err := w.flushOnce(sync && !onceAtEnd)
		if err != nil {
			w.fail(err)
			return
		}
		if !more {
			break
		}
	}
	if onceAtEnd {
		if _, err := w.flushOnce(true); err != nil {
			w.fail(err)
			return
		}
	}
	w.mu.Lock()
	left := len(w.buf) > 0
	w.mu.Unlock()
	if left {
		w.signal()
	}
}

// flushOnce takes the buffer and writes (and with sync, fsyncs) what is not
// done yet. It reports whether the buffer had frames.
func (w *wal) flushOnce(sync bool) (bool, error) {
	took, _ := w.take()
	return took > 0, w.writeOut(sync, took > 0)
}

// take moves the buffer to out. It returns the bytes taken, and the log
// bytes since the last snapshot up to the end of them.
func (w *wal) take() (int, int64) {
	w.mu.Lock()
	took := len(w.buf)
	if took > 0 {
		if len(w.out) == 0 {
			w.out, w.buf = w.buf, w.spare[:0]
			w.spare = nil
		} else {
			w.out = append(w.out, w.buf...)
			w.buf = w.buf[:0]
		}
		w.outLSN = w.lsn
		if w.mode == FsyncAlways {
			w.outUndo.take(&w.undo)
		}
	}
	pending := w.sinceSnap.Load()
	w.mu.Unlock()
	return took, pending
}

// writeOut writes (and with sync, fsyncs) what of out is not done yet.
func (w *wal) writeOut(sync, took bool) error {
	if err := w.cutBack(); err != nil {
		return err
	}
	if w.written < len(w.out) {
		n, err := w.f.Write(w.out[w.written:])
		w.written += max(n, 0)
		if err != nil {
			w.needTrunc = true
			return fmt.Errorf("write the log: %w", err)
		}
		w.dirty = true
	}
	if w.mode == FsyncEverySec && int64(len(w.out)) >= w.queueMax/4 {
		sync = true // out is kept until fsynced: do not let it grow a second's worth
	}
	if sync && w.dirty {
		if err := w.f.Sync(); err != nil {
			w.needTrunc = true
			return fmt.Errorf("fsync the log: %w", err)
		}
		w.syncs.Add(1)
		w.dirty = false
	}
	if w.mode == FsyncNo || !w.dirty {
		w.done()
	}
	if took && w.snapLogSize > 0 && w.sinceSnap.Load() >= max(w.snapLogSize, w.snapBytes.Load()) {
		select {
		case w.snapTrigger <- struct{}{}:
		default:
		}
	}
	return nil
}

// done marks out as in the file for good: its waiters complete.
func (w *wal) done() {
	if len(w.out) == 0 {
		return
	}
	w.base += int64(len(w.out))
	w.queued.Add(-int64(len(w.out)))
	w.spare, w.out, w.written = w.out[:0], nil, 0
	if w.mode != FsyncAlways {
		return
	}
	w.outUndo.release(w.e)
	w.mu.Lock()
	w.resolved = max(w.resolved, w.outLSN)
	w.settled.Store(w.resolved)
	w.ready = w.takeWaiters(w.ready[:0], w.resolved, false, nil)
	w.mu.Unlock()
	w.complete()
}

// takeWaiters resolves the waiters up to lsn (only the blocking ones with
// onlyBlocking): blocking ones are called here, with err, under w.mu, so that
// nobody sees w.resolved pass their frame before their change applied; the
// Submits move from w.waiters to dst. w.mu is held.
func (w *wal) takeWaiters(dst []waiter, lsn uint64, onlyBlocking bool, err error) []waiter {
	keep := w.waiters[:0]
	for _, wt := range w.waiters {
		switch {
		case wt.lsn > lsn || onlyBlocking && wt.b != nil:
			keep = append(keep, wt)
		case wt.b == nil:
			wt.done(nil, err)
		default:
			dst = append(dst, wt)
		}
	}
	clear(w.waiters[len(keep):])
	w.waiters = keep
	return dst
}

// complete hands the ready Submits to the completer, which calls them with
// nil (a rollback has set their ops' errors).
func (w *wal) complete() {
	if len(w.ready) == 0 {
		return
	}
	w.cmu.Lock()
	w.cq = append(w.cq, w.ready...)
	w.cmu.Unlock()
	select {
	case w.cwake <- struct{}{}:
	default:
	}
	clear(w.ready)
	w.ready = w.ready[:0]
}

// storageError is what clients get while the log fails.
func (w *wal) storageError(err error) *ndbclient.Error {
	return ndbclient.Errorf(ndbclient.CodeStorage, "data dir %s: %v; the change was not applied", w.dir.path, err)
}

// fail handles a failed write or fsync (see the top of this file).
func (w *wal) fail(err error) {
	w.writeErrors.Add(1)
	serr := w.storageError(err)
	cutErr := w.cutBack()
	if cutErr != nil {
		err = errors.Join(err, cutErr)
	}
	w.failedAt = time.Now()
	w.mu.Lock()
	first := w.failed == nil
	w.mu.Unlock()
	level := slog.LevelError
	if !first {
		level = slog.LevelDebug
	}
	// Logged before writes are refused, so that whoever is refused can
	// already read why (as writing again is logged before it is allowed).
	w.log.LogAttrs(context.Background(), level, "data dir: the log cannot be written; writes are refused until it can",
		slog.String("dir", w.dir.path), slog.String("file", w.dir.logName(w.seq)), slog.String("fsync", w.mode.String()),
		slog.Int64("good_bytes", w.base), slog.Any("error", err))
	w.mu.Lock()
	w.failed = serr
	w.refuse.Store(serr)
	w.mu.Unlock()
	if w.mode != FsyncAlways {
		return // out stays, to be written again
	}
	if cutErr != nil {
		// The file still holds the frames past base: a restart would
		// replay them. Their clients wait until it cannot (retry).
		w.rollbackDue = serr
		return
	}
	w.rollbackAll(serr)
}

// cutBack, after a failed write or fsync, cuts the file back to base, its
// last good length, so that no frame past it is ever replayed: their
// changes are to be rolled back (always) or written again. If the file
// cannot be cut, the log goes on in a new file whose first entry says
// where this one ends (recovery reads it first: logEnd); if that fails
// too, the error says so and the file stays as it is.
func (w *wal) cutBack() error {
	if !w.needTrunc {
		return nil
	}
	terr := w.f.Truncate(w.base)
	if terr == nil {
		w.needTrunc, w.written, w.dirty = false, 0, false
		return nil
	}
	if h := w.e.cfg.cutBackHook; h != nil {
		if err := h(); err != nil {
			return errors.Join(fmt.Errorf("cut the log back to %d bytes: %w", w.base, terr), err)
		}
	}
	first := appendLogEnd(beginFrame(nil), w.seq, w.base)
	endFrame(first, 0)
	f, err := w.dir.createLog(w.seq+1, first, w.e.cfg.logFileHook)
	if err != nil {
		return errors.Join(fmt.Errorf("cut the log back to %d bytes: %w", w.base, terr), err)
	}
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "data dir: the log could not be cut back after a failed write; it goes on in a new file, which says where the old one ends",
		slog.String("dir", w.dir.path), slog.String("file", w.dir.logName(w.seq)), slog.Int64("good_bytes", w.base),
		slog.String("new_file", w.dir.logName(w.seq+1)), slog.Any("error", terr))
	_ = w.f.Close()
	w.f, w.seq, w.base = f, w.seq+1, int64(fileHeaderLen+len(first))
	w.needTrunc, w.written, w.dirty = false, 0, false
	return nil
}

// rollbackAll undoes every change not yet durable, newest first, with every
// partition locked, and completes the Submits that wait for them.
func (w *wal) rollbackAll(serr *ndbclient.Error) {
	// Appenders that wait holding Engine.mu must let go before the rollback
	// takes every partition lock.
	w.mu.Lock()
	w.ready = w.takeWaiters(w.ready[:0], w.lsn, true, serr)
	w.mu.Unlock()
	parts := w.e.allPartitions()
	for _, p := range parts {
		p.mu.Lock()
	}
	now := w.e.now()
	w.mu.Lock()
	w.undo.rollbackFailing(now, serr)
	w.undo.reset()
	w.outUndo.rollbackFailing(now, serr)
	w.outUndo.reset()
	w.rollbacks.Add(1) // under every partition lock: a snapshot copy sees it before or after
	w.queued.Add(-int64(len(w.buf) + len(w.out)))
	w.buf = w.buf[:0]
	w.out, w.written = w.out[:0], 0
	w.resolved = w.lsn
	w.settled.Store(w.resolved)
	w.ready = w.takeWaiters(w.ready[:0], w.lsn, false, serr)
	failReads(w.ready, serr)
	w.mu.Unlock()
	for _, p := range parts {
		p.mu.Unlock()
	}
	w.complete()
}

// failReads fails the reads of Submits that waited on frames now rolled
// back: they saw changes that never happened. (Their writes were failed by
// the rollback itself.)
func failReads(ws []waiter, err error) {
	for _, wt := range ws {
		for _, op := range wt.b.Ops {
			if op.Kind == ndbclient.OpRead && op.Err == nil {
				op.Err, op.Row = err, op.Row[:0]
			}
		}
	}
}

// retry tries a failing log again: in always mode, writes may come again
// after retryAfter; in the others, what the buffer holds is written again.
func (w *wal) retry() {
	if w.cutBack() != nil {
		return
	}
	if w.mode == FsyncAlways {
		if serr := w.rollbackDue; serr != nil {
			w.rollbackDue = nil
			w.rollbackAll(serr)
		}
		if time.Since(w.failedAt) < w.every {
			return
		}
	} else {
		for {
			more, err := w.flushOnce(w.mode != FsyncNo)
			if err != nil {
				w.writeErrors.Add(1)
				w.failedAt = time.Now()
				_ = w.cutBack()
				return
			}
			if !more {
				break
			}
		}
	}
	// Logged first, so that the line comes before any write it lets in.
	w.log.LogAttrs(context.Background(), slog.LevelWarn, "data dir: the log is written again; writes are accepted",
		slog.String("dir", w.dir.path), slog.String("file", w.dir.logName(w.seq)))
	w.mu.Lock()
	w.failed = nil
	w.refuse.Store(nil)
	w.mu.Unlock()
}

// rotate writes and fsyncs what the buffer holds to the current file, then
// starts the next one: frames appended from then on go there. A snapshot
// taken after it returns holds, for each row, a state at least as new as the
// new file's start.
func (w *wal) rotate() walReply {
	if w.failing() {
		return walReply{err: errors.New("the log is failing")}
	}
	// The buffer as of now goes to this file; frames appended from here on
	// wait in the buffer for the next one.
	took, pending := w.take()
	if err := w.writeOut(true, took > 0); err != nil {
		w.fail(err)
		return walReply{err: err}
	}
	f, err := w.dir.createLog(w.seq+1, nil, w.e.cfg.logFileHook)
	if err != nil {
		return walReply{err: err}
	}
	_ = w.f.Close() // fsynced above
	w.f, w.seq, w.base = f, w.seq+1, fileHeaderLen
	return walReply{seq: w.seq, pending: pending, rollbacks: w.rollbacks.Load()}
}

// finish stops the log for Close: every frame is written and fsynced.
func (w *wal) finish() error {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	var err error
	if w.failing() {
		w.retry()
	}
	if serr := w.rollbackDue; serr != nil {
		// The failed frames are still in the file, and the process ends:
		// whether a restart replays them depends on what the disk kept.
		w.rollbackDue = nil
		w.rollbackAll(ndbclient.Errorf(ndbclient.CodeUnknownResult,
			"data dir %s: the log failed and could not be cut back (%v); the change may or may not be there after a restart", w.dir.path, serr))
	}
	if !w.failing() {
		for {
			more, ferr := w.flushOnce(true)
			if ferr != nil {
				err = ferr
				w.fail(ferr)
				break
			}
			if !more {
				break
			}
		}
	} else {
		err = errors.New("the log is failing")
	}
	if err != nil {
		w.mu.Lock()
		lost := len(w.out) + len(w.buf)
		w.mu.Unlock()
		if lost > 0 {
			w.log.LogAttrs(context.Background(), slog.LevelError, "data dir: acknowledged writes could not be written to the log and are lost",
				slog.String("dir", w.dir.path), slog.Int("bytes", lost), slog.Any("error", err))
		}
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// request sends a request to the writer and waits for its reply.
func (w *wal) request(kind int) walReply {
	r := walReq{kind: kind, reply: make(chan walReply, 1)}
	select {
	case w.reqs <- r:
		return <-r.reply
	case <-w.stopped:
		return walReply{err: errClosed}
	}
}
