package ndbclient

import (
	"context"
	"errors"
)

// Client is what the gateway talks to: it owns a driver and records batch
// metrics. The partition-aware dispatcher (grouping, rounds, coalescing, retries)
// grows here; the gateway's view of it stays Execute and Submit.
type Client struct {
	driver Driver
}

// NewClient wraps a driver.
func NewClient(d Driver) *Client { return &Client{driver: d} }

// Driver returns the underlying driver.
func (c *Client) Driver() Driver { return c.driver }

// Table returns a table's schema from the driver.
func (c *Client) Table(database, name string) (*Table, error) { return c.driver.Table(database, name) }

// Execute runs b synchronously.
func (c *Client) Execute(ctx context.Context, b *Batch) error {
	if len(b.Ops) == 0 {
		return nil
	}
	observeBatch(b)
	err := c.driver.Execute(ctx, b)
	if err != nil && errors.Is(err, context.Canceled) {
		return err
	}
	return err
}

// Submit starts b and calls done once every op has its result, possibly inline.
func (c *Client) Submit(b *Batch, done func(*Batch, error)) {
	if len(b.Ops) == 0 {
		done(b, nil)
		return
	}
	observeBatch(b)
	c.driver.Submit(b, done)
}

// Close closes the driver.
func (c *Client) Close() error { return c.driver.Close() }
