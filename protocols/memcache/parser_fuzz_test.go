package memcache

import (
	"bytes"
	"testing"
)

// FuzzParse checks the parser's invariants on arbitrary input: it never panics,
// never consumes more than it was given, only asks for more when no newline can
// complete the command, refuses only with a reply memcached sends, and parses a
// command the same way when it arrives in two pieces.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases() {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	f.Add([]byte("set k 0 0 5\r\nhel\r\n\r\nget k\r\n"), uint16(3))
	f.Add([]byte("gat 0 a b c\r\ngats 1 d\r\n"), uint16(10))
	f.Add([]byte("cas k 0 0 1 18446744073709551615 noreply\r\nx\r\n"), uint16(40))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		// Half the runs bound the values still arriving (MaxBuffered).
		p := Parser{MaxItemSize: 1 << 16, MaxBuffered: int(cut%2) * int(cut%512)}
		var cmd Command
		off := 0
		for steps := 0; off < len(in) && steps < 1000; steps++ {
			res := p.Parse(in[off:], &cmd)
			if res.N < 0 || res.N > len(in)-off {
				t.Fatalf("consumed %d of %d", res.N, len(in)-off)
			}
			switch res.Status {
			case StatusNeedMore:
				if res.N != 0 {
					t.Fatalf("need-more consumed %d", res.N)
				}
				if res.Need != 0 && (res.Need <= len(in)-off || p.MaxBuffered > 0 && res.Need > p.MaxBuffered) {
					t.Fatalf("need-more for %d bytes with %d here, %d allowed", res.Need, len(in)-off, p.MaxBuffered)
				}
				return
			case StatusOK:
				if res.N == 0 {
					t.Fatal("ok without progress")
				}
				checkCommand(t, &cmd)
				checkResume(t, in[off:], &cmd, res, int(cut))
				// Same command split in two: the first piece must not parse to
				// anything else.
				whole := in[off : off+res.N]
				c := int(cut) % (len(whole) + 1)
				p2 := Parser{MaxItemSize: p.MaxItemSize, MaxBuffered: p.MaxBuffered}
				var cmd2 Command
				if r2 := p2.Parse(whole[:c], &cmd2); c < len(whole) && r2.Status == StatusOK && r2.N != c {
					t.Fatalf("prefix of %d parsed as %d bytes", c, r2.N)
				}
			case StatusError:
				if res.N == 0 && !res.Close {
					t.Fatal("error without progress")
				}
				if res.Reply != nil && !knownReply(res.Reply) {
					t.Fatalf("unknown reply %q", res.Reply)
				}
				if res.Close {
					return
				}
			}
			off += res.N + res.Swallow
		}
	})
}

// checkResume: a retrieval parsed again from one of its keys (ParseFrom at
// KeySkip), a limit of keys at a time, gives the keys from that one on, in
// order, with the same line length and arguments.
func checkResume(t *testing.T, in []byte, cmd *Command, res Result, cut int) {
	if cmd.Kind != CmdGet && cmd.Kind != CmdGets && cmd.Kind != CmdGat && cmd.Kind != CmdGats || len(cmd.Keys) < 2 {
		return
	}
	want := make([]string, 0, len(cmd.Keys))
	for _, k := range cmd.Keys {
		want = append(want, string(k))
	}
	i := 1 + cut%(len(cmd.Keys)-1)
	at, limit := Resume{Line: res.N, Skip: KeySkip(cmd.Keys, i)}, 1+cut%3
	var p Parser
	var again Command
	for at.Skip > 0 {
		r := p.ParseFrom(in, at, limit, &again)
		if r.Status != StatusOK || r.N != res.N || again.Kind != cmd.Kind || again.Exptime != cmd.Exptime ||
			len(again.Keys) == 0 || len(again.Keys) > limit || i+len(again.Keys) > len(want) {
			t.Fatalf("resumed at key %d (%+v): %+v, %d keys; whole: %+v, %d keys", i, at, r, len(again.Keys), res, len(want))
		}
		for _, k := range again.Keys {
			if string(k) != want[i] {
				t.Fatalf("resumed key %d is %q, want %q", i, k, want[i])
			}
			i++
		}
		at.Skip = again.Next
	}
	if i != len(want) {
		t.Fatalf("resumed parses ended at key %d of %d", i, len(want))
	}
}

