package lin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Workload is the mix the clients run: each picks a key and an operation at
// random. Sets write values that are numbers unique to the run, so that a
// stale read is seen and incr has numbers to add to.
type Workload struct {
	Keys  []string
	Pause time.Duration // between a client's operations; 0 for none
	// Weights of set, get, cas, incr and delete; incr goes to a set on a
	// client without it.
	Weights [5]int
	// Repeat, when above 1, makes each value its number written Repeat
	// times, with a dot after each: long values, every byte of them
	// unique to the write, so that a value put together from parts of two
	// writes is seen. incr then finds no number: give it no weight.
	Repeat int
}

// LargeWeights are DefaultWeights without incr, for values that are no
// numbers (Repeat).
var LargeWeights = [5]int{Set: 25, Get: 40, Cas: 20, Delete: 15}

// DefaultWeights reads about as often as it writes, and leaves CAS a fair
// chance of finding its token current.
var DefaultWeights = [5]int{Set: 20, Get: 40, Cas: 20, Incr: 10, Delete: 10}

// Run runs one goroutine per client until ctx ends, recording into rec.
// Client i is numbered first+i in the history.
func (w Workload) Run(ctx context.Context, rec *Recorder, first int, clients []Client) {
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(ctx, rec, first+i, c)
		}()
	}
	wg.Wait()
}

func (w Workload) client(ctx context.Context, rec *Recorder, id int, c Client) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	tokens := map[string]uint64{} // the last token this client saw per key
	total := 0
	for _, x := range w.Weights {
		total += x
	}
	for seq := 1; ctx.Err() == nil; seq++ {
		in := Input{Key: w.Keys[rng.IntN(len(w.Keys))], Gateway: c.Gateway()}
		pick := rng.IntN(total)
		for k, x := range w.Weights {
			if pick < x {
				in.Kind = Kind(k)
				break
			}
			pick -= x
		}
		if in.Kind == Incr && !c.CanIncr() {
			in.Kind = Set
		}
		switch in.Kind {
		case Set, Cas:
			in.Value = fmt.Sprint(uint64(id+1)*1_000_000_000 + uint64(seq))
			if w.Repeat > 1 {
				in.Value = strings.Repeat(in.Value+".", w.Repeat)
			}
			in.Cas = tokens[in.Key]
			if in.Kind == Cas && in.Cas == 0 {
				in.Cas = 1 + rng.Uint64N(1000) // no token seen yet: most likely a stale one
			}
		case Incr:
			in.Delta = 1 + rng.Uint64N(9)
		}
		call := rec.Now()
		out, attempted, unexpected := c.Do(in)
		ret := rec.Now()
		if unexpected != "" {
			rec.Unexpected(unexpected)
		}
		if !attempted || out.Result == Ambiguous {
			why := ""
			if e, ok := c.(interface{ LastError() string }); ok {
				why = e.LastError()
			}
			rec.FailureWhy(ret, why)
		}
		if !attempted {
			time.Sleep(20 * time.Millisecond) // the gateway or the backend is down; try again soon
			continue
		}
		rec.Add(id, in, call, out, ret)
		if out.Result == Ok && out.Cas != 0 {
			tokens[in.Key] = out.Cas
		}
		if w.Pause > 0 {
			time.Sleep(w.Pause)
		}
	}
	c.Close()
}
