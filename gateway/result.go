package gateway

import "github.com/ndbgate/ndbgate/ndbclient"

// Class is a request's result for the front ends whose protocols are not
// memcached's (REST, gRPC): the outcomes folded, here and only here, onto
// what those protocols tell apart. Each front end translates a Class to its
// wire code, and ClassError's error through its map of the canonical codes.
// The memcache front end replies with the Outcome itself.
type Class uint8

const (
	ClassOK       Class = iota // done as asked; the outputs hold the result
	ClassNotFound              // the key does not exist (a get's miss; replace, cas, delete, incr of a missing key)
	ClassExists                // a store only if absent (add) found the key
	ClassChanged               // a compare-and-set found another version: the cas differs
	ClassError                 // failed; the error is a canonical ndbclient error
)

// Result is the request's Class and, unless ClassOK, an error saying what
// happened. For ClassNotFound, ClassExists and ClassChanged it is a canonical
// error of the nearest code (NotFound, Duplicate, ConditionFailed) whose
// message names the key; for ClassError it is Err. A get is ClassOK unless
// it failed as a whole: ItemResult tells each key's. Call it from Done, or
// after Run.
func (r *Request) Result() (Class, error) {
	switch r.Outcome {
	case OutcomeStored, OutcomeDeleted, OutcomeTouched, OutcomeNumber, OutcomeValues:
		return ClassOK, nil
	case OutcomeNotFound:
		return ClassNotFound, r.classError(ndbclient.CodeNotFound, 0, "key %q not found in container %q")
	case OutcomeNotStored:
		if r.Verb == VerbAdd {
			return ClassExists, r.classError(ndbclient.CodeDuplicate, 0, "key %q exists in container %q")
		}
		// replace, append and prepend store only over an existing item
		return ClassNotFound, r.classError(ndbclient.CodeNotFound, 0, "key %q not found in container %q")
	case OutcomeExists:
		return ClassChanged, r.classError(ndbclient.CodeConditionFailed, 0, "cas mismatch: key %q in container %q has changed; its cas differs from the one given")
	}
	if r.Err == nil {
		return ClassError, ndbclient.Errorf(ndbclient.CodeInternal, "request ended without an outcome")
	}
	return ClassError, r.Err
}

// ItemResult is key i's part of a get that did not fail as a whole:
// ClassOK for a hit, ClassNotFound for a miss, ClassError with the key's
// own error.
func (r *Request) ItemResult(i int) (Class, error) {
	switch it := &r.Items[i]; {
	case it.Err != nil:
		return ClassError, it.Err
	case !it.Hit:
		return ClassNotFound, r.classError(ndbclient.CodeNotFound, i, "key %q not found in container %q")
	}
	return ClassOK, nil
}

// classError builds the error of a class from a format taking key i and its
// container's name. Only failures pay for it.
func (r *Request) classError(code ndbclient.Code, i int, format string) error {
	container := ""
	if i < len(r.targets) && r.targets[i].route != nil {
		container = r.targets[i].route.Container.Name
	}
	var key []byte
	if i < r.NumKeys() {
		key = r.Key(i)
	}
	return ndbclient.Errorf(code, format, key, container)
}
