package ndbclient_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/ndbclient"
	"github.com/ndbgate/ndbgate/ndbclient/embedded"
)

// recorder wraps a driver: it records every flight it is sent (size and the
// nodes of its keys), can complete later and out of order, can hold flights
// until released, and can inject errors per op and attempt.
type recorder struct {
	ndbclient.Driver
	later time.Duration // >0: complete on another goroutine after up to this
	hold  chan struct{} // non-nil: each flight waits for a receive
	// early: with later, Submit returns only after done has run on the
	// other goroutine, as an executor can finish a flight before the
	// thread that queued it runs again.
	early  bool
	inject func(op *ndbclient.Op, attempt int) error

	mu       sync.Mutex
	flights  []int
	lone     []bool // each flight's Batch.Lone
	poll     []bool // and its Batch.Poll
	nodeSets []map[int]bool
	attempts map[*ndbclient.Op]int
}

func (d *recorder) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	nodes := map[int]bool{}
	var run []*ndbclient.Op
	for _, op := range b.Ops {
		if op.Table != nil && len(op.Key) > 0 {
			nodes[d.NodeOf(op.Table, d.Partition(op.Table, op.Key))] = true
		}
		if d.attempts == nil {
			d.attempts = map[*ndbclient.Op]int{}
		}
		d.attempts[op]++
		if d.inject != nil {
			if err := d.inject(op, d.attempts[op]); err != nil {
				op.Err = err
				continue
			}
		}
		run = append(run, op)
	}
	d.flights = append(d.flights, len(b.Ops))
	d.lone = append(d.lone, b.Lone)
	d.poll = append(d.poll, b.Poll)
	d.nodeSets = append(d.nodeSets, nodes)
	d.mu.Unlock()
	finish := func() {
		if d.hold != nil {
			<-d.hold
		}
		var err error
		if len(run) > 0 {
			err = d.Driver.Execute(context.Background(), &ndbclient.Batch{Ops: run})
		}
		done(b, err)
	}
	if d.later > 0 || d.hold != nil {
		delay := time.Duration(0)
		if d.later > 0 {
			delay = time.Duration(rand.Int64N(int64(d.later)))
		}
		ran := make(chan struct{})
		go func() { time.Sleep(delay); finish(); close(ran) }()
		if d.early {
			<-ran
		}
		return
	}
	finish()
}

func (d *recorder) take() (flights []int, nodeSets []map[int]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	flights, nodeSets = d.flights, d.nodeSets
	d.flights, d.nodeSets = nil, nil
	return flights, nodeSets
}

func (d *recorder) attemptsOf(op *ndbclient.Op) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempts[op]
}

func kvTable() *ndbclient.Table {
	return &ndbclient.Table{
		Database: "test", Name: "kv",
		Columns: []ndbclient.Column{
			{Name: "k", Type: ndbclient.TypeVarchar, Length: 64},
			{Name: "v", Type: ndbclient.TypeVarbinary, Length: 1024},
		},
		PrimaryKey:   []int{0},
		ExpireColumn: -1,
	}
}

// newEngine returns an embedded engine with nodes simulated data nodes and a
// table filled with keys k0..k(n-1) = v0..
func newEngine(t *testing.T, nodes, n int) (*embedded.Engine, *ndbclient.Table) {
	return newEngineTB(t, nodes, n)
}

func newEngineB(b *testing.B) (*embedded.Engine, *ndbclient.Table) { return newEngineTB(b, 1, 10) }

func newEngineTB(t testing.TB, nodes, n int) (*embedded.Engine, *ndbclient.Table) {
	t.Helper()
	e := embedded.New(embedded.Config{Partitions: 16, Nodes: nodes, ReapInterval: -1})
	t.Cleanup(func() { _ = e.Close() })
	tbl, err := e.CreateTable(kvTable())
	require.NoError(t, err)
	var b ndbclient.Batch
	for i := 0; i < n; i++ {
		b.Ops = append(b.Ops, writeOp(tbl, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
	}
	require.NoError(t, e.Execute(context.Background(), &b))
	for _, op := range b.Ops {
		require.NoError(t, op.Err)
	}
	return e, tbl
}

func key(k string) []ndbclient.Value { return []ndbclient.Value{ndbclient.String(k)} }

func readOp(tbl *ndbclient.Table, k string) *ndbclient.Op {
	return &ndbclient.Op{Kind: ndbclient.OpRead, Table: tbl, Key: key(k), Read: []int{1}}
}

func writeOp(tbl *ndbclient.Table, k, v string) *ndbclient.Op {
	return &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: key(k),
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String(v)}}}
}

