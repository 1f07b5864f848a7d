package memcache

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type parseCase struct {
	name string
	in   string
	want Command // Keys/Data compared as strings below
	keys []string
	data string
	res  Result // Status, N, Reply, Swallow, Close, TooLarge
}

func okRes(n int) Result { return Result{Status: StatusOK, N: n} }

func errRes(n int, reply []byte) Result { return Result{Status: StatusError, N: n, Reply: reply} }

func parseCases() []parseCase {
	long := strings.Repeat("k", 251)
	max := strings.Repeat("k", 250)
	return []parseCase{
		// Retrieval.
		{name: "get one", in: "get foo\r\n", want: Command{Kind: CmdGet}, keys: []string{"foo"}, res: okRes(9)},
		{name: "get bare newline", in: "get foo\n", want: Command{Kind: CmdGet}, keys: []string{"foo"}, res: okRes(8)},
		{name: "get many", in: "get a b  c \r\n", want: Command{Kind: CmdGet}, keys: []string{"a", "b", "c"}, res: okRes(13)},
		{name: "gets", in: "gets a b\r\n", want: Command{Kind: CmdGets}, keys: []string{"a", "b"}, res: okRes(10)},
		{name: "get 250-byte key", in: "get " + max + "\r\n", want: Command{Kind: CmdGet}, keys: []string{max}, res: okRes(256)},
		{name: "get 251-byte key", in: "get " + long + "\r\n", res: errRes(257, replyBadFormat)},
		{name: "get control char", in: "get a\x01b\r\n", res: errRes(9, replyBadFormat)},
		// A tab joins the columns of a key of several (ndbmemcache's containers).
		{name: "get tab-separated key", in: "get eu\t42 b\r\n", want: Command{Kind: CmdGet}, keys: []string{"eu\t42", "b"}, res: okRes(13)},
		{name: "set tab-separated key", in: "set eu\t42 0 0 1\r\nx\r\n", want: Command{Kind: CmdSet}, keys: []string{"eu\t42"}, data: "x", res: okRes(20)},
		{name: "get no key", in: "get\r\n", res: errRes(5, replyError)},
		{name: "gat", in: "gat 100 a b\r\n", want: Command{Kind: CmdGat, Exptime: 100}, keys: []string{"a", "b"}, res: okRes(13)},
		{name: "gats negative", in: "gats -1 a\r\n", want: Command{Kind: CmdGats, Exptime: -1}, keys: []string{"a"}, res: okRes(11)},
		{name: "gat no keys", in: "gat 10\r\n", want: Command{Kind: CmdGat, Exptime: 10}, res: okRes(8)},
		{name: "gat bad exptime", in: "gat x a\r\n", res: errRes(9, replyInvalidExptime)},
		{name: "gat missing exptime", in: "gat\r\n", res: errRes(5, replyError)},

		// Storage.
		{name: "set", in: "set k 5 10 3\r\nabc\r\n", want: Command{Kind: CmdSet, Flags: 5, Exptime: 10}, keys: []string{"k"}, data: "abc", res: okRes(19)},
		{name: "set noreply", in: "set k 0 0 1 noreply\r\na\r\n", want: Command{Kind: CmdSet, NoReply: true}, keys: []string{"k"}, data: "a", res: okRes(24)},
		{name: "set empty value", in: "set k 0 0 0\r\n\r\n", want: Command{Kind: CmdSet}, keys: []string{"k"}, data: "", res: okRes(15)},
		{name: "set value with CRLF inside", in: "set k 0 0 4\r\na\r\nb\r\n", want: Command{Kind: CmdSet}, keys: []string{"k"}, data: "a\r\nb", res: okRes(19)},
		{name: "set negative exptime", in: "set k 0 -1 1\r\na\r\n", want: Command{Kind: CmdSet, Exptime: -1}, keys: []string{"k"}, data: "a", res: okRes(17)},
		{name: "set max flags", in: "set k 4294967295 0 1\r\na\r\n", want: Command{Kind: CmdSet, Flags: 4294967295}, keys: []string{"k"}, data: "a", res: okRes(25)},
		{name: "add", in: "add k 0 0 1\r\na\r\n", want: Command{Kind: CmdAdd}, keys: []string{"k"}, data: "a", res: okRes(16)},
		{name: "replace", in: "replace k 0 0 1\r\na\r\n", want: Command{Kind: CmdReplace}, keys: []string{"k"}, data: "a", res: okRes(20)},
		{name: "append", in: "append k 0 0 1\r\na\r\n", want: Command{Kind: CmdAppend}, keys: []string{"k"}, data: "a", res: okRes(19)},
		{name: "prepend", in: "prepend k 0 0 1\r\na\r\n", want: Command{Kind: CmdPrepend}, keys: []string{"k"}, data: "a", res: okRes(20)},
		{name: "cas", in: "cas k 1 2 1 99\r\na\r\n", want: Command{Kind: CmdCas, Flags: 1, Exptime: 2, Cas: 99}, keys: []string{"k"}, data: "a", res: okRes(19)},
		{name: "cas noreply", in: "cas k 1 2 1 99 noreply\r\na\r\n", want: Command{Kind: CmdCas, Flags: 1, Exptime: 2, Cas: 99, NoReply: true}, keys: []string{"k"}, data: "a", res: okRes(27)},
		{name: "set too few args", in: "set k 0 0\r\n", res: errRes(11, replyError)},
		{name: "cas without unique", in: "cas k 0 0 1\r\n", res: errRes(13, replyError)},
		{name: "set too many args", in: "set k 0 0 1 noreply x\r\n", res: errRes(23, replyError)},
		{name: "set negative length", in: "set k 0 0 -1\r\n", res: errRes(14, replyBadFormat)},
		{name: "set bad length", in: "set k 0 0 x\r\n", res: errRes(13, replyBadFormat)},
		// memcached's bound: past INT_MAX-2 the line is malformed and nothing is swallowed.
		{name: "set absurd length", in: "set k 0 0 2147483646\r\nxx\r\n", res: errRes(22, replyBadFormat)},
		{name: "set largest length", in: "set k 0 0 2147483645\r\n", keys: []string{"k"}, res: Result{Status: StatusError, N: 22, Reply: replyTooLarge, Swallow: 2147483647, TooLarge: true}},
		{name: "set bad flags swallows", in: "set k x 0 2\r\nab\r\n", res: Result{Status: StatusError, N: 13, Reply: replyBadFormat, Swallow: 4}},
		{name: "set negative flags", in: "set k -1 0 1\r\na\r\n", res: Result{Status: StatusError, N: 14, Reply: replyBadFormat, Swallow: 3}},
		{name: "set flags overflow", in: "set k 18446744073709551616 0 1\r\na\r\n", res: Result{Status: StatusError, N: 32, Reply: replyBadFormat, Swallow: 3}},
		// memcached assigns strtoul's result to 32-bit flags: they wrap.
		{name: "set flags wrap", in: "set k 4294967297 0 1\r\na\r\n", want: Command{Kind: CmdSet, Flags: 1}, keys: []string{"k"}, data: "a", res: okRes(25)},
		{name: "set bad exptime", in: "set k 0 z 1\r\na\r\n", res: Result{Status: StatusError, N: 13, Reply: replyBadFormat, Swallow: 3}},
		{name: "set 251-byte key", in: "set " + long + " 0 0 1\r\na\r\n", res: Result{Status: StatusError, N: 263, Reply: replyBadFormat, Swallow: 3}},
		{name: "set bad format noreply is silent", in: "set k x 0 1 noreply\r\na\r\n", want: Command{Kind: CmdSet, NoReply: true}, res: Result{Status: StatusError, N: 21, Swallow: 3}},
		{name: "cas bad unique", in: "cas k 0 0 1 x\r\na\r\n", res: Result{Status: StatusError, N: 15, Reply: replyBadFormat, Swallow: 3}},
		{name: "set too large", in: "set k 0 0 2000000\r\n", want: Command{Kind: CmdSet}, keys: []string{"k"}, res: Result{Status: StatusError, N: 19, Reply: replyTooLarge, Swallow: 2000002, TooLarge: true}},
		{name: "set bad data chunk", in: "set k 0 0 1\r\nab\r\n", want: Command{Kind: CmdSet}, res: errRes(16, replyBadDataChunk)},
		{name: "set bad data chunk noreply", in: "set k 0 0 2 noreply\r\nabc\r\n", want: Command{Kind: CmdSet, NoReply: true}, res: Result{Status: StatusError, N: 25}},

		// Arithmetic, delete, touch.
		{name: "incr", in: "incr k 5\r\n", want: Command{Kind: CmdIncr, Delta: 5}, keys: []string{"k"}, res: okRes(10)},
		{name: "decr noreply", in: "decr k 18446744073709551615 noreply\r\n", want: Command{Kind: CmdDecr, Delta: 18446744073709551615, NoReply: true}, keys: []string{"k"}, res: okRes(37)},
		{name: "incr extra token is ignored like memcached", in: "incr k 1 x\r\n", want: Command{Kind: CmdIncr, Delta: 1}, keys: []string{"k"}, res: okRes(12)},
		{name: "incr overflow delta", in: "incr k 18446744073709551616\r\n", want: Command{Kind: CmdIncr}, res: errRes(29, replyInvalidDelta)},
		{name: "incr negative delta", in: "incr k -1\r\n", want: Command{Kind: CmdIncr}, res: errRes(11, replyInvalidDelta)},
		{name: "incr missing delta", in: "incr k\r\n", want: Command{Kind: CmdIncr}, res: errRes(8, replyError)},
		{name: "incr bad delta noreply", in: "incr k x noreply\r\n", want: Command{Kind: CmdIncr, NoReply: true}, res: Result{Status: StatusError, N: 18}},
		{name: "delete", in: "delete k\r\n", want: Command{Kind: CmdDelete}, keys: []string{"k"}, res: okRes(10)},
		{name: "delete legacy zero", in: "delete k 0\r\n", want: Command{Kind: CmdDelete}, keys: []string{"k"}, res: okRes(12)},
		{name: "delete noreply", in: "delete k noreply\r\n", want: Command{Kind: CmdDelete, NoReply: true}, keys: []string{"k"}, res: okRes(18)},
		{name: "delete zero noreply", in: "delete k 0 noreply\r\n", want: Command{Kind: CmdDelete, NoReply: true}, keys: []string{"k"}, res: okRes(20)},
		{name: "delete bad hold", in: "delete k 5\r\n", want: Command{Kind: CmdDelete}, res: errRes(12, replyDeleteUsage)},
		{name: "delete too many", in: "delete a b c\r\n", want: Command{Kind: CmdDelete}, res: errRes(14, replyDeleteUsage)},
		{name: "delete no key", in: "delete\r\n", want: Command{Kind: CmdDelete}, res: errRes(8, replyError)},
		{name: "touch", in: "touch k 10\r\n", want: Command{Kind: CmdTouch, Exptime: 10}, keys: []string{"k"}, res: okRes(12)},
		{name: "touch bad exptime", in: "touch k x\r\n", want: Command{Kind: CmdTouch}, res: errRes(11, replyInvalidExptime)},
		{name: "touch exptime over int64", in: "touch k 9223372036854775808\r\n", want: Command{Kind: CmdTouch}, res: errRes(29, replyInvalidExptime)},
		// memcached assigns strtol's result to a 32-bit exptime: it wraps.
		{name: "touch exptime wraps", in: "touch k 2147483648\r\n", want: Command{Kind: CmdTouch, Exptime: -2147483648}, keys: []string{"k"}, res: okRes(20)},

		// Other commands.
		{name: "stats", in: "stats\r\n", want: Command{Kind: CmdStats}, res: okRes(7)},
		{name: "stats settings", in: "stats settings\r\n", want: Command{Kind: CmdStats, Arg: []byte("settings")}, res: okRes(16)},
		{name: "flush_all", in: "flush_all\r\n", want: Command{Kind: CmdFlushAll}, res: okRes(11)},
		{name: "flush_all delay", in: "flush_all 30\r\n", want: Command{Kind: CmdFlushAll, Delay: 30}, res: okRes(14)},
		{name: "flush_all noreply", in: "flush_all noreply\r\n", want: Command{Kind: CmdFlushAll, NoReply: true}, res: okRes(19)},
		{name: "flush_all delay noreply", in: "flush_all 5 noreply\r\n", want: Command{Kind: CmdFlushAll, Delay: 5, NoReply: true}, res: okRes(21)},
		{name: "flush_all negative is now", in: "flush_all -1\r\n", want: Command{Kind: CmdFlushAll}, res: okRes(14)},
		{name: "flush_all bad delay", in: "flush_all x\r\n", want: Command{Kind: CmdFlushAll}, res: errRes(13, replyInvalidExptime)},
		{name: "version", in: "version\r\n", want: Command{Kind: CmdVersion}, res: okRes(9)},
		{name: "version ignores args", in: "version x\r\n", want: Command{Kind: CmdVersion}, res: okRes(11)},
		{name: "quit", in: "quit\r\n", want: Command{Kind: CmdQuit}, res: okRes(6)},
		{name: "verbosity", in: "verbosity 1\r\n", want: Command{Kind: CmdVerbosity, Level: 1}, res: okRes(13)},
		{name: "verbosity noreply", in: "verbosity 1 noreply\r\n", want: Command{Kind: CmdVerbosity, Level: 1, NoReply: true}, res: okRes(21)},
		{name: "verbosity bad", in: "verbosity x\r\n", want: Command{Kind: CmdVerbosity}, res: errRes(13, replyBadFormat)},
		{name: "verbosity missing", in: "verbosity\r\n", want: Command{Kind: CmdVerbosity}, res: errRes(11, replyError)},

		// Unknown and malformed.
		{name: "unknown", in: "bogus\r\n", res: errRes(7, replyError)},
		{name: "upper case is unknown", in: "GET k\r\n", res: errRes(7, replyError)},
		{name: "tab is not a separator", in: "get\tk\r\n", res: errRes(7, replyError)},
		{name: "empty line", in: "\r\n", res: errRes(2, replyError)},
		{name: "bare newline", in: "\n", res: errRes(1, replyError)},
		{name: "http request closes", in: "GET / HTTP/1.1\r\n", res: Result{Status: StatusError, N: 16, Close: true}},
		{name: "incomplete line", in: "get fo", res: Result{Status: StatusNeedMore}},
		{name: "incomplete data", in: "set k 0 0 3\r\nab", res: Result{Status: StatusNeedMore}},
		{name: "data without its CRLF yet", in: "set k 0 0 3\r\nabc", res: Result{Status: StatusNeedMore}},
		{name: "long line without newline closes", in: strings.Repeat("x", 3000), res: Result{Status: StatusError, N: 3000, Close: true}},
		{name: "long get line may grow", in: "get " + strings.Repeat("k ", 1500), res: Result{Status: StatusNeedMore}},
	}
}

