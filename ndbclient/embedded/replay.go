// Replaying the data dir's frames: a log file up to its last good frame (a
// torn tail is cut), each frame's entries checked against the tables, then
// applied as row images.

package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
)

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
