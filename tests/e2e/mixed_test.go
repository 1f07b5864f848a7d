package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemcacheAndRowAPIWritesOnOneKey: a REST pk-write to the table behind a
// memcache container is a memcache write too. It takes a new CAS, so a
// memcache cas taken before it fails instead of overwriting it, and it keeps
// the counter coherent with the value (gomemcache for memcache, the REST
// row API on ndbmemcache.demo_table).
func TestMemcacheAndRowAPIWritesOnOneKey(t *testing.T) {
	s := startServer(t)
	mc := memcache.New(s.memcacheAddr)
	c := newSpecClient(t, s)
	key := fmt.Sprintf("mixed-%d", time.Now().UnixNano())
	// string_value is a VARBINARY: the row API takes it in base64.
	restWrite := func(k, value, more string) response {
		t.Helper()
		values := `[{"column":"string_value","value":"` + base64.StdEncoding.EncodeToString([]byte(value)) + `"}` + more + `]`
		return c.post("/0.1.0/ndbmemcache/demo_table/pk-write", `{"filters":[{"column":"mkey","value":"`+k+`"}],"values":`+values+`}`)
	}

	require.NoError(t, mc.Set(&memcache.Item{Key: key, Value: []byte("one")}))
	before, err := mc.Get(key)
	require.NoError(t, err)
	r := restWrite(key, "rest", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	before.Value = []byte("memcache, from a stale cas")
	assert.ErrorIs(t, mc.CompareAndSwap(before), memcache.ErrCASConflict, "the REST write took a new CAS")
	got, err := mc.Get(key)
	require.NoError(t, err)
	assert.Equal(t, "rest", string(got.Value), "the acknowledged REST write stands")
	got.Value = []byte("memcache, from a fresh cas")
	require.NoError(t, mc.CompareAndSwap(got), "a cas taken after it works")

	// The counter: incr changes the math column, which memcache reads first.
	counter := key + "-n"
	require.NoError(t, mc.Set(&memcache.Item{Key: counter, Value: []byte("5")}))
	n, err := mc.Increment(counter, 1)
	require.NoError(t, err)
	require.Equal(t, uint64(6), n)
	r = restWrite(counter, "hello", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	got, err = mc.Get(counter)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got.Value), "the value written over REST, not the old counter")
	_, err = mc.Increment(counter, 1)
	assert.Error(t, err, "not a number any more")
	r = restWrite(counter, "41", "")
	require.Equal(t, 200, r.status, "%s", r.body)
	n, err = mc.Increment(counter, 1)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), n, "a number written over REST counts on")

	// The CAS is the container's.
	r = restWrite(key, "x", `,{"column":"cas_value","value":1}`)
	assert.Equal(t, 400, r.status)
	assert.Contains(t, r.errorMessage(t), `"cas_value"`)
	got, err = mc.Get(key)
	require.NoError(t, err)
	assert.Equal(t, "memcache, from a fresh cas", string(got.Value), "a refused write changes nothing")

	// Mixed under load: memcache clients append with gets/cas while one REST
	// client overwrites in order. No cas may apply to a version older than
	// the REST write it raced, so the last REST write heads the final value.
	hot := key + "-hot"
	require.NoError(t, mc.Set(&memcache.Item{Key: hot, Value: []byte("r0")}))
	var stop atomic.Bool
	var appended atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl := memcache.New(s.memcacheAddr)
			for !stop.Load() {
				it, err := cl.Get(hot)
				if err != nil {
					continue
				}
				it.Value = append(it.Value, fmt.Sprintf(" m%d", i)...)
				if cl.CompareAndSwap(it) == nil {
					appended.Add(1)
				}
			}
		}(i)
	}
	last := 0
	for j := 1; j <= 200; j++ {
		if r := restWrite(hot, fmt.Sprintf("r%d", j), ""); r.status == 200 {
			last = j
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Equal(t, 200, last, "every REST write acknowledged")
	got, err = mc.Get(hot)
	require.NoError(t, err)
	head, _, _ := strings.Cut(string(got.Value), " ")
	assert.Equal(t, fmt.Sprintf("r%d", last), head, "a memcache cas overwrote an acknowledged REST write")
	assert.Positive(t, appended.Load(), "the memcache clients raced the REST writes")
}
