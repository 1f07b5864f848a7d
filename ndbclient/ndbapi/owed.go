//go:build ndbapi

package ndbapi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ndbgate/ndbgate/ndbclient"
)

// Flights that return before every answer is in. A flight's batches go to
// the shim as sections (ndbgate_execute): a turn's batches for different
// data nodes, or a lane's one batch. With Config.FlightWait the flight
// waits that long for its answers; a batch NDB has not answered by then is
// owed: its transactions stay open on the executor's Ndb object, the
// flight's other batches complete, and the executor completes the owed one
// when NDB answers (collect), from its own goroutine. So a data node that
// stops answering holds up the batches with keys on it, not the event loop
// or executor that sent them, nor the other nodes' batches.

// owedPollMillis: an executor owed batches reads NDB's answers this often
// while it waits for work.
const owedPollMillis = 1

// sectionWords: the numbers of a section (ndbgate_execute): ticket, end
// op, wait in microseconds.
const sectionWords = 3

// slowNodeWait bounds a flight's wait for a batch whose node owes batches
// already: its reads of keys it holds the primary replica of may still
// answer at once, while its writes wait for the node that stopped.
const slowNodeWait = time.Millisecond

// owedNodes bounds the lanes whose owed batches are counted (Driver.owedOn):
// NDB has at most 144 data nodes.
const owedNodes = 256

// slowNode reports whether b's data node owes batches: a flight waits
// less for it (slowNodeWait). The shim, which sees each transaction's
// node, starts none on a node that has stopped answering
// (shim_execute.cpp, stalled).
func (d *Driver) slowNode(b *ndbclient.Batch) bool {
	return b.OneNode && b.Node >= 0 && b.Node < owedNodes && d.owedOn[b.Node].Load() > 0
}

// owedNode counts an owed batch in or out of its node's count.
func (d *Driver) owedNode(b *ndbclient.Batch, n int32) {
	if b.OneNode && b.Node >= 0 && b.Node < owedNodes {
		d.owedOn[b.Node].Add(n)
	}
}

// owing is an executor's owed batches and the scratch of its flights of
// sections. Only the flight holding the executor (busy) touches it, but
// owedCount, which the executor's goroutine reads to know whether to poll.
type owing struct {
	owed       map[uint32]owedBatch // by ticket
	owedCount  atomic.Int32
	ticket     uint32
	sections   []C.uint // per batch of a flight, sectionWords of them
	groupOps   []*ndbclient.Op
	collectBuf []byte
	step       ndbclient.Batch // callStep's
}

type owedBatch struct {
	b    *ndbclient.Batch
	done func(*ndbclient.Batch, error)
	// extra: the ops' state work (state.go), done once they are answered;
	// now is their flight's time.
	extra []stateExtra
	now   uint32
}

// completion is a batch to complete once its flight has let go of the
// executor (deliver).
type completion struct {
	b    *ndbclient.Batch
	done func(*ndbclient.Batch, error)
	err  error
}

func deliver(out []completion) {
	for _, c := range out {
		if c.done != nil {
			c.done(c.b, c.err)
		}
	}
}

// callStep runs a flight of item-state updates (state.go) as one section:
// true when NDB answered it in time and without a flight error. One it
// does not answer in time is owed with no one to complete: its answer,
// when it comes, is dropped (a step changes no reply).
func (e *executor) callStep(ops []*ndbclient.Op, now uint32) bool {
	e.step.Reset()
	e.step.Ops = ops
	bs, dones := [1]*ndbclient.Batch{&e.step}, [1]func(*ndbclient.Batch, error){nil}
	var buf [1]completion
	out := e.callSections(bs[:], dones[:], ops, nil, now, buf[:0])
	e.step.Ops = nil
	return len(out) == 1 && out[0].err == nil
}

// SubmitGroup sends the batches in one flight, each completing on its own
// (ndbclient.GroupSubmitter): on the caller's goroutine when the first is
// lone and the caller's executor is idle, as Submit does; else each is
// queued as Submit queues it.
func (d *Driver) SubmitGroup(bs []*ndbclient.Batch, dones []func(*ndbclient.Batch, error)) {
	if len(bs) == 1 {
		d.Submit(bs[0], dones[0])
		return
	}
	d.closeMu.RLock()
	if !d.closed.Load() && len(bs) > 0 && bs[0].Lone {
		if e := d.loneExecutor(bs[0].Shard); e.claimIdle() {
			var buf [4]completion
			out := e.runOnCaller(bs, dones, buf[:0])
			d.closeMu.RUnlock()
			deliver(out)
			return
		}
	}
	d.closeMu.RUnlock()
	for i, b := range bs {
		d.Submit(b, dones[i])
	}
}

