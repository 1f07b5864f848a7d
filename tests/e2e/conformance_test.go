package e2e

import (
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRandomConversationsMatchMemcached sends the same seeded random
// conversations of text and meta commands to memcached and to ndbgate and
// compares the replies. Odd seeds send one command at a time, each
// followed by mn; even seeds pipeline runs of up to eight commands, ended
// by mn, which ndbgate serves in batches (runs of gets, sets and mgs).
// After each conversation the counters of stats are compared too
// (counterCheck). Replies are compared byte for byte but for the values memcached and
// ndbgate cannot share (speaker.normalize): cas values, as the order in
// which each server first showed them, and remaining TTLs and seconds
// since the last access, as "some". Every conversation uses its own keys,
// so none sees another's items. NDBGATE_TEST_CONFORMANCE_SEEDS sets how
// many run (default 200).
func TestRandomConversationsMatchMemcached(t *testing.T) { conformanceRun(t, converse, 200) }

// conformanceRun starts memcached and ndbgate and holds each seed's
// conversation with both (converse describes the first difference, or
// returns ""), retrying a difference once (retryOnce), and compares their
// counters after each: after the retry's alone, when there was one. It
// holds seeds conversations unless NDBGATE_TEST_CONFORMANCE_SEEDS says; args
// are ndbgate's.
func conformanceRun(t *testing.T, converse func(t *testing.T, seed, attempt int, refAddr, gwAddr string) string, seeds int, args ...string) {
	if !haveMemcached() {
		t.Skip("memcached not on PATH: nothing to compare against")
	}
	mcAddr, _ := startMemcached(t)
	s := startServer(t, args...)
	seeds = envInt(t, "NDBGATE_TEST_CONFORMANCE_SEEDS", seeds)
	counters := newCounterCheck(t, mcAddr, s.memcacheAddr)
	for seed := 1; seed <= seeds; seed++ {
		excused := false
		retryOnce(t, seed, func(attempt int) string {
			if attempt > 0 {
				counters.rebase() // the first attempt's counters moved with its difference
			}
			diff := converse(t, seed, attempt, mcAddr, s.memcacheAddr)
			if why, ok := strings.CutPrefix(diff, memcachedBugPrefix); ok {
				t.Logf("seed %d: %s", seed, why)
				excused = true
				return ""
			}
			return diff
		})
		if excused {
			counters.rebase() // memcached's arithmetic failed where ndbgate's did not
		} else {
			counters.check(seed)
		}
	}
}

// TestMemcachedSignBugIsRecognized: memcachedSignBug excuses memcached
// 1.6.18's non-numeric answer for a number of 2^63 or more when a '-'
// follows the item in memory (made here: a freed item of dashes whose
// chunk the number takes), and nothing else: not a value that is no
// number, not a key written again later in its run, not a reply where
// memcached did not say non-numeric more often.
func TestMemcachedSignBugIsRecognized(t *testing.T) {
	if !haveMemcached() {
		t.Skip("memcached not on PATH")
	}
	mcAddr, _ := startMemcached(t)
	c := dialRaw(t, mcAddr)
	defer c.close()
	key := "" // which length of dashes shares the number's slab class depends on the build
	for n := 16; n <= 48 && key == ""; n++ {
		k := fmt.Sprintf("sb:%02d", n)
		c.roundTrip(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, n, strings.Repeat("-", n)), "STORED\r\n")
		c.roundTrip("delete "+k+"\r\n", "DELETED\r\n")
		c.roundTrip("set "+k+" 0 0 20\r\n18446744073709551610\r\n", "STORED\r\n")
		c.send("incr " + k + " 1\r\n")
		if strings.Contains(c.readLine(), "non-numeric") {
			key = k
		}
	}
	if key == "" {
		t.Skip("this memcached does not have 1.6.18's bug (fixed in 1.6.22): nothing to recognize")
	}
	const marker = "non-numeric value"
	want, got := "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n", "18446744073709551611\r\n"
	assert.True(t, memcachedSignBug(t, mcAddr, want, got, marker, [][]string{{key}}, []bool{true}))
	assert.False(t, memcachedSignBug(t, mcAddr, want, got, marker, [][]string{{key}, {key}}, []bool{true, false}),
		"the key written again later in the run")
	assert.False(t, memcachedSignBug(t, mcAddr, got, got, marker, [][]string{{key}}, []bool{true}),
		"memcached did not say non-numeric")
	c.roundTrip("set sb:nan 0 0 4\r\n12ab\r\n", "STORED\r\n")
	assert.False(t, memcachedSignBug(t, mcAddr, want, got, marker, [][]string{{"sb:nan"}}, []bool{true}),
		"a value that is no number")
	c.roundTrip("set sb:small 0 0 2\r\n12\r\n", "STORED\r\n")
	assert.False(t, memcachedSignBug(t, mcAddr, want, got, marker, [][]string{{"sb:small"}}, []bool{true}),
		"a number below 2^63, where memcached looks for no sign")
}

