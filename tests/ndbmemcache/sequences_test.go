package ndbmemcache

import (
	"fmt"
	"strings"
	"time"
)

// A sequence is a list of steps with keys of its own. Each server runs it
// on a new connection after its keys were deleted through that server, so
// that the rows both servers share start the same for each.
type sequence struct {
	name string
	// only: the roles it runs under (nil: every role).
	only []string
	// flushesDB: the sequence sends flush_all, which deletes every row of
	// the container's table under a policy with flush_from_db (ndb-test:
	// default_role). It runs there only with NDBMEMCACHE_DIFF_FLUSH=1.
	flushesDB bool
	// corrupts: ndbmemcache's memory may be corrupted after the sequence,
	// so it is restarted before the next.
	corrupts bool
	// prefix is put before every key: a key prefix of the role's.
	prefix string
	// intKeys: the container's key column is an INT, so keys are numbers
	// (and the names given to keyer are digits).
	intKeys bool
	steps   func(k keyer) []step
}

// keyer makes the sequence's keys: the same on both servers (their replies
// hold them), distinct per run, sequence and name.
type keyer func(name string) string

// T is a text protocol step; B a binary one.
func T(name, text string) step           { return step{name: name, text: text} }
func B(name string, reqs ...binReq) step { return step{name: name, bin: reqs} }

func set(k, v string) string { return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v) }

// cmd is a command with a data block: "set", "add", ... with flags and exptime.
func cmd(verb, k string, flags, exptime int, v string) string {
	return fmt.Sprintf("%s %s %d %d %d\r\n%s\r\n", verb, k, flags, exptime, len(v), v)
}

func bset(op byte, k, v string, flags uint32) binReq {
	return binReq{op: op, key: k, extras: setExtras(flags, 0), value: []byte(v)}
}

func bkey(op byte, k string) binReq { return binReq{op: op, key: k} }

func bincr(op byte, k string, delta, initial uint64, exptime uint32) binReq {
	return binReq{op: op, key: k, extras: incrExtras(delta, initial, exptime)}
}

const maxUint64 = "18446744073709551615"

