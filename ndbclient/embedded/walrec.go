package embedded

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The data dir's two file kinds, the log and the snapshot, share one
// layout (docs/ARCHITECTURE.md, "Persistence"):
//
//	header  [8] magic ("NDBGLOG2" or "NDBGSNP2"), [8] sequence number, LE
//	frames  [4] payload length N, LE; [4] CRC32C of those 4 bytes and the
//	        payload; [N] payload: one or more entries
//
// Entries (integers uvarint unless sized):
//
//	put     0x01 table, [1] item state, last access, len, row (rowcodec.go)
//	delete  0x02 table, len, key (the encoded primary key)
//	clear   0x03 table
//	create  0x04 table, len, schema (JSON, schemaRec)
//	end     0x05 tables, rows (a snapshot's last entry)
//	logend  0x06 seq, length: log-<seq> ends at length (a new log's first
//	        entry, when the last one could not be cut back after a failed
//	        write: what follows length there is never replayed)
//
// A frame is applied whole or not at all: a transaction's changes share one.
// Records are row images, not commands, so that replaying one twice, or over
// a snapshot that already holds it, changes nothing.
//
// The magic's last digit is the format's version. Version 1 files (magic
// "NDBGLOG1", "NDBGSNP1") differ only in their rows' encoding, the engine's
// before it was made compact (rowcodec.go): they are still read, and their
// rows upgraded as they load. Files are written in version 2.

const (
	entPut byte = iota + 1
	entDelete
	entClear
	entCreate
	entEnd
	entLogEnd
)

const (
	fileHeaderLen  = 16
	frameHeaderLen = 8
)

var (
	logMagic  = [8]byte{'N', 'D', 'B', 'G', 'L', 'O', 'G', '2'}
	snapMagic = [8]byte{'N', 'D', 'B', 'G', 'S', 'N', 'P', '2'}
	crcTable  = crc32.MakeTable(crc32.Castagnoli)
)

func appendFileHeader(dst []byte, magic [8]byte, seq uint64) []byte {
	dst = append(dst, magic[:]...)
	return binary.LittleEndian.AppendUint64(dst, seq)
}

// beginFrame reserves a frame header at the end of dst; endFrame fills it in
// once the entries after it are appended.
func beginFrame(dst []byte) []byte { return append(dst, 0, 0, 0, 0, 0, 0, 0, 0) }

func endFrame(b []byte, start int) {
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeaderLen))
	c := crc32.Update(0, crcTable, b[start:start+4])
	c = crc32.Update(c, crcTable, b[start+frameHeaderLen:])
	binary.LittleEndian.PutUint32(b[start+4:], c)
}

func appendPut(dst []byte, table int, state uint8, used uint32, row []byte) []byte {
	dst = append(dst, entPut)
	dst = binary.AppendUvarint(dst, uint64(table))
	dst = append(dst, state)
	dst = binary.AppendUvarint(dst, uint64(used))
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	return append(dst, row...)
}

func appendDelete(dst []byte, table int, key []byte) []byte {
	dst = append(dst, entDelete)
	dst = binary.AppendUvarint(dst, uint64(table))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

func appendClear(dst []byte, table int) []byte {
	return binary.AppendUvarint(append(dst, entClear), uint64(table))
}

func appendCreate(dst []byte, table int, schema []byte) []byte {
	dst = append(dst, entCreate)
	dst = binary.AppendUvarint(dst, uint64(table))
	dst = binary.AppendUvarint(dst, uint64(len(schema)))
	return append(dst, schema...)
}

func appendEnd(dst []byte, tables, rows uint64) []byte {
	dst = append(dst, entEnd)
	dst = binary.AppendUvarint(dst, tables)
	return binary.AppendUvarint(dst, rows)
}

func appendLogEnd(dst []byte, seq uint64, length int64) []byte {
	dst = binary.AppendUvarint(append(dst, entLogEnd), seq)
	return binary.AppendUvarint(dst, uint64(length))
}

// entry is one decoded entry. data points into the frame's payload.
type entry struct {
	kind  byte
	table uint64 // end: the table count; logend: the log's seq
	state uint8
	used  uint32
	rows  uint64 // end: the row count; logend: the log's length
	data  []byte // put: row; delete: key; create: schema
}

// decodeEntries appends the entries of a frame's payload to dst. Any
// malformation is an error: the frame is then not applied.
func decodeEntries(dst []entry, p []byte) ([]entry, error) {
	if len(p) == 0 {
		return dst, errors.New("empty frame")
	}
	for len(p) > 0 {
		var e entry
		e.kind, p = p[0], p[1:]
		var ok bool
		if e.table, p, ok = uvarint(p); !ok {
			return dst, fmt.Errorf("entry %d: bad table number", len(dst))
		}
		switch e.kind {
		case entPut:
			if len(p) == 0 {
				return dst, fmt.Errorf("entry %d: put cut short", len(dst))
			}
			e.state, p = p[0], p[1:]
			var used uint64
			if used, p, ok = uvarint(p); !ok || used > 1<<32-1 {
				return dst, fmt.Errorf("entry %d: bad last access", len(dst))
			}
			e.used = uint32(used)
			if e.data, p, ok = lenBytes(p); !ok {
				return dst, fmt.Errorf("entry %d: bad row length", len(dst))
			}
		case entDelete, entCreate:
			if e.data, p, ok = lenBytes(p); !ok {
				return dst, fmt.Errorf("entry %d: bad length", len(dst))
			}
		case entClear:
		case entEnd, entLogEnd:
			if e.rows, p, ok = uvarint(p); !ok {
				return dst, fmt.Errorf("entry %d: bad count", len(dst))
			}
		default:
			return dst, fmt.Errorf("entry %d: unknown kind %#x", len(dst), e.kind)
		}
		dst = append(dst, e)
	}
	return dst, nil
}

func uvarint(p []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, false
	}
	return v, p[n:], true
}