func submitWait(t *testing.T, c *ndbclient.Client, b *ndbclient.Batch) error {
	t.Helper()
	ch := make(chan error, 1)
	c.Submit(b, func(_ *ndbclient.Batch, err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("batch never completed")
		return nil
	}
}

func requireValues(t *testing.T, ops []*ndbclient.Op, names []string) {
	t.Helper()
	for i, op := range ops {
		require.NoError(t, op.Err, "op %d", i)
		require.Len(t, op.Row, 1)
		require.Equal(t, "v"+names[i][1:], string(op.Row[0].B), "op %d (%s)", i, names[i])
	}
}

func TestDispatchSplitsByNode(t *testing.T) {
	for _, lanes := range []bool{false, true} {
		t.Run(fmt.Sprintf("lanes=%v", lanes), func(t *testing.T) {
			e, tbl := newEngine(t, 4, 100)
			rec := &recorder{Driver: e, later: time.Millisecond}
			c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: lanes, Coalesce: true})
			var b ndbclient.Batch
			var names []string
			for i := 0; i < 100; i++ {
				names = append(names, fmt.Sprintf("k%d", i))
				b.Ops = append(b.Ops, readOp(tbl, names[i]))
			}
			require.NoError(t, submitWait(t, c, &b))
			requireValues(t, b.Ops, names)
			flights, nodeSets := rec.take()
			assert.Len(t, flights, 4, "one round per node, a flight each: %v", flights)
			total := 0
			for i, r := range flights {
				total += r
				assert.Len(t, nodeSets[i], 1, "a flight goes to one node")
			}
			assert.Equal(t, 100, total)
		})
	}
}

func TestDispatchRoundSize(t *testing.T) {
	e, tbl := newEngine(t, 1, 100)
	rec := &recorder{Driver: e}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{RoundSize: 32})
	var b ndbclient.Batch
	var names []string
	for i := 0; i < 100; i++ {
		names = append(names, fmt.Sprintf("k%d", i))
		b.Ops = append(b.Ops, readOp(tbl, names[i]))
	}
	require.NoError(t, submitWait(t, c, &b))
	requireValues(t, b.Ops, names)
	flights, _ := rec.take() // without lanes each round is a flight
	assert.Equal(t, []int{32, 32, 32, 4}, flights)

	// A transaction longer than a round goes whole, alone.
	b.Ops = b.Ops[:0]
	for i := 0; i < 40; i++ {
		op := writeOp(tbl, fmt.Sprintf("t%d", i), "x")
		op.TxnWithNext = i < 39
		b.Ops = append(b.Ops, op)
	}
	b.Ops = append(b.Ops, readOp(tbl, "k1"))
	require.NoError(t, submitWait(t, c, &b))
	flights, _ = rec.take()
	assert.Equal(t, []int{40, 1}, flights)
	for _, op := range b.Ops {
		require.NoError(t, op.Err)
	}
}

// TestDispatchCoalescing: many goroutines each submit single-key reads to a
// driver with a round-trip delay. With lanes and coalescing, the queued
// rounds of a node share flights; without coalescing each is its own.
func TestDispatchCoalescing(t *testing.T) {
	for _, coalesce := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) {
			e, tbl := newEngine(t, 2, 200)
			rec := &recorder{Driver: e, later: 500 * time.Microsecond}
			c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: coalesce})
			const clients, each = 32, 10
			var wg sync.WaitGroup
			var bad atomic.Int32
			for g := 0; g < clients; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						name := fmt.Sprintf("k%d", rand.IntN(200))
						b := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, name)}}
						ch := make(chan error, 1)
						c.Submit(&b, func(_ *ndbclient.Batch, err error) { ch <- err })
						if err := <-ch; err != nil || b.Ops[0].Err != nil || string(b.Ops[0].Row[0].B) != "v"+name[1:] {
							bad.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			assert.Zero(t, bad.Load(), "every request got its own right answer")
			flights, nodeSets := rec.take()
			largest := 0
			for i, r := range flights {
				largest = max(largest, r)
				assert.Len(t, nodeSets[i], 1)
			}
			if coalesce {
				assert.Less(t, len(flights), clients*each/2, "coalesced into fewer round trips")
				assert.Greater(t, largest, 1)
			} else {
				assert.Len(t, flights, clients*each, "one round trip per request")
				assert.Equal(t, 1, largest)
			}
		})
	}
}

func TestDispatchOverloaded(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e, hold: make(chan struct{})}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{MaxInFlight: 8})
	first := ndbclient.Batch{}
	for i := 0; i < 8; i++ {
		first.Ops = append(first.Ops, readOp(tbl, fmt.Sprintf("k%d", i)))
	}
	firstDone := make(chan error, 1)
	c.Submit(&first, func(_ *ndbclient.Batch, err error) { firstDone <- err })

	// Full: the next batch is refused at once, while the first is still held.
	over := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k9")}}
	refused := make(chan error, 1)
	c.Submit(&over, func(_ *ndbclient.Batch, err error) { refused <- err })
	select {
	case err := <-refused:
		assert.ErrorIs(t, err, ndbclient.ErrOverloaded)
		assert.ErrorIs(t, over.Ops[0].Err, ndbclient.ErrOverloaded)
	default:
		t.Fatal("an over-limit batch must be refused without waiting")
	}
	close(rec.hold)
	require.NoError(t, <-firstDone)
	for _, op := range first.Ops {
		require.NoError(t, op.Err)
	}
	// Room again.
	again := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k9")}}
	require.NoError(t, submitWait(t, c, &again))
	require.NoError(t, again.Ops[0].Err)
}