func checkParse(t *testing.T, tc parseCase, got Command, res Result) {
	t.Helper()
	assert.Equal(t, tc.res.Status, res.Status, "status")
	assert.Equal(t, tc.res.N, res.N, "consumed")
	assert.Equal(t, string(tc.res.Reply), string(res.Reply), "reply")
	assert.Equal(t, tc.res.Swallow, res.Swallow, "swallow")
	assert.Equal(t, tc.res.Close, res.Close, "close")
	assert.Equal(t, tc.res.TooLarge, res.TooLarge, "too large")
	if res.Status == StatusNeedMore {
		return
	}
	if tc.want.Kind != CmdNone || res.Status == StatusOK {
		assert.Equal(t, tc.want.Kind, got.Kind, "kind")
	}
	var keys []string
	for _, k := range got.Keys {
		keys = append(keys, string(k))
	}
	assert.Equal(t, tc.keys, keys, "keys")
	if res.Status == StatusOK {
		assert.Equal(t, tc.data, string(got.Data), "data")
		assert.Equal(t, tc.want.Flags, got.Flags, "flags")
		assert.Equal(t, tc.want.Exptime, got.Exptime, "exptime")
		assert.Equal(t, tc.want.Cas, got.Cas, "cas")
		assert.Equal(t, tc.want.Delta, got.Delta, "delta")
		assert.Equal(t, tc.want.Delay, got.Delay, "delay")
		assert.Equal(t, tc.want.Level, got.Level, "level")
		assert.Equal(t, string(tc.want.Arg), string(got.Arg), "arg")
	}
	assert.Equal(t, tc.want.NoReply, got.NoReply, "noreply")
}