func lenBytes(p []byte) ([]byte, []byte, bool) {
	n, rest, ok := uvarint(p)
	if !ok || n > uint64(len(rest)) {
		return nil, p, false
	}
	return rest[:n:n], rest[n:], true
}

// errTorn and errCorrupt are why a frame reader stops before the end: a
// frame cut short (a crash mid-write), or one whose length or checksum is
// wrong.
var (
	errTorn    = errors.New("frame cut short")
	errCorrupt = errors.New("checksum mismatch")
)

// bigFrame is the frame length past which the reader checks a frame's CRC
// before it allocates the frame's buffer (reading the frame twice): a bit
// flip in a length must not allocate up to the rest of a large file. A
// legitimate frame may be larger (a row up to item_size_max, 1 GiB).
var bigFrame int64 = 16 << 20

// frameReader reads the frames of one file after its header.
type frameReader struct {
	src    io.Reader // seeked back after a big frame's check, if it can be
	r      *bufio.Reader
	off    int64 // offset of the next frame
	remain int64 // bytes of the file after off
	buf    []byte
}

func newFrameReader(r io.Reader, size int64) *frameReader {
	return &frameReader{src: r, r: bufio.NewReaderSize(r, 1<<20), remain: size}
}

// readHeader checks the file header, of magic or of its version 1; it
// returns the sequence number, and whether the file is of version 1.
func (fr *frameReader) readHeader(magic [8]byte) (seq uint64, v1 bool, err error) {
	var h [fileHeaderLen]byte
	if fr.remain < fileHeaderLen {
		return 0, false, errTorn
	}
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		return 0, false, err
	}
	fr.off, fr.remain = fileHeaderLen, fr.remain-fileHeaderLen
	old := magic
	old[7] = '1'
	got := [8]byte(h[:8])
	if got != magic && got != old {
		return 0, false, fmt.Errorf("not an ndbgate %s file (magic %q)", kindOfMagic(magic), h[:8])
	}
	return binary.LittleEndian.Uint64(h[8:]), got == old, nil
}

func kindOfMagic(m [8]byte) string {
	if m == snapMagic {
		return "snapshot"
	}
	return "log"
}

// next returns the next frame's payload, valid until the following call:
// io.EOF at a clean end, errTorn or errCorrupt (or a read error) at a bad one,
// where fr.off is the offset of the first byte not accepted.
func (fr *frameReader) next() ([]byte, error) {
	if fr.remain == 0 {
		return nil, io.EOF
	}
	if fr.remain < frameHeaderLen {
		return nil, errTorn
	}
	var h [frameHeaderLen]byte
	if _, err := io.ReadFull(fr.r, h[:]); err != nil {
		return nil, readErr(err)
	}
	n := int64(binary.LittleEndian.Uint32(h[:]))
	if n == 0 {
		return nil, errCorrupt // a frame holds at least one entry (and zeroes are what a preallocated tail reads as)
	}
	if n > fr.remain-frameHeaderLen {
		return nil, errTorn
	}
	if sk, ok := fr.src.(io.Seeker); ok && n > bigFrame {
		sum := crc32.New(crcTable)
		_, _ = sum.Write(h[:4])
		if _, err := io.CopyN(sum, fr.r, n); err != nil {
			return nil, readErr(err)
		}
		if sum.Sum32() != binary.LittleEndian.Uint32(h[4:]) {
			return nil, errCorrupt
		}
		if _, err := sk.Seek(fr.off+frameHeaderLen, io.SeekStart); err != nil {
			return nil, err
		}
		fr.r.Reset(fr.src)
	}
	if int64(cap(fr.buf)) < n {
		fr.buf = make([]byte, n)
	}
	p := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		return nil, readErr(err)
	}
	c := crc32.Update(0, crcTable, h[:4])
	if crc32.Update(c, crcTable, p) != binary.LittleEndian.Uint32(h[4:]) {
		return nil, errCorrupt
	}
	fr.off += frameHeaderLen + n
	fr.remain -= frameHeaderLen + n
	return p, nil
}

// readErr: a file shorter than its size said is a torn frame.
func readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errTorn
	}
	return err
}
