package lin

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds a history entry.
func op(client int, in Input, call int64, out Output, ret int64) porcupine.Operation {
	if out.Result == Ambiguous {
		ret = never
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func set(k, v string) Input               { return Input{Kind: Set, Key: k, Value: v} }
func get(k string) Input                  { return Input{Kind: Get, Key: k} }
func cas(k, v string, token uint64) Input { return Input{Kind: Cas, Key: k, Value: v, Cas: token} }
func incr(k string, d uint64) Input       { return Input{Kind: Incr, Key: k, Delta: d} }
func del(k string) Input                  { return Input{Kind: Delete, Key: k} }
func ok(cas uint64) Output                { return Output{Result: Ok, Cas: cas} }
func hit(v string, cas uint64) Output     { return Output{Result: Ok, Value: v, Cas: cas} }

var (
	miss    = Output{Result: NotFound}
	exists  = Output{Result: Exists}
	unknown = Output{Result: Ambiguous}
)

func TestModel(t *testing.T) {
	cases := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a read after two writes sees the second", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, ok(2), 30),
			op(1, get("k"), 40, hit("2", 2), 50),
		}, porcupine.Ok},
		{"stale read: a read after two writes sees the first", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, ok(2), 30),
			op(1, get("k"), 40, hit("1", 1), 50),
		}, porcupine.Illegal},
		{"a read concurrent with the second write may see the first", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, ok(2), 60),
			op(1, get("k"), 40, hit("1", 1), 50),
		}, porcupine.Ok},
		{"a read sees the value with another token", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(1, get("k"), 40, hit("1", 7), 50),
		}, porcupine.Illegal},
		{"CAS with the current token stores", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(1, cas("k", "2", 1), 20, ok(2), 30),
			op(1, get("k"), 40, hit("2", 2), 50),
		}, porcupine.Ok},
		{"wrongly accepted CAS: a stale token stores", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, ok(2), 30),
			op(1, cas("k", "3", 1), 40, ok(3), 50),
		}, porcupine.Illegal},
		{"wrongly refused CAS: the current token is refused", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(1, cas("k", "3", 1), 40, exists, 50),
		}, porcupine.Illegal},
		{"CAS of a missing key is not found", []porcupine.Operation{
			op(1, cas("k", "3", 1), 40, miss, 50),
		}, porcupine.Ok},
		{"an ambiguous write may not have happened", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, unknown, 0),
			op(1, cas("k", "3", 1), 40, ok(3), 50),
			op(1, get("k"), 60, hit("3", 3), 70),
		}, porcupine.Ok},
		{"an ambiguous write may happen late", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, unknown, 0),
			op(1, get("k"), 40, hit("1", 1), 50),
			op(1, get("k"), 60, hit("2", 9), 70),
			op(1, get("k"), 80, hit("2", 9), 90),
		}, porcupine.Ok},
		{"an ambiguous write's token, once read, is bound", []porcupine.Operation{
			op(0, set("k", "2"), 20, unknown, 0),
			op(1, get("k"), 60, hit("2", 9), 70),
			op(1, get("k"), 80, hit("2", 8), 90),
		}, porcupine.Illegal},
		{"a write undone: a value read, then its predecessor", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, set("k", "2"), 20, unknown, 0),
			op(1, get("k"), 60, hit("2", 9), 70),
			op(1, get("k"), 80, hit("1", 1), 90),
		}, porcupine.Illegal},
		{"incr adds to the value", []porcupine.Operation{
			op(0, set("k", "10"), 0, ok(1), 10),
			op(1, incr("k", 5), 20, hit("15", 2), 30),
			op(1, get("k"), 40, hit("15", 2), 50),
		}, porcupine.Ok},
		{"incr applied twice", []porcupine.Operation{
			op(0, set("k", "10"), 0, ok(1), 10),
			op(1, incr("k", 5), 20, hit("15", 2), 30),
			op(1, get("k"), 40, hit("20", 2), 50),
		}, porcupine.Illegal},
		{"a delete is seen", []porcupine.Operation{
			op(0, set("k", "1"), 0, ok(1), 10),
			op(0, del("k"), 20, ok(0), 30),
			op(1, get("k"), 40, hit("1", 1), 50),
		}, porcupine.Illegal},
		{"keys are independent", []porcupine.Operation{
			op(0, set("a", "1"), 0, ok(1), 10),
			op(0, set("b", "2"), 20, ok(2), 30),
			op(1, get("a"), 40, hit("1", 1), 50),
			op(1, get("b"), 40, hit("2", 2), 50),
		}, porcupine.Ok},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.h, 10*time.Second).Result; got != tc.want {
				t.Fatalf("checker says %v, want %v", got, tc.want)
			}
		})
	}
}

// at is an op through gateway g.
func at(g int, in Input) Input { in.Gateway = g; return in }

func TestCachingModel(t *testing.T) {
	cases := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"a gateway may serve a version another gateway replaced", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("1", 1), 30),
			op(0, at(0, set("k", "2")), 40, ok(2), 50),
			op(1, at(1, get("k")), 60, hit("1", 1), 70),
		}, porcupine.Ok},
		{"a gateway reads its own writes", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(0, at(0, get("k")), 20, hit("1", 1), 30),
			op(0, at(0, set("k", "2")), 40, ok(2), 50),
			op(0, at(0, get("k")), 60, hit("1", 1), 70),
		}, porcupine.Illegal},
		{"a version no write made", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("9", 1), 30),
		}, porcupine.Illegal},
		{"a version with another token", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("1", 2), 30),
		}, porcupine.Illegal},
		{"a delete another gateway has not seen", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(0, at(0, del("k")), 20, ok(0), 30),
			op(1, at(1, get("k")), 40, hit("1", 1), 50),
			op(0, at(0, get("k")), 60, miss, 70),
		}, porcupine.Ok},
		{"CAS is checked against the backend, not a stale copy", []porcupine.Operation{
			op(0, at(0, set("k", "1")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("1", 1), 30),
			op(0, at(0, set("k", "2")), 40, ok(2), 50),
			op(1, at(1, cas("k", "3", 1)), 60, ok(3), 70),
		}, porcupine.Illegal},
		{"incr adds to the backend's value", []porcupine.Operation{
			op(0, at(0, set("k", "10")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("10", 1), 30),
			op(0, at(0, set("k", "20")), 40, ok(2), 50),
			op(1, at(1, incr("k", 1)), 60, hit("21", 3), 70),
			op(1, at(1, get("k")), 80, hit("21", 3), 90),
		}, porcupine.Ok},
		{"after its incr a gateway does not read the older copy", []porcupine.Operation{
			op(0, at(0, set("k", "10")), 0, ok(1), 10),
			op(1, at(1, get("k")), 20, hit("10", 1), 30),
			op(1, at(1, incr("k", 1)), 60, hit("11", 3), 70),
			op(1, at(1, get("k")), 80, hit("10", 1), 90),
		}, porcupine.Illegal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckCaching(tc.h, 10*time.Second).Result; got != tc.want {
				t.Fatalf("checker says %v, want %v", got, tc.want)
			}
		})
	}
}
