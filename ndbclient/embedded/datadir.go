package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// dataDir is the directory of the engine's files:
//
//	LOCK                 held (flock) while an engine uses the dir
//	log-<seq, 16 hex>    the log, one file per run and per snapshot (and per
//	                     file that could not be cut back: wal.cutBack)
//	snap-<seq>           a snapshot: every row as of some time after log-<seq> began
//	snap-<seq>.tmp       a snapshot being written (removed at start-up)
//	log-<seq>.dropped    a log after a corrupt one, set aside by a recovery
//	                     (removed by the next snapshot)
//
// Recovery loads the newest snapshot, snap-S, then replays log-S, log-S+1, ...
// in order (every log from the first, without a snapshot).
type dataDir struct {
	path string
	lock *os.File
}

// openDataDir creates the dir if needed and takes its lock.
func openDataDir(path string) (*dataDir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", path, err)
	}
	// The dir's own entry must last too, if it was just made.
	if err := (&dataDir{path: filepath.Dir(filepath.Clean(path))}).sync(); err != nil {
		return nil, fmt.Errorf("data dir %s: fsync its parent: %w", path, err)
	}
	f, err := os.OpenFile(filepath.Join(path, "LOCK"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s is not writable: %w", path, err)
	}
	if err := lockFile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir %s is in use by another ndbgate (its LOCK is held): %w", path, err)
	}
	// Check that files can be made and removed, before anything is loaded.
	probe := filepath.Join(path, "probe.tmp")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir %s is not writable: %w", path, err)
	}
	_ = os.Remove(probe)
	return &dataDir{path: path, lock: f}, nil
}

func (d *dataDir) close() error { return d.lock.Close() } // closing lets go of the flock

func (d *dataDir) logName(seq uint64) string  { return fmt.Sprintf("log-%016x", seq) }
func (d *dataDir) snapName(seq uint64) string { return fmt.Sprintf("snap-%016x", seq) }
func (d *dataDir) file(name string) string    { return filepath.Join(d.path, name) }

// files lists the sequence numbers of the dir's logs and snapshots, in
// ascending order, after removing leftover temporary files.
func (d *dataDir) files() (logs, snaps []uint64, err error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, nil, fmt.Errorf("data dir %s: %w", d.path, err)
	}
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(d.file(name))
			continue
		}
		var list *[]uint64
		var hex string
		switch {
		case strings.HasPrefix(name, "log-"):
			list, hex = &logs, name[4:]
		case strings.HasPrefix(name, "snap-"):
			list, hex = &snaps, name[5:]
		default:
			continue
		}
		if len(hex) != 16 {
			continue
		}
		seq, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			continue
		}
		*list = append(*list, seq)
	}
	slices.Sort(logs)
	slices.Sort(snaps)
	return logs, snaps, nil
}

// createLog makes log-<seq> with its header and the frame first (if any),
// durably (the file and its directory entry), open for appending.
func (d *dataDir) createLog(seq uint64, first []byte, hook func(logFile) logFile) (logFile, error) {
	path := d.file(d.logName(seq))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the log: %w", err)
	}
	if _, err := f.Write(append(appendFileHeader(nil, logMagic, seq), first...)); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = d.sync()
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create the log %s: %w", path, err)
	}
	if hook != nil {
		return hook(f), nil
	}
	return f, nil
}

// sync fsyncs the directory, so that created, renamed and removed entries
// last.
func (d *dataDir) sync() error {
	f, err := os.Open(d.path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
