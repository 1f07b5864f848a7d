// Snapshots: when they are taken (snapshotter), how one is written beside the
// log it bounds, and the last one at Close (closeDataDir).

package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

const (
	snapStep       = 1024    // rows copied per lock hold
	snapFrameBytes = 1 << 20 // a snapshot frame's payload, about
	snapRetryAfter = 30 * time.Second
)

// snapshotter takes a snapshot every SnapshotInterval, and when the log
// asks for one (SnapshotLogSize), if the log has grown since the last.
func (e *Engine) snapshotter() {
	var tick <-chan time.Time
	if iv := e.cfg.SnapshotInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	var quiet time.Time // after a failure, wait before trying again
	for {
		select {
		case <-e.stop:
			return
		case <-tick:
		case <-e.wal.snapTrigger:
		}
		if e.wal.sinceSnap.Load() == 0 || time.Now().Before(quiet) {
			continue
		}
		if err := e.snapshot(); err != nil {
			quiet = time.Now().Add(snapRetryAfter)
			e.log.LogAttrs(context.Background(), slog.LevelWarn, "data dir: snapshot failed; the log keeps everything, the next try is in 30s",
				slog.String("dir", e.wal.dir.path), slog.Any("error", err))
		}
	}
}

// snapshot writes a snapshot (temporary file, fsync, rename, fsync the dir)
// and then removes the snapshot and logs it replaces.
func (e *Engine) snapshot() error {
	w, d := e.wal, e.wal.dir
	if err := e.roomForSnapshot(); err != nil {
		return err
	}
	began := time.Now()
	e.mu.Lock() // no CreateTable between the rotation and the table list
	r := w.request(reqRotate)
	tables := *e.tables.Load()
	e.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("rotate the log: %w", r.err)
	}
	final := d.file(d.snapName(r.seq))
	tmp := final + ".tmp"
	if e.cfg.snapshotHook != nil {
		e.cfg.snapshotHook()
	}
	rows, size, err := e.writeSnapshot(tmp, r.seq, tables)
	if err == nil {
		// The copy may hold changes not yet durable (always mode): wait
		// until they are, or rolled back; after a rollback the copy may
		// hold a change that never happened, so it is discarded.
		w.settle()
		if w.rollbacks.Load() != r.rollbacks {
			err = errors.New("the log rolled back changes while the snapshot was copied; discarded (the log keeps everything)")
		}
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err == nil {
		err = d.sync()
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	w.sinceSnap.Add(-r.pending)
	w.snapBytes.Store(size)
	e.snapshots.Add(1)
	logs, snaps, _ := d.files()
	for _, s := range snaps {
		if s < r.seq {
			_ = os.Remove(d.file(d.snapName(s)))
		}
	}
	for _, l := range logs {
		if l < r.seq {
			_ = os.Remove(d.file(d.logName(l)))
		}
	}
	// Logs set aside by a recovery (.dropped) are older than this snapshot.
	dropped, _ := filepath.Glob(d.file("log-*.dropped"))
	for _, name := range dropped {
		var seq uint64
		if _, err := fmt.Sscanf(filepath.Base(name), "log-%016x.dropped", &seq); err == nil && seq < r.seq {
			if os.Remove(name) == nil {
				e.log.LogAttrs(context.Background(), slog.LevelInfo, "data dir: removed a log set aside by a recovery; a snapshot has replaced it",
					slog.String("file", name))
			}
		}
	}
	_ = d.sync()
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "data dir: snapshot written", slog.String("file", final),
		slog.Uint64("rows", rows), slog.Int64("bytes", size), slog.Duration("took", time.Since(began)))
	return nil
}

// snapHeadroom is the free space a snapshot leaves for the log, past its
// own estimated size: a snapshot must not fill the disk the log needs. Small,
// so that a small volume still gets snapshots (without them the log grows).
const snapHeadroom = 16 << 20

// roomForSnapshot refuses a snapshot the disk has no room for: its size,
// estimated as the last snapshot's or the rows' bytes in memory, whichever
// is larger, plus snapHeadroom for the log.
func (e *Engine) roomForSnapshot() error {
	free := freeBytes(e.wal.dir.path)
	if e.cfg.freeBytes != nil {
		free = e.cfg.freeBytes()
	}
	if free < 0 {
		return nil // unknown: try
	}
	need := max(e.wal.snapBytes.Load(), e.used.Load()) + snapHeadroom
	if free < need {
		return fmt.Errorf("not enough free space for a snapshot: %d bytes free, about %d needed (the snapshot and room for the log); the log keeps everything", free, need)
	}
	return nil
}

func (e *Engine) writeSnapshot(path string, seq uint64, tables []*table) (rows uint64, size int64, err error) {
	// Its cursor is a slot number, kept across lock holds: no slot array may
	// be renumbered meanwhile (partition.settle).
	e.snapshotting.Add(1)
	defer e.snapshotting.Add(-1)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	size = fileHeaderLen
	_, _ = bw.Write(appendFileHeader(nil, snapMagic, seq))
	emit := func(frame []byte) {
		endFrame(frame, 0)
		size += int64(len(frame))
		_, _ = bw.Write(frame) // bufio keeps the first error for Flush
	}
	frame := beginFrame(nil)
	for _, t := range tables {
		frame = appendCreate(frame, t.id, encodeSchema(t.schema))
	}
	if len(tables) > 0 {
		emit(frame)
	}
	now := e.now()
	for _, t := range tables {
		for _, p := range t.parts {
			for s := 0; ; {
				frame = beginFrame(frame[:0])
				p.mu.Lock()
				n := len(p.slots)
				for stop := s + snapStep; s < n && s < stop && len(frame) < snapFrameBytes; s++ {
					if sl := &p.slots[s]; sl.size != 0 && !p.expired(int32(s), now) {
						frame = appendPut(frame, t.id, sl.state, sl.used, p.row(int32(s)))
						rows++
					}
				}
				p.mu.Unlock()
				if len(frame) > frameHeaderLen {
					emit(frame)
				}
				if s >= n {
					break
				}
			}
		}
	}
	frame = appendEnd(beginFrame(frame[:0]), uint64(len(tables)), rows)
	emit(frame)
	if err := bw.Flush(); err != nil {
		return 0, 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, 0, fmt.Errorf("fsync %s: %w", path, err)
	}
	return rows, size, nil
}

// closeDataDir takes the last snapshot (if the log has grown since the
// last one), fsyncs and closes the log, and lets go of the dir.
func (e *Engine) closeDataDir() error {
	w := e.wal
	var errs []error
	if w.sinceSnap.Load() > 0 && !w.failing() {
		if err := e.snapshot(); err != nil {
			errs = append(errs, fmt.Errorf("data dir %s: snapshot at close: %w (the log keeps everything)", w.dir.path, err))
		}
	}
	if r := w.request(reqFinish); r.err != nil {
		errs = append(errs, fmt.Errorf("data dir %s: close the log: %w", w.dir.path, r.err))
	}
	<-w.cstopped // every Submit has completed
	if err := w.dir.close(); err != nil {
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	if err != nil { // callers that defer Close do not look
		e.log.LogAttrs(context.Background(), slog.LevelError, "data dir: close", slog.Any("error", err))
	}
	return err
}
