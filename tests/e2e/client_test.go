package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests use github.com/bradfitz/gomemcache, a widely used Go client, the
// way an application would.

func newClient(t testing.TB, addr string) *memcache.Client {
	t.Helper()
	mc := memcache.New(addr)
	mc.Timeout = ioTimeout
	mc.MaxIdleConns = 64
	t.Cleanup(func() { _ = mc.Close() })
	return mc
}

func requireItem(t *testing.T, mc *memcache.Client, key, value string, flags uint32) *memcache.Item {
	t.Helper()
	it, err := mc.Get(key)
	require.NoError(t, err, "get %s", key)
	require.Equal(t, key, it.Key)
	require.Equal(t, value, string(it.Value), "value of %s", key)
	require.Equal(t, flags, it.Flags, "flags of %s", key)
	return it
}

func requireMiss(t *testing.T, mc *memcache.Client, key string) {
	t.Helper()
	_, err := mc.Get(key)
	require.ErrorIs(t, err, memcache.ErrCacheMiss, "get %s", key)
}

// clientCases run in order on one server and one client per target.
var clientCases = []struct {
	name string
	run  func(t *testing.T, mc *memcache.Client)
}{
	{"set get and flags", func(t *testing.T, mc *memcache.Client) {
		requireMiss(t, mc, "c:none")
		for _, flags := range []uint32{0, 1, 0xdeadbeef, 0xffffffff} {
			key := fmt.Sprintf("c:flags:%d", flags)
			require.NoError(t, mc.Set(&memcache.Item{Key: key, Value: []byte("v" + key), Flags: flags}))
			requireItem(t, mc, key, "v"+key, flags)
		}
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:empty", Value: []byte{}}))
		requireItem(t, mc, "c:empty", "", 0)
		// Overwrite.
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:empty", Value: []byte("now full"), Flags: 3}))
		requireItem(t, mc, "c:empty", "now full", 3)
		// Binary value with every byte value.
		bin := make([]byte, 256)
		for i := range bin {
			bin[i] = byte(i)
		}
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:bin", Value: bin}))
		it, err := mc.Get("c:bin")
		require.NoError(t, err)
		require.Equal(t, bin, it.Value)
	}},
	{"get multi with 100 keys", func(t *testing.T, mc *memcache.Client) {
		keys := make([]string, 100)
		for i := range keys {
			keys[i] = fmt.Sprintf("c:multi:%03d", i)
			if i%3 != 0 { // every third key stays missing
				require.NoError(t, mc.Set(&memcache.Item{Key: keys[i], Value: []byte("value-" + keys[i]), Flags: uint32(i)}))
			}
		}
		got, err := mc.GetMulti(keys)
		require.NoError(t, err)
		require.Len(t, got, 66)
		for i, k := range keys {
			it, ok := got[k]
			if i%3 == 0 {
				assert.False(t, ok, "missing key %s returned", k)
				continue
			}
			if assert.True(t, ok, "key %s not returned", k) {
				assert.Equal(t, "value-"+k, string(it.Value))
				assert.Equal(t, uint32(i), it.Flags)
			}
		}
	}},
	{"add replace append prepend", func(t *testing.T, mc *memcache.Client) {
		require.NoError(t, mc.Add(&memcache.Item{Key: "c:arap", Value: []byte("mid"), Flags: 4}))
		require.ErrorIs(t, mc.Add(&memcache.Item{Key: "c:arap", Value: []byte("again")}), memcache.ErrNotStored)
		require.ErrorIs(t, mc.Replace(&memcache.Item{Key: "c:arap-none", Value: []byte("x")}), memcache.ErrNotStored)
		requireMiss(t, mc, "c:arap-none")
		require.NoError(t, mc.Append(&memcache.Item{Key: "c:arap", Value: []byte(">>")}))
		require.NoError(t, mc.Prepend(&memcache.Item{Key: "c:arap", Value: []byte("<<")}))
		requireItem(t, mc, "c:arap", "<<mid>>", 4) // append/prepend keep the flags
		require.NoError(t, mc.Replace(&memcache.Item{Key: "c:arap", Value: []byte("new"), Flags: 5}))
		requireItem(t, mc, "c:arap", "new", 5)
		require.ErrorIs(t, mc.Append(&memcache.Item{Key: "c:arap-none", Value: []byte("x")}), memcache.ErrNotStored)
		require.ErrorIs(t, mc.Prepend(&memcache.Item{Key: "c:arap-none", Value: []byte("x")}), memcache.ErrNotStored)
	}},
	{"compare and swap", func(t *testing.T, mc *memcache.Client) {
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:cas", Value: []byte("v1")}))
		it1, err := mc.Get("c:cas")
		require.NoError(t, err)
		it2, err := mc.Get("c:cas")
		require.NoError(t, err)
		it1.Value = []byte("v2")
		require.NoError(t, mc.CompareAndSwap(it1))
		requireItem(t, mc, "c:cas", "v2", 0)
		// it2 carries the unique from before the swap.
		it2.Value = []byte("lost update")
		require.ErrorIs(t, mc.CompareAndSwap(it2), memcache.ErrCASConflict)
		requireItem(t, mc, "c:cas", "v2", 0)
		// A fresh read can swap again.
		it3, err := mc.Get("c:cas")
		require.NoError(t, err)
		it3.Value = []byte("v3")
		require.NoError(t, mc.CompareAndSwap(it3))
		requireItem(t, mc, "c:cas", "v3", 0)
		// Swapping a deleted item: NOT_FOUND, which gomemcache calls a cache miss.
		it4, err := mc.Get("c:cas")
		require.NoError(t, err)
		require.NoError(t, mc.Delete("c:cas"))
		require.ErrorIs(t, mc.CompareAndSwap(it4), memcache.ErrCacheMiss)
	}},
	{"delete", func(t *testing.T, mc *memcache.Client) {
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:del", Value: []byte("x")}))
		require.NoError(t, mc.Delete("c:del"))
		requireMiss(t, mc, "c:del")
		require.ErrorIs(t, mc.Delete("c:del"), memcache.ErrCacheMiss)
	}},
	{"increment and decrement", func(t *testing.T, mc *memcache.Client) {
		_, err := mc.Increment("c:ctr-none", 1)
		require.ErrorIs(t, err, memcache.ErrCacheMiss)
		_, err = mc.Decrement("c:ctr-none", 1)
		require.ErrorIs(t, err, memcache.ErrCacheMiss)
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ctr", Value: []byte("41")}))
		v, err := mc.Increment("c:ctr", 1)
		require.NoError(t, err)
		require.Equal(t, uint64(42), v)
		v, err = mc.Increment("c:ctr", 958)
		require.NoError(t, err)
		require.Equal(t, uint64(1000), v)
		requireItem(t, mc, "c:ctr", "1000", 0)
		v, err = mc.Decrement("c:ctr", 1)
		require.NoError(t, err)
		require.Equal(t, uint64(999), v)
		// Clamp at zero.
		v, err = mc.Decrement("c:ctr", 5000)
		require.NoError(t, err)
		require.Equal(t, uint64(0), v)
		// Wrap past 2^64-1.
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ctr-max", Value: []byte("18446744073709551614")}))
		v, err = mc.Increment("c:ctr-max", 1)
		require.NoError(t, err)
		require.Equal(t, uint64(18446744073709551615), v)
		v, err = mc.Increment("c:ctr-max", 3)
		require.NoError(t, err)
		require.Equal(t, uint64(2), v)
		// Non-numeric.
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ctr-text", Value: []byte("text")}))
		_, err = mc.Increment("c:ctr-text", 1)
		require.Error(t, err)
		require.Contains(t, err.Error(), "cannot increment or decrement non-numeric value")
		_, err = mc.Decrement("c:ctr-text", 1)
		require.Error(t, err)
		require.Contains(t, err.Error(), "cannot increment or decrement non-numeric value")
		requireItem(t, mc, "c:ctr-text", "text", 0)
	}},
	{"touch and get-and-touch", func(t *testing.T, mc *memcache.Client) {
		require.ErrorIs(t, mc.Touch("c:touch-none", 10), memcache.ErrCacheMiss)
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:touch", Value: []byte("t"), Flags: 8}))
		require.NoError(t, mc.Touch("c:touch", 100))
		it, err := mc.GetAndTouch("c:touch", 100)
		require.NoError(t, err)
		require.Equal(t, "t", string(it.Value))
		require.Equal(t, uint32(8), it.Flags)
		_, err = mc.GetAndTouch("c:touch-none", 100)
		require.ErrorIs(t, err, memcache.ErrCacheMiss)
	}},
	{"expiry", func(t *testing.T, mc *memcache.Client) {
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ttl", Value: []byte("soon gone"), Expiration: 1}))
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ttl-touched", Value: []byte("kept"), Expiration: 1}))
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:ttl-long", Value: []byte("kept"), Expiration: 100}))
		require.NoError(t, mc.Touch("c:ttl-touched", 100))
		requireItem(t, mc, "c:ttl", "soon gone", 0)
		time.Sleep(2500 * time.Millisecond)
		requireMiss(t, mc, "c:ttl")
		requireItem(t, mc, "c:ttl-touched", "kept", 0)
		requireItem(t, mc, "c:ttl-long", "kept", 0)
		// An expired key can be added again.
		require.NoError(t, mc.Add(&memcache.Item{Key: "c:ttl", Value: []byte("back")}))
		requireItem(t, mc, "c:ttl", "back", 0)
	}},
	{"large value near the item size limit", func(t *testing.T, mc *memcache.Client) {
		rng := rand.New(rand.NewSource(1))
		big := make([]byte, valueMax()-1024) // near 1 MiB; near 13500 bytes on NDB
		rng.Read(big)
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:big", Value: big, Flags: 77}))
		it, err := mc.Get("c:big")
		require.NoError(t, err)
		require.Equal(t, uint32(77), it.Flags)
		require.True(t, bytes.Equal(big, it.Value), "large value corrupted (got %d bytes)", len(it.Value))
		// Twice the limit is refused, and the old value is gone (memcached unlinks it).
		err = mc.Set(&memcache.Item{Key: "c:big", Value: make([]byte, 2<<20)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "object too large for cache")
		requireMiss(t, mc, "c:big")
		// The client's connection pool is still healthy.
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:after-big", Value: []byte("ok")}))
		requireItem(t, mc, "c:after-big", "ok", 0)
	}},
	{"a refused set hides the old value from the next read, every time", func(t *testing.T, mc *memcache.Client) {
		// Refused while parsing, past the item size limit. gomemcache drops
		// its connection after the server error and reads on a new one: the
		// old item must be gone before the refusal comes (on NDB before
		// b85f2d2, 16 reads in 600 found it). A value the item size limit
		// admits but the column does not drops the old item too
		// (TestSetTooLongForItsColumn).
		tooBig := make([]byte, 2<<20)
		for i := 0; i < 50; i++ {
			key := fmt.Sprintf("c:refused:%d", i%10)
			require.NoError(t, mc.Set(&memcache.Item{Key: key, Value: []byte("old")}))
			err := mc.Set(&memcache.Item{Key: key, Value: tooBig})
			require.Error(t, err)
			require.Contains(t, err.Error(), "object too large for cache")
			requireMiss(t, mc, key)
		}
	}},
	{"flush all", func(t *testing.T, mc *memcache.Client) {
		for i := 0; i < 20; i++ {
			require.NoError(t, mc.Set(&memcache.Item{Key: fmt.Sprintf("c:flush:%d", i), Value: []byte("x")}))
		}
		require.NoError(t, mc.FlushAll())
		keys := []string{"c:flush:0", "c:flush:19", "c:multi:001", "c:arap"}
		got, err := mc.GetMulti(keys)
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoError(t, mc.Set(&memcache.Item{Key: "c:flush:0", Value: []byte("y")}))
		requireItem(t, mc, "c:flush:0", "y", 0)
	}},
	{"ping", func(t *testing.T, mc *memcache.Client) {
		require.NoError(t, mc.Ping())
	}},
}

func TestGomemcache(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		mc := newClient(t, tg.addr)
		for _, cc := range clientCases {
			t.Run(strings.ReplaceAll(cc.name, " ", "_"), func(t *testing.T) { cc.run(t, mc) })
		}
	})
}

