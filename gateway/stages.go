package gateway

import "github.com/ndbgate/ndbgate/ndbclient"

// The request machine: Do routes a request's keys and starts its first stage,
// batchDone moves it from stage to stage, and finish reports. Which client a
// key's writes go to is decided here too. The get stages are in get.go, the
// write stages in write.go, the container's column mapping in columns.go.

// Do runs r and calls r.Done exactly once, inline or later from another goroutine.
func (s *Service) Do(r *Request) {
	r.svc = s
	r.Outcome, r.Err, r.Number, r.NewCas = OutcomeNone, nil, 0, 0
	if r.lg != nil {
		r.lg.reading, r.lg.partless = false, r.lg.partless[:0]
	}
	if len(r.keyEnds) == 0 {
		r.fail(ndbclient.Errorf(ndbclient.CodeInvalidArgument, "no key"))
		r.finish()
		return
	}
	r.targets = r.targets[:0]
	rtr := s.routing.Load().router
	for i := range r.keyEnds {
		k := r.Key(i)
		rt, stripped := r.Route, k
		if rt == nil {
			rt, stripped = rtr.match(k)
		}
		if rt == nil && r.Verb != VerbGet && r.Verb != VerbGat && len(r.sets) == 0 {
			r.fail(errNoRoute)
			r.finish()
			return
		}
		r.targets = append(r.targets, keyTarget{route: rt, key: stripped})
	}
	if len(r.targets) == 1 && r.targets[0].route != nil && r.targets[0].route.Refused != nil && r.Verb != VerbGet && r.Verb != VerbGat {
		r.fail(r.targets[0].route.Refused)
		r.finish()
		return
	}
	if r.disabledByPolicy() {
		r.finish()
		return
	}
	switch r.Verb {
	case VerbGet, VerbGat:
		r.startGet()
	case VerbSet:
		if len(r.sets) > 0 {
			r.startSets()
		} else {
			r.startWrite()
		}
	case VerbAdd, VerbReplace, VerbCas, VerbDelete, VerbTouch, VerbUnlink:
		r.startWrite()
	case VerbAppend, VerbPrepend:
		r.startAppend()
	case VerbIncr, VerbDecr:
		r.startIncr()
	default:
		r.fail(ndbclient.Errorf(ndbclient.CodeInvalidArgument, "unknown verb"))
		r.finish()
	}
}

// errNoRoute fails a key that no key prefix matches.
var errNoRoute = &ndbclient.Error{Code: ndbclient.CodeInvalidArgument, Message: "no container for this key prefix"}

// A request runs as a small state machine: each stage submits one batch and
// continues in batchDone, so the same code serves drivers that complete inline
// and drivers that complete later on another goroutine.
type stage uint8

const (
	stageGet stage = iota + 1
	stageWrite
	stageAppend
	stageIncr
	stageReadModify  // read value, cas and math for a read-modify-write
	stageWriteModify // conditional update of a read-modify-write
	stageCreate      // insert of an incr/decr's initial value, or of an append's data
	stageVivify      // insert of the empty item of a meta get with N
	stageStaleCheck  // read of the cas an invalidating meta set compares against
	stageStaleStore  // store of an invalidating meta set with an older cas
	stageSets        // the stores of a set of several keys (AddSet)
	stageLargeParts  // a large value's row again and its parts (large.go)
	stageLargeHeader // the row a large value's write replaces
	stageLargeWrite  // a large value's row and parts
	stageLargeFree   // the parts a large value's write freed
	stageLargeGats   // a gat's expiry updates of the large-value items it found
)

// maxModifyAttempts bounds read-modify-write retries when racing writers keep
// changing the row between the read and the conditional update.
const maxModifyAttempts = 16

// errTooManyChanges ends a request whose stages kept losing races.
var errTooManyChanges = ndbclient.Errorf(ndbclient.CodeTemporary, "too many concurrent changes to the key")

// attempt counts one more start of a stage that can be retried after a lost
// race (a read-modify-write, a create, a vivify, a stale check). Past
// maxModifyAttempts it fails the request with Temporary, finishes it, and
// returns false: the stage must not start.
func (r *Request) attempt() bool {
	r.attempts++
	if r.attempts <= maxModifyAttempts {
		return true
	}
	r.fail(errTooManyChanges)
	r.NewCas = 0
	r.finish()
	return false
}

func (r *Request) submit(cl *ndbclient.Client, st stage, from, to int) {
	r.stage, r.from, r.to = st, from, to
	r.batch.Reset()
	r.batch.Shard, r.batch.Lone, r.batch.Poll, r.batch.Bulk, r.batch.Turn = r.Shard, r.Lone, r.Poll, r.Bulk, r.Turn
	if r.abandoned.Load() {
		r.batch.Abandon()
	}
	for i := from; i < to; i++ {
		r.batch.Ops = append(r.batch.Ops, &r.ops[i])
	}
	cl.Submit(&r.batch, r.onBatch)
}