func TestParseTable(t *testing.T) {
	for _, tc := range parseCases() {
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			var cmd Command
			res := p.Parse([]byte(tc.in), &cmd)
			checkParse(t, tc, cmd, res)
		})
	}
}

// TestParseOneByteAtATime feeds every complete case a byte at a time: each
// prefix must ask for more, and the whole input must parse as in one piece.
func TestParseOneByteAtATime(t *testing.T) {
	for _, tc := range parseCases() {
		if tc.res.Status == StatusNeedMore || tc.res.Close {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var p Parser
			var cmd Command
			in := []byte(tc.in)
			for i := 0; i < len(in); i++ {
				res := p.Parse(in[:i], &cmd)
				if tc.res.TooLarge || tc.res.Swallow > 0 || res.Status != StatusNeedMore {
					// A refused line is answered as soon as the line is whole.
					if res.Status != StatusNeedMore {
						require.GreaterOrEqual(t, i, tc.res.N, "answered before the line was whole")
						checkParse(t, tc, cmd, res)
						return
					}
					continue
				}
				require.Equal(t, StatusNeedMore, res.Status, "prefix of %d bytes", i)
			}
			checkParse(t, tc, cmd, p.Parse(in, &cmd))
		})
	}
}

// TestParsePipeline parses several commands from one buffer in turn.
func TestParsePipeline(t *testing.T) {
	in := []byte("set a 0 0 1\r\nx\r\nget a b\r\nbogus\r\nincr a 1\r\ndelete a noreply\r\nget")
	var p Parser
	var cmd Command
	var kinds []CommandKind
	off := 0
	for {
		res := p.Parse(in[off:], &cmd)
		if res.Status == StatusNeedMore {
			break
		}
		kinds = append(kinds, cmd.Kind)
		off += res.N + res.Swallow
	}
	require.Equal(t, []CommandKind{CmdSet, CmdGet, CmdNone, CmdIncr, CmdDelete}, kinds)
	require.Equal(t, "get", string(in[off:]))
}

func TestParseManyKeysBeyondTokenLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("get")
	for i := 0; i < 500; i++ {
		b.WriteString(" key")
		b.WriteString(strings.Repeat("x", i%7))
	}
	b.WriteString("\r\n")
	var p Parser
	var cmd Command
	res := p.Parse([]byte(b.String()), &cmd)
	require.Equal(t, StatusOK, res.Status)
	require.Len(t, cmd.Keys, 500)
}

func TestParseMaxItemSize(t *testing.T) {
	p := Parser{MaxItemSize: 10}
	var cmd Command
	res := p.Parse([]byte("set k 0 0 10\r\n0123456789\r\n"), &cmd)
	require.Equal(t, StatusOK, res.Status)
	res = p.Parse([]byte("set k 0 0 11\r\n01234567890\r\n"), &cmd)
	require.Equal(t, StatusError, res.Status)
	require.Equal(t, string(replyTooLarge), string(res.Reply))
	require.Equal(t, 13, res.Swallow)
	require.True(t, res.TooLarge)
}

func TestParseDoesNotAllocate(t *testing.T) {
	inputs := [][]byte{
		[]byte("get a b c d e f g h\r\n"),
		[]byte("set key 0 0 5\r\nhello\r\n"),
		[]byte("gets key\r\n"),
		[]byte("incr counter 1\r\n"),
		[]byte("delete key noreply\r\n"),
		[]byte("bogus\r\n"),
	}
	var p Parser
	var cmd Command
	for _, in := range inputs { // grow the key slice once
		p.Parse(in, &cmd)
	}
	allocs := testing.AllocsPerRun(200, func() {
		for _, in := range inputs {
			p.Parse(in, &cmd)
		}
	})
	require.Zero(t, allocs)
}

