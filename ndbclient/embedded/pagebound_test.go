package embedded

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// The bound on arena pages under a memory limit (docs/CONFIGURATION.md, memory_limit): one
// and a half times the limit, plus 64 KiB per table partition (plus, for a
// moment, one page that a compaction copies rows into).

// pagesHeld is the real bytes of the arena pages of every partition, checked
// against the arenas' own count.
func pagesHeld(t testing.TB, e *Engine) int64 {
	t.Helper()
	var n int64
	for _, tb := range *e.tables.Load() {
		for _, p := range tb.parts {
			p.mu.Lock()
			var real int64
			for _, pg := range p.arena.pages {
				real += int64(len(pg))
			}
			require.Equal(t, p.arena.pageBytes, real)
			n += real
			p.mu.Unlock()
		}
	}
	return n
}

// valueOf is a value of size bytes that tells seed.
func valueOf(size, seed int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte('a' + (seed+i/64)%26)
	}
	if size >= 4 {
		binary.LittleEndian.PutUint32(b, uint32(seed))
	}
	return b
}

// The probe: under a 4 MiB limit, 8 MiB of a cache table's sets at each of six
// sizes, one after another. Before arena pages moved between classes, each
// size kept the pages it had filled (every partition's free chunks served only
// their own class) and the engine held about six times the limit. Now the
// pages, in total and in the real bytes mapped, stay within the cap: one and a
// half times the limit plus a first page per partition.
func TestPagesStayBoundedAcrossValueSizes(t *testing.T) {
	const limit = 4 << 20
	e := newEngine(t, Config{MemoryLimit: limit})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<20))
	bound := int64(limit + limit/2 + 16*64<<10)
	peak := int64(0)
	for _, size := range []int{1_000, 2_600, 6_800, 17_700, 46_000, 120_000} {
		v := valueOf(size, size)
		for i := range (8 << 20) / size {
			w := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint(size, ":", i), set(colValue, ndbclient.Bytes(v)))
			run(t, e, w)
			require.NoError(t, w.Err)
			if i%8 == 0 {
				peak = max(peak, pagesHeld(t, e))
			}
		}
		pages := pagesHeld(t, e)
		st := e.Stats()
		t.Logf("%6d-byte values: bytes %d KiB, pages %d KiB (peak %d KiB), evictions %d",
			size, st.Bytes>>10, pages>>10, peak>>10, st.Evictions)
		require.LessOrEqual(t, st.Bytes, uint64(limit))
		require.LessOrEqual(t, pages, bound, "pages after %d-byte values", size)
		require.LessOrEqual(t, peak, bound, "peak pages during %d-byte values", size)
		// The newest rows of this size are cached.
		got, ok := getValue(t, e, tbl, fmt.Sprint(size, ":", (8<<20)/size-1))
		require.True(t, ok)
		require.Equal(t, string(v), got)
	}
}

// A table without eviction never loses a row to page moves: its rows move to
// free chunks of their class on other pages, and it still fills to about the
// limit at each size in turn while its pages stay under the cap.
func TestPagesStayBoundedWithoutEviction(t *testing.T) {
	const limit = 4 << 20
	e := newEngine(t, Config{MemoryLimit: limit, Partitions: 4})
	tbl := mustCreateKept(t, e, "db", 1<<20)
	bound := int64(limit + limit/2 + 4*64<<10)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string][]byte{}
	for fill, size := range []int{700, 120_000, 1_800, 9_000, 300, 40_000, 3_000} {
		// Fill until refused.
		n := 0
		for ; ; n++ {
			k := fmt.Sprint(fill, ":", n)
			v := valueOf(size, fill*100000+n)
			w := writeOp(ndbclient.OpInsert, tbl, k, set(colValue, ndbclient.Bytes(v)))
			run(t, e, w)
			if codeOf(w) == ndbclient.CodeOutOfMemory {
				break
			}
			require.NoError(t, w.Err)
			model[k] = v
		}
		st := e.Stats()
		pages := pagesHeld(t, e)
		t.Logf("fill %d, %6d-byte values: %d stored, bytes %d KiB of %d, pages %d KiB of %d",
			fill, size, n, st.Bytes>>10, limit>>10, pages>>10, bound>>10)
		require.LessOrEqual(t, pages, bound)
		require.Zero(t, st.Evictions)
		// Full: within a row (and its per-partition rounding) of the limit.
		_, chunk := classOf(size + 64)
		require.Greater(t, int64(st.Bytes), int64(limit)-int64(4*chunk+pageAlign), "filled to the limit")
		// Delete about two thirds of everything, at random.
		for k := range model {
			if rng.IntN(3) != 0 {
				run(t, e, writeOp(ndbclient.OpDelete, tbl, k))
				delete(model, k)
			}
		}
		for k, v := range model {
			got, ok := getValue(t, e, tbl, k)
			require.True(t, ok, k)
			require.Equal(t, string(v), got, k)
		}
	}
}

// A cache taking ever larger rows at the page cap: rows over the largest
// class (dedicated pages) must not be refused while the page pool holds
// pages, which count against the cap but fit no such row.
func TestBigRowsAtTheCapUseThePooledPages(t *testing.T) {
	const limit = 16 << 20
	e := newEngine(t, Config{MemoryLimit: limit})
	tbl := mustCreate(t, e, memcacheTable("cache", 1<<20))
	for _, size := range []int{1_000, 46_000, 200_000, 1_000, 300_000} {
		v := valueOf(size, size)
		oom := 0
		for i := range (24 << 20) / size {
			w := writeOp(ndbclient.OpWrite, tbl, fmt.Sprint(size, ":", i), set(colValue, ndbclient.Bytes(v)))
			run(t, e, w)
			if codeOf(w) == ndbclient.CodeOutOfMemory {
				oom++
			} else {
				require.NoError(t, w.Err)
			}
		}
		require.Zero(t, oom, "size %d: a cache evicts to make room, it does not refuse", size)
	}
	checkEngine(t, e)
}