func checkCommand(t *testing.T, cmd *Command) {
	if cmd.Kind == CmdNone || cmd.Kind >= numCommandKinds {
		t.Fatalf("bad kind %d", cmd.Kind)
	}
	for _, k := range cmd.Keys {
		if cmd.Meta.KeyB64 {
			if len(k) == 0 || len(k) > KeyMaxLength {
				t.Fatalf("binary key of %d bytes accepted", len(k))
			}
			continue
		}
		if !validKey(k) {
			t.Fatalf("invalid key %q accepted", k)
		}
	}
	if cmd.Kind.IsStorage() && len(cmd.Keys) != 1 {
		t.Fatalf("%v with %d keys", cmd.Kind, len(cmd.Keys))
	}
	if len(cmd.Data) > 1<<16 {
		t.Fatalf("value of %d bytes over the limit", len(cmd.Data))
	}
}

func knownReply(r []byte) bool {
	for _, k := range [][]byte{replyError, replyBadFormat, replyBadDataChunk, replyDeleteUsage,
		replyInvalidDelta, replyInvalidExptime, replyTooLarge, replyOutOfMemory,
		replyFlagsTooLongMg, replyFlagsTooLong, replyDuplicateFlag, replyInvalidOrDupFlag, replyInvalidFlag,
		replyBadToken, replyKeyDecode, replyMTokenLength, replyBadInitial, replyBadDelta, replyOpaqueTooLong,
		replyBadMsMode, replyBadMaMode} {
		if bytes.Equal(r, k) {
			return true
		}
	}
	return false
}

// FuzzParseMeta holds the meta commands to FuzzParse's invariants, plus: a
// refused meta command always gets one of memcached's replies, and quiet never
// hides an error.
func FuzzParseMeta(f *testing.F) {
	for _, tc := range metaCases() {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	f.Add([]byte("mg a v q\r\nmg b v q k O1\r\nmn\r\n"), uint16(7))
	f.Add([]byte("ms Zm9v 3 b MA N10 I C1\r\nabc\r\nmd Zm9v b I T0 x\r\n"), uint16(20))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		p := Parser{MaxItemSize: 1 << 16}
		var cmd Command
		off := 0
		for steps := 0; off < len(in) && steps < 1000; steps++ {
			res := p.Parse(in[off:], &cmd)
			if res.N < 0 || res.N > len(in)-off {
				t.Fatalf("consumed %d of %d", res.N, len(in)-off)
			}
			switch res.Status {
			case StatusNeedMore:
				return
			case StatusOK:
				checkCommand(t, &cmd)
				if cmd.Kind.IsMeta() && cmd.NoReply {
					t.Fatal("meta command with noreply")
				}
				whole := in[off : off+res.N]
				c := int(cut) % (len(whole) + 1)
				p2 := Parser{MaxItemSize: p.MaxItemSize, MaxBuffered: p.MaxBuffered}
				var cmd2 Command
				if r2 := p2.Parse(whole[:c], &cmd2); c < len(whole) && r2.Status == StatusOK && r2.N != c {
					t.Fatalf("prefix of %d parsed as %d bytes", c, r2.N)
				}
			case StatusError:
				if res.N == 0 && !res.Close {
					t.Fatal("error without progress")
				}
				if res.Reply != nil && !knownReply(res.Reply) {
					t.Fatalf("unknown reply %q", res.Reply)
				}
				if res.Close {
					return
				}
			}
			off += res.N + res.Swallow
		}
	})
}
