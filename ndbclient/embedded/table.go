package embedded

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// table is the engine's view of a schema: the stored copy handed to callers plus
// the precomputed row layout and the partitions.
type table struct {
	e         *Engine
	id        int              // position in the engine's table list: the data dir's table number
	restored  bool             // loaded from the data dir
	schema    *ndbclient.Table // the stored copy; never changed after creation
	cols      []colInfo
	pk        []int // column indexes, key order
	dist      []int // positions in pk of the distribution key; nil = whole key
	varCols   []int // non-key variable-length columns, in column order
	sparse    []int // nullable non-key fixed-width columns, in column order
	nullBytes int   // bytes of the null bitmap (nullable non-key columns)
	denseLen  int   // bytes of the dense area (NOT NULL fixed-width columns)
	v1Fixed   int   // bytes of the fixed area of the data dir's version 1 rows
	// expireCol is the expire column, -1 for none: the schema's, or the
	// one BindExpireColumn gave a table made without one (bound, its
	// schema then, which ops carry). Set once; read by the reaper too.
	expireCol atomic.Int32
	// byCaller: the expire column's expiry is its caller's to keep
	// (ndbclient.Table.ExpiryByCaller): no row counts as expired.
	byCaller atomic.Bool
	bound    atomic.Pointer[ndbclient.Table]
	eviction bool
	parts    []*partition
	hints    []indexHint // parts[i]'s index, for prefetching (prefetch.go)
	// largest is the longest row stored so far, bytes (LargestRow). It
	// only grows.
	largest atomic.Int64
	// seq is the auto-increment sequence (NextAutoIncrement): the value
	// last handed out, 0 until first used. Lock order: seq.mu, then a
	// partition's mu.
	seq struct {
		mu   sync.Mutex
		last uint64
	}
}

// noteRow records that a row of n bytes is stored.
func (t *table) noteRow(n int) {
	for {
		cur := t.largest.Load()
		if int64(n) <= cur || t.largest.CompareAndSwap(cur, int64(n)) {
			return
		}
	}
}

// colInfo is one column's storage layout.
type colInfo struct {
	ndbclient.Column
	width    int            // fixed-width bytes (0 for variable-length columns)
	maxLen   int            // variable-length: longest value in bytes
	lenBytes int            // variable-length: size of the length prefix (1, 2 or 4)
	nullBit  int            // bit in the null bitmap, -1 if not nullable or a key column
	fixedOff int            // non-key NOT NULL fixed: offset in the dense area
	sparseAt int            // non-key nullable fixed: ordinal in t.sparse
	v1Off    int            // non-key fixed: offset in a version 1 row's fixed area
	varIdx   int            // non-key variable: ordinal in the variable area
	keyPos   int            // position in the primary key, -1 if not a key column
	kind     ndbclient.Kind // the Value kind the column takes
	min, max int64
	umax     uint64
}

const maxKeyBytes = 1<<16 - 1 // the row header stores the key length in 2 bytes

// Default lengths of the text-valued types when Column.Length is 0.
func defaultLen(c *ndbclient.Column) int {
	switch c.Type {
	case ndbclient.TypeDecimal:
		if c.Precision > 0 {
			return c.Precision + 2 // sign and point
		}
		return 65 + 2
	case ndbclient.TypeDate:
		return len("-YYYY-MM-DD")
	case ndbclient.TypeDatetime, ndbclient.TypeTimestamp:
		return len("YYYY-MM-DD hh:mm:ss.ffffff")
	case ndbclient.TypeTime:
		return len("-hhh:mm:ss.ffffff")
	case ndbclient.TypeBlob, ndbclient.TypeText:
		return 1<<16 - 1 // MySQL's BLOB/TEXT
	}
	return 0
}

func intRange(t ndbclient.ColumnType, bits int) (lo, hi int64, uhi uint64) {
	switch t {
	case ndbclient.TypeInt8:
		return -1 << 7, 1<<7 - 1, 0
	case ndbclient.TypeInt16:
		return -1 << 15, 1<<15 - 1, 0
	case ndbclient.TypeInt24:
		return -1 << 23, 1<<23 - 1, 0
	case ndbclient.TypeInt32:
		return -1 << 31, 1<<31 - 1, 0
	case ndbclient.TypeInt64:
		return -1 << 63, 1<<63 - 1, 0
	case ndbclient.TypeUint8:
		return 0, 0, 1<<8 - 1
	case ndbclient.TypeUint16:
		return 0, 0, 1<<16 - 1
	case ndbclient.TypeUint24:
		return 0, 0, 1<<24 - 1
	case ndbclient.TypeUint32:
		return 0, 0, 1<<32 - 1
	case ndbclient.TypeUint64:
		return 0, 0, 1<<64 - 1
	case ndbclient.TypeYear:
		return 0, 0, 2155
	case ndbclient.TypeBit:
		return 0, 0, 1<<bits - 1 // 1<<64 - 1 wraps to MaxUint64, as wanted
	}
	return 0, 0, 0
}

func fixedWidth(c *ndbclient.Column) int {
	switch c.Type {
	case ndbclient.TypeInt8, ndbclient.TypeUint8:
		return 1
	case ndbclient.TypeInt16, ndbclient.TypeUint16, ndbclient.TypeYear:
		return 2
	case ndbclient.TypeInt24, ndbclient.TypeUint24:
		return 3
	case ndbclient.TypeInt32, ndbclient.TypeUint32, ndbclient.TypeFloat:
		return 4
	case ndbclient.TypeInt64, ndbclient.TypeUint64, ndbclient.TypeDouble:
		return 8
	case ndbclient.TypeBit:
		return (c.Length + 7) / 8
	case ndbclient.TypeBinary:
		return c.Length
	}
	return 0
}