// memcachedBugPrefix starts what a conversation returns when it ended at
// a difference that memcachedSignBug explains: not a failure.
const memcachedBugPrefix = "memcached bug: "

// signBugExcuse is what a conversation returns when memcachedSignBug
// explains the difference of its commands from to to.
func signBugExcuse(from, to int) string {
	return fmt.Sprintf("%scommands %d-%d: memcached called a number of 2^63 or more non-numeric "+
		"(1.6.18's strchr past the value; fixed in 1.6.22); the rest is not compared", memcachedBugPrefix, from, to)
}

// memcachedSignBug reports whether a run's replies differ by memcached
// 1.6.18's bug in incr and decr, fixed in 1.6.22 (ea92c6c01): to parse a
// value of 2^63 or more it looks for a '-' with strchr, past the value's
// end into whatever memory follows the item, and answers non-numeric when
// it finds one there. It holds when memcached answered non-numeric
// (marker) more often than ndbgate, and each key the run incremented or
// decremented (arith) is touched by nothing after that in the run
// (touched, each command's keys in order) and holds on memcached a number
// of 2^63 or more, which memcached's own incr must take. From there on the
// servers' items differ, so the conversation ends.
func memcachedSignBug(t *testing.T, refAddr, want, got, marker string, touched [][]string, arith []bool) bool {
	if strings.Count(want, marker) <= strings.Count(got, marker) {
		return false
	}
	var keys []string
	for i, ks := range touched {
		if !arith[i] {
			continue
		}
		for _, later := range touched[i+1:] {
			if slices.Contains(later, ks[0]) {
				return false
			}
		}
		keys = append(keys, ks[0])
	}
	if len(keys) == 0 {
		return false
	}
	c := dialRaw(t, refAddr)
	defer c.close()
	for _, k := range keys {
		c.send("get " + k + "\r\n")
		lines := c.readUntilEnd(3)
		if len(lines) != 2 {
			return false
		}
		v := strings.TrimSuffix(lines[1], "\r\n")
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < 1<<63 {
			return false
		}
	}
	return true
}

// counterCheck compares the counters of memcached's stats that both
// servers keep alike, conversation by conversation: each counter must move
// as much on ndbgate as on memcached. Not compared: what the embedded
// engine's reaper takes in the background (get_expired, reclaimed, and
// the items memcached keeps), and what depends on memory or time.
type counterCheck struct {
	t        *testing.T
	ref, gw  *rawConn
	was      [2]map[string]string
	counters []string
}

func newCounterCheck(t *testing.T, refAddr, gwAddr string) *counterCheck {
	c := &counterCheck{t: t, ref: dialRaw(t, refAddr), gw: dialRaw(t, gwAddr), counters: []string{
		"cmd_get", "cmd_set", "cmd_flush", "cmd_touch", "cmd_meta", "get_hits", "get_misses", "delete_misses",
		"delete_hits", "incr_misses", "incr_hits", "decr_misses", "decr_hits", "cas_misses", "cas_hits",
		"cas_badval", "touch_hits", "touch_misses", "store_too_large", "store_no_memory"}}
	c.was = [2]map[string]string{c.ref.stats(""), c.gw.stats("")}
	return c
}

