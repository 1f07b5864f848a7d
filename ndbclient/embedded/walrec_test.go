package embedded

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// fuzzTables are what the fuzzed frames refer to: a memcache table (0) and one
// with a composite key, a distribution key and fixed, nullable and wide
// columns (1).
func fuzzTables(t testing.TB, e *Engine) (*ndbclient.Table, *ndbclient.Table) {
	mc := mustCreate(t, e, memcacheTable("mc", 300))
	wide := mustCreate(t, e, &ndbclient.Table{Database: "test", Name: "wide", Columns: []ndbclient.Column{
		{Name: "a", Type: ndbclient.TypeChar, Length: 4},
		{Name: "b", Type: ndbclient.TypeInt24},
		{Name: "c", Type: ndbclient.TypeBinary, Length: 3, Nullable: true},
		{Name: "d", Type: ndbclient.TypeVarbinary, Length: 70000, Nullable: true},
		{Name: "e", Type: ndbclient.TypeBit, Length: 12},
		{Name: "x", Type: ndbclient.TypeUint32},
	}, PrimaryKey: []int{0, 1}, DistributionKey: []int{1}, ExpireColumn: 5, Partitions: 3})
	return mc, wide
}

// rowOf is the row the engine stores for op's key and sets.
func rowOf(t testing.TB, e *Engine, s *ndbclient.Table, op *ndbclient.Op) []byte {
	tb, err := e.tableOf(s)
	require.NoError(t, err)
	return tb.buildRow(nil, tb.appendKey(nil, op.Key), nil, op.Set, -1, nil)
}

// seedFrames are well-formed frames of every entry kind, as a log holds them.
func seedFrames(t testing.TB, e *Engine, mc, wide *ndbclient.Table) [][]byte {
	r1 := rowOf(t, e, mc, writeOp(ndbclient.OpWrite, mc, "key", set(colValue, ndbclient.String("value")), set(colExpire, ndbclient.Uint(5))))
	r2 := rowOf(t, e, wide, &ndbclient.Op{Key: []ndbclient.Value{ndbclient.String("ab"), ndbclient.Int(-7)},
		Set: []ndbclient.ColumnValue{set(3, ndbclient.Bytes(bytes.Repeat([]byte{9}, 300))), set(4, ndbclient.Uint(4095))}})
	frame := func(entries ...[]byte) []byte {
		f := beginFrame(nil)
		for _, en := range entries {
			f = append(f, en...)
		}
		endFrame(f, 0)
		return f
	}
	schema := encodeSchema(memcacheTable("made", 10))
	return [][]byte{
		frame(appendPut(nil, 0, stFetched, 7, r1)),
		frame(appendPut(nil, 1, 0, 0, r2), appendDelete(nil, 0, rowKey(r1))),
		frame(appendClear(nil, 1)),
		frame(appendCreate(nil, 2, schema)),
		frame(appendEnd(nil, 2, 1)),
		frame(appendLogEnd(nil, 3, 4096)),
	}
}

func TestFramesRoundTrip(t *testing.T) {
	e := newEngine(t, Config{})
	mc, wide := fuzzTables(t, e)
	seeds := seedFrames(t, e, mc, wide)
	all := bytes.Join(seeds, nil)
	fr := newFrameReader(bytes.NewReader(all), int64(len(all)))
	kinds := []byte{}
	for {
		p, err := fr.next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		ents, err := decodeEntries(nil, p)
		require.NoError(t, err)
		for _, en := range ents {
			kinds = append(kinds, en.kind)
		}
	}
	assert.Equal(t, []byte{entPut, entPut, entDelete, entClear, entCreate, entEnd, entLogEnd}, kinds)
	assert.EqualValues(t, len(all), fr.off)

	// Torn and corrupt frames are told apart, at the frame's start.
	fr = newFrameReader(bytes.NewReader(all[:len(all)-1]), int64(len(all)-1))
	var err error
	for err == nil {
		_, err = fr.next()
	}
	assert.ErrorIs(t, err, errTorn)
	assert.EqualValues(t, len(all)-len(seeds[len(seeds)-1]), fr.off)
	bad := bytes.Clone(all)
	bad[len(seeds[0])+frameHeaderLen+2] ^= 1
	fr = newFrameReader(bytes.NewReader(bad), int64(len(bad)))
	_, err = fr.next()
	require.NoError(t, err)
	_, err = fr.next()
	assert.ErrorIs(t, err, errCorrupt)
	assert.EqualValues(t, len(seeds[0]), fr.off)
}

