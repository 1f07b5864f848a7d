//go:build ndbapi

package ndb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/drivertest"
	"github.com/ndbgate/ndbgate/ndbclient/ndbapi"
)

// Data nodes that answer later than ndb.busy_poll get no poll at all: the
// window never grows past 0, and each lone flight sleeps for its answer as
// without the poll. No NDB round trip through the shim takes under 5 µs,
// two wake-ups over loopback TCP; on session 51's Intel guest about one in
// 200 took under 20.
func TestBusyPollShorterThanTheRoundTripNeverPolls(t *testing.T) {
	d := openDriverWith(t, ndbapi.Config{Connectstring: connectstring(t), PoolSize: 2, BusyPoll: 5 * time.Microsecond})
	testLoneFlights(t, d, false)
}

// Lone batches (Batch.Lone) run on their caller's goroutine when the first
// executor is idle, and queue behind it when it is not. Lone writers and
// readers race batches handed to the executors; every read must see its
// own writer's last value, and nothing may be left queued (a post that
// found the executor busy with a lone flight). With a busy poll
// (ndb.busy_poll) lone flights poll for their answers through the
// connection's wait group, beside executors that sleep in NDB's poll, once
// the first round trips have sized the poll's window. The limit is the
// largest allowed, above any round trip of a cluster on this host: on
// ndbmtd on 2 cores, whose round trips often took over 200 µs, the
// default's window halved after each of those, and only 93 of the 200
// flights below polled.
func TestLoneFlightsShareTheExecutor(t *testing.T) {
	for _, poll := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("busy poll %s", poll), func(t *testing.T) {
			d := openDriverWith(t, ndbapi.Config{Connectstring: connectstring(t), PoolSize: 2, BusyPoll: poll})
			testLoneFlights(t, d, poll > 0)
		})
	}
}

func testLoneFlights(t *testing.T, d *ndbapi.Driver, polls bool) {
	tbl := suiteTable(t, d, "lone", true)
	c := ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	write := func(k, v string) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String(k)},
			Set: []ndbclient.ColumnValue{{Column: drivertest.ColValue, Value: ndbclient.String(v)}}}
	}
	read := func(k string) *ndbclient.Op {
		return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: []ndbclient.Value{ndbclient.String(k)}, Read: []int{drivertest.ColValue}}
	}
	// Execute's batches are lone; Submit's are not unless marked.
	run := func(lone bool, ops ...*ndbclient.Op) error {
		b := &ndbclient.Batch{Ops: ops, Poll: lone} // a lone caller that may poll
		if lone {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Execute(ctx, b); err != nil {
				return err
			}
		} else {
			ch := make(chan error, 1)
			c.Submit(b, func(_ *ndbclient.Batch, err error) { ch <- err })
			if err := <-ch; err != nil {
				return err
			}
		}
		for _, op := range ops {
			if op.Err != nil {
				return op.Err
			}
		}
		return nil
	}

	// Alone, every lone flight runs on the caller, and polls if asked to.
	before, polledBefore := d.Stats().FlightsOnCaller, d.Stats().FlightsPolled
	for i := range 100 {
		k := fmt.Sprintf("alone-%d", i)
		require.NoError(t, run(true, write(k, "v")))
		op := read(k)
		require.NoError(t, run(true, op))
		require.Equal(t, "v", string(op.Row[0].B))
	}
	assert.Equal(t, uint64(200), d.Stats().FlightsOnCaller-before, "each of 200 lone flights on its caller")
	if polled := d.Stats().FlightsPolled - polledBefore; polls {
		// The window starts at 0 and grows from the first round trips; a
		// round trip slower than the limit shrinks it for a few flights.
		assert.GreaterOrEqual(t, polled, uint64(150), "most of 200 lone flights polled for their answers")
	} else {
		assert.Zero(t, polled, "no flight polls without a busy poll")
	}
	// Five keys at a time: a lone batch's rounds for one data node run on
	// the caller as one flight of several transactions (five writes), or
	// of reads sharing one; the poll waits for the first answer, the rest
	// are collected as without it.
	before, polledBefore = d.Stats().FlightsOnCaller, d.Stats().FlightsPolled
	for i := range 20 {
		var keys []string
		var ws, rs []*ndbclient.Op
		for j := range 5 {
			k := fmt.Sprintf("five-%d-%d", i, j)
			keys, ws, rs = append(keys, k), append(ws, write(k, "v"+k)), append(rs, read(k))
		}
		require.NoError(t, run(true, ws...))
		require.NoError(t, run(true, rs...))
		for j, op := range rs {
			require.Equal(t, "v"+keys[j], string(op.Row[0].B))
		}
	}
	onCaller, polled := d.Stats().FlightsOnCaller-before, d.Stats().FlightsPolled-polledBefore
	assert.Positive(t, onCaller, "some five-key flights on their callers")
	if polls {
		assert.Positive(t, polled, "flights on their callers polled")
		assert.LessOrEqual(t, polled, onCaller, "only flights on their callers poll")
	} else {
		assert.Zero(t, polled)
	}

	// Raced: 8 lone writers, 4 batch writers, for 3 s.
	before = d.Stats().FlightsOnCaller
	stop := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	var ops sync.Map // goroutine -> ops done
	for g := range 12 {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lone := g < 8
			n := 0
			for i := 0; time.Now().Before(stop); i++ {
				v := fmt.Sprintf("v%d", i)
				var keys []string
				if lone {
					keys = []string{fmt.Sprintf("race-%d", g)}
				} else {
					for j := range 10 {
						keys = append(keys, fmt.Sprintf("race-%d-%d", g, j))
					}
				}
				var ws, rs []*ndbclient.Op
				for _, k := range keys {
					ws, rs = append(ws, write(k, v)), append(rs, read(k))
				}
				if err := run(lone, ws...); err != nil {
					errs <- fmt.Errorf("goroutine %d write %d: %w", g, i, err)
					return
				}
				if err := run(lone, rs...); err != nil {
					errs <- fmt.Errorf("goroutine %d read %d: %w", g, i, err)
					return
				}
				for j, op := range rs {
					if got := string(op.Row[0].B); got != v {
						errs <- fmt.Errorf("goroutine %d: %s = %q after writing %q", g, keys[j], got, v)
						return
					}
				}
				n += len(keys)
			}
			ops.Store(g, n)
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	onCaller = d.Stats().FlightsOnCaller - before
	ops.Range(func(g, n any) bool {
		assert.Positive(t, n.(int), "goroutine %d made progress", g)
		return true
	})
	assert.Positive(t, onCaller, "some lone flights ran on their callers while others queued")
	assert.Zero(t, d.Overlaps(), "flights begun on an executor already running one: two on one Ndb object")
	t.Logf("raced: %d lone flights on their callers", onCaller)
}
