package embedded

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
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

// replayLog applies log-<seq>, up to end if end >= 0 (logEnd). A torn or
// corrupt frame ends it: the file is cut there (cut reports it). It returns
// the bytes of frames applied.
func (e *Engine) replayLog(d *dataDir, seq uint64, end int64, now uint32) (applied int64, cut bool, err error) {
	path := d.file(d.logName(seq))
	f, err := os.Open(path)
	if err != nil {
		return 0, false, fmt.Errorf("data dir: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("data dir: %w", err)
	}
	size := st.Size()
	if end >= fileHeaderLen && end < size {
		// What follows end is what failed writes left and the writer could
		// not cut back: refused changes (always), or frames it wrote again
		// in the next log (everysec, no).
		e.log.LogAttrs(context.Background(), slog.LevelWarn, "data dir: skipping the end of a log whose last writes failed (the next log says where it ends)",
			slog.String("file", path), slog.Int64("offset", end), slog.Int64("skipped_bytes", size-end))
		size = end
	}
	fr := newFrameReader(f, size)
	hseq, v1, err := fr.readHeader(logMagic)
	if err == nil && hseq != seq {
		err = fmt.Errorf("header says log %d", hseq)
	}
	if err != nil {
		return 0, true, e.cutLog(path, 0, st.Size(), err)
	}
	var ents []entry
	for {
		off := fr.off
		p, err := fr.next()
		if err == io.EOF {
			return applied, false, nil
		}
		if err == nil {
			ents, err = decodeEntries(ents[:0], p)
		}
		if err == nil {
			err = e.checkEntries(ents, false, v1)
		}
		if err != nil {
			return applied, true, e.cutLog(path, off, st.Size(), err)
		}
		if err := e.applyEntries(ents, now); err != nil {
			return 0, false, fmt.Errorf("data dir: replaying %s: %w", path, err)
		}
		applied += fr.off - off
	}
}

// cutLog truncates a log at off, the end of its last good frame (a file
// whose header is bad goes whole), and says so.
func (e *Engine) cutLog(path string, off, size int64, why error) error {
	e.log.LogAttrs(context.Background(), slog.LevelWarn, "data dir: the log has a torn or corrupt tail; cutting it after the last good record",
		slog.String("file", path), slog.Int64("offset", off), slog.Int64("dropped_bytes", size-off), slog.String("reason", why.Error()))
	if off < fileHeaderLen {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("data dir: remove %s: %w", path, err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		err = f.Truncate(off)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("data dir: cut %s at %d: %w", path, off, err)
	}
	return nil
}

// logEnd is where log-<seq> ends if log-<seq+1> begins with a logend entry
// naming it (the writer could not cut log-<seq> back after a failed write,
// and went on in a new file), else -1.
func (d *dataDir) logEnd(seq uint64) int64 {
	f, err := os.Open(d.file(d.logName(seq + 1)))
	if err != nil {
		return -1
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return -1
	}
	fr := newFrameReader(f, st.Size())
	if h, _, err := fr.readHeader(logMagic); err != nil || h != seq+1 {
		return -1
	}
	p, err := fr.next()
	if err != nil {
		return -1
	}
	ents, err := decodeEntries(nil, p)
	if err != nil || len(ents) != 1 || ents[0].kind != entLogEnd || ents[0].table != seq {
		return -1
	}
	return int64(ents[0].rows)
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

// checkEntries checks a frame's entries against the tables before any of
// them applies, so that a frame applies whole or not at all. snapshot: the
// entries a snapshot holds (puts, creates, end). v1: the frame is from a
// version 1 file: its rows are checked as such, then upgraded (en.data
// then holds the row in the current encoding).
func (e *Engine) checkEntries(ents []entry, snapshot, v1 bool) error {
	tables := *e.tables.Load()
	created := 0
	for i := range ents {
		en := &ents[i]
		var t *table
		if en.kind == entLogEnd {
			if snapshot {
				return fmt.Errorf("entry %d: a snapshot holds no log end", i)
			}
			continue // read before the log it names (logEnd)
		}
		if en.kind != entCreate && en.kind != entEnd {
			if en.table >= uint64(len(tables)) {
				return fmt.Errorf("entry %d: no table %d", i, en.table)
			}
			t = tables[en.table]
		}
		switch en.kind {
		case entPut:
			check := t.checkRow
			if v1 {
				check = t.checkRowV1
			}
			if err := check(en.data); err != nil {
				return fmt.Errorf("entry %d: table %s: %w", i, t.schema.FullName(), err)
			}
		case entDelete, entClear:
			if snapshot {
				return fmt.Errorf("entry %d: a snapshot holds no deletes", i)
			}
			if en.kind == entDelete {
				if err := t.checkKeyBytes(en.data); err != nil {
					return fmt.Errorf("entry %d: table %s: %w", i, t.schema.FullName(), err)
				}
			}
		case entCreate:
			s, err := decodeSchema(en.data)
			if err != nil {
				return fmt.Errorf("entry %d: %w", i, err)
			}
			switch id := en.table; {
			case id < uint64(len(tables)):
				if !tables[id].sameShape(s) {
					return fmt.Errorf("entry %d: table %d is %s, not %s", i, id, tables[id].schema.FullName(), s.FullName())
				}
			case id != uint64(len(tables)+created):
				return fmt.Errorf("entry %d: table %d follows table %d", i, id, len(tables)+created-1)
			default:
				created++
			}
		case entEnd:
			if !snapshot {
				return fmt.Errorf("entry %d: an end record in a log", i)
			}
		}
	}
	if v1 {
		for i := range ents {
			if en := &ents[i]; en.kind == entPut {
				en.data = tables[en.table].upgradeRow(nil, en.data)
			}
		}
	}
	return nil
}

// applyEntries applies checked entries. Its errors are not corruption: the
// rows do not fit the memory limit.
func (e *Engine) applyEntries(ents []entry, now uint32) error {
	for i := range ents {
		en := &ents[i]
		switch en.kind {
		case entCreate:
			if en.table < uint64(len(*e.tables.Load())) {
				continue // the same table (checked)
			}
			s, _ := decodeSchema(en.data)
			t, err := newTable(s, e.cfg.Partitions)
			if err != nil {
				return err
			}
			t.restored = true
			e.mu.Lock()
			if e.byName[s.FullName()] != nil {
				e.mu.Unlock()
				return fmt.Errorf("table %s is created twice", s.FullName())
			}
			e.addTable(t)
			e.mu.Unlock()
		case entPut:
			if err := (*e.tables.Load())[en.table].replayPut(en, now); err != nil {
				return err
			}
		case entDelete:
			t := (*e.tables.Load())[en.table]
			p, tag := t.locateKey(en.data)
			p.mu.Lock()
			if s := p.lookup(tag, en.data); s >= 0 {
				p.del(s)
			}
			p.mu.Unlock()
		case entClear:
			for _, p := range (*e.tables.Load())[en.table].parts {
				p.mu.Lock()
				p.clear(now)
				p.mu.Unlock()
			}
		}
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

// replayPut stores a logged row image: a row already expired is a delete.
func (t *table) replayPut(en *entry, now uint32) error {
	key := rowKey(en.data)
	p, tag := t.locateKey(key)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.lookup(tag, key)
	if x := t.expireOf(en.data); x != 0 && x <= now {
		if s >= 0 {
			p.del(s)
		}
		return nil
	}
	// The limit waits for the end of the replay (fitAfterReplay): a snapshot
	// plus log frames older than its copy pass through states that never
	// existed, and may not fit where the final state does.
	s, err := p.put(s, tag, en.data, now, true)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.schema.FullName(), err)
	}
	sl := &p.slots[s]
	sl.state, sl.used = en.state&(stFetched|stStale|stToken), min(en.used, now)
	return nil
}

// locateKey is the partition and index tag of an encoded key, as runOne
// finds them from the key's values.
func (t *table) locateKey(key []byte) (*partition, uint32) {
	h := t.e.hash(key)
	d := h
	if t.dist != nil {
		var kb [keyStack]byte
		d = t.e.hash(t.appendDistBytes(kb[:0], key))
	}
	return t.parts[(d>>32)%uint64(len(t.parts))], uint32(h)
}

// keyColumns walks an encoded key, calling fn with each key column's
// position and bytes; false if the key is malformed.
func (t *table) keyColumns(key []byte, fn func(pos int, b []byte)) bool {
	for pos, c := range t.pk {
		ci := &t.cols[c]
		n := ci.width
		if n == 0 {
			if len(key) < ci.lenBytes {
				return false
			}
			v := getUint(key, ci.lenBytes)
			if v > uint64(ci.maxLen) || v > uint64(len(key)-ci.lenBytes) {
				return false
			}
			n = ci.lenBytes + int(v)
		}
		if n > len(key) {
			return false
		}
		if fn != nil {
			fn(pos, key[:n])
		}
		key = key[n:]
	}
	return len(key) == 0
}

func (t *table) checkKeyBytes(key []byte) error {
	if !t.keyColumns(key, nil) {
		return errors.New("malformed key")
	}
	return nil
}

// appendDistBytes appends the encoded distribution key of an encoded
// (well-formed) key.
func (t *table) appendDistBytes(dst, key []byte) []byte {
	var cols [16][]byte
	parts := cols[:0]
	if len(t.pk) > len(cols) {
		parts = make([][]byte, 0, len(t.pk))
	}
	t.keyColumns(key, func(_ int, b []byte) { parts = append(parts, b) })
	for _, pos := range t.dist {
		dst = append(dst, parts[pos]...)
	}
	return dst
}

// checkRow checks that row is a well-formed row of t (rowcodec.go): every
// length within its column's and the row's bounds.
func (t *table) checkRow(row []byte) error {
	// A one-byte key and nothing else (or an empty last variable column)
	// makes a row of two bytes; a key length in 3 bytes needs them.
	if len(row) < 2 || row[0] == 0 || row[0] == keyLenLong && len(row) < 3 {
		return errors.New("row too short")
	}
	ks, base := keyBounds(row)
	if base > len(row) {
		return errors.New("key longer than the row")
	}
	if ks == 3 && base-ks < keyLenLong {
		return errors.New("a short key's length in 3 bytes")
	}
	if err := t.checkKeyBytes(row[ks:base]); err != nil {
		return err
	}
	if base+t.nullBytes+t.denseLen > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	off := t.varStart(row, base)
	if off > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	for j, c := range t.varCols {
		ci := &t.cols[c]
		if j == len(t.varCols)-1 {
			if n := len(row) - off; n > ci.maxLen {
				return fmt.Errorf("column %q: bad length %d", ci.Name, n)
			}
			return nil
		}
		var err error
		if off, err = varColumnEnd(row, off, ci); err != nil {
			return err
		}
	}
	if off != len(row) {
		return fmt.Errorf("%d bytes after the last column", len(row)-off)
	}
	return nil
}

// varColumnEnd checks the length-prefixed column ci at off in row and
// returns where it ends.
func varColumnEnd(row []byte, off int, ci *colInfo) (int, error) {
	if off+ci.lenBytes > len(row) {
		return 0, fmt.Errorf("column %q cut short", ci.Name)
	}
	n := getUint(row[off:], ci.lenBytes)
	if n > uint64(ci.maxLen) || n > uint64(len(row)-off-ci.lenBytes) {
		return 0, fmt.Errorf("column %q: bad length %d", ci.Name, n)
	}
	return off + ci.lenBytes + int(n), nil
}

// checkRowV1 is checkRow for a row of the data dir's version 1 files
// (rowcodec.go, upgradeRow).
func (t *table) checkRowV1(row []byte) error {
	if len(row) < 2 {
		return errors.New("row too short")
	}
	k := int(binary.LittleEndian.Uint16(row))
	if 2+k > len(row) {
		return errors.New("key longer than the row")
	}
	if k == 0 {
		return errors.New("empty key")
	}
	if err := t.checkKeyBytes(row[2 : 2+k]); err != nil {
		return err
	}
	off := 2 + k + t.nullBytes + t.v1Fixed
	if off > len(row) {
		return errors.New("row too short for its fixed columns")
	}
	for _, c := range t.varCols {
		ci := &t.cols[c]
		var err error
		if off, err = varColumnEnd(row, off, ci); err != nil {
			return err
		}
	}
	if off != len(row) {
		return fmt.Errorf("%d bytes after the last column", len(row)-off)
	}
	return nil
}

// schemaRec is a table's schema as the data dir keeps it: what shapes its
// rows (ndbclient.Table's StateColumn is for NDB and is not kept).
type schemaRec struct {
	Database          string             `json:"database"`
	Name              string             `json:"name"`
	Columns           []ndbclient.Column `json:"columns"`
	PrimaryKey        []int              `json:"primary_key"`
	DistributionKey   []int              `json:"distribution_key,omitempty"`
	Partitions        int                `json:"partitions"`
	OrderedPrimaryKey bool               `json:"ordered_primary_key,omitempty"`
	Eviction          bool               `json:"eviction,omitempty"`
	ExpireColumn      int                `json:"expire_column"`
}

func encodeSchema(s *ndbclient.Table) []byte {
	b, err := json.Marshal(schemaRec{
		Database: s.Database, Name: s.Name, Columns: s.Columns, PrimaryKey: s.PrimaryKey,
		DistributionKey: s.DistributionKey, Partitions: s.Partitions, OrderedPrimaryKey: s.OrderedPrimaryKey,
		Eviction: s.Eviction, ExpireColumn: s.ExpireColumn,
	})
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// maxRestoredPartitions bounds a stored table's partitions (the config allows
// at most 4096).
const maxRestoredPartitions = 4096

func decodeSchema(b []byte) (*ndbclient.Table, error) {
	var r schemaRec
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	if r.Partitions < 1 || r.Partitions > maxRestoredPartitions {
		return nil, fmt.Errorf("table %s.%s: %d partitions", r.Database, r.Name, r.Partitions)
	}
	s := &ndbclient.Table{Database: r.Database, Name: r.Name, Columns: r.Columns, PrimaryKey: r.PrimaryKey,
		DistributionKey: r.DistributionKey, Partitions: r.Partitions, OrderedPrimaryKey: r.OrderedPrimaryKey,
		Eviction: r.Eviction, ExpireColumn: r.ExpireColumn}
	if _, err := newTable(s, 1); err != nil {
		return nil, fmt.Errorf("table schema: %w", err)
	}
	return s, nil
}

// shapeDiff says how s differs from the stored table, for the error that a
// configuration no longer matches its data dir.
func (t *table) shapeDiff(s *ndbclient.Table) string {
	st := t.schema
	if len(s.Columns) != len(st.Columns) {
		return fmt.Sprintf("%d columns stored, %d asked for", len(st.Columns), len(s.Columns))
	}
	for i := range s.Columns {
		if a, b := st.Columns[i], s.Columns[i]; !a.Equal(&b) {
			return fmt.Sprintf("column %d stored as %s %s(%d), asked for as %s %s(%d)", i, a.Name, a.Type, a.Length, b.Name, b.Type, b.Length)
		}
	}
	switch {
	case !slices.Equal(s.PrimaryKey, st.PrimaryKey):
		return "another primary key"
	case s.Eviction != st.Eviction:
		return fmt.Sprintf("eviction %v stored, %v asked for", st.Eviction, s.Eviction)
	case s.ExpireColumn != st.ExpireColumn:
		return "another expire column"
	case s.Partitions != 0 && s.Partitions != st.Partitions:
		return fmt.Sprintf("%d partitions stored, %d asked for", st.Partitions, s.Partitions)
	}
	return "another distribution key"
}

// Restored reports whether the table named like s was loaded from the data
// dir (its shape then comes from there, and CreateTable checks a
// configuration's against it).
func (e *Engine) Restored(s *ndbclient.Table) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.byName[s.FullName()]
	return t != nil && t.restored
}

// logCreate logs the creation of t, which will be table number
// len(tables). e.mu is held.
func (e *Engine) logCreate(t *table) error {
	if err := e.wal.refusing(); err != nil {
		return err
	}
	frame := beginFrame(nil)
	frame = appendCreate(frame, len(*e.tables.Load()), encodeSchema(t.schema))
	endFrame(frame, 0)
	return e.wal.appendWait(frame)
}

// Snapshots.

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
