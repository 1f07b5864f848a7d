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
// Entries are one word, so that readers and writers on other goroutines
// always see a whole one: 48 bits of the key's maphash (the bits that do
// not pick the bucket) and the partition in 16. Two keys whose hashes agree
// on those bits (odds about 2^-45 a lookup, of eight entries compared)
// share an answer. That costs at most a hop inside NDB, never a wrong
// result: a partition only picks the transaction's coordinator and the
// dispatcher's lane, and NDB routes every operation by its own hash.
//
// A bucket is memoWays entries in one cache line. A new key takes an empty
// entry, else the entry its hash picks (slot). Reads in key order, as
// flexAsynch's and memtier's sequential patterns make, come back to a
// bucket's keys in the same cycle: when a bucket had more keys than ways,
// evicting the oldest (as this memo did) missed every one of them, 27 % of
// 100,000 keys in 131,072 entries, and each miss cost an MD5 in NDB (7 % of
// the gateway's CPU in 100-key gets on NDB 7.5.0). Evicting by the new key's
// hash keeps the keys that have a slot to themselves: 90 % hit. In random
// order both hit about 92 %; direct-mapped, 70 %. Twice the entries
// (partitionMemoEntries) hit 99.6 % of 100,000 keys in order, and took 3 %
// off the gateway's CPU a key in 100-key gets.
type partitionMemo struct {
	seed    maphash.Seed
	entries []atomic.Uint64 // 0: empty; len is a power of two, at least memoWays
}

// memoWays is the entries of a bucket: 64 bytes, one cache line (Go aligns
// an allocation whose size is a power of two to its size, up to a page).
const memoWays = 8

// partitionMemoEntries is 2 MiB per table.
const partitionMemoEntries = 1 << 18

// noPartition: not remembered.
const noPartition = -1

// newPartitionMemo makes a memo of entries entries, a power of two of at
// least memoWays.
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

// bucket is the first entry of h's bucket.
func (m *partitionMemo) bucket(h uint64) int {
	return int(h&uint64(len(m.entries)/memoWays-1)) * memoWays
}

// get returns the partition remembered for the key of hash h, or noPartition.
func (m *partitionMemo) get(h uint64) int {
	b := m.entries[m.bucket(h):][:memoWays]
	for i := range b {
		if e := b[i].Load(); e != 0 && e>>16 == h>>16 {
			return int(e & 0xffff)
		}
	}
	return noPartition
}

// prefetch asks for the cache line of h's bucket, which get will read.
func (m *partitionMemo) prefetch(h uint64) {
	prefetch.Line(uintptr(unsafe.Pointer(&m.entries[m.bucket(h)])))
}

// put remembers partition p for the key of hash h: in its own entry if the
// bucket has one, else in the first empty entry, else in the entry slot
// picks. A partition past 16 bits (more than NDB allows a table) is not
// remembered. Racing puts may leave a bucket with a key twice or one lost:
// each entry stays whole, so that costs only a later miss.
func (m *partitionMemo) put(h uint64, p int) {
	if p < 0 || p > 0xffff {
		return
	}
	b := m.entries[m.bucket(h):][:memoWays]
	at := slot(h)
	for i := range b {
		if e := b[i].Load(); e == 0 || e>>16 == h>>16 {
			at = i
			break
		}
	}
	b[at].Store(h>>16<<16 | uint64(p))
}

// slot is the entry a key of hash h replaces in a full bucket: bits 16-18
// of h. A bucket is picked by h's lowest bits (15 of them in a memo of
// partitionMemoEntries), so a bucket's keys spread over its entries.
func slot(h uint64) int {
	return int(h>>16) % memoWays
}