// FuzzLogFrames feeds arbitrary bytes to the log's reader, decoder and
// checks, and applies what passes to an engine: nothing may panic, what
// decodes must encode back to the same entries, and every row stored must
// decode column by column.
func FuzzLogFrames(f *testing.F) {
	e := newEngine(f, Config{Partitions: 2, Now: func() uint32 { return 100 }})
	mc, wide := fuzzTables(f, e)
	seeds := seedFrames(f, e, mc, wide)
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add(bytes.Join(seeds, nil))
	// A version 1 row: the fuzzer reads every payload both ways.
	tb, err := e.tableOf(wide)
	require.NoError(f, err)
	r2 := rowOf(f, e, wide, &ndbclient.Op{Key: []ndbclient.Value{ndbclient.String("ab"), ndbclient.Int(-7)},
		Set: []ndbclient.ColumnValue{set(2, ndbclient.Bytes([]byte{1})), set(3, ndbclient.Bytes([]byte{9, 9}))}})
	v1 := beginFrame(nil)
	v1 = appendPut(v1, 1, 0, 0, encodeV1(tb, r2))
	endFrame(v1, 0)
	f.Add(v1)
	f.Add(seeds[0][:len(seeds[0])-2])
	f.Fuzz(func(t *testing.T, data []byte) {
		var ents, again []entry
		// consume decodes, checks and applies one payload.
		consume := func(p []byte) {
			var err error
			if ents, err = decodeEntries(ents[:0], p); err != nil {
				return
			}
			var re []byte
			for _, en := range ents {
				switch en.kind {
				case entPut:
					re = appendPut(re, int(en.table), en.state, en.used, en.data)
				case entDelete:
					re = appendDelete(re, int(en.table), en.data)
				case entClear:
					re = appendClear(re, int(en.table))
				case entCreate:
					re = appendCreate(re, int(en.table), en.data)
				case entEnd:
					re = appendEnd(re, en.table, en.rows)
				case entLogEnd:
					re = appendLogEnd(re, en.table, int64(en.rows))
				}
			}
			again, err = decodeEntries(again[:0], re)
			if err != nil || len(again) != len(ents) {
				t.Fatalf("re-encoded entries do not decode: %v", err)
			}
			for i := range ents {
				if a, b := ents[i], again[i]; a.kind != b.kind || a.table != b.table || a.state != b.state ||
					a.used != b.used || a.rows != b.rows || !bytes.Equal(a.data, b.data) {
					t.Fatalf("entry %d changed in a round trip: %+v, %+v", i, a, b)
				}
			}
			// Read as a version 1 frame: what passes is upgraded to rows
			// that pass the current check.
			if old, err := decodeEntries(nil, p); err == nil && e.checkEntries(old, false, true) == nil {
				for i, en := range old {
					if en.kind == entPut {
						if err := (*e.tables.Load())[en.table].checkRow(en.data); err != nil {
							t.Fatalf("entry %d: a version 1 row upgraded to a bad row: %v", i, err)
						}
					}
				}
			}
			if e.checkEntries(ents, false, false) != nil {
				return
			}
			for _, en := range ents {
				if en.kind == entCreate && len(*e.tables.Load()) >= 4 {
					return // enough tables; each costs its partitions
				}
			}
			if err := e.applyEntries(ents, 100); err != nil {
				t.Fatalf("checked entries fail to apply: %v", err)
			}
		}
		// The bytes as one frame's payload (past the checksum, which the
		// fuzzer would seldom get right), then as a file of frames.
		consume(data)
		if len(data) > frameHeaderLen {
			consume(data[frameHeaderLen:])
		}
		fr := newFrameReader(bytes.NewReader(data), int64(len(data)))
		for {
			p, err := fr.next()
			if err != nil {
				if err != io.EOF && err != errTorn && err != errCorrupt {
					t.Fatalf("reader error %v", err)
				}
				break
			}
			consume(p)
		}
		// Every row stored decodes, column by column.
		for _, tb := range *e.tables.Load() {
			for _, p := range tb.parts {
				p.mu.Lock()
				for s := range p.slots {
					if p.slots[s].size == 0 {
						continue
					}
					row := p.row(int32(s))
					for c := range tb.cols {
						var v ndbclient.Value
						tb.decode(row, c, &v)
					}
				}
				p.mu.Unlock()
			}
		}
	})
}

// A corrupt frame length, as long as the rest of the file, is refused as
// corrupt before a buffer of that length is allocated; a big frame that is
// whole still reads.
func TestFrameLengthFlipAllocatesNothing(t *testing.T) {
	e := newEngine(t, Config{})
	mc, wide := fuzzTables(t, e)
	seeds := seedFrames(t, e, mc, wide)
	defer func(old int64) { bigFrame = old }(bigFrame)
	bigFrame = 8 // every frame here is big: each is checked before it is read
	all := bytes.Join(seeds, nil)
	fr := newFrameReader(bytes.NewReader(all), int64(len(all)))
	n := 0
	for {
		_, err := fr.next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, len(seeds), n)

	bad := bytes.Clone(all)
	long := uint32(len(all) - len(seeds[0]) - frameHeaderLen) // all the rest
	binary.LittleEndian.PutUint32(bad[len(seeds[0]):], long)
	fr = newFrameReader(bytes.NewReader(bad), int64(len(bad)))
	_, err := fr.next()
	require.NoError(t, err)
	_, err = fr.next()
	assert.ErrorIs(t, err, errCorrupt)
	assert.EqualValues(t, len(seeds[0]), fr.off)
	assert.Less(t, cap(fr.buf), int(long), "the corrupt length was allocated")
}