func TestEncodeDoesNotAllocateIntoSpareCapacity(t *testing.T) {
	dst := make([]byte, 0, 4096)
	key, val := []byte("key"), []byte("value")
	allocs := testing.AllocsPerRun(200, func() {
		b := AppendValue(dst[:0], key, 7, val)
		b = AppendValueCas(b, key, 7, val, 42)
		b = AppendUint(b, 99)
		_ = append(b, replyEnd...)
	})
	require.Zero(t, allocs)
}

func TestEncoders(t *testing.T) {
	require.Equal(t, "VALUE k 7 3\r\nabc\r\n", string(AppendValue(nil, []byte("k"), 7, []byte("abc"))))
	require.Equal(t, "VALUE k 4294967295 0 18446744073709551615\r\n\r\n",
		string(AppendValueCas(nil, []byte("k"), 4294967295, nil, 18446744073709551615)))
	require.Equal(t, "0\r\n", string(AppendUint(nil, 0)))
	require.Equal(t, "STAT curr_items 5\r\n", string(AppendStat(nil, "curr_items", 5)))
	require.Equal(t, "STAT version 1.0\r\n", string(AppendStatString(nil, "version", "1.0")))
	require.Equal(t, "VERSION 1.2.3\r\n", string(AppendVersion(nil, "1.2.3")))
}