func (r *Request) batchDone(_ *ndbclient.Batch, err error) {
	if r.batch.Turn == nil {
		// Completed away from the turn's goroutine: later stages go
		// through the lanes (ndbclient.Batch.Turn).
		r.Turn = nil
	}
	if err != nil && r.stage != stageLargeFree { // a free that failed loses only space
		r.fail(err)
		r.finish()
		return
	}
	if r.lg != nil && r.lg.reading && (r.stage == stageGet || r.stage == stageReadModify) && r.largeReads(r.stage, r.from, r.to) {
		return
	}
	r.stageDone()
}

// stageDone moves the request on from the stage whose batch completed.
func (r *Request) stageDone() {
	switch r.stage {
	case stageGet:
		r.getDone()
	case stageWrite:
		r.writeDone()
	case stageAppend:
		r.appendDone()
	case stageIncr:
		r.incrDone()
	case stageReadModify:
		r.readModifyDone()
	case stageWriteModify:
		r.writeModifyDone()
	case stageCreate:
		r.createDone()
	case stageVivify:
		r.vivifyDone()
	case stageStaleCheck:
		r.staleCheckDone()
	case stageStaleStore:
		r.staleStoreDone()
	case stageSets:
		r.setsDone()
	case stageLargeParts:
		r.largePartsDone()
	case stageLargeHeader:
		r.largeHeaderDone()
	case stageLargeWrite:
		r.largeWriteDone()
	case stageLargeFree:
		r.largeFreeDone()
	case stageLargeGats:
		r.resumeStage()
	}
}

// finish invalidates local copies of written caching keys and reports.
func (r *Request) finish() {
	if r.Verb != VerbGet && r.Verb != VerbGat && len(r.targets) == 1 && len(r.sets) == 0 { // setsDone invalidates its own
		if t := r.targets[0]; r.dropsLocalCopy(&t) && r.Outcome != OutcomeNotStored {
			r.invalidateLocal(t)
		}
	}
	if r.lg != nil && r.lg.touched {
		// A large value's parts and text: not kept for the next request.
		r.lg.touched = false
		r.ops, r.textBuf = nil, nil
	}
	r.svc.count(r)
	r.Done(r)
}

// invalidateLocal drops a caching key from the in-process cache. The local cache
// is the embedded engine, which completes inline, so this never waits on I/O.
func (r *Request) invalidateLocal(t keyTarget) {
	o := &ndbclient.Op{}
	c := t.route.Container
	o.Kind, o.Table = ndbclient.OpDelete, c.Table
	var keyVals [4]ndbclient.Value
	var err error
	o.Key, err = r.keyValues(c, t.key, keyVals[:0])
	if err != nil {
		return
	}
	r.svc.fills.drop(r.svc.local, t.key, o, r.Shard)
}

// writeClient is where a single-key write goes: caching keys are written to the
// backend (finish then drops the local copy).
func (r *Request) writeClient() *ndbclient.Client { return r.clientOf(&r.targets[0]) }

// clientOf is the client a write of target t goes to.
func (r *Request) clientOf(t *keyTarget) *ndbclient.Client {
	if t.route.Policy.writeAccess(r.Verb) == AccessLocal {
		return r.svc.local
	}
	return r.svc.backend
}

// disabledByPolicy answers a single-key write whose policy disables it, as
// ndbmemcache does: NOT_FOUND for a delete or touch, NOT_STORED otherwise.
// Gets need no check (a disabled get is in no pass: a miss), and a
// multi-key set has no such key (SetsCanShareABatch).
func (r *Request) disabledByPolicy() bool {
	if r.Verb == VerbGet || r.Verb == VerbGat || len(r.sets) > 0 || len(r.targets) != 1 {
		return false
	}
	t := &r.targets[0]
	if t.route == nil || t.route.Policy.writeAccess(r.Verb) != AccessDisabled {
		return false
	}
	switch r.Verb {
	case VerbDelete, VerbUnlink, VerbTouch:
		r.Outcome = OutcomeNotFound
	default:
		r.Outcome = OutcomeNotStored
	}
	return true
}

// dropsLocalCopy: a write of target t went to the backend while the
// policy may hold a copy of the key in the local cache.
func (r *Request) dropsLocalCopy(t *keyTarget) bool {
	if t.route == nil || !t.route.Policy.UsesLocal() {
		return false
	}
	a := t.route.Policy.writeAccess(r.Verb)
	return a == AccessNDB || a == AccessCaching
}
