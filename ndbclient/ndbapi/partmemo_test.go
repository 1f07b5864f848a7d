package ndbapi

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPartitionMemoRemembersAndReplaces(t *testing.T) {
	m := newPartitionMemo(1 << 10)
	k := []byte("memtier-12345")
	h := m.hash(k)
	assert.Equal(t, noPartition, m.get(h), "empty")
	m.put(h, 7)
	assert.Equal(t, 7, m.get(m.hash(k)))
	m.put(h, 0)
	assert.Equal(t, 0, m.get(h), "partition 0 is remembered too")
	m.put(h, 1<<16)
	assert.Equal(t, 0, m.get(h), "a partition past 16 bits is not stored")

	// A key that lands on the same entry replaces it; the first then misses.
	var other []byte
	for i := 0; other == nil; i++ {
		c := []byte(fmt.Sprintf("key-%d", i))
		if ch := m.hash(c); ch&(1<<10-1) == h&(1<<10-1) && ch != h {
			other = c
		}
	}
	m.put(m.hash(other), 3)
	assert.Equal(t, 3, m.get(m.hash(other)))
	assert.Equal(t, noPartition, m.get(h))
}

func TestPartitionMemoKeysOfSeveralColumns(t *testing.T) {
	m := newPartitionMemo(1 << 10)
	assert.NotEqual(t, m.hash([]byte("abc"), 2, 1), m.hash([]byte("abc"), 1, 2))
	assert.Equal(t, m.hash([]byte("abc"), 2, 1), m.hash([]byte("abc"), 2, 1))
}

func TestPartitionMemoConcurrentEntriesStayWhole(t *testing.T) {
	// Writers store each key's own partition (a function of the key); a
	// reader must never see another key's partition for its key.
	m := newPartitionMemo(64)
	partOf := func(i int) int { return i % 1000 }
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 20000; i++ {
				k := i*4 + w
				h := m.hash([]byte(fmt.Sprint(k)))
				if p := m.get(h); p != noPartition && p != partOf(k) {
					t.Errorf("key %d: got partition %d, want %d", k, p, partOf(k))
					return
				}
				m.put(h, partOf(k))
			}
		}(w)
	}
	wg.Wait()
}

func BenchmarkPartitionMemoHit(b *testing.B) {
	m := newPartitionMemo(partitionMemoEntries)
	k := []byte("memtier-1234567")
	m.put(m.hash(k), 5)
	for b.Loop() {
		if m.get(m.hash(k)) != 5 {
			b.Fatal("miss")
		}
	}
}