// The dispatcher is crowded from half its MaxInFlight, or 1,024 ops if
// fewer, until those complete.
func TestDispatchCrowded(t *testing.T) {
	for _, tc := range []struct{ max, crowdedAt int }{{600, 300}, {65536, 1024}} {
		e, tbl := newEngine(t, 1, 10)
		rec := &recorder{Driver: e, hold: make(chan struct{})}
		c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{MaxInFlight: tc.max, RoundSize: 1024})
		submit := func(n int) chan error {
			b := &ndbclient.Batch{}
			for i := 0; i < n; i++ {
				b.Ops = append(b.Ops, readOp(tbl, fmt.Sprintf("k%d", i%10)))
			}
			ch := make(chan error, 1)
			c.Submit(b, func(_ *ndbclient.Batch, err error) { ch <- err })
			return ch
		}
		var held []chan error
		for n := tc.crowdedAt - 1; n > 0; n -= min(n, 1000) {
			held = append(held, submit(min(n, 1000)))
		}
		assert.False(t, c.Crowded(), "%d in flight of %d", tc.crowdedAt-1, tc.max)
		held = append(held, submit(1))
		assert.True(t, c.Crowded(), "%d in flight of %d", tc.crowdedAt, tc.max)
		close(rec.hold)
		for _, ch := range held {
			require.NoError(t, <-ch)
		}
		assert.False(t, c.Crowded(), "all done")
	}
}

var (
	errTemporary = &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: 266, Message: "time-out in NDB"}
	errUnknown   = &ndbclient.Error{Code: ndbclient.CodeUnknownResult, NativeCode: 4012, Message: "request timed out"}
)

func TestDispatchRetriesTemporary(t *testing.T) {
	e, tbl := newEngine(t, 2, 10)
	flaky := func(op *ndbclient.Op, attempt int) error {
		if string(op.Key[0].B) == "k3" && attempt <= 2 {
			return errTemporary
		}
		return nil
	}
	rec := &recorder{Driver: e, later: time.Millisecond, inject: flaky}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{RetryBase: 100 * time.Microsecond})
	b := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k3"), readOp(tbl, "k4")}}
	require.NoError(t, submitWait(t, c, &b))
	requireValues(t, b.Ops, []string{"k3", "k4"})
	assert.Equal(t, 3, rec.attemptsOf(b.Ops[0]), "two temporary failures, then success")

	// Past MaxRetries the Temporary error reaches the caller.
	always := func(op *ndbclient.Op, _ int) error { return errTemporary }
	rec2 := &recorder{Driver: e, inject: always}
	c2 := ndbclient.NewClientWith(rec2, ndbclient.DispatchConfig{MaxRetries: 2, RetryBase: 100 * time.Microsecond})
	b2 := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k1")}}
	require.NoError(t, submitWait(t, c2, &b2))
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(b2.Ops[0].Err))
	assert.Equal(t, 3, rec2.attemptsOf(b2.Ops[0]))
}

// A driver's refusals to send (NotSent: a data node silent for a flight
// wait, often only slow) are tried again past MaxRetries, for up to a
// second: a write refused 12 times is applied. A refusal that lasts fails
// the op then, and a refusal beside another Temporary failure gets only
// MaxRetries.
func TestDispatchRetriesNotSentPastMaxRetries(t *testing.T) {
	e, tbl := newEngine(t, 2, 10)
	notSent := &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: 4012, Message: "not sent", NotSent: true}
	refused := func(op *ndbclient.Op, attempt int) error {
		if attempt <= 12 {
			return notSent
		}
		return nil
	}
	rec := &recorder{Driver: e, inject: refused}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{MaxRetries: 3, RetryBase: 100 * time.Microsecond})
	w := &ndbclient.Op{Kind: ndbclient.OpWrite, Table: tbl, Key: []ndbclient.Value{ndbclient.String("nk")},
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String("v")}}}
	b := ndbclient.Batch{Ops: []*ndbclient.Op{w}}
	require.NoError(t, submitWait(t, c, &b))
	require.NoError(t, w.Err)
	assert.Equal(t, 13, rec.attemptsOf(w), "12 refusals, then sent")
	r := readOp(tbl, "nk")
	require.NoError(t, submitWait(t, c, &ndbclient.Batch{Ops: []*ndbclient.Op{r}}))
	requireValues(t, []*ndbclient.Op{r}, []string{"v"})

	always := func(*ndbclient.Op, int) error { return notSent }
	rec2 := &recorder{Driver: e, inject: always}
	c2 := ndbclient.NewClientWith(rec2, ndbclient.DispatchConfig{MaxRetries: 1, RetryBase: 10 * time.Millisecond})
	b2 := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k1")}}
	start := time.Now()
	require.NoError(t, submitWait(t, c2, &b2))
	took := time.Since(start)
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(b2.Ops[0].Err))
	assert.GreaterOrEqual(t, took, 900*time.Millisecond, "refused for about a second")
	assert.Less(t, took, 3*time.Second)
	assert.Greater(t, rec2.attemptsOf(b2.Ops[0]), 2)

	mixed := func(op *ndbclient.Op, _ int) error {
		if string(op.Key[0].B) == "k1" {
			return notSent
		}
		return errTemporary
	}
	rec3 := &recorder{Driver: e, inject: mixed}
	c3 := ndbclient.NewClientWith(rec3, ndbclient.DispatchConfig{MaxRetries: 2, RetryBase: 100 * time.Microsecond})
	k1, k2 := readOp(tbl, "k1"), readOp(tbl, "k2")
	k1.TxnWithNext = true // one round
	require.NoError(t, submitWait(t, c3, &ndbclient.Batch{Ops: []*ndbclient.Op{k1, k2}}))
	assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(k2.Err))
	assert.Equal(t, 3, rec3.attemptsOf(k1), "MaxRetries only")
}

