package embedded

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestCreateTable(t *testing.T) {
	e := newEngine(t, Config{Partitions: 8})
	s := memcacheTable("t", 100)
	tbl, err := e.CreateTable(s)
	require.NoError(t, err)
	assert.NotSame(t, s, tbl, "the engine keeps its own copy")
	assert.Equal(t, 8, tbl.Partitions, "the stored schema shows the partition count it got")
	s.Columns[0].Name = "changed by the caller"
	assert.Equal(t, "mkey", tbl.Columns[0].Name)

	again, err := e.CreateTable(memcacheTable("t", 100))
	require.NoError(t, err, "same shape is idempotent")
	assert.Same(t, tbl, again)
	got, err := e.Table("test", "t")
	require.NoError(t, err)
	assert.Same(t, tbl, got)

	other := memcacheTable("t", 200)
	_, err = e.CreateTable(other)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err), "a different shape under the same name")

	own := memcacheTable("own", 10)
	own.Partitions = 3
	tbl2 := mustCreate(t, e, own)
	assert.Equal(t, 3, tbl2.Partitions)
	assert.Equal(t, 2, e.Stats().Tables)
	assert.Equal(t, 11, e.Stats().Partitions)

	for name, mutate := range map[string]func(*ndbclient.Table){
		"no name":                    func(s *ndbclient.Table) { s.Name = "" },
		"no primary key":             func(s *ndbclient.Table) { s.PrimaryKey = nil },
		"nullable key":               func(s *ndbclient.Table) { s.Columns[0].Nullable = true },
		"key twice":                  func(s *ndbclient.Table) { s.PrimaryKey = []int{0, 0} },
		"varchar without length":     func(s *ndbclient.Table) { s.Columns[0].Length = 0 },
		"expire column is bytes":     func(s *ndbclient.Table) { s.ExpireColumn = colValue },
		"expire column in key":       func(s *ndbclient.Table) { s.Columns[0].Type = ndbclient.TypeUint32; s.ExpireColumn = 0 },
		"distribution key not in pk": func(s *ndbclient.Table) { s.DistributionKey = []int{colFlags} },
		"blob key": func(s *ndbclient.Table) {
			s.Columns[0] = ndbclient.Column{Name: "mkey", Type: ndbclient.TypeBlob}
		},
		"key too long":        func(s *ndbclient.Table) { s.Columns[0].Length = 70000 },
		"too many partitions": func(s *ndbclient.Table) { s.Partitions = 1 << 17 },
	} {
		s := memcacheTable("bad_"+name, 10)
		mutate(s)
		_, err := e.CreateTable(s)
		assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err), name)
	}
	_, err = e.CreateTable(nil)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	_, err = e.Table("test", "bad_no name")
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
}

// An op may carry another *Table of the same name and shape (e.g. a caller's
// own copy); a different shape is refused.
func TestForeignSchemaPointer(t *testing.T) {
	e := newEngine(t, Config{})
	tbl := mustCreate(t, e, memcacheTable("t", 100))
	put(t, e, tbl, "k", item{value: "v"})
	copyOf := memcacheTable("t", 100)
	rd := readOp(copyOf, "k", colValue)
	run(t, e, rd)
	require.NoError(t, rd.Err)
	assert.Equal(t, "v", rd.Row[0].Str())
	rd = readOp(memcacheTable("t", 99), "k", colValue)
	run(t, e, rd)
	assert.Equal(t, ndbclient.CodeSchemaError, codeOf(rd))
}

func TestPartitionAndNodeOf(t *testing.T) {
	e := newEngine(t, Config{Partitions: 16, Nodes: 3})
	tbl := mustCreate(t, e, memcacheTable("t", 10))
	seen := map[int]int{}
	for i := range 4000 {
		k := key(fmt.Sprintf("key:%d", i))
		p := e.Partition(tbl, k)
		require.Equal(t, p, e.Partition(tbl, k), "deterministic")
		require.True(t, p >= 0 && p < 16)
		seen[p]++
	}
	require.Len(t, seen, 16)
	for p, n := range seen {
		assert.InDelta(t, 250, n, 100, "partition %d is not badly skewed", p)
	}
	for p := range 16 {
		assert.Equal(t, p%3, e.NodeOf(tbl, p))
	}
	assert.Equal(t, 0, e.Partition(tbl, []ndbclient.Value{ndbclient.Uint(1)}), "a bad key maps to 0")

	// The op's partition is the one Partition reports: the row is in it.
	put(t, e, tbl, "where", item{value: "here"})
	et, err := e.tableOf(tbl)
	require.NoError(t, err)
	p := et.parts[e.Partition(tbl, key("where"))]
	assert.Equal(t, int64(1), p.items.Load())
}

