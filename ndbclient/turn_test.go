package ndbclient_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// turnBatch is a batch of reads of keys, in turn t.
func turnBatch(tbl *ndbclient.Table, t *ndbclient.Turn, keys ...string) *ndbclient.Batch {
	b := &ndbclient.Batch{Turn: t}
	for _, k := range keys {
		b.Ops = append(b.Ops, readOp(tbl, k))
	}
	return b
}

// A turn's batches wait for Run, which sends them together, every node's
// rounds in one lone flight, and completes them before it returns, on its
// own goroutine: their batches keep the turn.
func TestTurnRunsItsBatchesInOneFlight(t *testing.T) {
	e, tbl := newEngine(t, 2, 100)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	names := [][]string{{"k1", "k2", "k3", "k4", "k5", "k6"}, {"k7"}, {"k8", "k9"}}
	var batches []*ndbclient.Batch
	done := make([]bool, len(names))
	for i, keys := range names {
		b := turnBatch(tbl, &turn, keys...)
		batches = append(batches, b)
		c.Submit(b, func(b *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			assert.Same(t, &turn, b.Turn, "completed on the turn's goroutine")
			done[i] = true
		})
	}
	flights, _ := rec.take()
	assert.Empty(t, flights, "nothing sent before Run")
	assert.Equal(t, []bool{false, false, false}, done)
	require.True(t, turn.Pending())

	turn.Run()
	assert.Equal(t, []bool{true, true, true}, done, "completed inside Run")
	assert.False(t, turn.Pending())
	flights, nodeSets := rec.take()
	assert.Equal(t, []int{9}, flights, "one flight for the turn")
	assert.Len(t, nodeSets[0], 2, "with both nodes' rounds")
	assert.Equal(t, []bool{true}, rec.lone, "run on the caller's goroutine")
	assert.Equal(t, []bool{false}, rec.poll, "several rounds: no poll")
	for i, b := range batches {
		requireValues(t, b.Ops, names[i])
	}
}

// A turn of one round may poll when its batch may (Batch.Poll); a turn of
// more than one may not.
func TestTurnPollsOnlyAlone(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	run := func(batches ...*ndbclient.Batch) []bool {
		t.Helper()
		for _, b := range batches {
			b.Poll = true
			c.Submit(b, func(_ *ndbclient.Batch, err error) { assert.NoError(t, err) })
		}
		turn.Run()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		p := rec.poll
		rec.poll, rec.lone = nil, nil
		return p
	}
	assert.Equal(t, []bool{true}, run(turnBatch(tbl, &turn, "k1")))
	assert.Equal(t, []bool{false}, run(turnBatch(tbl, &turn, "k1"), turnBatch(tbl, &turn, "k2")))
}

// A completion inside Run may start its request's next stage in the same
// turn: Run sends it too before it returns.
func TestTurnRunsWhatItsCompletionsAdd(t *testing.T) {
	e, tbl := newEngine(t, 2, 10)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	second := turnBatch(tbl, nil, "k2", "k3")
	finished := false
	c.Submit(turnBatch(tbl, &turn, "k1"), func(b *ndbclient.Batch, err error) {
		require.NoError(t, err)
		second.Turn = b.Turn
		c.Submit(second, func(_ *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			finished = true
		})
	})
	turn.Run()
	assert.True(t, finished, "the second stage ran in the same Run")
	requireValues(t, second.Ops, []string{"k2", "k3"})
	flights, _ := rec.take()
	assert.Equal(t, []int{1, 2}, flights)
}

// A turn's flight that completes on another goroutine (the driver could not
// run it on the caller's) completes its batches without their turn, so that
// their next stages do not add to a turn they do not own.
func TestTurnLeftWhenCompletedElsewhere(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e, later: time.Millisecond}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	b := turnBatch(tbl, &turn, "k1")
	ch := make(chan *ndbclient.Turn, 1)
	c.Submit(b, func(b *ndbclient.Batch, err error) {
		assert.NoError(t, err)
		ch <- b.Turn
	})
	turn.Run()
	select {
	case got := <-ch:
		assert.Nil(t, got, "completed away from the turn")
	case <-time.After(10 * time.Second):
		t.Fatal("never completed")
	}
	requireValues(t, b.Ops, []string{"k1"})
}