// A round whose other transactions were applied cannot go again whole:
// its transactions that failed whole go again on their own. A memcache
// pipeline's sets are one batch; a refusal to send some of them failed
// them while the rest were stored (live, a preload at pipeline 16).
func TestDispatchRetriesFailedTransactionsOfARound(t *testing.T) {
	e, tbl := newEngine(t, 1, 0) // one node: one round
	notSent := &ndbclient.Error{Code: ndbclient.CodeTemporary, NativeCode: 4012, Message: "not sent", NotSent: true}
	inject := func(op *ndbclient.Op, attempt int) error {
		switch string(op.Key[0].B) {
		case "w1":
			if attempt <= 6 {
				return notSent
			}
		case "w3":
			if attempt <= 1 {
				return errTemporary
			}
		}
		return nil
	}
	rec := &recorder{Driver: e, inject: inject}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{MaxRetries: 3, RetryBase: 100 * time.Microsecond})
	var ops []*ndbclient.Op
	for i := range 4 {
		ops = append(ops, writeOp(tbl, fmt.Sprintf("w%d", i), fmt.Sprintf("v%d", i)))
	}
	require.NoError(t, submitWait(t, c, &ndbclient.Batch{Ops: ops}))
	for i, o := range ops {
		require.NoError(t, o.Err, "w%d", i)
	}
	assert.Equal(t, []int{1, 7, 1, 2}, []int{rec.attemptsOf(ops[0]), rec.attemptsOf(ops[1]), rec.attemptsOf(ops[2]), rec.attemptsOf(ops[3])},
		"the applied ones once; w1 refused 6 times, past MaxRetries; w3 failed once")
	for i := range 4 {
		r := readOp(tbl, fmt.Sprintf("w%d", i))
		require.NoError(t, submitWait(t, c, &ndbclient.Batch{Ops: []*ndbclient.Op{r}}))
		requireValues(t, []*ndbclient.Op{r}, []string{fmt.Sprintf("w%d", i)})
	}

	// Nothing applied, but a write whose result is unknown: the round
	// cannot go again whole; its refused transactions still go again.
	unknownFirst := func(op *ndbclient.Op, attempt int) error {
		switch string(op.Key[0].B) {
		case "u0":
			return errUnknown
		case "u1", "u2":
			if attempt <= 2 {
				return notSent
			}
		}
		return nil
	}
	rec2 := &recorder{Driver: e, inject: unknownFirst}
	c2 := ndbclient.NewClientWith(rec2, ndbclient.DispatchConfig{MaxRetries: 3, RetryBase: 100 * time.Microsecond})
	u := []*ndbclient.Op{writeOp(tbl, "u0", "v0"), writeOp(tbl, "u1", "v1"), writeOp(tbl, "u2", "v2")}
	require.NoError(t, submitWait(t, c2, &ndbclient.Batch{Ops: u}))
	assert.Equal(t, ndbclient.CodeUnknownResult, ndbclient.CodeOf(u[0].Err))
	assert.Equal(t, 1, rec2.attemptsOf(u[0]), "a write that may have committed is not sent again")
	for i := 1; i < 3; i++ {
		require.NoError(t, u[i].Err, "u%d", i)
		assert.Equal(t, 3, rec2.attemptsOf(u[i]), "u%d: refused twice, then sent", i)
	}
}

