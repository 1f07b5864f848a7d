package ndbclient_test

import (
	"testing"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// BenchmarkSubmitOneRead is the hot path of a memcache get on the embedded
// engine: one read through the dispatcher (no lanes) against the driver alone.
func BenchmarkSubmitOneRead(b *testing.B) {
	e, tbl := newEngineB(b)
	op := readOp(tbl, "k1")
	batch := ndbclient.Batch{Ops: []*ndbclient.Op{op}}
	done := func(*ndbclient.Batch, error) {}
	b.Run("driver", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op.Row = op.Row[:0]
			e.Submit(&batch, done)
		}
	})
	b.Run("dispatcher", func(b *testing.B) {
		c := ndbclient.NewClient(e)
		b.ReportAllocs()
		for b.Loop() {
			op.Row = op.Row[:0]
			c.Submit(&batch, done)
		}
	})
}