func TestDriverBasics(t *testing.T) {
	e := New(Config{MemoryLimit: 1 << 20})
	assert.Equal(t, "embedded", e.Name())
	assert.NoError(t, e.Ready())
	tbl := mustCreate(t, e, memcacheTable("t", 10))
	put(t, e, tbl, "a", item{value: "1"})
	st := e.Stats()
	assert.Equal(t, uint64(1), st.Items)
	assert.Equal(t, uint64(1<<20), st.LimitBytes)
	assert.Equal(t, 1, st.Nodes)
	assert.Equal(t, 16, st.Partitions)
	assert.Positive(t, st.Bytes)

	// Submit completes inline, on this goroutine.
	b := &ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "a", colValue)}}
	called := false
	e.Submit(b, func(got *ndbclient.Batch, err error) {
		called = true
		assert.Same(t, b, got)
		assert.NoError(t, err)
	})
	assert.True(t, called)
	assert.Equal(t, "1", b.Ops[0].Row[0].Str())

	// A cancelled context runs nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	op := writeOp(ndbclient.OpDelete, tbl, "a")
	require.ErrorIs(t, e.Execute(ctx, &ndbclient.Batch{Ops: []*ndbclient.Op{op}}), context.Canceled)
	require.Error(t, op.Err)

	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "Close is idempotent")
	assert.Equal(t, ndbclient.CodeUnavailable, ndbclient.CodeOf(e.Ready()))
	op = readOp(tbl, "a")
	err := e.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{op}})
	assert.Equal(t, ndbclient.CodeUnavailable, ndbclient.CodeOf(err))
	assert.Equal(t, ndbclient.CodeUnavailable, codeOf(op))
}

func TestDefaults(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	assert.Equal(t, 16, e.cfg.Partitions)
	assert.Equal(t, 1, e.cfg.Nodes)
	assert.Equal(t, int64(0), e.limit)
	assert.InDelta(t, float64(time.Now().Unix()), float64(e.now()), 2, "the default clock is the time")
}

func TestUntilNextSecond(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, time.Second + clockSlack},
		{250 * time.Millisecond, 750*time.Millisecond + clockSlack},
		{999 * time.Millisecond, time.Millisecond + clockSlack},
	} {
		require.Equal(t, tc.want, untilNextSecond(base.Add(tc.at)), "at +%v", tc.at)
	}
}

// The default clock is the wall clock's second, set as each second begins.
func TestDefaultClockFollowsTheSecond(t *testing.T) {
	e := New(Config{ReapInterval: -1})
	t.Cleanup(func() { _ = e.Close() })
	now := time.Now()
	require.InDelta(t, now.Unix(), int64(e.now()), 1)
	next := now.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next) + 300*time.Millisecond)
	require.Equal(t, uint32(next.Unix()), e.now(), "clock not advanced 300 ms into the next second")
}

// LargestRow reports the longest row a table has held, through its own
// schema pointer or another of the same name, so that front ends size the
// pieces of a large multi-get by the values really stored.
func TestLargestRow(t *testing.T) {
	e := newEngine(t, Config{Partitions: 4})
	tbl := mustCreate(t, e, memcacheTable("sizes", 1<<20))
	var _ ndbclient.RowSizer = e
	assert.Zero(t, e.LargestRow(tbl), "nothing stored")
	put(t, e, tbl, "small", item{value: strings.Repeat("s", 10)})
	small := e.LargestRow(tbl)
	assert.Greater(t, small, 10, "the whole row: key, value and the other columns")
	put(t, e, tbl, "big", item{value: strings.Repeat("b", 5000)})
	big := e.LargestRow(tbl)
	assert.GreaterOrEqual(t, big, 5000)
	assert.Less(t, big, 5000+small)
	put(t, e, tbl, "small2", item{value: "x"})
	run(t, e, &ndbclient.Op{Kind: ndbclient.OpDelete, Table: tbl, Key: key("big")})
	assert.Equal(t, big, e.LargestRow(tbl), "it only grows")
	assert.Equal(t, big, e.LargestRow(memcacheTable("sizes", 1<<20)), "another pointer to the same table")
	assert.Zero(t, e.LargestRow(memcacheTable("nosuch", 10)))
}