// runOnCaller runs bs in one flight on the caller's goroutine, the
// executor claimed (claimIdle), lets go of the executor, and returns out
// with the batches answered, for the caller to deliver.
func (e *executor) runOnCaller(bs []*ndbclient.Batch, dones []func(*ndbclient.Batch, error), out []completion) []completion {
	e.lone = e.d.busyPoll > 0 && bs[0].Poll
	out = e.runGroup(bs, dones, out)
	e.lone = false
	e.release()
	e.d.flightsOnCaller.Add(1)
	return out
}

// runGroup runs bs in one flight and appends to out the batches answered
// in it; the others are owed. The caller holds the executor (busy) and
// delivers out once it has let go of it.
func (e *executor) runGroup(bs []*ndbclient.Batch, dones []func(*ndbclient.Batch, error), out []completion) []completion {
	if e.running.Add(1) > 1 {
		e.d.overlaps.Add(1)
	}
	defer e.running.Add(-1)
	ops := bs[0].Ops
	if len(bs) > 1 {
		for _, b := range bs {
			e.groupOps = append(e.groupOps, b.Ops...)
		}
		ops = e.groupOps
		defer func() {
			clear(e.groupOps)
			e.groupOps = e.groupOps[:0]
		}()
	}
	now := uint32(time.Now().Unix())
	st := &e.state
	stateful, err := st.plan(ops, e.d.info, now)
	switch {
	case err != nil:
		for _, op := range ops {
			op.Err = err
		}
		err = nil
	case stateful && len(st.pre) > 0:
		// Updates that read the state first: one flight, waited for.
		err = e.runStateful(ops, now)
	case stateful:
		out = e.callSections(bs, dones, ops, st.extra, now, out)
		e.stateSteps(ops, now) // the owed ops have no row yet: afterFlight skips them
		st.release()
		return out
	default:
		return e.callSections(bs, dones, ops, nil, now, out)
	}
	for i, b := range bs {
		out = append(out, completion{b, dones[i], err})
	}
	return out
}

// callSections runs ops, bs's batches one after another, as one flight of
// one section a batch (ndbgate_execute), and appends the answered batches
// to out.
func (e *executor) callSections(bs []*ndbclient.Batch, dones []func(*ndbclient.Batch, error), ops []*ndbclient.Op, extra []stateExtra, now uint32, out []completion) []completion {
	var err error
	e.req, err = encodeFlight(e.req[:0], ops, extra, e.d.info, now)
	if err != nil || len(ops) == 0 {
		for _, op := range ops {
			op.Err = err
		}
		for i, b := range bs {
			out = append(out, completion{b, dones[i], nil})
		}
		return out
	}
	e.sections = e.sections[:0]
	end := 0
	for _, b := range bs {
		if len(b.Ops) == 0 {
			continue // no section: it completes below with nothing to read
		}
		end += len(b.Ops)
		e.ticket++
		wait := e.d.flightWait
		if e.d.slowNode(b) {
			wait = min(wait, slowNodeWait)
		}
		e.sections = append(e.sections, C.uint(e.ticket), C.uint(end), C.uint(wait/time.Microsecond))
	}
	n, err := e.execute(e.sections, e.d.flightWait)
	if err != nil {
		err = e.fail(ops, err)
		for i, b := range bs {
			out = append(out, completion{b, dones[i], err})
		}
		return out
	}
	bound := len(e.resp) // the flight's results fit in it, so one owed batch's do
	r := reader{b: e.resp[:n]}
	s, off := 0, 0
	for i, b := range bs {
		if len(b.Ops) == 0 {
			out = append(out, completion{b, dones[i], nil})
			continue
		}
		ticket := uint32(e.sections[sectionWords*s])
		s++
		var x []stateExtra
		if extra != nil {
			x = extra[off : off+len(b.Ops)]
		}
		off += len(b.Ops)
		switch r.u8() {
		case 0:
			err := decodeResultsFrom(&r, b.Ops, x, e.d.described)
			out = append(out, completion{b, dones[i], err})
		case 1:
			for _, op := range b.Ops {
				op.Row = op.Row[:0] // no answer yet: no state work now either
			}
			if dones[i] == nil {
				b = orphan(b) // a step's: its ops are the executor's, reused next flight
			}
			e.owed[ticket] = owedBatch{b: b, done: dones[i], extra: slices.Clone(x), now: now}
			e.owedCount.Add(1)
			e.d.owedNode(b, 1)
			e.d.batchesOwed.Add(1)
			// Room for it alone in ndbgate_collect's answer: its results
			// (within the flight's bound), ticket, status and the count.
			if need := bound + 16; cap(e.collectBuf) < need {
				e.collectBuf = make([]byte, need)
			}
		default:
			err := e.fail(b.Ops, ndbclient.Errorf(ndbclient.CodeInternal, "malformed response from the NDB shim"))
			out = append(out, completion{b, dones[i], err})
		}
	}
	for _, t := range staleSchema(ops) {
		e.d.refreshLater(t)
	}
	return out
}