// check fails the test when a counter moved differently on the two servers
// since the last check or rebase.
func (c *counterCheck) check(seed int) {
	now := [2]map[string]string{c.ref.stats(""), c.gw.stats("")}
	for _, name := range c.counters {
		ref := statUint(c.t, now[0], name) - statUint(c.t, c.was[0], name)
		gw := statUint(c.t, now[1], name) - statUint(c.t, c.was[1], name)
		if ref != gw {
			c.t.Errorf("seed %d: %s moved %d on memcached, %d on ndbgate", seed, name, ref, gw)
		}
	}
	c.was = now
}

// rebase starts the next check from the counters as they are now.
func (c *counterCheck) rebase() { c.was = [2]map[string]string{c.ref.stats(""), c.gw.stats("")} }

// retryOnce runs a seed's conversation, and once more, on keys of its own,
// when the replies differed, for a server's one-off. (memcached 1.6.18's
// occasional "non-numeric" for an incr of a 20-digit number was one, until
// memcachedSignBug named it: it came back on the retry in session 46's CI.)
// A difference that comes back fails the test; one that does not is
// logged.
func retryOnce(t *testing.T, seed int, run func(attempt int) string) {
	t.Helper()
	first := run(0)
	if first == "" {
		return
	}
	if again := run(1); again != "" {
		t.Fatal(again)
	}
	t.Logf("seed %d differed once, and not on a second run:\n%s", seed, first)
}

// converse runs the conversation of seed on memcached at ref and ndbgate at
// gw, each on a connection of its own, closed after it (memcached takes
// 1,024 connections), and describes the first difference ("" for none).
// Each attempt has keys of its own.
func converse(t *testing.T, seed, attempt int, refAddr, gwAddr string) string {
	return converseWith(t, seed, attempt, refAddr, gwAddr, false)
}

// converseWith is converse; forever holds a conversation whose items never
// expire (conversation.forever).
func converseWith(t *testing.T, seed, attempt int, refAddr, gwAddr string, forever bool) string {
	rng := rand.New(rand.NewSource(int64(seed)))
	conv := newConversation(rng, fmt.Sprintf("cf%d.%d:", seed, attempt))
	conv.forever = forever
	ref, gw := newSpeaker(t, refAddr), newSpeaker(t, gwAddr)
	defer ref.c.close()
	defer gw.c.close()
	var sent []string
	for i := 0; i < 60; {
		run := runLength(seed, rng)
		cmds := make([]string, run)
		for k := range cmds {
			cmds[k] = conv.next()
		}
		cmd := strings.Join(cmds, "")
		want, got := ref.say(cmd), gw.say(cmd)
		sent = append(sent, strings.TrimSuffix(ref.last, "\r\n"))
		if want != got {
			touched, arith := make([][]string, run), make([]bool, run)
			for k, c := range cmds {
				touched[k], arith[k] = conv.keysOf(c)
			}
			if memcachedSignBug(t, refAddr, want, got, "non-numeric value", touched, arith) {
				return signBugExcuse(i, i+run-1)
			}
			return fmt.Sprintf("seed %d, commands %d-%d: replies differ\nconversation:\n  %s\nmemcached: %q\nndbgate:   %q",
				seed, i, i+run-1, strings.Join(sent, "\n  "), want, got)
		}
		i += run
	}
	return ""
}

// runLength is how many commands go before the next mn or NOOP: one for
// odd seeds, up to eight for even ones.
func runLength(seed int, rng *rand.Rand) int {
	if seed%2 == 0 {
		return 1 + rng.Intn(8)
	}
	return 1
}

// envInt is the environment variable name as an int, or def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	return n
}

// speaker is one server's side of a conversation: it fills each command's
// cas placeholders with the cas that server last showed for the key, and
// normalizes its replies.
type speaker struct {
	c    *rawConn
	cas  map[string]string // key -> the last cas this server showed for it
	seen map[string]int    // cas -> the order in which it was first shown
	last string            // the command as last sent, placeholders filled
}

func newSpeaker(t *testing.T, addr string) *speaker {
	return &speaker{c: dialRaw(t, addr), cas: map[string]string{}, seen: map[string]int{}}
}