// A turn's flight that a driver completes on another goroutine before
// Submit returns (an executor that ran it before the thread that queued it
// ran again) completes its batches on the turn's goroutine all the same,
// keeping their turn: the goroutine that completed it must not touch the
// turn, nor the flight once Run may have recycled it.
func TestTurnCompletedElsewhereBeforeSubmitReturns(t *testing.T) {
	e, tbl := newEngine(t, 2, 10)
	rec := &recorder{Driver: e, later: time.Microsecond, early: true}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	runner := goroutineID()
	second := turnBatch(tbl, nil, "k2", "k3")
	finished := false
	c.Submit(turnBatch(tbl, &turn, "k1"), func(b *ndbclient.Batch, err error) {
		require.NoError(t, err)
		assert.Equal(t, runner, goroutineID(), "completed on the turn's goroutine")
		assert.Same(t, &turn, b.Turn, "kept its turn")
		second.Turn = b.Turn
		c.Submit(second, func(_ *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			assert.Equal(t, runner, goroutineID(), "the next stage too")
			finished = true
		})
	})
	turn.Run()
	assert.True(t, finished, "the second stage ran in the same Run")
	requireValues(t, second.Ops, []string{"k2", "k3"})
}

// Turns whose flights complete elsewhere at any moment, before or after
// Submit returns, each complete once with their values (run with -race: the
// goroutine that completed a flight must not touch it once Run recycles it).
func TestTurnFlightsCompletedElsewhereAtAnyMoment(t *testing.T) {
	e, tbl := newEngine(t, 2, 100)
	rec := &recorder{Driver: e, later: 20 * time.Microsecond}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	var wg sync.WaitGroup
	for i := range 500 {
		keys := []string{fmt.Sprintf("k%d", i%100), fmt.Sprintf("k%d", (i+37)%100)}
		b := turnBatch(tbl, &turn, keys...)
		wg.Add(1)
		c.Submit(b, func(b *ndbclient.Batch, err error) {
			defer wg.Done()
			assert.NoError(t, err)
			for j, op := range b.Ops { // assert: this may be another goroutine
				if assert.NoError(t, op.Err) && assert.Len(t, op.Row, 1) {
					assert.Equal(t, "v"+keys[j][1:], string(op.Row[0].B))
				}
			}
		})
		turn.Run()
	}
	wg.Wait()
}

// goroutineID is the calling goroutine's number, from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	return strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
}

// Without coalescing each round is its own flight, so a batch ignores its
// turn and is sent at once.
func TestTurnOnlyWithCoalescing(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: false})
	var turn ndbclient.Turn
	b := turnBatch(tbl, &turn, "k1")
	require.NoError(t, submitWait(t, c, b))
	assert.False(t, turn.Pending())
	requireValues(t, b.Ops, []string{"k1"})
	flights, _ := rec.take()
	assert.Equal(t, []int{1}, flights)
}

// A turn's flight takes at most 1024 ops (NDB's transactions an Ndb object);
// the rounds past that go through their nodes' lanes. All are answered.
func TestTurnFlightIsBounded(t *testing.T) {
	e, tbl := newEngine(t, 1, 1500)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	pending := 0
	for i := 0; i < 6; i++ {
		var keys []string
		for j := 0; j < 250; j++ {
			keys = append(keys, fmt.Sprintf("k%d", i*250+j))
		}
		b := turnBatch(tbl, &turn, keys...)
		pending++
		c.Submit(b, func(b *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			requireValues(t, b.Ops, keys)
			pending--
		})
	}
	turn.Run()
	assert.Zero(t, pending, "every batch answered in Run (the lanes complete inline here)")
	flights, _ := rec.take()
	require.Len(t, rec.lone, len(flights))
	var lone, lanes []int
	for i, n := range flights {
		if rec.lone[i] {
			lone = append(lone, n)
		} else {
			lanes = append(lanes, n)
		}
	}
	assert.Equal(t, []int{1000}, lone, "the turn's flight")
	assert.Equal(t, []int{250, 250}, lanes, "through the lane")
}

// A turn sends its Bulk batches' rounds through their lanes, not in its
// flight, which then holds only the requests of connections with few keys
// out: the loop, and every other connection on it, waits for that flight,
// and the data node's queue it joins holds at most a lane's flight of
// bulk work.
func TestTurnSendsBulkRoundsThroughLanes(t *testing.T) {
	e, tbl := newEngine(t, 1, 1200)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	var flood []string
	for j := 0; j < 600; j++ { // rounds of 256, 256 and 88
		flood = append(flood, fmt.Sprintf("k%d", j))
	}
	for _, b := range []*ndbclient.Batch{turnBatch(tbl, &turn, flood...), turnBatch(tbl, &turn, "k1150", "k1151")} {
		b.Bulk = len(b.Ops) > 2
		c.Submit(b, func(b *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			requireValues(t, b.Ops, map[bool][]string{true: flood, false: {"k1150", "k1151"}}[b.Bulk])
		})
	}
	turn.Run()
	flights, _ := rec.take()
	assert.Equal(t, []int{256, 256, 88, 2}, flights, "the bulk rounds through the lane, then the turn's flight")
	assert.Equal(t, []bool{false, false, false, true}, rec.lone, "only the turn's flight runs on the loop")
}