// newTable validates s, copies it and computes the layout. defParts is the
// engine's partition count for tables that leave it at 0.
func newTable(s *ndbclient.Table, defParts int) (*table, error) {
	if s == nil {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "no table given")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cp := *s
	cp.Columns = slices.Clone(s.Columns)
	cp.PrimaryKey = slices.Clone(s.PrimaryKey)
	cp.DistributionKey = slices.Clone(s.DistributionKey)
	if cp.Partitions == 0 {
		cp.Partitions = defParts
	}
	if cp.Partitions < 1 || cp.Partitions > 1<<16 {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: partitions must be 1..65536", cp.FullName())
	}
	t := &table{schema: &cp, pk: cp.PrimaryKey, eviction: cp.Eviction}
	t.expireCol.Store(int32(max(cp.ExpireColumn, -1)))
	t.byCaller.Store(cp.ExpiryByCaller)
	t.cols = make([]colInfo, len(cp.Columns))
	for i := range t.cols {
		t.cols[i] = colInfo{Column: cp.Columns[i], nullBit: -1, keyPos: -1, fixedOff: -1, sparseAt: -1, v1Off: -1, varIdx: -1}
	}
	keyBytes := 0
	for pos, c := range cp.PrimaryKey {
		ci := &t.cols[c]
		if ci.keyPos >= 0 {
			return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: column %q appears twice in the primary key", cp.FullName(), ci.Name)
		}
		if ci.Type == ndbclient.TypeBlob || ci.Type == ndbclient.TypeText {
			return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: %s column %q cannot be in the primary key", cp.FullName(), ci.Type, ci.Name)
		}
		ci.keyPos = pos
	}
	if cp.ExpireColumn >= 0 && t.cols[cp.ExpireColumn].keyPos >= 0 {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: expire column %q cannot be in the primary key", cp.FullName(), cp.Columns[cp.ExpireColumn].Name)
	}
	for i := range t.cols {
		ci := &t.cols[i]
		ci.min, ci.max, ci.umax = intRange(ci.Type, ci.Length)
		ci.width = fixedWidth(&ci.Column)
		ci.kind = kindOf(ci)
		if ci.width == 0 {
			ci.maxLen = ci.Length
			if ci.maxLen <= 0 {
				ci.maxLen = defaultLen(&ci.Column)
			}
			switch {
			case ci.maxLen <= 0xFF:
				ci.lenBytes = 1
			case ci.maxLen <= 0xFFFF:
				ci.lenBytes = 2
			default:
				ci.lenBytes = 4
			}
		}
		if ci.keyPos >= 0 {
			keyBytes += ci.width + ci.lenBytes + ci.maxLen
			continue
		}
		if ci.Nullable {
			ci.nullBit = 0 // numbered below
		}
		switch {
		case ci.width > 0 && ci.Nullable:
			ci.sparseAt = len(t.sparse)
			t.sparse = append(t.sparse, i)
		case ci.width > 0:
			ci.fixedOff = t.denseLen
			t.denseLen += ci.width
		}
		if ci.width > 0 {
			ci.v1Off = t.v1Fixed
			t.v1Fixed += ci.width
		} else {
			ci.varIdx = len(t.varCols)
			t.varCols = append(t.varCols, i)
		}
	}
	nullable := 0
	for i := range t.cols {
		if t.cols[i].nullBit >= 0 {
			t.cols[i].nullBit = nullable
			nullable++
		}
	}
	t.nullBytes = (nullable + 7) / 8
	if keyBytes > maxKeyBytes {
		return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: primary key can be %d bytes long; the limit is %d", cp.FullName(), keyBytes, maxKeyBytes)
	}
	if len(cp.DistributionKey) > 0 && !slices.Equal(cp.DistributionKey, cp.PrimaryKey) {
		for _, c := range cp.DistributionKey {
			pos := t.cols[c].keyPos
			if pos < 0 {
				return nil, ndbclient.Errorf(ndbclient.CodeSchemaError, "table %s: distribution key column %q is not in the primary key", cp.FullName(), cp.Columns[c].Name)
			}
			t.dist = append(t.dist, pos)
		}
	}
	return t, nil
}

// expireColumn is the table's expire column, -1 for none.
func (t *table) expireColumn() int { return int(t.expireCol.Load()) }

// current is the schema ops carry: the stored one, or the one with the
// expire column bound since.
func (t *table) current() *ndbclient.Table {
	if b := t.bound.Load(); b != nil {
		return b
	}
	return t.schema
}

// sameShape reports whether s describes the stored table, as made or with
// its expire column bound since (Partitions 0 matches whatever count the
// table got). s without an expire column matches a table with one: the
// column is a container's to bind (Client.BindExpireColumn), not the
// table's shape.
func (t *table) sameShape(s *ndbclient.Table) bool {
	st := t.schema
	dk := func(x *ndbclient.Table) []int {
		if len(x.DistributionKey) == 0 {
			return x.PrimaryKey
		}
		return x.DistributionKey
	}
	return s.Database == st.Database && s.Name == st.Name &&
		slices.EqualFunc(s.Columns, st.Columns, func(a, b ndbclient.Column) bool { return a.Equal(&b) }) && slices.Equal(s.PrimaryKey, st.PrimaryKey) &&
		slices.Equal(dk(s), dk(st)) && (s.Partitions == 0 || s.Partitions == st.Partitions) &&
		s.Eviction == st.Eviction && (s.ExpireColumn < 0 || s.ExpireColumn == st.ExpireColumn || s.ExpireColumn == t.expireColumn())
}
