package ndbclient

import (
	"cmp"
	"slices"
)

// Turn collects the rounds that the batches of one event loop's turn
// submit (Batch.Turn); the loop runs them itself at the turn's end (Run),
// together, in one flight on its own goroutine. The turn's requests then
// pay one round trip between them, and no thread hand-off either way: the
// ops are sent and their results read on the core that built them, and
// the loop, not an executor and then the loop, is woken by the answer.
// Bulk batches' rounds go through their nodes' lanes instead: the loop
// waits for its flight, and so do its other connections. A Turn belongs to
// its loop's goroutine.
type Turn struct {
	rounds []*round
	spare  []*round
	poll   bool     // every batch added since the last Run may poll (Batch.Poll)
	mine   []*round // Run's scratch: one client's rounds for its flight
	// Run's scratch for a group of flights (runGroup).
	flights []*flight
	batches []*Batch
	dones   []func(*Batch, error)
}

// add adds a call's rounds to the turn; poll is its batch's Batch.Poll.
func (t *Turn) add(rounds []*round, poll bool) {
	if len(t.rounds) == 0 {
		t.poll = poll
	} else {
		t.poll = t.poll && poll
	}
	t.rounds = append(t.rounds, rounds...)
}

// Pending reports whether the turn has rounds to run.
func (t *Turn) Pending() bool { return len(t.rounds) > 0 }

// Run sends the rounds added since the last Run: for each client, as many
// as turnFlightOps allows in one flight, which the driver runs on the
// caller's goroutine when it can (Batch.Lone), and the rest, Bulk batches'
// rounds first of all, through their nodes' lanes. With a driver that
// sends a group of batches in one round trip (GroupSubmitter), the flight
// is one batch a node, each completing on its own: a node that does not
// answer in time holds up only its batch, which completes later
// (ndb.flight_wait). A completion that runs here may add rounds of its
// request's next stage: Run runs those too, until none is left.
func (t *Turn) Run() {
	for len(t.rounds) > 0 {
		all := t.rounds
		t.rounds, t.spare = t.spare[:0], nil
		poll := t.poll && len(all) == 1
		rounds := all
		for len(rounds) > 0 {
			c := rounds[0].call.c
			rest, ops := rounds[:0], 0
			for _, r := range rounds {
				switch {
				case r.call.c != c:
					rest = append(rest, r)
				case r.call.b.Abandoned():
					r.finish(ErrAbandoned) // as a lane drops it: unsent
				case r.call.b.Bulk:
					// Its lane runs it on an executor, behind other
					// callers' rounds, at most RoundSize ops a flight:
					// the data node's queue, which this loop's flight
					// joins, stays short (TestTurnSendsBulkRoundsThroughLanes).
					c.send(r)
				case ops+len(r.ops) <= turnFlightOps:
					t.mine = append(t.mine, r)
					ops += len(r.ops)
				default:
					c.send(r)
				}
			}
			rounds = rest
			if len(t.mine) == 0 {
				continue
			}
			// In node order, each node's first op marked: the driver
			// must not join it to another node's transaction.
			slices.SortStableFunc(t.mine, func(a, b *round) int { return cmp.Compare(a.node, b.node) })
			var f *flight
			nodeOps := 0
			for i, r := range t.mine {
				first := i == 0 || t.mine[i-1].node != r.node
				r.ops[0].nodeStart = i > 0 && first
				if f == nil || (first && c.grouper != nil) {
					f = c.newFlight(nil)
					f.turn = true
					f.b.Lone, f.b.Poll = true, poll
					t.flights = append(t.flights, f)
				}
				f.add(r)
				nodeOps += len(r.ops)
				if i == len(t.mine)-1 || t.mine[i+1].node != r.node {
					c.lane(r.node).nodeOps.Add(float64(nodeOps))
					nodeOps = 0
				}
			}
			clear(t.mine)
			t.mine = t.mine[:0]
			if c.grouper != nil {
				t.runGroup(c)
			} else {
				runFlights(t.flights[0])
			}
			clear(t.flights)
			t.flights = t.flights[:0]
		}
		clear(all)
		t.spare = all[:0]
	}
}

// runGroup submits the turn's flights, one a node, as a group
// (GroupSubmitter). Those done before SubmitGroup returns complete here, on
// the turn's goroutine; each other one completes where the driver finishes
// it (driverDone).
func (t *Turn) runGroup(c *Client) {
	ops, rounds := 0, 0
	for _, f := range t.flights {
		f.state.Store(flightSubmitting)
		ops += len(f.b.Ops)
		rounds += len(f.rounds)
		t.batches = append(t.batches, &f.b)
		t.dones = append(t.dones, f.onDone)
	}
	// One round trip, as a turn flight of one batch was.
	observeFlight(t.flights[0].b.Shard, ops)
	if rounds > 1 {
		dispatchCoalesced.Add(float64(rounds - 1))
	}
	c.grouper.SubmitGroup(t.batches, t.dones)
	for _, f := range t.flights {
		if f.state.CompareAndSwap(flightSubmitting, flightWaiting) {
			continue // f is the driver's now, and may be released already
		}
		f.finishTurn(f.err, true)
		f.release()
	}
	clear(t.batches)
	clear(t.dones)
	t.batches, t.dones = t.batches[:0], t.dones[:0]
}

// turnFlightOps bounds the ops of a turn's flight: NDB takes at most 1024
// transactions on one Ndb object at once (neighbouring committed reads
// share one), and the rest wait no longer in their nodes' lanes.
const turnFlightOps = 1024