func TestNumberParsers(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
		v  int64
	}{
		{"0", true, 0}, {"-0", true, 0}, {"2147483647", true, 2147483647}, {"-2147483648", true, -2147483648},
		// strtol's 64-bit result, assigned to an int32 as memcached does
		{"2147483648", true, -2147483648}, {"-2147483649", true, 2147483647}, {"4294967296", true, 0},
		{"+1", true, 1}, {"9223372036854775807", true, -1},
		{"9223372036854775808", false, 0}, {"-9223372036854775809", false, 0}, // ERANGE
		{"", false, 0}, {"-", false, 0}, {"+", false, 0}, {"1a", false, 0}, {" 1", false, 0}, {"+-1", false, 0},
	} {
		v, ok := parseInt32([]byte(tc.in))
		assert.Equal(t, tc.ok, ok, tc.in)
		assert.Equal(t, tc.v, v, tc.in)
	}
	for _, tc := range []struct {
		in string
		ok bool
		v  uint64
	}{
		{"18446744073709551615", true, 1<<64 - 1}, {"18446744073709551616", false, 0}, {"99999999999999999999", false, 0},
		{"+5", true, 5}, {"-0", true, 0}, {"-5", false, 0}, {"0000000000000000000000007", true, 7}, // strtoull negates; memcached refuses a negative signed result
		{"-18446744073709551615", true, 1}, {"-9223372036854775808", false, 0}, {"-9223372036854775809", true, 1<<63 - 1},
	} {
		v, ok := parseUint64([]byte(tc.in))
		assert.Equal(t, tc.ok, ok, tc.in)
		assert.Equal(t, tc.v, v, tc.in)
	}
	flags, ok := parseUint32([]byte("4294967297"))
	assert.True(t, ok)
	assert.Equal(t, uint32(1), flags, "strtoul's result assigned to 32-bit flags")
}

