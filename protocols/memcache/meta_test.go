package memcache

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// whole stands for "the whole input less any swallowed data block".
const whole = -1

type metaCase struct {
	name  string
	in    string
	kind  CommandKind
	key   string // decoded
	data  string
	check func(t *testing.T, m *MetaFlags, cmd *Command)
	res   Result
}

// metaCases follow memcached's proto_text.c: per flag, per error string.
func metaCases() []metaCase {
	long := strings.Repeat("k", 251)
	flags17 := strings.Repeat(" k", 17)
	return []metaCase{
		{name: "mg bare", in: "mg foo\r\n", kind: CmdMetaGet, key: "foo", res: okRes(whole)},
		{name: "mg flags", in: "mg foo v c f k s t h l O123 q u\r\n", kind: CmdMetaGet, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, cmd *Command) {
				for _, c := range []byte("vcfkstOhlqu") {
					assert.True(t, m.On(c), "flag %c", c)
				}
				assert.Equal(t, "v c f k s t h l O123 q u", string(m.Tokens))
				assert.True(t, cmd.Quiet)
			}},
		{name: "mg tokens", in: "mg foo T30 N-1 R5 E99\r\n", kind: CmdMetaGet, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, _ *Command) {
				assert.Equal(t, int64(30), m.TTL)
				assert.Equal(t, int64(-1), m.Vivify)
				assert.Equal(t, int64(5), m.Recache)
				assert.Equal(t, uint64(99), m.NewCas)
			}},
		{name: "mg base64 key", in: "mg Zm9v b v\r\n", kind: CmdMetaGet, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, _ *Command) {
				assert.True(t, m.KeyB64)
				assert.Equal(t, "Zm9v", string(m.RawKey))
			}},
		{name: "mg binary key", in: "mg AAEC b\r\n", kind: CmdMetaGet, key: "\x00\x01\x02", res: okRes(whole)},
		{name: "mg no key", in: "mg\r\n", res: errRes(whole, replyError)},
		{name: "mg long key", in: "mg " + long + " v\r\n", res: errRes(whole, replyBadFormat)},
		{name: "mg duplicate", in: "mg foo v v\r\n", res: errRes(whole, replyDuplicateFlag)},
		{name: "mg unknown", in: "mg foo v z\r\n", res: errRes(whole, replyInvalidFlag), key: "foo"},
		{name: "mg non-letter", in: "mg foo 1\r\n", res: errRes(whole, replyInvalidFlag)},
		{name: "mg bad ttl", in: "mg foo Tx\r\n", res: errRes(whole, replyBadToken), key: "foo"},
		{name: "mg empty ttl", in: "mg foo T\r\n", res: errRes(whole, replyBadToken), key: "foo"},
		{name: "mg bad base64", in: "mg foo! b\r\n", res: errRes(whole, replyKeyDecode), key: "foo!"},
		{name: "mg opaque 32", in: "mg foo O" + strings.Repeat("x", 31) + "\r\n", kind: CmdMetaGet, key: "foo", res: okRes(whole)},
		{name: "mg opaque too long", in: "mg foo O" + strings.Repeat("x", 32) + "\r\n", res: errRes(whole, replyOpaqueTooLong), key: "foo"},
		{name: "mg too many flags", in: "mg foo" + flags17 + " v\r\n", res: errRes(whole, replyFlagsTooLongMg)},
		{name: "mg control key", in: "mg f\x01o v\r\n", res: errRes(whole, replyBadFormat), key: "f\x01o"},

		{name: "ms", in: "ms foo 2 T10 F7 c\r\nhi\r\n", kind: CmdMetaSet, key: "foo", data: "hi", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, cmd *Command) {
				assert.Equal(t, uint32(7), cmd.Flags)
				assert.Equal(t, int64(10), cmd.Exptime)
				assert.Equal(t, "T10 F7 c", string(m.Tokens))
			}},
		{name: "ms no flags", in: "ms foo 0\r\n\r\n", kind: CmdMetaSet, key: "foo", res: okRes(whole)},
		{name: "ms modes", in: "ms foo 1 MA C5 I N9 E6 q\r\nx\r\n", kind: CmdMetaSet, key: "foo", data: "x", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, cmd *Command) {
				assert.Equal(t, byte('A'), m.Mode)
				assert.Equal(t, uint64(5), m.CompareCas)
				assert.Equal(t, uint64(6), m.NewCas)
				assert.True(t, m.On('I'))
				assert.True(t, cmd.Quiet)
			}},
		{name: "ms no length", in: "ms foo\r\n", res: errRes(whole, replyBadFormat)},
		{name: "ms bad length", in: "ms foo x\r\n", res: errRes(whole, replyBadFormat)},
		{name: "ms negative length", in: "ms foo -1\r\n", res: errRes(whole, replyBadFormat)},
		{name: "ms bad mode", in: "ms foo 2 MX\r\nhi\r\n", key: "foo", res: Result{Status: StatusError, N: whole, Reply: replyBadMsMode, Swallow: 4}},
		{name: "ms long mode", in: "ms foo 2 MAA\r\nhi\r\n", key: "foo", res: Result{Status: StatusError, N: whole, Reply: replyMTokenLength, Swallow: 4}},
		{name: "ms bad flags token", in: "ms foo 2 Fx\r\nhi\r\n", key: "foo", res: Result{Status: StatusError, N: whole, Reply: replyBadFormat, Swallow: 4}},
		{name: "ms duplicate", in: "ms foo 2 c c\r\nhi\r\n", res: Result{Status: StatusError, N: whole, Reply: replyDuplicateFlag, Swallow: 4}},
		{name: "ms bad chunk", in: "ms foo 2\r\nhiX\r\n", key: "foo", res: errRes(14, replyBadDataChunk)}, // the "\n" left over is the next (empty) line
		{name: "ms absurd length", in: "ms foo 2147483646\r\n", key: "foo", res: errRes(19, replyBadFormat)},
		{name: "ms too large", in: "ms foo 2000000\r\n", key: "foo", res: Result{Status: StatusError, N: whole, Reply: replyTooLarge, Swallow: 2000002, TooLarge: true}},
		{name: "ms partial", in: "ms foo 5\r\nhel", res: Result{Status: StatusNeedMore}},

		{name: "md", in: "md foo q I T30 C9 x k O1\r\n", kind: CmdMetaDelete, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, _ *Command) {
				assert.Equal(t, uint64(9), m.CompareCas)
				assert.Equal(t, int64(30), m.TTL)
				assert.True(t, m.On('x'))
			}},
		{name: "md duplicate", in: "md foo q q\r\n", res: errRes(whole, replyInvalidOrDupFlag)},
		{name: "md unknown", in: "md foo z\r\n", res: errRes(whole, replyInvalidOrDupFlag)},
		{name: "md too many", in: "md foo" + flags17 + " v\r\n", res: errRes(whole, replyFlagsTooLong)},

		{name: "ma", in: "ma foo N0 J10 D5 MD T9 v t c\r\n", kind: CmdMetaArithmetic, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, _ *Command) {
				assert.Equal(t, uint64(10), m.Initial)
				assert.Equal(t, uint64(5), m.Delta)
				assert.Equal(t, byte('D'), m.Mode)
			}},
		{name: "ma default delta", in: "ma foo\r\n", kind: CmdMetaArithmetic, key: "foo", res: okRes(whole),
			check: func(t *testing.T, m *MetaFlags, _ *Command) { assert.Equal(t, uint64(1), m.Delta) }},
		{name: "ma bad mode", in: "ma foo MX\r\n", key: "foo", res: errRes(whole, replyBadMaMode)},
		{name: "ma bad delta", in: "ma foo D-1\r\n", key: "foo", res: errRes(whole, replyInvalidOrDupFlag)},
		{name: "ma bad initial", in: "ma foo N0 Jx\r\n", key: "foo", res: errRes(whole, replyInvalidOrDupFlag)},

		{name: "mn", in: "mn\r\n", kind: CmdMetaNoop, res: okRes(whole)},
		{name: "me", in: "me foo\r\n", kind: CmdMetaDebug, key: "foo", res: okRes(whole)},
		{name: "me b", in: "me Zm9v b\r\n", kind: CmdMetaDebug, key: "foo", res: okRes(whole)},
		{name: "me no key", in: "me\r\n", res: errRes(whole, replyBadFormat)},
	}
}