// A batch abandoned before its turn ran is dropped unsent, as a lane drops
// one, and completes with ErrAbandoned.
func TestTurnDropsAbandonedBatches(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	gone, kept := turnBatch(tbl, &turn, "k1"), turnBatch(tbl, &turn, "k2")
	var goneErr, keptErr error = nil, fmt.Errorf("not completed")
	c.Submit(gone, func(_ *ndbclient.Batch, err error) { goneErr = err })
	c.Submit(kept, func(_ *ndbclient.Batch, err error) { keptErr = err })
	gone.Abandon()
	turn.Run()
	assert.ErrorIs(t, goneErr, ndbclient.ErrAbandoned)
	assert.NoError(t, keptErr)
	requireValues(t, kept.Ops, []string{"k2"})
	flights, _ := rec.take()
	assert.Equal(t, []int{1}, flights)
}

// grouper is a driver that sends a group of batches together
// (GroupSubmitter) and answers every batch at once but those of node slow,
// which it holds until answer.
type grouper struct {
	ndbclient.Driver
	slow   int
	mu     sync.Mutex
	groups [][]int // per SubmitGroup, each batch's node (-1: several)
	held   []func()
}

func (g *grouper) SubmitGroup(bs []*ndbclient.Batch, dones []func(*ndbclient.Batch, error)) {
	g.mu.Lock()
	var nodes []int
	for _, b := range bs {
		n := b.Node
		if !b.OneNode {
			n = -1
		}
		nodes = append(nodes, n)
	}
	g.groups = append(g.groups, nodes)
	g.mu.Unlock()
	for i, b := range bs {
		if b.OneNode && b.Node == g.slow {
			done := dones[i] // the slices are the caller's again once SubmitGroup returns
			g.mu.Lock()
			g.held = append(g.held, func() { g.Driver.Submit(b, done) })
			g.mu.Unlock()
			continue
		}
		g.Driver.Submit(b, dones[i])
	}
}

// answer answers the held batches, each on a goroutine of its own.
func (g *grouper) answer() {
	g.mu.Lock()
	held := g.held
	g.held = nil
	g.mu.Unlock()
	for _, f := range held {
		go f()
	}
}

// With a driver that takes groups, a turn's flight is a batch a node, sent
// together; the batches of a node that answers at once complete in Run, on
// the turn, while the request whose keys include the slow node's completes
// when that node answers, away from the turn (ndb.flight_wait).
func TestTurnSendsABatchANodeAndCompletesEachOnItsOwn(t *testing.T) {
	e, tbl := newEngine(t, 2, 100)
	g := &grouper{Driver: e, slow: 1}
	c := ndbclient.NewClientWith(g, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var turn ndbclient.Turn
	// One batch a key: each lands on one node or the other.
	var keys []string
	for i := 0; i < 16; i++ {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	var mu sync.Mutex
	onTurn, later := map[string]bool{}, map[string]bool{}
	all := make(chan struct{}, len(keys))
	nodeOf := map[string]int{}
	for _, k := range keys {
		b := turnBatch(tbl, &turn, k)
		nodeOf[k] = e.NodeOf(tbl, e.Partition(tbl, b.Ops[0].Key))
		c.Submit(b, func(b *ndbclient.Batch, err error) {
			assert.NoError(t, err)
			requireValues(t, b.Ops, []string{k})
			mu.Lock()
			if b.Turn == &turn {
				onTurn[k] = true
			} else {
				later[k] = true
			}
			mu.Unlock()
			all <- struct{}{}
		})
	}
	turn.Run()
	g.mu.Lock()
	require.Equal(t, [][]int{{0, 1}}, g.groups, "one group, a batch a node, in node order")
	g.mu.Unlock()
	mu.Lock()
	for _, k := range keys {
		if nodeOf[k] == 0 {
			assert.True(t, onTurn[k], "%s, on the node that answered, completed in Run", k)
		} else {
			assert.False(t, onTurn[k] || later[k], "%s waits for the slow node", k)
		}
	}
	slow := len(keys) - len(onTurn)
	mu.Unlock()
	require.Positive(t, slow, "some keys are on the slow node")
	require.Less(t, slow, len(keys), "and some on the other")

	g.answer()
	for range keys {
		select {
		case <-all:
		case <-time.After(5 * time.Second):
			t.Fatal("a batch never completed")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		if nodeOf[k] == 1 {
			assert.True(t, later[k], "%s completed once its node answered, away from the turn", k)
		}
	}
}
