package ndbclient

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"weak"
)

// Client is what the gateway talks to: it owns a driver and runs every
// Submit through the dispatcher (dispatch.go). The gateway's view of it stays
// Execute and Submit.
type Client struct {
	driver Driver
	cfg    DispatchConfig
	nodes  int
	// lanes is one per data node the driver's NodeOf names, made on demand
	// (lane) so that data nodes added while serving get theirs; nil with
	// lanes off. Copy-on-write: send loads it without a lock.
	lanes    atomic.Pointer[[]*lane]
	lanesMu  sync.Mutex       // serialises growing lanes
	inline   bool             // the driver completes every Submit inline (InlineDriver)
	batcher  PartitionBatcher // nil if the driver has none
	grouper  GroupSubmitter   // nil if the driver has none
	inFlight atomic.Int64
	scratch  sync.Pool // *[]*round
	failures failureLog
}

// NewClient wraps a driver with the default dispatcher: no lanes, retries on.
func NewClient(d Driver) *Client { return NewClientWith(d, DispatchConfig{}) }

// NewClientWith wraps a driver with a dispatcher configuration.
func NewClientWith(d Driver, cfg DispatchConfig) *Client {
	cfg.defaults()
	c := &Client{driver: d, cfg: cfg, nodes: max(1, d.Stats().Nodes)}
	c.failures.log = cfg.Log
	if in, ok := d.(InlineDriver); ok {
		c.inline = in.CompletesInline()
	}
	c.batcher, _ = d.(PartitionBatcher)
	c.grouper, _ = d.(GroupSubmitter)
	c.scratch.New = func() any { s := make([]*round, 0, 8); return &s }
	liveClients.add(c)
	if cfg.Lanes {
		c.lane(c.nodes - 1)
	}
	return c
}

// maxLanes bounds the lanes a driver's NodeOf may ask for (NDB has at most
// 144 data nodes, RonDB included); a larger answer goes to lane 0.
const maxLanes = 256

// lane returns lane i, making lanes up to it first if need be.
func (c *Client) lane(i int) *lane {
	if ls := c.lanes.Load(); ls != nil && i < len(*ls) {
		return (*ls)[i]
	}
	c.lanesMu.Lock()
	defer c.lanesMu.Unlock()
	var grown []*lane
	if ls := c.lanes.Load(); ls != nil {
		if i < len(*ls) {
			return (*ls)[i]
		}
		grown = append(grown, *ls...)
	}
	for n := len(grown); n <= i; n++ {
		grown = append(grown, &lane{c: c, node: n, nodeOps: dispatchNodeOps.WithLabelValues(fmt.Sprint(n))})
	}
	c.lanes.Store(&grown)
	return grown[i]
}

// liveClients lets the in-flight gauge sum every client at scrape time without
// a shared counter on the hot path; weak pointers let closed clients go.
var liveClients clientList

type clientList struct {
	mu   sync.Mutex
	list []weak.Pointer[Client]
}

func (l *clientList) add(c *Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.list[:0]
	for _, w := range l.list {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	l.list = append(live, weak.Make(c))
}

func sumInFlight() float64 {
	liveClients.mu.Lock()
	defer liveClients.mu.Unlock()
	var n int64
	for _, w := range liveClients.list {
		if c := w.Value(); c != nil {
			n += c.inFlight.Load()
		}
	}
	return float64(n)
}

// Crowded reports whether crowdedOps, or half of MaxInFlight if less, are
// in flight: front ends then hold back clients that already have many
// operations in flight, so that the rest of the room stays for everyone
// else, none of them is refused as overloaded because of one client's
// pipeline, and none waits behind it at the data nodes for long.
func (c *Client) Crowded() bool {
	return c.inFlight.Load() >= int64(min(crowdedOps, c.cfg.MaxInFlight/2))
}

// crowdedOps is where the dispatcher counts as crowded (Crowded), about
// 2 ms of two data nodes' reads on the hosts here. It bounds what pipelines
// hold, not what the cluster is given: 16 connections of 100-key gets hold
// 1,600 and are not held back, since none holds a fair share. Beside four
// connections pipelining 20,000 gets each, on NDB 7.5.0 with their bulk
// rounds in the lanes, a lone client's get took a median 0.18-0.44 ms with
// the mark at 2,048 and 0.07-0.18 at 1,024, where the flood was served at
// 0.93x (bench/RESULTS.md, session 51). With no mark (16,384 held) it took
// 40 ms.
const crowdedOps = 1024

// Config returns the dispatcher configuration in effect.
func (c *Client) Config() DispatchConfig { return c.cfg }

// Driver returns the underlying driver.
func (c *Client) Driver() Driver { return c.driver }

// Table returns a table's schema from the driver.
func (c *Client) Table(database, name string) (*Table, error) { return c.driver.Table(database, name) }

// BindExpireColumn makes column col of t, a table the driver described,
// its expire column, so that expired rows are misses (and, on the embedded
// engine, are freed), or with byCaller only known (Table.ExpiryByCaller).
// A table with that expire column already, kept alike, is returned as it
// is; one with another, or kept otherwise, is a SchemaError, since its
// rows expire by that one. Drivers that read the column from each op's
// Table (ExpiryBinder's other drivers) get it set in t. It returns the
// schema ops must carry from then on.
func (c *Client) BindExpireColumn(t *Table, col int, byCaller bool) (*Table, error) {
	switch {
	case col < 0 || t.ExpireColumn == col && t.ExpiryByCaller == byCaller:
		return t, nil
	case col >= len(t.Columns):
		return nil, Errorf(CodeSchemaError, "table %s has no column %d", t.FullName(), col)
	case t.ExpireColumn == col:
		return nil, Errorf(CodeSchemaError, "table %s keeps expiry in column %q for containers with large values and for others alike: give its containers large values, or none", t.FullName(), t.Columns[col].Name)
	case t.ExpireColumn >= 0:
		return nil, Errorf(CodeSchemaError, "table %s keeps expiry in column %q, not %q: every container of a table must name the same expire column", t.FullName(), t.Columns[t.ExpireColumn].Name, t.Columns[col].Name)
	}
	if b, ok := c.driver.(ExpiryBinder); ok {
		return b.BindExpireColumn(t, col, byCaller)
	}
	t.ExpireColumn, t.ExpiryByCaller = col, byCaller
	return t, nil
}

// Execute runs b synchronously through the dispatcher. Its caller does
// nothing else until b completes, so b is lone (Batch.Lone).
func (c *Client) Execute(ctx context.Context, b *Batch) error {
	if len(b.Ops) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.Lone = true
	ch := make(chan error, 1)
	c.Submit(b, func(_ *Batch, err error) { ch <- err })
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// The batch is still running and owns b's ops; wait for it so the
		// caller may reuse them.
		<-ch
		return ctx.Err()
	}
}

// Submit starts b and calls done once every op has its result, possibly inline.
func (c *Client) Submit(b *Batch, done func(*Batch, error)) {
	if len(b.Ops) == 0 {
		done(b, nil)
		return
	}
	observeBatch(b)
	c.dispatch(b, done)
}

// Close closes the driver.
func (c *Client) Close() error { return c.driver.Close() }
