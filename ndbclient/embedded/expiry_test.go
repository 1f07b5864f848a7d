package embedded

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

func TestExpiredRowsAreMisses(t *testing.T) {
	clock := newClock()
	now := uint64(clock.now())
	cases := []struct {
		name string
		op   func(tbl *ndbclient.Table) *ndbclient.Op
		code ndbclient.Code
		live bool // the key holds a (new) live row afterwards
	}{
		{"read", func(tbl *ndbclient.Table) *ndbclient.Op { return readOp(tbl, "k", colValue) }, ndbclient.CodeNotFound, false},
		{"insert", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpInsert, tbl, "k", set(colValue, ndbclient.String("new")))
		}, ndbclient.CodeOK, true},
		{"update", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpUpdate, tbl, "k", set(colExpire, ndbclient.Uint(0)))
		}, ndbclient.CodeNotFound, false},
		{"write", func(tbl *ndbclient.Table) *ndbclient.Op {
			return writeOp(ndbclient.OpWrite, tbl, "k", set(colValue, ndbclient.String("new")))
		}, ndbclient.CodeOK, true},
		{"delete", func(tbl *ndbclient.Table) *ndbclient.Op { return writeOp(ndbclient.OpDelete, tbl, "k") }, ndbclient.CodeNotFound, false},
		{"cond update", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpCondUpdate, Table: tbl, Key: key("k"), CondColumn: colCas, CondValue: ndbclient.Uint(1)}
		}, ndbclient.CodeNotFound, false},
		{"add", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("k"), AddColumn: colMath, Delta: 1}
		}, ndbclient.CodeNotFound, false},
		{"add create", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAdd, Table: tbl, Key: key("k"), AddColumn: colMath, Delta: 1, Create: true, Initial: 3, Read: []int{colMath}}
		}, ndbclient.CodeOK, true},
		{"append", func(tbl *ndbclient.Table) *ndbclient.Op {
			return &ndbclient.Op{Kind: ndbclient.OpAppend, Table: tbl, Key: key("k"), AppendColumn: colValue, Data: []byte("x")}
		}, ndbclient.CodeNotFound, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, Config{Partitions: 2, Now: clock.now})
			tbl := mustCreate(t, e, memcacheTable("t", 64))
			put(t, e, tbl, "k", item{value: "old", cas: 1, math: u64(1), expire: now}) // expires at now: already a miss
			op := c.op(tbl)
			run(t, e, op)
			require.Equal(t, c.code, codeOf(op), "%v", op.Err)
			st := e.Stats()
			assert.Equal(t, uint64(1), st.Expired, "the expired row was freed when touched")
			assert.Equal(t, uint64(1), st.ExpiredOnAccess)
			if c.live {
				assert.Equal(t, uint64(1), st.Items)
				v, ok := getValue(t, e, tbl, "k")
				require.True(t, ok)
				assert.NotEqual(t, "old", v)
			} else {
				assert.Equal(t, uint64(0), st.Items)
				assert.Equal(t, uint64(0), st.Bytes)
			}
		})
	}
}

func TestExpiryBoundaries(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 4, Now: clock.now})
	tbl := mustCreate(t, e, memcacheTable("t", 64))
	now := uint64(clock.now())
	put(t, e, tbl, "never", item{value: "n", expire: 0})
	put(t, e, tbl, "soon", item{value: "s", expire: now + 10})
	put(t, e, tbl, "later", item{value: "l", expire: now + 100})
	for _, k := range []string{"never", "soon", "later"} {
		_, ok := getValue(t, e, tbl, k)
		assert.True(t, ok, k)
	}
	clock.advance(9)
	_, ok := getValue(t, e, tbl, "soon")
	assert.True(t, ok, "one second before expiry")
	clock.advance(1)
	_, ok = getValue(t, e, tbl, "soon")
	assert.False(t, ok, "at the expiry second")
	// Touch: pushing the expiry out keeps the row alive.
	up := writeOp(ndbclient.OpUpdate, tbl, "later", set(colExpire, ndbclient.Uint(now+1000)))
	run(t, e, up)
	require.NoError(t, up.Err)
	clock.advance(500)
	_, ok = getValue(t, e, tbl, "later")
	assert.True(t, ok)
	_, ok = getValue(t, e, tbl, "never")
	assert.True(t, ok)

	// A signed expire column with a negative time is already expired; a table
	// without an expire column never expires anything.
	s := &ndbclient.Table{Database: "test", Name: "signed", ExpireColumn: 1, PrimaryKey: []int{0},
		Columns: []ndbclient.Column{{Name: "k", Type: ndbclient.TypeVarchar, Length: 10}, {Name: "exp", Type: ndbclient.TypeInt64}}}
	st := mustCreate(t, e, s)
	w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: st, Key: key("k"), Set: []ndbclient.ColumnValue{set(1, ndbclient.Int(-5))}}
	run(t, e, w)
	require.NoError(t, w.Err)
	rd := readOp(st, "k")
	run(t, e, rd)
	assert.Equal(t, ndbclient.CodeNotFound, codeOf(rd))

	s = memcacheTable("noexp", 64)
	s.ExpireColumn = -1
	nt := mustCreate(t, e, s)
	put(t, e, nt, "k", item{value: "v", expire: 1})
	_, ok = getValue(t, e, nt, "k")
	assert.True(t, ok)
}

