// Package ndbclienttest has driver wrappers for tests: they change when and how
// a real driver completes, never what it computes.
package ndbclienttest

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Later wraps a driver so every Submit completes on another goroutine after a
// random delay up to maxDelay: batches finish out of order, as they do with the
// NDB driver's poll thread. Execute stays synchronous.
func Later(d ndbclient.Driver, maxDelay time.Duration) ndbclient.Driver {
	return &laterDriver{Driver: d, maxDelay: maxDelay}
}

type laterDriver struct {
	ndbclient.Driver
	maxDelay time.Duration
}

func (d *laterDriver) Name() string { return d.Driver.Name() + "+later" }

func (d *laterDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	delay := time.Duration(rand.Int64N(int64(d.maxDelay) + 1))
	go func() {
		time.Sleep(delay)
		done(b, d.Driver.Execute(context.Background(), b))
	}()
}

// NextAutoIncrement is the wrapped driver's (ndbclient.Sequencer).
func (d *laterDriver) NextAutoIncrement(ctx context.Context, t *ndbclient.Table) (uint64, error) {
	s, ok := d.Driver.(ndbclient.Sequencer)
	if !ok {
		return 0, ndbclient.Errorf(ndbclient.CodeSchemaError, "%s has no sequences", d.Driver.Name())
	}
	return s.NextAutoIncrement(ctx, t)
}