// ParseFrom takes a retrieval's keys from a later key on (KeySkip), at most
// its limit, marking where the next starts (Next), with the line's length
// and arguments; it refuses a Resume that fits no key of the line.
func TestParseFrom(t *testing.T) {
	var p Parser
	var whole, cmd Command
	in := []byte("gat 30   a bb  ccc d\r\nget x\r\n")
	res := p.Parse(in, &whole)
	require.Equal(t, StatusOK, res.Status)
	require.Len(t, whole.Keys, 4)
	assert.Zero(t, whole.Next, "Parse takes every key")
	skips := []int{}
	for i := range whole.Keys {
		skips = append(skips, KeySkip(whole.Keys, i)) // before p parses again: whole.Keys is p's
	}
	assert.Equal(t, []int{0, 2, 6, 10}, skips)
	names := func(keys [][]byte) []string {
		got := []string{}
		for _, k := range keys {
			got = append(got, string(k))
		}
		return got
	}
	for i, want := range [][]string{nil, {"bb", "ccc", "d"}, {"ccc", "d"}, {"d"}} {
		if i == 0 {
			continue // Skip 0 is no resume
		}
		at := Resume{Line: res.N, Skip: skips[i]}
		var q Parser
		r := q.ParseFrom(in, at, 10, &cmd)
		require.Equal(t, StatusOK, r.Status, "from key %d", i)
		assert.Equal(t, res.N, r.N)
		assert.Equal(t, CmdGat, cmd.Kind)
		assert.Equal(t, int64(30), cmd.Exptime)
		assert.Equal(t, want, names(cmd.Keys), "from key %d", i)
		assert.Zero(t, cmd.Next, "from key %d: the last keys", i)
	}
	// A limit: the keys after are left, and Next says where they start.
	r := p.ParseFrom(in, Resume{Line: res.N, Skip: skips[1]}, 1, &cmd)
	require.Equal(t, StatusOK, r.Status)
	assert.Equal(t, []string{"bb"}, names(cmd.Keys))
	assert.Equal(t, skips[2], cmd.Next)
	r = p.ParseFrom(in, Resume{Line: res.N, Skip: cmd.Next}, 1, &cmd)
	require.Equal(t, StatusOK, r.Status)
	assert.Equal(t, []string{"ccc"}, names(cmd.Keys))
	assert.Equal(t, skips[3], cmd.Next)

	for _, skip := range []int{1, 3, 4, 5, 7, 11, 12, 40} { // inside a key, on a space, past the keys
		r := p.ParseFrom(in, Resume{Line: res.N, Skip: skip}, 10, &cmd)
		assert.Equal(t, StatusError, r.Status, "skip %d", skip)
		assert.Equal(t, replyError, r.Reply, "skip %d", skip)
		assert.Equal(t, res.N, r.N, "skip %d: the line is consumed", skip)
	}
	for _, at := range []Resume{{Line: 0, Skip: 2}, {Line: 5, Skip: 2}, {Line: len(in) + 1, Skip: 2}, {Line: res.N, Skip: 0}} {
		r := p.ParseFrom(in, at, 10, &cmd)
		assert.Equal(t, StatusError, r.Status, "%+v", at)
		assert.Equal(t, res.N, r.N, "%+v: the line is consumed", at)
	}
	r = p.ParseFrom([]byte("delete k\r\n"), Resume{Line: 10, Skip: 2}, 10, &cmd)
	assert.Equal(t, StatusError, r.Status, "not a retrieval")
}