func TestReaperFreesExpiredRows(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 2, Now: clock.now, ReapInterval: 5 * time.Millisecond})
	tbl := mustCreate(t, e, memcacheTable("t", 64))
	now := uint64(clock.now())
	const n = 3*reapStep + 17 // several lock holds per partition
	for i := range n {
		exp := now + 10
		if i%3 == 0 {
			exp = 0 // never
		}
		put(t, e, tbl, fmt.Sprint("k", i), item{value: "some value", expire: exp})
	}
	keep := uint64((n + 2) / 3)
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, uint64(n), e.Stats().Items, "nothing is due yet")
	clock.advance(10)
	// A partition's pass counts what it freed after its last step, so the
	// count may trail the items for a moment: wait for both.
	require.Eventually(t, func() bool {
		st := e.Stats()
		return st.Items == keep && st.Expired == uint64(n)-keep
	}, 5*time.Second, 5*time.Millisecond)
	st := e.Stats()
	assert.Equal(t, uint64(0), st.ExpiredOnAccess, "the reaper, not a client, freed them")
	_, ok := getValue(t, e, tbl, "k0")
	assert.True(t, ok)

	// What the reaper freed is reused: refilling does not grow the arena.
	var pages int64
	et, _ := e.tableOf(tbl)
	for _, p := range et.parts {
		p.mu.Lock()
		pages += p.arena.pageBytes
		p.mu.Unlock()
	}
	for i := range n {
		if i%3 != 0 {
			put(t, e, tbl, fmt.Sprint("k", i), item{value: "some value"})
		}
	}
	var pages2 int64
	for _, p := range et.parts {
		p.mu.Lock()
		pages2 += p.arena.pageBytes
		p.mu.Unlock()
	}
	assert.Equal(t, pages, pages2)
}

func TestReapDirect(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 1, Now: clock.now})
	tbl := mustCreate(t, e, memcacheTable("t", 64))
	for i := range 10 {
		put(t, e, tbl, fmt.Sprint(i), item{value: "v", expire: uint64(clock.now()) + 1 + uint64(i)})
	}
	clock.advance(5)
	assert.Equal(t, 5, e.reap(), "expire times now+1 .. now+5 are due")
	assert.Equal(t, uint64(5), e.Stats().Items)
	assert.Equal(t, 0, e.reap())
}

