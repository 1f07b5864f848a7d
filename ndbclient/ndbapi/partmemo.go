package ndbapi

import (
	"hash/maphash"
	"sync/atomic"
	"unsafe"

	"github.com/ndbgate/ndbgate/internal/prefetch"
)

// partitionMemo remembers the partitions of recently routed keys. NDB's
// distribution hash is an MD5 over the key padded to its column's full
// length (252 bytes for the default container's VARCHAR(250)): a tenth of
// the gateway's CPU at memcache pipeline 16 on NDB 7.5.0, where a cache
// lookup costs a maphash and one memory read.
//
// It is direct-mapped, and an entry is one word, so that readers and writers
// on other goroutines always see a whole one: 48 bits of the key's maphash
// (the bits that do not pick the entry) and the partition in 16. Two keys
// whose hashes agree on those 64 bits (odds 2^-48 a lookup) share an answer.
// That costs at most a hop inside NDB, never a wrong result: a partition only
// picks the transaction's coordinator and the dispatcher's lane, and NDB
// routes every operation by its own hash.
type partitionMemo struct {
	seed    maphash.Seed
	entries []atomic.Uint64 // 0: empty
}

// partitionMemoEntries is 1 MiB per table: with 100,000 keys of uniform
// popularity about 70 % of lookups hit, and all of a hot set smaller than
// that.
const partitionMemoEntries = 1 << 17

// noPartition: not remembered.
const noPartition = -1

func newPartitionMemo(entries int) *partitionMemo {
	return &partitionMemo{seed: maphash.MakeSeed(), entries: make([]atomic.Uint64, entries)}
}

// hash is the memo hash of a key's native columns, concatenated in buf with
// their lengths in lens (a key of several columns hashes the lengths too, so
// that "ab","c" and "a","bc" differ).
func (m *partitionMemo) hash(buf []byte, lens ...int) uint64 {
	if len(lens) <= 1 {
		return maphash.Bytes(m.seed, buf)
	}
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.Write(buf)
	for _, n := range lens {
		h.WriteByte(byte(n))
		h.WriteByte(byte(n >> 8))
	}
	return h.Sum64()
}

// get returns the partition remembered for the key of hash h, or noPartition.
func (m *partitionMemo) get(h uint64) int {
	e := m.entries[h&uint64(len(m.entries)-1)].Load()
	if e == 0 || e>>16 != h>>16 {
		return noPartition
	}
	return int(e & 0xffff)
}

// prefetch asks for the cache line of h's entry, which get will read.
func (m *partitionMemo) prefetch(h uint64) {
	prefetch.Line(uintptr(unsafe.Pointer(&m.entries[h&uint64(len(m.entries)-1)])))
}

// put remembers partition p for the key of hash h. A partition past 16 bits
// (more than NDB allows a table) is not remembered.
func (m *partitionMemo) put(h uint64, p int) {
	if p < 0 || p > 0xffff {
		return
	}
	m.entries[h&uint64(len(m.entries)-1)].Store(h>>16<<16 | uint64(p))
}