func TestDispatchNeverRetriesUnknownWrites(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	unknown := func(op *ndbclient.Op, attempt int) error {
		if attempt == 1 {
			return errUnknown
		}
		return nil
	}
	rec := &recorder{Driver: e, inject: unknown}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{RetryBase: 100 * time.Microsecond})
	w := ndbclient.Batch{Ops: []*ndbclient.Op{writeOp(tbl, "k1", "new")}}
	require.NoError(t, submitWait(t, c, &w))
	assert.Equal(t, ndbclient.CodeUnknownResult, ndbclient.CodeOf(w.Ops[0].Err))
	assert.Equal(t, 1, rec.attemptsOf(w.Ops[0]), "a write that may have committed is not sent again")

	r := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k2")}}
	require.NoError(t, submitWait(t, c, &r))
	requireValues(t, r.Ops, []string{"k2"})
	assert.Equal(t, 2, rec.attemptsOf(r.Ops[0]), "a read is safe to repeat")

	// A round whose write succeeded is not repeated for a neighbour's
	// Temporary: the neighbour goes again on its own.
	mixed := func(op *ndbclient.Op, attempt int) error {
		if op.Kind == ndbclient.OpRead && attempt == 1 {
			return errTemporary
		}
		return nil
	}
	rec3 := &recorder{Driver: e, inject: mixed}
	c3 := ndbclient.NewClientWith(rec3, ndbclient.DispatchConfig{RetryBase: 100 * time.Microsecond})
	m := ndbclient.Batch{Ops: []*ndbclient.Op{writeOp(tbl, "k7", "w"), readOp(tbl, "k8")}}
	require.NoError(t, submitWait(t, c3, &m))
	assert.Equal(t, 1, rec3.attemptsOf(m.Ops[0]))
	requireValues(t, m.Ops[1:], []string{"k8"})
	assert.Equal(t, 2, rec3.attemptsOf(m.Ops[1]))
}

// A read that won the recache token changed the row: a retry for a
// neighbour's Temporary would read again, find the token taken, and leave
// nobody holding it. The neighbour goes again on its own.
func TestDispatchKeepsATokenWon(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	invalidate := &ndbclient.Op{Kind: ndbclient.OpUpdate, Table: tbl, Key: key("k1"), KeepState: true, MarkStale: true,
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String("v1")}}}
	require.NoError(t, e.Execute(context.Background(), &ndbclient.Batch{Ops: []*ndbclient.Op{invalidate}}))
	require.NoError(t, invalidate.Err)

	neighbour := readOp(tbl, "k2")
	flaky := func(op *ndbclient.Op, attempt int) error {
		if op == neighbour && attempt == 1 {
			return errTemporary
		}
		return nil
	}
	rec := &recorder{Driver: e, inject: flaky}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{RetryBase: 100 * time.Microsecond})
	lease := readOp(tbl, "k1")
	lease.Lease = true
	b := ndbclient.Batch{Ops: []*ndbclient.Op{lease, neighbour}}
	require.NoError(t, submitWait(t, c, &b))
	require.NoError(t, lease.Err)
	assert.True(t, lease.Won, "the token stays with the read that won it")
	assert.True(t, lease.Meta.Stale)
	assert.Equal(t, 1, rec.attemptsOf(lease), "not read again")
	requireValues(t, []*ndbclient.Op{neighbour}, []string{"k2"})
	assert.Equal(t, 2, rec.attemptsOf(neighbour), "the neighbour alone went again")

	// Without a token won, the same round is retried and both succeed.
	again := readOp(tbl, "k3")
	again.Lease = true
	neighbour = readOp(tbl, "k4")
	b2 := ndbclient.Batch{Ops: []*ndbclient.Op{again, neighbour}}
	require.NoError(t, submitWait(t, c, &b2))
	requireValues(t, b2.Ops, []string{"k3", "k4"})
	assert.Equal(t, 2, rec.attemptsOf(again))
}

func TestDispatchPerOpErrorsIsolated(t *testing.T) {
	e, tbl := newEngine(t, 4, 50)
	rec := &recorder{Driver: e, later: 2 * time.Millisecond}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
	var b ndbclient.Batch
	for i := 0; i < 60; i++ { // k50..k59 do not exist
		b.Ops = append(b.Ops, readOp(tbl, fmt.Sprintf("k%d", i)))
	}
	ins := &ndbclient.Op{Kind: ndbclient.OpInsert, Table: tbl, Key: key("k1"),
		Set: []ndbclient.ColumnValue{{Column: 1, Value: ndbclient.String("dup")}}}
	b.Ops = append(b.Ops, ins)
	require.NoError(t, submitWait(t, c, &b))
	for i := 0; i < 60; i++ {
		if i < 50 {
			require.NoError(t, b.Ops[i].Err, "k%d", i)
			assert.Equal(t, fmt.Sprintf("v%d", i), string(b.Ops[i].Row[0].B))
		} else {
			assert.ErrorIs(t, b.Ops[i].Err, ndbclient.ErrNotFound, "k%d", i)
		}
	}
	assert.ErrorIs(t, ins.Err, ndbclient.ErrDuplicate)
}

