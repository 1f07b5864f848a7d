package embedded

// Huge pages (Config.HugePages). A busy partition's regular pages are
// maxPage (1 MiB) and mapped one by one, so the kernel never backs them
// with a 2 MiB page: each row then needs its own 4 KiB TLB entry, and a
// batch's lookups stall on page walks (bench/HISTORY.md, session 31). With
// HugePages every regular page, a partition's first too, is hugePage,
// mapped 2 MiB-aligned and marked MADV_HUGEPAGE, which transparent huge
// pages honour in their default "madvise" mode; memcached's -L does the
// same for its slabs. The kernel may still give 4 KiB pages (THP "never",
// or no free 2 MiB page): the mapping then works as any other.

// hugePage is the size of an x86-64 or arm64 (4 KiB granule) huge page.
const hugePage = 2 << 20

// firstPageSize is the size of a partition's first regular page. With huge
// pages it is one already: the rows of most partitions would otherwise never
// reach a page big enough (100,000 small rows in 16 partitions are about
// 500 KiB each).
func (e *Engine) firstPageSize() int {
	if e.cfg.HugePages {
		return hugePage
	}
	return firstPage
}

// regularPageMax is the size a busy partition's regular pages grow to.
func (e *Engine) regularPageMax() int {
	if e.cfg.HugePages {
		return hugePage
	}
	return maxPage
}

// mapRegular maps a regular page of n bytes: on huge pages when they are
// on and n is a whole number of them.
func (e *Engine) mapRegular(n int) []byte {
	if e.cfg.HugePages && n%hugePage == 0 {
		if mem := mapHuge(n); mem != nil {
			return mem
		}
	}
	return mapPage(n)
}
