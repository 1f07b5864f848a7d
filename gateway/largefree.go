package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Freeing old parts after the reply.
//
// Once a write of a large value has committed, its row no longer names the
// old parts and nobody can read them; freeing them is only space. So the
// write answers its client at once and the frees run on their own (a round
// trip fewer for the client, as ndbmemcache's two), as bulk work (behind
// other clients' requests in the nodes' lanes), at most maxFreeingParts
// part deletes at a time: past that a write waits for its own free, as
// every write did before, so a client writing faster than the cluster
// frees is held back rather than the frees piling up, and the frees alone
// never make the backend crowded (ndbclient.Client.Crowded). A value's
// parts are deleted in one transaction, as ndbmemcache deletes them in its
// write's: one commit for the data nodes instead of one a part. No reader
// holds a part's lock (ndbgate's and ndbmemcache's read parts simple), so
// the deletes make no lock cycle with one. A part already gone (freed by
// ndbmemcache, or never written by a row that claims more) fails that
// transaction, and each part is then deleted in a transaction of its own,
// where it fails only its own delete. Drain waits for the frees at
// shutdown; a process that stops before they are done leaves those parts
// unnamed.

// maxFreeingParts bounds the part deletes in flight after their writes'
// replies: half of the backend's crowded mark (1,024 ops); 6 writes of
// 1 MB values, 256 of 20 KB.
var maxFreeingParts int64 = 512

// partsFree is the batch of one write's frees.
type partsFree struct {
	ops  []ndbclient.Op
	b    ndbclient.Batch
	svc  *Service
	cl   *ndbclient.Client
	lv   *LargeValues
	id   uint64
	done func(*ndbclient.Batch, error)
}

// partsFrees keeps the batches; New is set in init, as finish puts back.
var partsFrees sync.Pool

func init() {
	partsFrees.New = func() any {
		f := &partsFree{}
		f.done = f.finish
		return f
	}
}

// freeLater submits the deletes of the n parts of the large value id of lv
// on cl, and reports whether it did; false when they would take the part
// deletes in flight past maxFreeingParts.
func (s *Service) freeLater(cl *ndbclient.Client, lv *LargeValues, id uint64, n int, shard int) bool {
	if s.freeingParts.Add(int64(n)) > maxFreeingParts {
		s.freeingParts.Add(-int64(n))
		return false
	}
	f := partsFrees.Get().(*partsFree)
	f.svc, f.cl, f.lv, f.id = s, cl, lv, id
	if cap(f.ops) < n {
		f.ops = make([]ndbclient.Op, n)
	}
	f.ops = f.ops[:n]
	f.b.Shard = shard
	f.submit(true)
	return true
}

// submit submits f's deletes, in one transaction when linked.
func (f *partsFree) submit(linked bool) {
	shard := f.b.Shard
	f.b.Reset()
	f.b.Shard, f.b.Bulk = shard, true
	partDeletes(f.ops, f.lv, f.id, linked)
	for k := range f.ops {
		f.b.Ops = append(f.b.Ops, &f.ops[k])
	}
	f.cl.Submit(&f.b, f.done)
}

// partDeletes makes ops the deletes of the first len(ops) parts of the
// large value id of lv: one transaction when linked, else each its own.
func partDeletes(ops []ndbclient.Op, lv *LargeValues, id uint64, linked bool) {
	for k := range ops {
		o := &ops[k]
		o.Reset()
		o.Kind, o.Table = ndbclient.OpDelete, lv.Parts
		o.Key = lv.partKey(o.Key, id, k)
		o.TxnWithNext = linked && k < len(ops)-1
	}
}

// freeAgain reports whether the linked deletes in ops failed, a part
// already gone or any other error: then each is tried on its own, so that
// the parts still there are freed.
func freeAgain(ops []ndbclient.Op) bool {
	if len(ops) < 2 || !ops[0].TxnWithNext {
		return false
	}
	for k := range ops {
		if ops[k].Err != nil {
			return true
		}
	}
	return false
}

// finish ends a write's frees. A free that failed (the dispatcher logs the
// backend's failures, not a refusal as overloaded) loses only space: the
// value was written.
func (f *partsFree) finish(*ndbclient.Batch, error) {
	if freeAgain(f.ops) {
		f.submit(false)
		return
	}
	s, n := f.svc, len(f.ops)
	f.svc, f.cl, f.lv = nil, nil, nil
	partsFrees.Put(f)
	s.freeingParts.Add(-int64(n))
}

// Drain waits until the frees of old parts that writes left running after
// their replies are done, or ctx ends (its error then). Call it once the
// front ends have stopped, before the backend closes.
func (s *Service) Drain(ctx context.Context) error {
	for s.freeingParts.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
