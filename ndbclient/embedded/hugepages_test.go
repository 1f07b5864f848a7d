package embedded

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// With HugePages every partition's first page is one 2 MiB page, aligned so
// that the kernel can back it with a huge page, and the rows read back.
func TestHugePagesAreAlignedWholePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge pages are asked for on Linux only")
	}
	e := newEngine(t, Config{HugePages: true})
	tbl := mustCreate(t, e, memcacheTable("huge", 1024))
	for i := range 2000 {
		put(t, e, tbl, fmt.Sprintf("k%05d", i), item{value: strings.Repeat("v", 100)})
	}
	tb, err := e.tableOf(tbl)
	require.NoError(t, err)
	pages := 0
	for _, p := range tb.parts {
		p.mu.Lock()
		for _, pg := range p.arena.pages {
			if pg == nil {
				continue
			}
			pages++
			assert.Equal(t, hugePage, len(pg), "partition %d: a regular page that is not one huge page", p.num)
			assert.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(pg)))%hugePage, "partition %d: a page not aligned to 2 MiB", p.num)
		}
		p.mu.Unlock()
	}
	assert.Equal(t, len(tb.parts), pages, "one page a partition")
	for i := range 2000 {
		v, ok := getValue(t, e, tbl, fmt.Sprintf("k%05d", i))
		require.True(t, ok, "k%05d", i)
		require.Equal(t, strings.Repeat("v", 100), v)
	}
	if thp, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && !strings.Contains(string(thp), "[never]") {
		assert.True(t, hugeAdvised(t, tb.parts[0].arena.pages[0]), "the page is not marked for huge pages (smaps)")
	}
}

// hugeAdvised reports whether the mapping holding pg has MADV_HUGEPAGE
// ("hg" in its VmFlags).
func hugeAdvised(t *testing.T, pg []byte) bool {
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(pg)))
	in := false
	for line := range strings.Lines(string(smaps)) {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line, " hg")
		}
	}
	return false
}

// Under a memory limit the cap leaves room for each partition's first huge
// page, and eviction keeps the rows within the limit as it does with small
// pages.
func TestHugePagesUnderALimit(t *testing.T) {
	e := newEngine(t, Config{HugePages: true, MemoryLimit: 8 << 20})
	tbl := mustCreate(t, e, memcacheTable("huge", 4096))
	val := strings.Repeat("x", 1000)
	for i := range 20_000 { // 20 MB of values into an 8 MiB limit
		op := writeOp(ndbclient.OpWrite, tbl, fmt.Sprintf("k%05d", i), item{value: val}.set()...)
		run(t, e, op)
		require.NoError(t, op.Err, "k%05d", i)
	}
	s := e.Stats()
	assert.LessOrEqual(t, s.Bytes, uint64(8<<20), "rows beyond the limit")
	assert.Positive(t, s.Evictions, "nothing was evicted")
	assert.LessOrEqual(t, e.pageBytes.Load(), e.pageCap(), "pages beyond the cap")
	v, ok := getValue(t, e, tbl, "k19999")
	require.True(t, ok, "the newest row was evicted")
	assert.Equal(t, val, v)
}