// TestDispatchConcurrentMixed hammers a later-completing driver from many
// goroutines with multi-node batches, transactions and single ops (-race).
func TestDispatchConcurrentMixed(t *testing.T) {
	e, tbl := newEngine(t, 4, 100)
	rec := &recorder{Driver: e, later: 300 * time.Microsecond}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: true, RoundSize: 16, FlightsPerNode: 2})
	var wg sync.WaitGroup
	var bad atomic.Int32
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				var b ndbclient.Batch
				var names []string
				for j := 0; j < 1+rand.IntN(40); j++ {
					names = append(names, fmt.Sprintf("k%d", rand.IntN(100)))
					b.Ops = append(b.Ops, readOp(tbl, names[j]))
				}
				w1 := writeOp(tbl, fmt.Sprintf("g%d", g), "a")
				w1.TxnWithNext = true
				w2 := writeOp(tbl, fmt.Sprintf("h%d", g), "b")
				b.Ops = append(b.Ops, w1, w2)
				ch := make(chan error, 1)
				c.Submit(&b, func(_ *ndbclient.Batch, err error) { ch <- err })
				if err := <-ch; err != nil {
					bad.Add(1)
					continue
				}
				for j, name := range names {
					if b.Ops[j].Err != nil || string(b.Ops[j].Row[0].B) != "v"+name[1:] {
						bad.Add(1)
					}
				}
				if w1.Err != nil || w2.Err != nil {
					bad.Add(1)
				}
			}
		}(g)
	}
	wg.Wait()
	assert.Zero(t, bad.Load())
	flights, _ := rec.take()
	for _, r := range flights {
		assert.LessOrEqual(t, r, 16, "no flight above RoundSize")
	}
}

// A driver that completes inline holds nothing between calls, so the
// in-flight bound does not apply to it; the same engine with a simulated round
// trip (which completes later) is bounded as usual.
func TestInlineDriverSkipsAdmission(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	require.True(t, e.CompletesInline())
	c := ndbclient.NewClientWith(e, ndbclient.DispatchConfig{MaxInFlight: 2})
	b := ndbclient.Batch{}
	for i := 0; i < 3; i++ {
		b.Ops = append(b.Ops, readOp(tbl, fmt.Sprintf("k%d", i)))
	}
	require.NoError(t, submitWait(t, c, &b))
	for i, op := range b.Ops {
		require.NoError(t, op.Err)
		assert.Equal(t, fmt.Sprintf("v%d", i), op.Row[0].Str())
	}

	slow := embedded.New(embedded.Config{RoundTripDelay: time.Millisecond, ReapInterval: -1})
	t.Cleanup(func() { _ = slow.Close() })
	require.False(t, slow.CompletesInline())
	stbl, err := slow.CreateTable(kvTable())
	require.NoError(t, err)
	sc := ndbclient.NewClientWith(slow, ndbclient.DispatchConfig{MaxInFlight: 2})
	over := ndbclient.Batch{}
	for i := 0; i < 3; i++ {
		over.Ops = append(over.Ops, readOp(stbl, fmt.Sprintf("k%d", i)))
	}
	assert.ErrorIs(t, sc.Execute(context.Background(), &over), ndbclient.ErrOverloaded)
}

// A batch abandoned while it waits in a node's queue completes with
// ErrAbandoned and is never sent; one queued beside it still runs, and the
// in-flight bound gets its room back.
func TestDispatchDropsAbandonedQueuedBatches(t *testing.T) {
	e, tbl := newEngine(t, 1, 10)
	rec := &recorder{Driver: e, hold: make(chan struct{})}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: false, MaxInFlight: 3})
	submit := func(name string) (*ndbclient.Batch, chan error) {
		b := &ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, name)}}
		ch := make(chan error, 1)
		c.Submit(b, func(_ *ndbclient.Batch, err error) { ch <- err })
		return b, ch
	}
	first, firstDone := submit("k1") // sent, held by the driver
	gone, goneDone := submit("k2")   // queued behind it
	kept, keptDone := submit("k3")   // queued too
	gone.Abandon()
	rec.hold <- struct{}{} // the first flight completes; the lane moves on
	require.NoError(t, <-firstDone)
	require.NoError(t, first.Ops[0].Err)
	assert.ErrorIs(t, <-goneDone, ndbclient.ErrAbandoned)
	assert.ErrorIs(t, gone.Ops[0].Err, ndbclient.ErrAbandoned)
	rec.hold <- struct{}{}
	require.NoError(t, <-keptDone)
	require.NoError(t, kept.Ops[0].Err)
	flights, _ := rec.take()
	assert.Equal(t, []int{1, 1}, flights, "the abandoned batch was never sent")
	close(rec.hold)
	// Its ops left the in-flight count: three fit again.
	var waits []chan error
	for i := 0; i < 3; i++ {
		_, ch := submit(fmt.Sprintf("k%d", 4+i))
		waits = append(waits, ch)
	}
	for _, ch := range waits {
		require.NoError(t, <-ch)
	}
}