func checkMeta(t *testing.T, tc metaCase, cmd *Command, res Result) {
	t.Helper()
	assert.Equal(t, tc.res.Status, res.Status, "status")
	wantN := tc.res.N
	if wantN == whole {
		wantN = len(tc.in) - tc.res.Swallow
		if tc.res.TooLarge {
			wantN = len(tc.in)
		}
	}
	if res.Status != StatusNeedMore {
		assert.Equal(t, wantN, res.N, "consumed")
	}
	assert.Equal(t, string(tc.res.Reply), string(res.Reply), "reply")
	assert.Equal(t, tc.res.Swallow, res.Swallow, "swallow")
	assert.Equal(t, tc.res.TooLarge, res.TooLarge, "too large")
	if res.Status != StatusOK {
		return
	}
	assert.Equal(t, tc.kind, cmd.Kind)
	if tc.key != "" {
		require.Len(t, cmd.Keys, 1)
		assert.Equal(t, tc.key, string(cmd.Keys[0]))
	}
	assert.Equal(t, tc.data, string(cmd.Data))
	assert.False(t, cmd.NoReply, "meta commands answer errors even when quiet")
	if tc.check != nil {
		tc.check(t, &cmd.Meta, cmd)
	}
}

func TestParseMetaTable(t *testing.T) {
	for _, tc := range metaCases() {
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			var cmd Command
			checkMeta(t, tc, &cmd, p.Parse([]byte(tc.in), &cmd))
		})
	}
}