// TestGomemcacheConcurrent has 50 goroutines do 200 operations each on
// overlapping keys, then checks that no update was lost or torn:
//   - incr on 10 shared counters: each ends at the number of increments aimed at it;
//   - append of a goroutine-unique token to 5 shared lists: every token is there once;
//   - gets+cas increments on 10 shared keys: each ends at the number of successful swaps;
//   - set/get of values that carry their own checksum on 20 shared keys: every
//     read value is one that some goroutine wrote in full.
func TestGomemcacheConcurrent(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		const (
			workers  = 50
			ops      = 200
			counters = 10
			lists    = 5
			casKeys  = 10
			regs     = 20
		)
		mc := newClient(t, tg.addr)
		for i := 0; i < counters; i++ {
			require.NoError(t, mc.Set(&memcache.Item{Key: fmt.Sprintf("cc:ctr:%d", i), Value: []byte("0")}))
		}
		for i := 0; i < lists; i++ {
			require.NoError(t, mc.Set(&memcache.Item{Key: fmt.Sprintf("cc:list:%d", i), Value: []byte{}}))
		}
		for i := 0; i < casKeys; i++ {
			require.NoError(t, mc.Set(&memcache.Item{Key: fmt.Sprintf("cc:cas:%d", i), Value: []byte("0")}))
		}

		var (
			mu         sync.Mutex
			incrWant   [counters]int
			casWant    [casKeys]int
			appended   = map[string]int{} // token -> list index
			errs       []string
			wg         sync.WaitGroup
			maxCASTrys = 500
		)
		fail := func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			if len(errs) < 20 {
				errs = append(errs, fmt.Sprintf(format, args...))
			}
		}
		deadline := time.Now().Add(60 * time.Second)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(w)))
				for i := 0; i < ops && time.Now().Before(deadline); i++ {
					switch i % 4 {
					case 0:
						k := rng.Intn(counters)
						if _, err := mc.Increment(fmt.Sprintf("cc:ctr:%d", k), 1); err != nil {
							fail("incr: %v", err)
							continue
						}
						mu.Lock()
						incrWant[k]++
						mu.Unlock()
					case 1:
						k := rng.Intn(lists)
						tok := fmt.Sprintf("%d.%d,", w, i)
						if err := mc.Append(&memcache.Item{Key: fmt.Sprintf("cc:list:%d", k), Value: []byte(tok)}); err != nil {
							fail("append: %v", err)
							continue
						}
						mu.Lock()
						appended[tok] = k
						mu.Unlock()
					case 2:
						k := rng.Intn(casKeys)
						key := fmt.Sprintf("cc:cas:%d", k)
						done := false
						for try := 0; try < maxCASTrys && !done; try++ {
							it, err := mc.Get(key)
							if err != nil {
								fail("cas get: %v", err)
								break
							}
							n, err := strconv.Atoi(string(it.Value))
							if err != nil {
								fail("cas value %q: %v", it.Value, err)
								break
							}
							it.Value = []byte(strconv.Itoa(n + 1))
							switch err := mc.CompareAndSwap(it); {
							case err == nil:
								done = true
							case errors.Is(err, memcache.ErrCASConflict):
							default:
								fail("cas: %v", err)
								try = maxCASTrys
							}
						}
						if done {
							mu.Lock()
							casWant[k]++
							mu.Unlock()
						} else {
							fail("cas on %s did not succeed in %d tries", key, maxCASTrys)
						}
					case 3:
						key := fmt.Sprintf("cc:reg:%d", rng.Intn(regs))
						body := strings.Repeat(string(rune('a'+w%26)), 1+rng.Intn(200))
						val := fmt.Sprintf("%d:%d:%s", w, len(body), body)
						if err := mc.Set(&memcache.Item{Key: key, Value: []byte(val), Flags: uint32(w)}); err != nil {
							fail("set: %v", err)
							continue
						}
						it, err := mc.Get(key)
						if err != nil {
							fail("get %s: %v", key, err)
							continue
						}
						f := strings.SplitN(string(it.Value), ":", 3)
						if len(f) != 3 || strconv.Itoa(len(f[2])) != f[1] || f[0] != strconv.Itoa(int(it.Flags)) ||
							strings.Trim(f[2], f[2][:1]) != "" {
							fail("torn value for %s: flags %d value %q", key, it.Flags, it.Value)
						}
					}
				}
			}(w)
		}
		wg.Wait()
		require.Empty(t, errs, "errors during the concurrent run")
		require.True(t, time.Now().Before(deadline), "concurrent run did not finish in time")

		total := 0
		for i := 0; i < counters; i++ {
			it, err := mc.Get(fmt.Sprintf("cc:ctr:%d", i))
			require.NoError(t, err)
			assert.Equal(t, strconv.Itoa(incrWant[i]), string(it.Value), "counter %d", i)
			total += incrWant[i]
		}
		assert.Equal(t, workers*ops/4, total)
		for i := 0; i < casKeys; i++ {
			it, err := mc.Get(fmt.Sprintf("cc:cas:%d", i))
			require.NoError(t, err)
			assert.Equal(t, strconv.Itoa(casWant[i]), string(it.Value), "cas counter %d", i)
		}
		seen := map[string]int{}
		for i := 0; i < lists; i++ {
			it, err := mc.Get(fmt.Sprintf("cc:list:%d", i))
			require.NoError(t, err)
			for _, tok := range strings.SplitAfter(string(it.Value), ",") {
				if tok == "" {
					continue
				}
				if k, ok := appended[tok]; !ok || k != i {
					t.Errorf("list %d holds unexpected token %q", i, tok)
				}
				seen[tok]++
			}
		}
		assert.Len(t, seen, workers*ops/4, "appended tokens")
		for tok, n := range seen {
			if n != 1 {
				t.Errorf("token %q appears %d times", tok, n)
			}
		}
	})
}
