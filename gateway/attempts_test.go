package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// losingDriver plays a writer that wins every race: a batch whose ops are
// all of kind lose fails each with err, unsent.
type losingDriver struct {
	ndbclient.Driver
	lose  ndbclient.OpKind
	err   error
	count *atomic.Int64 // batches so failed
}

func (d losingDriver) loses(b *ndbclient.Batch) bool {
	for _, o := range b.Ops {
		if o.Kind != d.lose {
			return false
		}
	}
	if len(b.Ops) == 0 {
		return false
	}
	for _, o := range b.Ops {
		o.Err = d.err
	}
	d.count.Add(1)
	return true
}

func (d losingDriver) Execute(ctx context.Context, b *ndbclient.Batch) error {
	if d.loses(b) {
		return nil
	}
	return d.Driver.Execute(ctx, b)
}

func (d losingDriver) Submit(b *ndbclient.Batch, done func(*ndbclient.Batch, error)) {
	if d.loses(b) {
		done(b, nil)
		return
	}
	d.Driver.Submit(b, done)
}

// Every stage retried after a lost race gives up after the same number of
// attempts, with Temporary, no cas, and nothing changed.
func TestLostRacesEndInTemporary(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lose   ndbclient.OpKind
		err    error
		setup  string // the value of "k" before, "" none
		verb   gateway.Verb
		set    func(r *gateway.Request)
		losses int64
	}{
		// incr of a non-canonical number: read-modify-write, whose
		// conditional update always finds the row changed.
		{"read-modify-write", ndbclient.OpCondUpdate, ndbclient.ErrConditionFailed, "007", gateway.VerbIncr,
			func(r *gateway.Request) { r.Delta = 1 }, 16},
		// incr with an initial value: the create always finds the key taken,
		// and the incr then always finds it missing.
		{"create", ndbclient.OpInsert, ndbclient.ErrDuplicate, "", gateway.VerbIncr,
			func(r *gateway.Request) { r.Delta, r.Create, r.Initial = 1, true, 5 }, 16},
		// meta get N: the empty item's insert always finds the key taken, and
		// the get then always misses.
		{"vivify", ndbclient.OpInsert, ndbclient.ErrDuplicate, "", gateway.VerbGet,
			func(r *gateway.Request) { r.Meta.Vivify, r.Meta.Lease = true, true }, 16},
		// meta set C I with an old cas: the stale store always finds the cas
		// changed after the check read it (the first loss is the cas store).
		{"stale check", ndbclient.OpCondUpdate, ndbclient.ErrConditionFailed, "v", gateway.VerbCas,
			func(r *gateway.Request) { r.Cas, r.Meta.Invalidate = 1, true }, 1 + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			losses := &atomic.Int64{}
			h := newHarness(t, func(d ndbclient.Driver) ndbclient.Driver {
				return losingDriver{Driver: d, lose: tc.lose, err: tc.err, count: losses}
			})
			if tc.setup != "" {
				require.Equal(t, gateway.OutcomeStored, h.set(t, "k", tc.setup).Outcome)
			}
			r := h.do(t, tc.verb, "new", tc.set, "k")
			require.Equal(t, gateway.OutcomeError, r.Outcome)
			assert.Equal(t, ndbclient.CodeTemporary, ndbclient.CodeOf(r.Err), "%v", r.Err)
			assert.Zero(t, r.NewCas)
			assert.Equal(t, tc.losses, losses.Load(), "attempts before giving up")
			want := tc.setup
			if want == "" {
				want = "<miss>"
			}
			assert.Equal(t, want, h.get(t, "k"), "nothing changed")
		})
	}
}
