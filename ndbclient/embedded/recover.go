// Loading a data dir at start (Open): the newest snapshot, then the log after
// it (replay.go), then making the rows fit the memory limit.

package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"time"
)

// Persistence (docs/ARCHITECTURE.md, "Persistence"): with Config.DataDir the
// engine keeps a log of every change (wal.go) and takes snapshots that bound
// it. A snapshot starts by rotating the log; it then copies the rows, a few
// at a time under each partition's lock. Each row it holds is as new as the
// new log's start or newer, and the log holds every change since that start as
// row images, so loading the snapshot and replaying the log after it gives the
// state at the crash (or at Close).

// Open returns a running engine. With cfg.DataDir it first loads the data
// dir: its newest snapshot, then the log after it. A log's torn or corrupt
// tail is cut at the last good frame (and logged); a corrupt snapshot is an
// error.
func Open(cfg Config) (*Engine, error) {
	if cfg.DataDir == "" {
		return New(cfg), nil
	}
	e := makeEngine(cfg)
	d, err := openDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	next, pending, snapBytes, err := e.recover(d)
	if err == nil {
		err = e.fitAfterReplay()
	}
	if err == nil {
		var f logFile
		if f, err = d.createLog(next, nil, cfg.logFileHook); err == nil {
			e.wal = newWAL(e, d, next, f, cfg.Fsync)
			e.wal.sinceSnap.Store(pending)
			e.wal.snapBytes.Store(snapBytes)
		} else {
			err = fmt.Errorf("data dir %s: %w", d.path, err)
		}
	}
	if err != nil {
		_ = d.close()
		return nil, err
	}
	e.syncWait = cfg.Fsync == FsyncAlways
	st := e.Stats()
	e.log.LogAttrs(context.Background(), slog.LevelInfo, "data dir loaded", slog.String("dir", d.path),
		slog.Int("tables", st.Tables), slog.Uint64("rows", st.Items), slog.Int64("log_bytes_replayed", pending),
		slog.Duration("took", time.Since(began)), slog.String("fsync", cfg.Fsync.String()))
	e.start()
	return e, nil
}

// recover loads the dir's state; it returns the next log's sequence number,
// the bytes of log replayed and the snapshot's size.
func (e *Engine) recover(d *dataDir) (next uint64, pending, snapBytes int64, err error) {
	logs, snaps, err := d.files()
	if err != nil {
		return 0, 0, 0, err
	}
	now := e.now()
	var start uint64
	if len(snaps) > 0 {
		start = snaps[len(snaps)-1]
		if snapBytes, err = e.loadSnapshot(d, start, now); err != nil {
			return 0, 0, 0, err
		}
		for _, s := range snaps[:len(snaps)-1] { // left by a crash before the cleanup
			_ = os.Remove(d.file(d.snapName(s)))
		}
	}
	var replay []uint64
	for _, l := range logs {
		if l >= start {
			replay = append(replay, l)
		} else {
			_ = os.Remove(d.file(d.logName(l)))
		}
	}
	next = max(start, 0) + 1
	for i, seq := range replay {
		if i > 0 && seq != replay[i-1]+1 || i == 0 && len(snaps) > 0 && seq != start {
			return 0, 0, 0, fmt.Errorf("data dir %s: %s is missing (the files run %s to %s): the log after the snapshot must be whole; restore it, or move the data dir away to start empty",
				d.path, d.logName(seq-1), d.logName(replay[0]), d.logName(replay[len(replay)-1]))
		}
	}
	for i, seq := range replay {
		end := int64(-1)
		if i < len(replay)-1 {
			end = d.logEnd(seq)
		}
		n, cut, err := e.replayLog(d, seq, end, now)
		if err != nil {
			return 0, 0, 0, err
		}
		pending += n
		next = seq + 1
		st, serr := os.Stat(d.file(d.logName(seq)))
		switch {
		case cut && errors.Is(serr, fs.ErrNotExist):
			next = seq // its header was bad and it is gone: the next log takes its number
		case serr == nil && st.Size() == fileHeaderLen && i == len(replay)-1 && (len(snaps) == 0 || seq != start):
			// The last run wrote nothing: its log goes and the next one takes
			// its number, so that a crash loop does not pile up empty logs.
			// (A snapshot's own log stays: the snapshot's log must exist.)
			if err := os.Remove(d.file(d.logName(seq))); err == nil {
				next = seq
			}
		}
		if cut && i < len(replay)-1 {
			// Frames after a gap cannot apply: keep the prefix, and the
			// later files aside for whoever wants to look.
			for _, later := range replay[i+1:] {
				name := d.file(d.logName(later))
				st, _ := os.Stat(name)
				_ = os.Rename(name, name+".dropped")
				e.log.LogAttrs(context.Background(), slog.LevelError, "data dir: dropping a log that follows a corrupt one",
					slog.String("file", name), slog.String("renamed_to", name+".dropped"), slog.Int64("dropped_bytes", fileSize(st)))
			}
			break
		}
	}
	return next, pending, snapBytes, d.sync()
}