func TestParseMetaOneByteAtATime(t *testing.T) {
	for _, tc := range metaCases() {
		if tc.res.Status != StatusOK {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			var cmd Command
			in := []byte(tc.in)
			for i := 0; i < len(in); i++ {
				require.Equal(t, StatusNeedMore, p.Parse(in[:i], &cmd).Status, "prefix of %d bytes", i)
			}
			checkMeta(t, tc, &cmd, p.Parse(in, &cmd))
		})
	}
}

func TestParseMetaDoesNotAllocate(t *testing.T) {
	in := []byte("mg Zm9vYmFy b v c f k t O123 q\r\nms foo 2 T10 F7 c MS\r\nhi\r\nma n N0 J1 D2 v\r\nmn\r\n")
	var p Parser
	var cmd Command
	parseAll := func() {
		for off := 0; off < len(in); {
			res := p.Parse(in[off:], &cmd)
			if res.Status != StatusOK {
				t.Fatalf("status %v at %d", res.Status, off)
			}
			off += res.N
		}
	}
	parseAll()
	assert.Zero(t, testing.AllocsPerRun(100, parseAll))
}

func TestMetaTokenHelpers(t *testing.T) {
	var got []string
	forEachToken([]byte("  v  O12 k "), func(tk []byte) { got = append(got, string(tk)) })
	assert.Equal(t, []string{"v", "O12", "k"}, got)
	arg, ok := flagArg([]byte("v C123 k"), 'C')
	assert.True(t, ok)
	assert.Equal(t, "123", string(arg))
	assert.False(t, hasFlag([]byte("v k"), 'q'))
	assert.Equal(t, "mg", CmdMetaGet.String())
	assert.Equal(t, "me", CmdMetaDebug.String())
}

// TestMetaQuietGetRunIsOneBatch: a pipeline of mg ... q ended by mn reaches the
// backend as one batch, and the replies keep their order and opaques.
func TestMetaQuietGetRunIsOneBatch(t *testing.T) {
	drv := &countingDriver{Driver: newEngine(t)}
	addr := startServer(t, "", drv, 64)
	conn := dialServer(t, addr, 10*time.Second)
	rd := bufio.NewReader(conn)
	readLine := func() string {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		return line
	}

	_, err := conn.Write([]byte("ms a 2 q\r\nva\r\nms c 2 q\r\nvc\r\nmn\r\n"))
	require.NoError(t, err)
	require.Equal(t, "MN\r\n", readLine())
	drv.take()

	_, err = conn.Write([]byte("mg a v q O1\r\nmg missing v q O2\r\nmg c v q k O3\r\nmg b v O4\r\nmn\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"VA 2 O1\r\n", "va\r\n", "VA 2 kc O3\r\n", "vc\r\n", "EN O4\r\n", "MN\r\n"} {
		assert.Equal(t, want, readLine())
	}
	assert.Equal(t, []int{4}, drv.take(), "batch sizes")

	// An mg that changes the item (T) runs on its own and ends the run.
	_, err = conn.Write([]byte("mg a q v\r\nmg c T10 q v\r\nmg a q v\r\nmn\r\n"))
	require.NoError(t, err)
	for _, want := range []string{"VA 2\r\n", "va\r\n", "VA 2\r\n", "vc\r\n", "VA 2\r\n", "va\r\n", "MN\r\n"} {
		assert.Equal(t, want, readLine())
	}
	assert.Equal(t, []int{1, 2, 1}, drv.take(), "batch sizes: a, c's read+touch, a")
}