// collect appends to out the owed batches NDB has answered, reading its
// sockets first with poll (else only what the flights' polls read). The
// caller holds the executor.
func (e *executor) collect(poll bool, out []completion) []completion {
	if len(e.collectBuf) < 64<<10 {
		e.collectBuf = make([]byte, max(64<<10, cap(e.collectBuf)))
	}
	e.collectBuf = e.collectBuf[:cap(e.collectBuf)]
	first := len(out)
	for {
		var more C.int
		p := C.int(0)
		if poll {
			p = 1
		}
		n := C.ndbgate_collect(e.d.pool, C.int(e.conn), p, (*C.uchar)(unsafe.Pointer(&e.collectBuf[0])), C.int(len(e.collectBuf)), &more)
		if n < 4 {
			break
		}
		r := reader{b: e.collectBuf[:int(n)]}
		count := r.u32()
		if count == 0 && more != 0 {
			// Not even one fits (cannot happen within the bound kept above):
			// more room, and again.
			e.collectBuf = make([]byte, 2*len(e.collectBuf))
			poll = false
			continue
		}
		for ; count > 0 && r.ok(); count-- {
			ticket, status := r.u32(), r.u8()
			ob, ok := e.owed[ticket]
			if !ok || !r.ok() {
				break // cannot happen: the shim owes only what it was given
			}
			delete(e.owed, ticket)
			e.owedCount.Add(-1)
			e.d.owedNode(ob.b, -1)
			var err error
			if status == 0 {
				err = decodeResultsFrom(&r, ob.b.Ops, ob.extra, e.d.described)
				if err == nil && ob.extra != nil {
					e.state.extra, e.state.now, e.state.steps = ob.extra, ob.now, e.state.steps[:0]
					e.stateSteps(ob.b.Ops, ob.now)
					e.state.release()
				}
			} else {
				unknownResult(ob.b.Ops, "NDB never answered: its connection was made again or its table changed")
			}
			out = append(out, completion{ob.b, ob.done, err})
		}
		if more == 0 {
			break
		}
		poll = false
	}
	for _, c := range out[first:] {
		for _, t := range staleSchema(c.b.Ops) {
			e.d.refreshLater(t)
		}
	}
	return out
}

// collectOwed collects the owed batches NDB has answered, unless a flight
// holds the executor (it will), and completes them.
func (e *executor) collectOwed() {
	e.mu.Lock()
	if e.busy {
		e.mu.Unlock()
		return
	}
	e.busy = true
	e.mu.Unlock()
	if e.running.Add(1) > 1 {
		e.d.overlaps.Add(1)
	}
	var buf [4]completion
	out := e.collect(true, buf[:0])
	e.running.Add(-1)
	e.release()
	deliver(out)
}

// orphan copies a batch whose ops its flight's owner reuses: the copies
// take the answer when it comes.
func orphan(b *ndbclient.Batch) *ndbclient.Batch {
	c := &ndbclient.Batch{Ops: make([]*ndbclient.Op, len(b.Ops))}
	for i, op := range b.Ops {
		o := &ndbclient.Op{Kind: op.Kind, Table: op.Table, Read: slices.Clone(op.Read), AppendColumn: op.AppendColumn}
		c.Ops[i] = o
	}
	return c
}

// abandonOwed completes what is still owed when the driver closes: the
// pool goes, and with it the transactions, whose outcome is unknown.
func (e *executor) abandonOwed() {
	for ticket, ob := range e.owed {
		delete(e.owed, ticket)
		e.owedCount.Add(-1)
		e.d.owedNode(ob.b, -1)
		unknownResult(ob.b.Ops, "the NDB driver closed before NDB answered")
		if ob.done != nil {
			ob.done(ob.b, nil)
		}
	}
}

// unknownResult fails ops whose transactions may or may not have committed.
func unknownResult(ops []*ndbclient.Op, why string) {
	for _, op := range ops {
		op.Err = &ndbclient.Error{Code: ndbclient.CodeUnknownResult, Message: why}
		op.Row = op.Row[:0]
	}
}