func fileSize(st os.FileInfo) int64 {
	if st == nil {
		return 0
	}
	return st.Size()
}

// loadSnapshot applies snap-<seq> and returns its size. Any flaw is an
// error: the snapshot is the base the log applies to.
func (e *Engine) loadSnapshot(d *dataDir, seq uint64, now uint32) (int64, error) {
	st, err := os.Stat(d.file(d.snapName(seq)))
	if err != nil {
		return 0, fmt.Errorf("data dir: %w", err)
	}
	return st.Size(), e.loadSnapshotFile(d, seq, now)
}

func (e *Engine) loadSnapshotFile(d *dataDir, seq uint64, now uint32) error {
	path := d.file(d.snapName(seq))
	corrupt := func(off int64, err error) error {
		return fmt.Errorf("snapshot %s is corrupt at offset %d: %v; ndbgate will not start from a damaged snapshot: restore the file, or move the data dir away to start empty", path, off, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	fr := newFrameReader(f, st.Size())
	hseq, v1, err := fr.readHeader(snapMagic)
	if err == nil && hseq != seq {
		err = fmt.Errorf("header says snapshot %d", hseq)
	}
	if err != nil {
		return corrupt(0, err)
	}
	var ents []entry
	var rows uint64
	ended := false
	for {
		off := fr.off
		p, err := fr.next()
		if err == io.EOF {
			break
		}
		if err == nil && ended {
			err = errors.New("data after the end record")
		}
		if err == nil {
			ents, err = decodeEntries(ents[:0], p)
		}
		if err == nil {
			err = e.checkEntries(ents, true, v1)
		}
		for i := 0; err == nil && i < len(ents); i++ {
			switch en := &ents[i]; en.kind {
			case entPut:
				rows++
			case entEnd:
				switch {
				case i != len(ents)-1:
					err = errors.New("entries after the end record")
				case en.table != uint64(len(*e.tables.Load())) || en.rows != rows:
					err = fmt.Errorf("the end record counts %d tables and %d rows, the snapshot holds %d and %d", en.table, en.rows, len(*e.tables.Load()), rows)
				}
				ended = true
			}
		}
		if err != nil {
			return corrupt(off, err)
		}
		if err := e.applyEntries(ents, now); err != nil {
			return fmt.Errorf("data dir: loading %s: %w", path, err)
		}
	}
	if !ended {
		return corrupt(fr.off, errors.New("no end record: the snapshot is incomplete"))
	}
	return nil
}

// fitAfterReplay makes the loaded rows fit the memory limit, which the
// replay ignored: eviction tables make room, as for a write; if that is not
// enough, the start fails.
func (e *Engine) fitAfterReplay() error {
	used := e.used.Load()
	if e.limit == 0 || used <= e.limit {
		return nil
	}
	now := e.now()
	for _, t := range *e.tables.Load() {
		if !t.eviction {
			continue
		}
		p := t.parts[0]
		p.mu.Lock()
		ok := p.reserve(0, -1, now) // evicts until nothing more is over
		p.mu.Unlock()
		if ok {
			return nil
		}
		break // reserve has tried every eviction table
	}
	return fmt.Errorf("data dir: the rows do not fit embedded.memory_limit (%d bytes; they take %d); raise it", e.limit, used)
}
