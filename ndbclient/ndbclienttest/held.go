package ndbclienttest

import (
	"context"
	"sync"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Hold wraps a driver so that every Submit waits until Release, which runs
// the batches held so far on the caller's goroutine: a test sees what its
// code does while batches are in flight.
func Hold(d ndbclient.Driver) *Held { return &Held{Driver: d} }

// Held is a driver made by Hold.
type Held struct {
	ndbclient.Driver
	mu   sync.Mutex
	held []func()
}

func (d *Held) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = append(d.held, func() { done(b, d.Driver.Execute(context.Background(), b)) })
}

// Release completes the batches held so far.
func (d *Held) Release() {
	d.mu.Lock()
	held := d.held
	d.held = nil
	d.mu.Unlock()
	for _, run := range held {
		run()
	}
}

// Pending reports whether batches are held.
func (d *Held) Pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held) > 0
}
