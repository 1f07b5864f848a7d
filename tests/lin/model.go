// Package lin records concurrent histories of memcache-shaped operations
// against running ndbgate processes and checks them for linearizability with
// porcupine, one key at a time.
//
// The model is a register per key that holds a value and its cas token. The
// server picks the tokens, so the model learns them from replies: a write's
// reply names the new token, and a read that finds the token still unknown
// (after an ambiguous write) binds it. An ambiguous operation (timed out, lost
// its connection, or failed on the server in a way that may still have
// committed) may have taken effect or not, at any time after its call; the
// model allows both.
package lin

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does.
type Kind uint8

const (
	Set Kind = iota
	Get
	Cas // store Value only if the item's token is still Input.Cas
	Incr
	Delete
)

func (k Kind) String() string {
	return [...]string{"set", "get", "cas", "incr", "delete"}[k]
}

// Input is an operation as a client called it.
type Input struct {
	Kind  Kind
	Key   string
	Value string // Set, Cas
	Cas   uint64 // Cas: the token compared
	Delta uint64 // Incr
	// Gateway is which gateway the client spoke to (CachingModel; Model
	// ignores it).
	Gateway int
}

// Result is how an operation ended.
type Result uint8

const (
	Ok         Result = iota // stored, found, incremented, deleted
	NotFound                 // no such item (a get's miss)
	Exists                   // Cas: the item's token was another
	NonNumeric               // Incr: the value is not a number
	Ambiguous                // may or may not have taken effect
)

func (r Result) String() string {
	return [...]string{"ok", "not-found", "exists", "non-numeric", "ambiguous"}[r]
}

// Output is what the operation returned.
type Output struct {
	Result Result
	Value  string // Get and Incr when Ok
	Cas    uint64 // the item's token after the operation; 0 when the reply had none
}

// state is one key's register. cas 0 is a token not yet known: the last write
// was ambiguous, or its reply carried none.
type state struct {
	present bool
	value   string
	cas     uint64
}

var absent = state{}

// casMatches reports whether token could be the item's current token.
func (s state) casMatches(token uint64) bool { return s.cas == 0 || s.cas == token }

// step returns every state the register may be in after the operation, none
// when the operation could not have returned what it did from s.
func step(s state, in Input, out Output) []state {
	if out.Result == Ambiguous {
		return append([]state{s}, applied(s, in)...)
	}
	switch in.Kind {
	case Set:
		if out.Result == Ok {
			return []state{{present: true, value: in.Value, cas: out.Cas}}
		}
	case Get:
		switch {
		case out.Result == Ok && s.present && s.value == out.Value && s.casMatches(out.Cas):
			return []state{{present: true, value: s.value, cas: out.Cas}}
		case out.Result == NotFound && !s.present:
			return []state{s}
		}
	case Cas:
		switch {
		case out.Result == Ok && s.present && s.casMatches(in.Cas):
			return []state{{present: true, value: in.Value, cas: out.Cas}}
		case out.Result == Exists && s.present && (s.cas == 0 || s.cas != in.Cas):
			return []state{s}
		case out.Result == NotFound && !s.present:
			return []state{s}
		}
	case Incr:
		n, numeric := number(s.value)
		switch {
		case out.Result == Ok && s.present && numeric && out.Value == strconv.FormatUint(n+in.Delta, 10):
			return []state{{present: true, value: out.Value, cas: out.Cas}}
		case out.Result == NotFound && !s.present:
			return []state{s}
		case out.Result == NonNumeric && s.present && !numeric:
			return []state{s}
		}
	case Delete:
		switch {
		case out.Result == Ok && s.present:
			return []state{absent}
		case out.Result == NotFound && !s.present:
			return []state{s}
		}
	}
	return nil
}

// applied is the state an ambiguous operation leaves when it did take effect
// (none when it could not have), with its token unknown.
func applied(s state, in Input) []state {
	switch in.Kind {
	case Set:
		return []state{{present: true, value: in.Value}}
	case Cas:
		if s.present && s.casMatches(in.Cas) {
			return []state{{present: true, value: in.Value}}
		}
	case Incr:
		if n, ok := number(s.value); s.present && ok {
			return []state{{present: true, value: strconv.FormatUint(n+in.Delta, 10)}}
		}
	case Delete:
		if s.present {
			return []state{absent}
		}
	}
	return nil
}

// number parses a value as memcached's incr does: decimal digits, at most
// 2^64-1.
func number(v string) (uint64, bool) {
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// Model is the per-key register model, partitioned by key.
var Model = func() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} { return []interface{}{absent} },
		Step: func(st, in, out interface{}) []interface{} {
			next := step(st.(state), in.(Input), out.(Output))
			res := make([]interface{}, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
		Hash: func(st interface{}) uint64 {
			s := st.(state)
			h := fnv.New64a()
			_, _ = h.Write([]byte(s.value))
			if s.present {
				_, _ = h.Write([]byte{1})
			}
			return h.Sum64() ^ s.cas*0x9e3779b97f4a7c15
		},
		DescribeOperation: func(in, out interface{}) string {
			return describe(in.(Input), out.(Output))
		},
		DescribeState: func(st interface{}) string {
			s := st.(state)
			if !s.present {
				return "absent"
			}
			return fmt.Sprintf("%q c%d", s.value, s.cas)
		},
	}
	m := nm.ToModel()
	m.Partition = byKey
	return m
}()

func describe(in Input, out Output) string {
	call := in.Kind.String() + "(" + in.Key
	switch in.Kind {
	case Set:
		call += ", " + strconv.Quote(in.Value)
	case Cas:
		call += fmt.Sprintf(", %q, c%d", in.Value, in.Cas)
	case Incr:
		call += fmt.Sprintf(", %d", in.Delta)
	}
	call += ") -> " + out.Result.String()
	if out.Value != "" {
		call += " " + strconv.Quote(out.Value)
	}
	if out.Cas != 0 {
		call += fmt.Sprintf(" c%d", out.Cas)
	}
	return call
}

func byKey(h []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range h {
		k := op.Input.(Input).Key
		i, ok := index[k]
		if !ok {
			i = len(parts)
			index[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// Verdict is a checked history's outcome.
type Verdict struct {
	Result porcupine.CheckResult // Ok, Illegal, or Unknown (the time bound ran out)
	Info   porcupine.LinearizationInfo
}

// Check checks a history within timeout.
func Check(h []porcupine.Operation, timeout time.Duration) Verdict {
	res, info := porcupine.CheckOperationsVerbose(Model, h, timeout)
	return Verdict{Result: res, Info: info}
}