// TestDispatchBulkQueuesBehindOthers: in a node's lane, a Bulk batch's rounds
// leave after every other queued round, even those queued after them; with
// coalescing, a flight fills up with bulk rounds once the others are in.
func TestDispatchBulkQueuesBehindOthers(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) {
			e, tbl := newEngine(t, 1, 10)
			rec := &recorder{Driver: e, hold: make(chan struct{})}
			c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: true, Coalesce: coalesce, RoundSize: 4})
			var order []string
			var mu sync.Mutex
			submit := func(bulk bool, names ...string) chan error {
				b := &ndbclient.Batch{Bulk: bulk}
				for _, n := range names {
					b.Ops = append(b.Ops, readOp(tbl, n))
				}
				ch := make(chan error, 1)
				c.Submit(b, func(_ *ndbclient.Batch, err error) {
					mu.Lock()
					order = append(order, names[0])
					mu.Unlock()
					ch <- err
				})
				return ch
			}
			all := []chan error{
				submit(false, "k0"),       // sent, held by the driver
				submit(true, "k1", "k2"),  // queued
				submit(true, "k3", "k4"),  // queued
				submit(false, "k5"),       // queued last, leaves first
				submit(false, "k6", "k7"), // and after it
			}
			want := []int{1, 1, 2, 2, 2}
			if coalesce {
				// k5 and k6,k7 fill 3 of 4, k1,k2 do not fit; then k1..k4.
				want = []int{1, 3, 4}
			}
			for range want {
				rec.hold <- struct{}{}
			}
			for _, ch := range all {
				require.NoError(t, <-ch)
			}
			flights, _ := rec.take()
			assert.Equal(t, want, flights)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"k0", "k5", "k6", "k1", "k3"}, order)
		})
	}
}

// partitionCounter is a recorder whose driver computes partitions a batch
// at a time (PartitionBatcher), skipping the ops skip names.
type partitionCounter struct {
	*recorder
	skip             func(i int) bool
	singles, batches atomic.Int32
}

func (d *partitionCounter) Partition(t *ndbclient.Table, key []ndbclient.Value) int {
	d.singles.Add(1)
	return d.recorder.Partition(t, key)
}

func (d *partitionCounter) Partitions(ops []*ndbclient.Op) {
	d.batches.Add(1)
	for i, op := range ops {
		if (i > 0 && ops[i-1].TxnWithNext) || (d.skip != nil && d.skip(i)) {
			continue
		}
		op.SetKeyPartition(d.recorder.Partition(op.Table, op.Key))
	}
}

func TestDispatchBatchesPartitions(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		keys                     int
		skip                     func(int) bool
		wantBatches, wantSingles int32
	}{
		{"a multi-get is placed in one call", 100, nil, 1, 0},
		{"keys the batch leaves unplaced are placed one by one", 100, func(i int) bool { return i%2 == 1 }, 1, 50},
		{"a small batch is placed key by key", 3, nil, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, tbl := newEngine(t, 4, 100)
			d := &partitionCounter{recorder: &recorder{Driver: e, later: time.Millisecond}, skip: tc.skip}
			c := ndbclient.NewClientWith(d, ndbclient.DispatchConfig{Lanes: true, Coalesce: true})
			var b ndbclient.Batch
			var names []string
			for i := 0; i < tc.keys; i++ {
				names = append(names, fmt.Sprintf("k%d", i))
				b.Ops = append(b.Ops, readOp(tbl, names[i]))
			}
			require.NoError(t, submitWait(t, c, &b))
			requireValues(t, b.Ops, names)
			assert.Equal(t, tc.wantBatches, d.batches.Load())
			assert.Equal(t, tc.wantSingles, d.singles.Load())
			_, nodeSets := d.take()
			for _, nodes := range nodeSets {
				assert.Len(t, nodes, 1, "each flight still goes to one node")
			}
			for i, op := range b.Ops {
				p, ok := op.KeyPartition()
				require.True(t, ok, "op %d has its partition", i)
				assert.Equal(t, e.Partition(tbl, op.Key), p)
			}
		})
	}
}

// startsSmaller is a driver that knew fewer data nodes when the client was
// made than its NodeOf names now: data nodes added while serving.
type startsSmaller struct {
	*recorder
	atStart int
}

func (s startsSmaller) Stats() ndbclient.DriverStats {
	st := s.recorder.Stats()
	st.Nodes = s.atStart
	return st
}

// TestDispatchLanesForAddedNodes: a node the driver names past those it had
// at start gets a lane of its own, so its rounds neither queue behind another
// node's flight nor leave on another node's lane.
func TestDispatchLanesForAddedNodes(t *testing.T) {
	e, tbl := newEngine(t, 4, 100)
	rec := &recorder{Driver: e, hold: make(chan struct{})}
	c := ndbclient.NewClientWith(startsSmaller{recorder: rec, atStart: 2},
		ndbclient.DispatchConfig{Lanes: true, RoundSize: 1000, FlightsPerNode: 1})
	var b ndbclient.Batch
	for i := 0; i < 100; i++ {
		b.Ops = append(b.Ops, readOp(tbl, fmt.Sprintf("k%d", i)))
	}
	ch := make(chan error, 1)
	c.Submit(&b, func(_ *ndbclient.Batch, err error) { ch <- err })
	// Every round is held in the driver: one flight per lane is in it.
	var nodeSets []map[int]bool
	require.Eventually(t, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.nodeSets) >= 4
	}, 5*time.Second, time.Millisecond, "a flight on each of the 4 nodes' lanes at once")
	close(rec.hold)
	require.NoError(t, <-ch)
	_, nodeSets = rec.take()
	seen := map[int]bool{}
	for _, s := range nodeSets {
		require.Len(t, s, 1, "each round holds one node's keys: %v", nodeSets)
		for n := range s {
			seen[n] = true
		}
	}
	assert.Equal(t, map[int]bool{0: true, 1: true, 2: true, 3: true}, seen)
	for i, op := range b.Ops {
		require.NoError(t, op.Err)
		assert.Equal(t, fmt.Sprintf("v%d", i), string(op.Row[0].B))
	}
}