// A table made without an expire column gets one when a container names it
// (BindExpireColumn): from then on its expired rows, those written before
// included, are misses and the reaper frees them, whichever of the table's
// schemas an op carries.
func TestBindExpireColumn(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 2, Now: clock.now})
	s := memcacheTable("late", 64)
	s.ExpireColumn = -1
	made := mustCreate(t, e, s)
	now := uint64(clock.now())
	put(t, e, made, "past", item{value: "p", expire: now - 1})
	put(t, e, made, "soon", item{value: "s", expire: now + 10})
	put(t, e, made, "never", item{value: "n"})
	_, ok := getValue(t, e, made, "past")
	require.True(t, ok, "no expire column yet: nothing expires")
	assert.Equal(t, 0, e.reap())

	for col, want := range map[int]string{colKey: "primary key", colValue: "integer or a TIMESTAMP", 99: "no column"} {
		_, err := e.BindExpireColumn(made, col, false)
		assert.ErrorContains(t, err, want)
		assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
	}
	bound, err := e.BindExpireColumn(made, colExpire, false)
	require.NoError(t, err)
	assert.Equal(t, colExpire, bound.ExpireColumn)
	assert.Equal(t, -1, made.ExpireColumn, "the schema as made stays as it was")
	again, err := e.BindExpireColumn(made, colExpire, false)
	require.NoError(t, err)
	assert.Same(t, bound, again)
	got, err := e.Table("test", "late")
	require.NoError(t, err)
	assert.Same(t, bound, got, "Table gives the bound schema")
	_, err = e.BindExpireColumn(made, colCas, false)
	assert.ErrorContains(t, err, `keeps expiry in column "expire_time"`)

	for _, schema := range []*ndbclient.Table{made, bound} {
		_, ok = getValue(t, e, schema, "past")
		assert.False(t, ok, "expired before the binding: a miss after it")
		_, ok = getValue(t, e, schema, "soon")
		assert.True(t, ok)
	}
	clock.advance(10)
	assert.Equal(t, 1, e.reap(), "soon is due (past was freed when read)")
	assert.Equal(t, uint64(1), e.Stats().Items)
	_, ok = getValue(t, e, bound, "never")
	assert.True(t, ok)

	// Made again in either shape, it is the same table.
	for _, x := range []int{-1, colExpire} {
		ask := *s
		ask.ExpireColumn = x
		got, err := e.CreateTable(&ask)
		require.NoError(t, err, "expire column %d", x)
		assert.Same(t, bound, got)
	}
}

// A table made with an expire column is the table asked for without one
// (a configuration whose containers bind the column, made by a build that
// put it in the table's shape), and it keeps expiring by it; asked for with
// another, it is a SchemaError.
func TestMadeWithAnExpireColumnIsAskedForWithout(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 2, Now: clock.now})
	made := mustCreate(t, e, memcacheTable("t", 64))
	require.Equal(t, colExpire, made.ExpireColumn)
	ask := *memcacheTable("t", 64)
	ask.ExpireColumn = -1
	got, err := e.CreateTable(&ask)
	require.NoError(t, err)
	assert.Same(t, made, got)
	put(t, e, got, "past", item{value: "p", expire: uint64(clock.now()) - 1})
	_, ok := getValue(t, e, got, "past")
	assert.False(t, ok, "still expires by its column")
	ask.ExpireColumn = colCas
	_, err = e.CreateTable(&ask)
	assert.Equal(t, ndbclient.CodeSchemaError, ndbclient.CodeOf(err))
}

// An expire column whose expiry its caller keeps (ExpiryByCaller): a row
// past it is read, replaced and deleted as any other, the reaper leaves it,
// and a lease's recache still reads the column.
func TestExpiryKeptByTheCaller(t *testing.T) {
	clock := newClock()
	e := newEngine(t, Config{Partitions: 2, Now: clock.now})
	s := memcacheTable("kept", 64)
	s.ExpireColumn = -1
	made := mustCreate(t, e, s)
	bound, err := e.BindExpireColumn(made, colExpire, true)
	require.NoError(t, err)
	assert.True(t, bound.ExpiryByCaller)
	_, err = e.BindExpireColumn(made, colExpire, false)
	assert.ErrorContains(t, err, "for its caller and for itself alike")
	now := uint64(clock.now())
	put(t, e, bound, "past", item{value: "p", expire: now - 1})
	put(t, e, bound, "soon", item{value: "s", expire: now + 5})
	v, ok := getValue(t, e, bound, "past")
	assert.True(t, ok, "an expired row is read")
	assert.Equal(t, "p", v)
	assert.Equal(t, 0, e.reap())
	assert.Equal(t, uint64(2), e.Stats().Items)
	assert.Zero(t, e.Stats().Expired)

	ins := writeOp(ndbclient.OpInsert, bound, "past", set(colValue, ndbclient.String("new")))
	run(t, e, ins)
	assert.Equal(t, ndbclient.CodeDuplicate, codeOf(ins), "an expired row is not replaced by an insert")

	lease := readOp(bound, "soon", colValue)
	lease.Lease, lease.RecacheAt = true, uint32(now+10)
	run(t, e, lease)
	require.NoError(t, lease.Err)
	assert.True(t, lease.Won, "expires before the recache time: the token is won")

	del := writeOp(ndbclient.OpDelete, bound, "past")
	run(t, e, del)
	require.NoError(t, del.Err)
	assert.Equal(t, uint64(1), e.Stats().Items)
}