// sequences are the command sequences the two servers are compared on.
func sequences() []sequence {
	return []sequence{
		{name: "misses", steps: func(k keyer) []step {
			a, b, c := k("a"), k("b"), k("c")
			return []step{
				T("get", "get "+a+"\r\n"),
				T("gets", "gets "+a+"\r\n"),
				T("get three", "get "+a+" "+b+" "+c+"\r\n"),
				T("touch", "touch "+a+" 10\r\n"),
				T("delete", "delete "+a+"\r\n"),
				T("incr", "incr "+a+" 1\r\n"),
				T("decr", "decr "+a+" 1\r\n"),
				T("append", cmd("append", a, 0, 0, "x")),
				T("prepend", cmd("prepend", a, 0, 0, "x")),
				T("replace", cmd("replace", a, 0, 0, "x")),
				T("cas", "cas "+a+" 0 0 1 12345\r\nx\r\n"),
			}
		}},
		{name: "set-get", steps: func(k keyer) []step {
			a, b, c, d := k("a"), k("b"), k("c"), k("d")
			return []step{
				T("set", set(a, "hello")),
				T("get", "get "+a+"\r\n"),
				T("gets", "gets "+a+"\r\n"),
				T("set again", set(a, "world")),
				T("gets changed cas", "gets "+a+"\r\n"),
				T("set empty value with flags", cmd("set", a, 42, 0, "")),
				T("get empty", "get "+a+"\r\n"),
				T("set max flags", cmd("set", b, 4294967295, 0, "max")),
				T("get max flags", "get "+b+"\r\n"),
				T("set flags 2^32", "set "+c+" 4294967296 0 1\r\nx\r\n"),
				T("set negative flags", "set "+c+" -1 0 1\r\nx\r\n"),
				T("get two, one missing", "get "+a+" "+c+" "+b+"\r\n"),
				T("gets two", "gets "+b+" "+a+"\r\n"),
				T("set bad data chunk", "set "+a+" 0 0 3\r\nabcd\r\n"),
				T("get after bad chunk", "get "+a+"\r\n"),
				T("set non-numeric length", "set "+a+" 0 0 abc\r\nabc\r\n"),
				T("set binary bytes", cmd("set", d, 7, 0, "\x00\r\n\xff end")),
				T("get binary bytes", "get "+d+"\r\n"),
				T("set missing arguments", "set "+d+" 0 0\r\n"),
				T("get same key twice", "get "+b+" "+b+"\r\n"),
			}
		}},
		{name: "add-replace", steps: func(k keyer) []step {
			a, b := k("a"), k("b")
			return []step{
				T("add new", cmd("add", a, 1, 0, "first")),
				T("add existing", cmd("add", a, 2, 0, "second")),
				T("get", "get "+a+"\r\n"),
				T("replace missing", cmd("replace", b, 3, 0, "third")),
				T("get missing", "get "+b+"\r\n"),
				T("replace existing", cmd("replace", a, 4, 0, "fourth")),
				T("gets", "gets "+a+"\r\n"),
				T("add after delete", "delete "+a+"\r\n"+cmd("add", a, 5, 0, "fifth")),
				T("get added", "get "+a+"\r\n"),
			}
		}},
		{name: "append-prepend", steps: func(k keyer) []step {
			a, n := k("a"), k("n")
			return []step{
				T("set", cmd("set", a, 9, 0, "mid")),
				T("gets before", "gets "+a+"\r\n"),
				T("append", cmd("append", a, 0, 0, "-end")),
				T("prepend", cmd("prepend", a, 0, 0, "pre-")),
				T("gets after (flags kept, cas changed)", "gets "+a+"\r\n"),
				T("append flags ignored", cmd("append", a, 123, 0, "!")),
				T("get", "get "+a+"\r\n"),
				T("append empty", cmd("append", a, 0, 0, "")),
				T("get after empty append", "get "+a+"\r\n"),
				T("set number", set(n, "12")),
				T("append digit", cmd("append", n, 0, 0, "3")),
				T("prepend digit", cmd("prepend", n, 0, 0, "9")),
				T("get 9123", "get "+n+"\r\n"),
				T("incr appended number", "incr "+n+" 1\r\n"),
				T("get incremented", "get "+n+"\r\n"),
			}
		}},
		// ndbmemcache may crash at its last step (see README.md).
		{name: "prepend-after-incr", steps: func(k keyer) []step {
			n := k("n")
			return []step{
				T("set number", set(n, "12")),
				T("incr", "incr "+n+" 1\r\n"),
				T("get incremented", "get "+n+"\r\n"),
				T("prepend to the incremented number", cmd("prepend", n, 0, 0, "9")+"get "+n+"\r\n"),
			}
		}},
		{name: "cas", steps: func(k keyer) []step {
			a := k("a")
			return []step{
				T("cas missing", "cas "+a+" 0 0 1 1\r\nx\r\n"),
				T("set", set(a, "v1")),
				T("gets", "gets "+a+"\r\n"),
				T("cas good", "cas "+a+" 5 0 2 {cas:"+a+"}\r\nv2\r\n"),
				T("gets after good cas", "gets "+a+"\r\n"),
				T("cas stale", "cas "+a+" 0 0 2 {cas:"+a+"#0}\r\nv3\r\n"),
				T("get after stale cas", "get "+a+"\r\n"),
				T("cas zero", "cas "+a+" 0 0 2 0\r\nv4\r\n"),
				T("cas bad unique", "cas "+a+" 0 0 2 abc\r\nv5\r\n"),
				T("cas missing unique", "cas "+a+" 0 0 2\r\nv6\r\n"),
				T("gets again", "gets "+a+"\r\n"),
				T("cas good noreply", "cas "+a+" 0 0 2 {cas:"+a+"} noreply\r\nv7\r\n"),
				T("gets after noreply cas", "gets "+a+"\r\n"),
				T("incr changes cas", set(a, "5")+"gets "+a+"\r\nincr "+a+" 1\r\ngets "+a+"\r\n"),
				T("cas after incr with the old cas", "cas "+a+" 0 0 1 {cas:"+a+"#3}\r\nx\r\n"),
				T("delete then cas", "delete "+a+"\r\ncas "+a+" 0 0 1 {cas:"+a+"}\r\ny\r\n"),
			}
		}},
		{name: "incr-decr", steps: func(k keyer) []step {
			n := k("n")
			return []step{
				T("set 10", set(n, "10")),
				T("incr 5", "incr "+n+" 5\r\n"),
				T("decr 3", "decr "+n+" 3\r\n"),
				T("get 12", "get "+n+"\r\n"),
				T("gets after incr", "gets "+n+"\r\n"),
				T("decr below 0", "decr "+n+" 100\r\n"),
				T("get 0", "get "+n+"\r\n"),
				T("set 2^64-1", set(n, maxUint64)),
				T("incr wraps", "incr "+n+" 1\r\n"),
				T("get wrapped", "get "+n+"\r\n"),
				T("set 2^64-2", set(n, "18446744073709551614")),
				T("incr to 2^64-1", "incr "+n+" 1\r\n"),
				T("incr by 2^64-1", "incr "+n+" "+maxUint64+"\r\n"),
				T("set 100", set(n, "100")),
				T("decr to 99 (length shrinks)", "decr "+n+" 1\r\n"),
				T("get 99", "get "+n+"\r\n"),
				T("incr to 100 (length grows)", "incr "+n+" 1\r\n"),
				T("get 100", "get "+n+"\r\n"),
				T("set 007", set(n, "007")),
				T("incr 007", "incr "+n+" 1\r\n"),
				T("get 8", "get "+n+"\r\n"),
				T("incr delta 2^64 (too big)", "incr "+n+" 18446744073709551616\r\n"),
				T("incr delta negative", "incr "+n+" -1\r\n"),
				T("incr delta non-numeric", "incr "+n+" abc\r\n"),
				T("incr missing delta", "incr "+n+"\r\n"),
				T("incr noreply", "incr "+n+" 2 noreply\r\nget "+n+"\r\n"),
				T("set 2^64 (too big)", set(n, "18446744073709551616")),
				T("incr 2^64", "incr "+n+" 1\r\n"),
				T("set with spaces", set(n, " 5")),
				T("incr spaces", "incr "+n+" 1\r\n"),
			}
		}},
		{name: "incr-non-numeric", steps: func(k keyer) []step {
			n, e, m := k("n"), k("e"), k("m")
			return []step{
				T("set abc", set(n, "abc")),
				T("incr abc", "incr "+n+" 1\r\n"),
				T("decr abc", "decr "+n+" 1\r\n"),
				T("get abc", "get "+n+"\r\n"),
				T("set 12abc", set(n, "12abc")),
				T("incr 12abc", "incr "+n+" 1\r\n"),
				T("get 12abc", "get "+n+"\r\n"),
				T("set empty", set(e, "")),
				T("incr empty", "incr "+e+" 1\r\n"),
				T("get empty", "get "+e+"\r\n"),
				T("set -5", set(m, "-5")),
				T("decr -5", "decr "+m+" 1\r\n"),
				T("set 1.5", set(m, "1.5")),
				T("incr 1.5", "incr "+m+" 1\r\n"),
				T("get 1.5", "get "+m+"\r\n"),
			}
		}},
		{name: "delete", steps: func(k keyer) []step {
			a := k("a")
			return []step{
				T("delete missing", "delete "+a+"\r\n"),
				T("set", set(a, "x")),
				T("delete", "delete "+a+"\r\n"),
				T("get deleted", "get "+a+"\r\n"),
				T("delete again", "delete "+a+"\r\n"),
				T("delete with time 0", set(a, "x")+"delete "+a+" 0\r\n"),
				T("delete with time 10", set(a, "x")+"delete "+a+" 10\r\n"),
				T("get after delete with time", "get "+a+"\r\n"),
				T("delete noreply", set(a, "x")+"delete "+a+" noreply\r\nget "+a+"\r\n"),
				T("delete without key", "delete\r\n"),
			}
		}},
		{name: "noreply", steps: func(k keyer) []step {
			a, b := k("a"), k("b")
			return []step{
				T("set noreply", "set "+a+" 0 0 1 noreply\r\n1\r\nget "+a+"\r\n"),
				T("add noreply (exists)", "add "+a+" 0 0 1 noreply\r\n2\r\nget "+a+"\r\n"),
				T("replace noreply (missing)", "replace "+b+" 0 0 1 noreply\r\n3\r\nget "+b+"\r\n"),
				T("append noreply", "append "+a+" 0 0 1 noreply\r\n4\r\nget "+a+"\r\n"),
				T("prepend noreply", "prepend "+a+" 0 0 1 noreply\r\n5\r\nget "+a+"\r\n"),
				T("incr noreply", "incr "+a+" 10 noreply\r\nget "+a+"\r\n"),
				T("decr noreply", "decr "+a+" 1 noreply\r\nget "+a+"\r\n"),
				T("delete noreply", "delete "+a+" noreply\r\nget "+a+"\r\n"),
				T("incr missing noreply", "incr "+a+" 1 noreply\r\nget "+a+"\r\n"),
			}
		}},
		{name: "flags-expiry", steps: func(k keyer) []step {
			a, b, c, d, e, f := k("a"), k("b"), k("c"), k("d"), k("e"), k("f")
			return []step{
				T("set exptime 1", cmd("set", a, 7, 1, "short")),
				T("set exptime 1 too", cmd("set", c, 9, 1, "short")),
				T("set exptime 0", cmd("set", b, 8, 0, "long")),
				T("set exptime 100", cmd("set", d, 10, 100, "later")),
				T("set exptime -1 (expired at once)", cmd("set", e, 11, -1, "gone")),
				T("get at once", "get "+a+" "+b+" "+c+" "+d+" "+e+"\r\n"),
				T("set absolute exptime in the past", cmd("set", f, 12, int(time.Now().Unix())-100, "past")),
				T("get past", "get "+f+"\r\n"),
				{name: "get after 2.1 s", text: "get " + a + " " + b + " " + c + " " + d + " " + e + "\r\n", sleep: 2100 * time.Millisecond},
				T("add over expired", cmd("add", a, 13, 0, "again")),
				T("get re-added", "get "+a+"\r\n"),
				T("append expired", cmd("append", e, 0, 0, "x")),
				T("incr expired", "incr "+e+" 1\r\n"),
			}
		}},
		// touch has a sequence of its own: on an existing row of an NDB
		// table it may hang ndbgate (see README.md), and the steps after a
		// lost server are not compared.
		{name: "touch", steps: func(k keyer) []step {
			a, b, c := k("a"), k("b"), k("c")
			return []step{
				T("set three", cmd("set", a, 1, 0, "a")+cmd("set", b, 2, 1, "b")+cmd("set", c, 3, 0, "c")),
				T("gets before touch", "gets "+a+"\r\n"),
				T("touch to 1 s", "touch "+a+" 1\r\n"),
				T("gets after touch (cas kept?)", "gets "+a+"\r\n"),
				T("touch to 0 (never expires)", "touch "+b+" 0\r\n"),
				T("touch noreply", "touch "+c+" 1 noreply\r\nget "+c+"\r\n"),
				{name: "get after 2.1 s", text: "get " + a + " " + b + " " + c + "\r\n", sleep: 2100 * time.Millisecond},
				T("touch expired", "touch "+a+" 10\r\n"),
			}
		}},
		{name: "flush_all", flushesDB: true, steps: func(k keyer) []step {
			a, b := k("a"), k("b")
			return []step{
				T("set two", set(a, "1")+set(b, "2")),
				T("flush_all", "flush_all\r\n"),
				T("get after flush", "get "+a+" "+b+"\r\n"),
				T("set after flush", set(a, "3")),
				T("get set after flush", "get "+a+"\r\n"),
				T("flush_all noreply", "flush_all noreply\r\nget "+a+"\r\n"),
				T("flush_all 0", "flush_all 0\r\n"),
			}
		}},
		{name: "key-length", steps: func(k keyer) []step {
			k250 := pad(k("k250"), 250)
			k251 := pad(k("k251"), 251)
			return []step{
				T("set 250-byte key", set(k250, "ok")),
				T("get 250-byte key", "get "+k250+"\r\n"),
				T("delete 250-byte key", "delete "+k250+"\r\n"),
				T("get 251-byte key", "get "+k251+"\r\n"),
				T("gets 251-byte key", "gets "+k251+"\r\n"),
				T("set 251-byte key", set(k251, "no")),
				T("add 251-byte key", cmd("add", k251, 0, 0, "no")),
				T("delete 251-byte key", "delete "+k251+"\r\n"),
				T("incr 251-byte key", "incr "+k251+" 1\r\n"),
				T("touch 251-byte key", "touch "+k251+" 1\r\n"),
				T("get 250 and 251", "get "+k250+" "+k251+"\r\n"),
			}
		}},
		{name: "value-size", steps: func(k keyer) []step {
			a, b, c := k("a"), k("b"), k("c")
			return []step{
				T("set 13500 bytes", set(a, strings.Repeat("a", 13500))),
				T("get 13500 bytes", "get "+a+"\r\n"),
				T("set 13501 bytes", set(b, strings.Repeat("b", 13501))),
				T("get 13501 bytes", "get "+b+"\r\n"),
				T("set small", set(b, "small")),
				T("set 13501 bytes over it", set(b, strings.Repeat("b", 13501))),
				T("get after the refused set", "get "+b+"\r\n"),
				T("set 100000 bytes", set(c, strings.Repeat("c", 100000))),
				T("get 100000 bytes", "get "+c+"\r\n"),
			}
		}},
		// ndbmemcache may crash in these two, on an NDB prefix (see
		// README.md): it is restarted after each.
		{name: "value-over-1mb", corrupts: true, steps: func(k keyer) []step {
			d := k("d")
			return []step{
				T("set 1048576 bytes", set(d, strings.Repeat("d", 1048576))),
				T("get 1048576 bytes", "get "+d+"\r\n"),
				T("set 1048577 bytes", set(d, strings.Repeat("e", 1048577))),
				T("get over 1 MB", "get "+d+"\r\n"),
				T("set small", set(d, "small")),
				T("set 2 MB over it", set(d, strings.Repeat("f", 2<<20))),
				T("get after a failed large set", "get "+d+"\r\n"),
			}
		}},
		{name: "binary-over-1mb", corrupts: true, steps: func(k keyer) []step {
			b := k("b")
			return []step{
				B("set small", bset(opSet, b, "small", 0)),
				B("set 1048577 bytes", bset(opSet, b, strings.Repeat("b", 1048577), 0)),
				B("get after over 1 MB", bkey(opGet, b)),
			}
		}},
		// ndbmemcache writes past its row buffer here (see README.md): it
		// is restarted after this sequence.
		{name: "append-past-column", corrupts: true, steps: func(k keyer) []step {
			a := k("a")
			return []step{
				T("set 13500 bytes", set(a, strings.Repeat("a", 13500))),
				T("append past 13500", cmd("append", a, 0, 0, "zz")),
				T("get after append past 13500", "get "+a+"\r\n"),
			}
		}},
		{name: "errors", steps: func(k keyer) []step {
			a := k("a")
			return []step{
				T("unknown command", "bogus "+a+"\r\n"),
				T("get without key", "get\r\n"),
				T("empty line", "\r\n"),
				T("set without length", "set "+a+" 0 0\r\n"),
				T("touch without time", "touch "+a+"\r\n"),
				T("incr without arguments", "incr\r\n"),
				T("upper-case command", "GET "+a+"\r\n"),
				T("get after errors", "get "+a+"\r\n"),
			}
		}},
		{name: "text-pipelined", steps: func(k keyer) []step {
			a, b, c, n := k("a"), k("b"), k("c"), k("n")
			return []step{
				T("six commands", set(a, "alpha")+cmd("add", b, 3, 0, "beta")+"get "+a+" "+b+"\r\n"+
					cmd("add", a, 0, 0, "again")+"gets "+a+"\r\n"+"delete "+b+"\r\n"),
				T("counter", set(n, "1")+"incr "+n+" 1\r\nincr "+n+" 1\r\ndecr "+n+" 5\r\nget "+n+"\r\n"),
				T("misses and hits", "get "+c+"\r\nget "+a+"\r\nget "+c+" "+a+"\r\ndelete "+c+"\r\n"+cmd("replace", c, 0, 0, "x")+cmd("append", a, 0, 0, "!")+"get "+a+"\r\n"),
				T("noreply mixed", "set "+c+" 0 0 1 noreply\r\nz\r\nget "+c+"\r\ndelete "+c+" noreply\r\nget "+c+"\r\n"),
				T("error inside a pipeline", "get "+a+"\r\nbogus\r\nget "+a+"\r\n"),
				T("cas in a pipeline", "gets "+a+"\r\ncas "+a+" 0 0 1 {cas:"+a+"}\r\nX\r\nget "+a+"\r\n"),
			}
		}},
		// default_role: ndb_memcache_metadata.sql gives it the prefix mc:
		// (memcache-only); with ndb-create-tables' demo rows the keys fall
		// under the role's "" prefix instead.
		// The role of policies.sql: the policies and the container no demo
		// role uses. Keys are written through "" (ndb-test) and reached
		// through the other prefixes, which strip theirs.
		{name: "policy-read-only", only: []string{policiesRole}, steps: func(k keyer) []step {
			a, b := k("a"), k("b")
			return []step{
				T("set via catch-all", set(a, "v")),
				T("get via ro:", "get ro:"+a+"\r\n"),
				T("set via ro:", set("ro:"+a, "x")),
				T("add via ro:", cmd("add", "ro:"+b, 0, 0, "x")),
				T("append via ro:", cmd("append", "ro:"+a, 0, 0, "x")),
				T("incr via ro:", "incr ro:"+a+" 1\r\n"),
				T("delete via ro:", "delete ro:"+a+"\r\n"),
				T("get after the refusals", "get "+a+" "+b+"\r\n"),
			}
		}},
		{name: "policy-local-deletes", only: []string{policiesRole}, steps: func(k keyer) []step {
			a := k("a")
			return []step{
				T("set via cld:", set("cld:"+a, "v")),
				T("get via cld:", "get cld:"+a+"\r\n"),
				T("delete via cld: (the cache only)", "delete cld:"+a+"\r\n"),
				T("get via catch-all", "get "+a+"\r\n"),
				T("get via cld: again", "get cld:"+a+"\r\n"),
				T("delete via catch-all", "delete "+a+"\r\n"),
			}
		}},
		{name: "multi-column", only: []string{policiesRole}, steps: func(k keyer) []step {
			key := "p:" + k("r") + "\t42"
			return []step{
				T("set", cmd("set", key, 5, 0, "Ada\tLondon")),
				T("get (constant flags)", "get "+key+"\r\n"),
				T("replace", cmd("replace", key, 0, 0, "Ada\tParis")),
				T("get again", "get "+key+"\r\n"),
				T("add existing", cmd("add", key, 0, 0, "Bo\tRome")),
				T("delete", "delete "+key+"\r\n"),
				T("get deleted", "get "+key+"\r\n"),
			}
		}},
		{name: "mc-prefix", only: []string{"default_role"}, prefix: "mc:", steps: func(k keyer) []step {
			a, n := k("a"), k("n")
			return []step{
				T("set", set(a, "cached")),
				T("get", "get "+a+"\r\n"),
				T("gets", "gets "+a+"\r\n"),
				T("append", cmd("append", a, 0, 0, "!")+"get "+a+"\r\n"),
				T("incr", set(n, "41")+"incr "+n+" 1\r\nget "+n+"\r\n"),
				T("incr non-numeric", "incr "+a+" 1\r\n"),
				T("set 13501 bytes", set(a, strings.Repeat("m", 13501))+"get "+a+"\r\n"),
				T("delete", "delete "+a+"\r\nget "+a+"\r\n"),
			}
		}},
		// demo_tabs under "t:": an INT key, three value columns joined by
		// tabs, and expiry in `expire_time TIMESTAMP NULL`.
		{name: "tabs-expiry", only: []string{"default_role", "db-only", "ndb-caching"}, prefix: "t:", intKeys: true, steps: func(k keyer) []step {
			a, b, c, d, e, f := k("1"), k("2"), k("3"), k("4"), k("5"), k("6")
			return []step{
				T("set exptime 0", cmd("set", a, 5, 0, "x\ty\t3")),
				T("get", "get "+a+"\r\n"),
				T("set exptime 1", cmd("set", b, 6, 1, "short\tlived\t1")),
				T("set exptime 100", cmd("set", c, 7, 100, "later\tstill\t2")),
				T("set exptime -1 (expired at once)", cmd("set", d, 8, -1, "gone\tnow\t4")),
				T("set absolute exptime in the past", cmd("set", e, 9, int(time.Now().Unix())-100, "past\ttime\t5")),
				T("get at once", "get "+a+" "+b+" "+c+" "+d+" "+e+"\r\n"),
				{name: "get after 2.1 s", text: "get " + a + " " + b + " " + c + " " + d + " " + e + "\r\n", sleep: 2100 * time.Millisecond},
				T("add over expired", cmd("add", b, 10, 0, "back\tagain\t6")),
				T("get re-added", "get "+b+"\r\n"),
				T("replace expired", cmd("replace", d, 0, 0, "no\tsuch\t7")),
				T("set absolute exptime in an hour", cmd("set", f, 11, int(time.Now().Unix())+3600, "hour\tfrom\t8")+"get "+f+"\r\n"),
				T("delete", "delete "+a+"\r\nget "+a+"\r\n"),
			}
		}},
		// demo_ext under "b:": values over string_value's 2,000 bytes go in
		// external_values' parts of 13,950 bytes.
		{name: "large-values", only: []string{"default_role", "db-only", "ndb-caching"}, prefix: "b:", steps: func(k keyer) []step {
			a, b, n := k("a"), k("b"), k("n")
			v := func(c string, n int) string { return strings.Repeat(c, n) }
			return []step{
				T("set 2000 bytes, in the row", set(a, v("r", 2000))+"get "+a+"\r\n"),
				T("set 2001 bytes, in a part", set(a, v("p", 2001))+"get "+a+"\r\n"),
				T("set 30000 bytes, three parts", cmd("set", a, 7, 0, v("t", 30000))+"gets "+a+"\r\n"),
				T("replace with 100000 bytes", cmd("replace", a, 8, 0, v("h", 100000))+"get "+a+"\r\n"),
				T("append across a part", cmd("append", a, 0, 0, v("A", 13000))+"get "+a+"\r\n"),
				T("prepend", cmd("prepend", a, 0, 0, "<")+"get "+a+"\r\n"),
				T("gets", "gets "+a+"\r\n"),
				T("cas good", "cas "+a+" 1 0 40000 {cas:"+a+"}\r\n"+v("c", 40000)+"\r\nget "+a+"\r\n"),
				T("cas stale", "cas "+a+" 1 0 3 {cas:"+a+"#0}\r\nold\r\n"),
				T("incr of a large value", "incr "+a+" 1\r\n"),
				T("back into the row", set(a, "short")+"get "+a+"\r\n"),
				T("append out of the row", cmd("append", a, 0, 0, v("o", 5000))+"get "+a+"\r\n"),
				T("add existing", cmd("add", a, 0, 0, v("x", 20000))),
				T("add new, large", cmd("add", b, 2, 0, v("y", 20000))+"get "+a+" "+b+"\r\n"),
				T("delete", "delete "+a+"\r\nget "+a+"\r\ndelete "+a+"\r\n"),
				T("pipelined", set(n, v("1", 3000))+set(b, v("2", 60000))+"get "+n+" "+b+"\r\ndelete "+b+"\r\nget "+b+"\r\n"),
			}
		}},
		// policies.sql's demo_ext_exp under "bx:": large values, and expiry
		// in `expire_time INT UNSIGNED`, which ndbgate keeps itself.
		{name: "large-values-expiry", only: []string{policiesRole}, prefix: "bx:", steps: func(k keyer) []step {
			a, b, c, d, e := k("a"), k("b"), k("c"), k("d"), k("e")
			v := func(c string, n int) string { return strings.Repeat(c, n) }
			return []step{
				T("set large, exptime 0", cmd("set", a, 1, 0, v("a", 20000))),
				T("set large, exptime 1", cmd("set", b, 2, 1, v("b", 30000))),
				T("set large, exptime 100", cmd("set", c, 3, 100, v("c", 16000))),
				T("set large, exptime -1 (expired at once)", cmd("set", d, 4, -1, v("d", 14000))),
				T("set short, exptime 1", cmd("set", e, 5, 1, "short")),
				T("get at once", "get "+a+" "+b+" "+c+" "+d+" "+e+"\r\n"),
				{name: "get after 2.1 s", text: "get " + a + " " + b + " " + c + " " + d + " " + e + "\r\n", sleep: 2100 * time.Millisecond},
				T("replace expired", cmd("replace", b, 0, 0, v("x", 3000))),
				T("append to expired", cmd("append", b, 0, 0, "x")),
				T("add over expired", cmd("add", b, 6, 0, v("B", 25000))+"get "+b+"\r\n"),
				T("set over expired", cmd("set", e, 7, 0, v("E", 4000))+"get "+e+"\r\n"),
				T("delete expired", "delete "+d+"\r\nget "+d+"\r\n"),
				T("touch live", "touch "+a+" 1\r\n"),
				{name: "get after touch and 2.1 s", text: "get " + a + " " + c + "\r\n", sleep: 2100 * time.Millisecond},
				T("delete live", "delete "+c+"\r\nget "+c+"\r\n"),
			}
		}},
		{name: "large-values-binary", only: []string{"default_role", "db-only", "ndb-caching"}, prefix: "b:", steps: func(k keyer) []step {
			a := k("a")
			v := func(c string, n int) string { return strings.Repeat(c, n) }
			return []step{
				B("binary set and get", bset(opSet, a, v("B", 50000), 3), bkey(opGet, a)),
				B("binary append", binReq{op: opAppend, key: a, value: []byte(v("C", 9000))}, bkey(opGet, a)),
				B("binary delete", bkey(opDelete, a), bkey(opGet, a)),
			}
		}},
		{name: "binary-basics", steps: func(k keyer) []step {
			a, b, c, d := k("a"), k("b"), k("c"), k("d")
			return []step{
				B("get miss", bkey(opGet, a)),
				B("getk miss", bkey(opGetk, a)),
				B("set", bset(opSet, a, "hello", 0xdeadbeef)),
				B("get", bkey(opGet, a)),
				B("getk", bkey(opGetk, a)),
				B("add existing", bset(opAdd, a, "nope", 0)),
				B("add new", bset(opAdd, b, "new", 1)),
				B("replace missing", bset(opReplace, c, "x", 0)),
				B("replace existing", bset(opReplace, b, "newer", 2)),
				B("get replaced", bkey(opGet, b)),
				B("set with good cas", binReq{op: opSet, key: b, extras: setExtras(3, 0), value: []byte("cas"), cas: b}),
				B("set with stale cas", binReq{op: opSet, key: b, extras: setExtras(4, 0), value: []byte("stale"), cas: b + "#0"}),
				B("set missing with cas", binReq{op: opSet, key: c, extras: setExtras(4, 0), value: []byte("x"), cas: "12345"}),
				B("append", binReq{op: opAppend, key: b, value: []byte("-app")}),
				B("prepend", binReq{op: opPrepend, key: b, value: []byte("pre-")}),
				B("get appended", bkey(opGet, b)),
				B("delete", bkey(opDelete, b)),
				B("delete missing", bkey(opDelete, b)),
				B("get deleted", bkey(opGet, b)),
				B("incr creates with initial", bincr(opIncr, c, 10, 5, 0)),
				B("incr", bincr(opIncr, c, 10, 5, 0)),
				B("decr below 0", bincr(opDecr, c, 100, 0, 0)),
				B("incr missing, no create", bincr(opIncr, d, 1, 0, 0xffffffff)),
				B("incr wraps", bset(opSet, d, maxUint64, 0), bincr(opIncr, d, 1, 0, 0xffffffff)),
				B("get incremented", bkey(opGet, c)),
				B("incr non-numeric", bincr(opIncr, a, 1, 0, 0xffffffff)),
				B("getq hit", bkey(opGetq, a)),
				B("getq miss", bkey(opGetq, b)),
				B("noop", bkey(opNoop, "")),
				B("touch", binReq{op: opTouch, key: a, extras: setExtras(0, 0)[4:]}),
				B("delete with stale cas", binReq{op: opDelete, key: a, cas: "1"}),
				B("get after stale delete", bkey(opGet, a)),
			}
		}},
		{name: "binary-pipelined", steps: func(k keyer) []step {
			a, b, c, d := k("a"), k("b"), k("c"), k("d")
			return []step{
				B("set get add delete", bset(opSet, a, "one", 1), bkey(opGet, a), bset(opAdd, a, "two", 2), bset(opAdd, b, "three", 3),
					bkey(opGetk, b), bkey(opDelete, b), bkey(opGet, b), bkey(opNoop, "")),
				B("getq hits and misses then noop", bkey(opGetq, a), bkey(opGetq, b), bkey(opGetkq, a), bkey(opGetkq, c), bkey(opNoop, "")),
				B("quiet writes", bset(opSetq, c, "quiet", 4), bset(opAddq, c, "dup", 5), bkey(opDeleteq, d), bkey(opGet, c), bkey(opNoop, "")),
				B("counters", bincr(opIncr, d, 1, 100, 0), bincr(opIncr, d, 1, 100, 0), bincr(opDecr, d, 50, 0, 0), bkey(opGet, d),
					bincr(opIncrq, d, 1, 0, 0), bkey(opGet, d)),
				B("many gets", bkey(opGetq, a), bkey(opGetq, c), bkey(opGetq, d), bkey(opGetq, b), bkey(opGetk, a)),
			}
		}},
		{name: "binary-limits", steps: func(k keyer) []step {
			a := k("a")
			k251 := pad(k("k251"), 251)
			return []step{
				B("get 251-byte key", bkey(opGet, k251)),
				B("set 251-byte key", bset(opSet, k251, "x", 0)),
				B("set 13501 bytes", bset(opSet, a, strings.Repeat("a", 13501), 0)),
				B("get after 13501", bkey(opGet, a)),
				B("unknown opcode", binReq{op: 0x7f, key: a}),
				B("get after unknown opcode", bkey(opGet, a)),
			}
		}},
	}
}

// pad lengthens key with x to n bytes.
func pad(key string, n int) string {
	if len(key) >= n {
		return key[:n]
	}
	return key + strings.Repeat("x", n-len(key))
}