// A lone batch reaches the driver lone only as a single round on its first
// try: the flight of a batch split over nodes would hold up its other
// rounds if it ran on the caller's goroutine. With lanes and without. So
// does its leave to poll (Batch.Poll), which means nothing without Lone.
func TestDispatchLoneOnlyAsOneRound(t *testing.T) {
	for _, lanes := range []bool{false, true} {
		t.Run(fmt.Sprintf("lanes=%v", lanes), func(t *testing.T) {
			e, tbl := newEngine(t, 2, 100)
			rec := &recorder{Driver: e}
			c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{Lanes: lanes, RoundSize: 1000, FlightsPerNode: 1})
			var runPoll func(lone, poll bool, keys ...string) []bool
			run := func(lone bool, keys ...string) []bool {
				t.Helper()
				return runPoll(lone, false, keys...)
			}
			runPoll = func(lone, poll bool, keys ...string) []bool {
				t.Helper()
				b := ndbclient.Batch{Lone: lone, Poll: poll}
				for _, k := range keys {
					b.Ops = append(b.Ops, readOp(tbl, k))
				}
				require.NoError(t, submitWait(t, c, &b))
				for i, op := range b.Ops {
					require.NoError(t, op.Err, keys[i])
				}
				rec.mu.Lock()
				defer rec.mu.Unlock()
				l := rec.lone
				for i, p := range rec.poll {
					assert.Equal(t, poll && l[i], p, "flight %d: Poll", i)
				}
				rec.lone, rec.poll = nil, nil
				return l
			}
			// Two keys on different nodes.
			node := func(k string) int { return e.NodeOf(tbl, e.Partition(tbl, readOp(tbl, k).Key)) }
			a, b := "k0", ""
			for i := 1; i < 100 && b == ""; i++ {
				if k := fmt.Sprintf("k%d", i); node(k) != node(a) {
					b = k
				}
			}
			require.NotEmpty(t, b, "a key on the other node")
			assert.Equal(t, []bool{true}, run(true, a), "one key")
			assert.Equal(t, []bool{false}, run(false, a), "not lone")
			assert.Equal(t, []bool{false, false}, run(true, a, b), "two nodes: two rounds")
			assert.Equal(t, []bool{true}, runPoll(true, true, a), "one key, may poll")
			assert.Equal(t, []bool{false}, runPoll(false, true, a), "may poll, not lone")
			assert.Equal(t, []bool{false, false}, runPoll(true, true, a, b), "may poll, two rounds")
		})
	}
}

// An operation that ends failed on the backend, after its retries, is
// logged with the backend's own error, at most once a second; a miss, and
// a failure retried away, are not.
func TestDispatchLogsBackendFailuresOnceASecond(t *testing.T) {
	e, tbl := newEngine(t, 2, 10)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	failing := map[string]int{"k1": 99, "k2": 99, "k3": 1} // failures before success
	rec := &recorder{Driver: e, inject: func(op *ndbclient.Op, attempt int) error {
		if attempt <= failing[string(op.Key[0].B)] {
			return errTemporary
		}
		return nil
	}}
	c := ndbclient.NewClientWith(rec, ndbclient.DispatchConfig{MaxRetries: 1, RetryBase: 100 * time.Microsecond, Log: log})

	for _, key := range []string{"k3", "absent", "k1", "k2"} {
		b := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, key)}}
		require.NoError(t, submitWait(t, c, &b))
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	require.Len(t, lines, 1, "one line for k1; k2 within the second is counted, k3 succeeded on its retry, absent is a miss:\n%s", logged.String())
	assert.Contains(t, lines[0], "backend operation failed")
	assert.Contains(t, lines[0], "time-out in NDB (native 266)")
	assert.Contains(t, lines[0], "failures_since_last_line=0")

	time.Sleep(time.Second) // the next failure starts a line again, and counts k2
	b := ndbclient.Batch{Ops: []*ndbclient.Op{readOp(tbl, "k1")}}
	require.NoError(t, submitWait(t, c, &b))
	lines = strings.Split(strings.TrimSpace(logged.String()), "\n")
	require.Len(t, lines, 2, logged.String())
	assert.Contains(t, lines[1], "failures_since_last_line=1")
}