var (
	casPlaceholder = regexp.MustCompile(`\{cas:([^}]*)\}`)
	valueLine      = regexp.MustCompile(`^VALUE (\S+) (\d+) (\d+)(?: (\d+))?\r\n$`)
	metaFlag       = regexp.MustCompile(` ([a-zA-Z])(\S*)`)
)

// say sends cmd (one command or a run of them) and mn, and returns the
// normalized replies before MN. A run's cas placeholders take the cas each
// server showed before the run.
func (s *speaker) say(cmd string) string {
	s.last = casPlaceholder.ReplaceAllStringFunc(cmd, func(m string) string {
		if c, ok := s.cas[casPlaceholder.FindStringSubmatch(m)[1]]; ok {
			return c
		}
		return "1"
	})
	s.c.send(s.last + "mn\r\n")
	var b strings.Builder
	for {
		line := s.c.readLine()
		if line == "MN\r\n" {
			return b.String()
		}
		line = s.normalize(line)
		lenAt := -1 // the field of line that gives its data's length
		if strings.HasPrefix(line, "VALUE ") {
			lenAt = 3
		} else if strings.HasPrefix(line, "VA ") {
			lenAt = 1
		}
		if lenAt < 0 {
			b.WriteString(line)
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.Atoi(fields[lenAt])
		require.NoError(s.c.t, err, "length in %q", line)
		data, err := s.c.readN(n + 2)
		require.NoError(s.c.t, err)
		// memcached pads a number that a decr shortened with spaces, where
		// ndbgate stores it as it is (docs/MEMCACHED-COMPATIBILITY.md); an
		// append or prepend keeps the padding. The conversation's values
		// have no spaces of their own.
		if v := strings.ReplaceAll(data[:n], " ", ""); len(v) < n {
			data, fields[lenAt] = v+"\r\n", strconv.Itoa(len(v))
		}
		b.WriteString(strings.Join(fields, " ") + "\r\n" + data)
	}
}

// normalize rewrites a reply line's cas values as the order in which this
// server first showed them, and remembers each as its key's latest; and
// it makes a positive remaining TTL "some" (a second may pass between the
// two servers' answers).
func (s *speaker) normalize(line string) string {
	token := func(key, cas string) string {
		if key != "" {
			s.cas[key] = cas
		}
		n, ok := s.seen[cas]
		if !ok {
			n = len(s.seen) + 1
			s.seen[cas] = n
		}
		return "#" + strconv.Itoa(n)
	}
	if m := valueLine.FindStringSubmatch(line); m != nil {
		if m[4] == "" {
			return line
		}
		return fmt.Sprintf("VALUE %s %s %s %s\r\n", m[1], m[2], m[3], token(m[1], m[4]))
	}
	if len(line) < 4 || line[2] != ' ' && line[2] != '\r' || !strings.Contains("VA HD NF NS EX EN ", line[:3]) {
		return line
	}
	// A meta reply: the key comes back with k, which the conversation asks
	// for wherever it asks for c.
	key := ""
	for _, m := range metaFlag.FindAllStringSubmatch(line, -1) {
		if m[1] == "k" {
			key = m[2]
		}
	}
	return metaFlag.ReplaceAllStringFunc(line, func(f string) string {
		m := metaFlag.FindStringSubmatch(f)
		switch {
		case m[1] == "c":
			return " c" + token(key, m[2])
		case m[1] == "t" && m[2] != "-1":
			return " tsome"
		case m[1] == "l":
			// Seconds since the last access: memcached's clock ticks on
			// its own second, not the unix one.
			return " lsome"
		}
		return f
	})
}

// conversation makes random commands over a few keys of its own. It uses
// no flag newer than Debian's memcached 1.6.18 (md x, ms N: ndbgate follows
// current memcached there), and puts T and N before t: memcached answers t
// with the TTL as of the flags before it, ndbgate with the TTL the command
// leaves (docs/MEMCACHED-COMPATIBILITY.md).
type conversation struct {
	rng    *rand.Rand
	prefix string
	// forever: no command sets a TTL or asks for one (a container
	// without an expire column): exptimes are 0, and gat, touch and the
	// meta flags T and t are left out.
	forever bool
}

func newConversation(rng *rand.Rand, prefix string) *conversation {
	return &conversation{rng: rng, prefix: prefix}
}

func (c *conversation) pick(choices ...string) string { return choices[c.rng.Intn(len(choices))] }

// keysOf is the conversation's keys that cmd names, and whether cmd
// increments or decrements (incr, decr, ma).
func (c *conversation) keysOf(cmd string) (keys []string, arith bool) {
	line, _, _ := strings.Cut(cmd, "\r\n")
	fields := strings.Fields(line)
	for _, f := range fields {
		if strings.HasPrefix(f, c.prefix) {
			keys = append(keys, f)
		}
	}
	return keys, len(fields) > 0 && (fields[0] == "incr" || fields[0] == "decr" || fields[0] == "ma") && len(keys) > 0
}

// key is one of the conversation's four keys; key 3 is 250 bytes long,
// memcached's longest.
func (c *conversation) key() string {
	n := c.rng.Intn(4)
	if n == 3 {
		return c.prefix + "3" + strings.Repeat("k", 249-len(c.prefix))
	}
	return c.prefix + strconv.Itoa(n)
}

// Keys 0 and 1 are the counters: only they are incremented, and only the
// others are appended to or get the flags that show or change an item's
// state (h, R, N, I) or its size (s). memcached makes a new item when incr makes a number
// longer, with its state afresh, and pads a number that decr shortened,
// so that a later incr may fit; ndbgate keeps the item and its state, and
// pads nothing (docs/MEMCACHED-COMPATIBILITY.md).
func (c *conversation) counterKey() string { return c.prefix + strconv.Itoa(c.rng.Intn(2)) }

func isCounter(k string) bool { return strings.HasSuffix(k, ":0") || strings.HasSuffix(k, ":1") }

// without drops the flags from a meta command's flags.
func without(flags string, drop ...string) string {
	for _, f := range drop {
		flags = strings.Replace(flags, " "+f, "", 1)
	}
	return flags
}

// value is a short value: letters, a number, a huge number, or empty.
func (c *conversation) value() string {
	switch c.rng.Intn(7) {
	case 0:
		return ""
	case 1, 2:
		return strconv.FormatUint(uint64(c.rng.Intn(1000)), 10)
	case 3:
		return "18446744073709551610"
	case 4: // what memcached's incr takes for a number, and does not
		return c.pick(" 12", "+7", "-0", "12 ab", "-5", "12ab", "-18446744073709551615")
	default:
		n := 1 + c.rng.Intn(8)
		if c.rng.Intn(8) == 0 {
			// Values that take more than one read and write, within
			// what NDB's default container holds (VARBINARY(13500)),
			// with room for the small appends of a conversation.
			n = 1 + c.rng.Intn(12000)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefgh"[c.rng.Intn(8)]
		}
		return string(b)
	}
}

// exptime: never, already expired, or far enough ahead that a test never
// sees it pass.
// Signs, and values memcached's C parsers truncate to 32 bits, among them.
func (c *conversation) exptime() string {
	if c.forever {
		return "0"
	}
	return c.pick("0", "0", "-1", "1000", "+1000", "-0", "4294967296")
}

func (c *conversation) flags() string {
	return c.pick("0", "5", "4294967295", "+5", "-0", "4294967297")
}

func (c *conversation) keys() string {
	ks := make([]string, 1+c.rng.Intn(3))
	for i := range ks {
		ks[i] = c.key()
	}
	return strings.Join(ks, " ")
}

// cas is a placeholder for the key's latest cas on each server, or a cas
// neither made, and newer than any either makes (ms I stores an older one).
func (c *conversation) cas(key string) string {
	if c.rng.Intn(4) == 0 {
		return "18446744073709551615"
	}
	return "{cas:" + key + "}"
}

// metaFlags picks a few of flags, each at most once.
func (c *conversation) metaFlags(flags ...string) string {
	var b strings.Builder
	for _, f := range flags {
		if c.forever {
			switch f {
			case "T1000", "t":
				continue
			case "N1000":
				f = "N0"
			}
		}
		if c.rng.Intn(3) == 0 {
			b.WriteString(" " + f)
		}
	}
	return b.String()
}

func (c *conversation) next() string {
	k := c.key()
	noreply := ""
	if c.rng.Intn(8) == 0 {
		noreply = " noreply"
	}
	choice := c.rng.Intn(14)
	if c.forever && (choice == 4 || choice == 5) {
		choice = 3 // a get instead of gat or touch
	}
	switch choice {
	case 0, 1:
		v := c.value()
		verb := c.pick("set", "set", "add", "replace", "append", "prepend")
		if isCounter(k) && (verb == "append" || verb == "prepend") {
			verb = "set"
		}
		if verb == "append" || verb == "prepend" {
			v = v[:min(len(v), 20)] // a value grows by at most 60 x 20 bytes
		}
		return fmt.Sprintf("%s %s %s %s %d%s\r\n%s\r\n", verb, k, c.flags(), c.exptime(), len(v), noreply, v)
	case 2:
		v := c.value()
		return fmt.Sprintf("cas %s %s %s %d %s%s\r\n%s\r\n", k, c.pick("0", "7"), c.exptime(), len(v), c.cas(k), noreply, v)
	case 3:
		return fmt.Sprintf("%s %s\r\n", c.pick("get", "gets"), c.keys())
	case 4:
		return fmt.Sprintf("%s %s %s\r\n", c.pick("gat", "gats"), c.pick("0", "1000", "-1"), c.keys())
	case 5:
		return fmt.Sprintf("touch %s %s%s\r\n", k, c.exptime(), noreply)
	case 6:
		return fmt.Sprintf("%s %s %s%s\r\n", c.pick("incr", "decr"), c.counterKey(), c.pick("1", "0", "7", "18446744073709551615", "x", "+5", "-0", "-5", "-18446744073709551615"), noreply)
	case 7:
		return fmt.Sprintf("delete %s%s\r\n", k, noreply)
	case 8, 9:
		flags := c.metaFlags("T1000", "N1000", "R2000", "v", "f", "s", "t", "h", "l", "k c", "O42", "q")
		if isCounter(k) {
			flags = without(flags, "h", "s", "R2000", "N1000")
		}
		if strings.Contains(flags, " T") {
			// memcached checks R against the TTL T just set; ndbgate
			// against the TTL before the touch, as gat returns the item.
			flags = without(flags, "R2000")
		}
		return fmt.Sprintf("mg %s%s\r\n", k, flags)
	case 10:
		v := c.value()
		flags := c.metaFlags("F9", "T1000", "I", "q", "k c", "O7")
		if isCounter(k) {
			flags = without(flags, "I")
		}
		if c.rng.Intn(3) == 0 {
			flags += " C" + c.cas(k)
		}
		if c.rng.Intn(2) == 0 {
			if isCounter(k) {
				flags += " M" + c.pick("E", "R", "S")
			} else {
				flags += " M" + c.pick("E", "A", "P", "R", "S")
			}
		}
		if strings.HasSuffix(flags, " MA") || strings.HasSuffix(flags, " MP") {
			v = v[:min(len(v), 20)] // as append's
		}
		return fmt.Sprintf("ms %s %d%s\r\n%s\r\n", k, len(v), flags, v)
	case 11:
		flags := c.metaFlags("q", "I", "T1000", "k", "O5")
		if isCounter(k) {
			flags = without(flags, "I")
		}
		if c.rng.Intn(3) == 0 {
			flags += " C" + c.cas(k)
		}
		return fmt.Sprintf("md %s%s\r\n", k, flags)
	case 12:
		k = c.counterKey()
		flags := c.metaFlags("N1000", "J13", "D"+c.pick("5", "+5", "-0"), "q", "t", "k c", "v", "O3")
		if c.rng.Intn(3) == 0 {
			flags += " M" + c.pick("I", "D", "+", "-")
		}
		if c.rng.Intn(4) == 0 {
			flags += " C" + c.cas(k)
		}
		return fmt.Sprintf("ma %s%s\r\n", k, flags)
	default:
		// No flush_all: memcached's marks items flushed by the second, so
		// what it leaves of the items stored around it varies from run to
		// run (TestFlushAllDelayed checks flushes).
		return fmt.Sprintf("verbosity 1%s\r\n", noreply)
	}
}
