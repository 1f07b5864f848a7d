// Package ndbmemcache is a differential test of ndbgate against MySQL
// Cluster's own memcached (ndbmemcache: memcached with ndb_engine.so),
// serving the same server role of ndbmemcache's configuration on the same
// data nodes. Each command sequence runs on ndbmemcache, then on ndbgate,
// both over TCP, and their replies are compared byte for byte, cas values
// only for consistency (see casTokens). It runs by hand on a live cluster:
//
//	NDBGATE_TEST_CONNECTSTRING=127.0.0.1:1186 NDBGATE_BIN=/tmp/ndbgate \
//	NDBMEMCACHE_DIR=/path/to/build/storage/ndb/memcache go test -v ./tests/ndbmemcache/
//
// and skips without those variables. See README.md.
package ndbmemcache

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// roles are the server roles of ndbmemcache's demo configuration.
var roles = []string{"db-only", "default_role", "ndb-caching", "mc-only"}

// policiesRole is the role policies.sql adds, with the policies and the
// container no demo role uses (NDBMEMCACHE_DIFF_ROLES=ndbgate-diff). Its
// "" prefix is default_role's: ndb-test on demo_table.
const policiesRole = "ndbgate-diff"

// stepResult is one server's replies to a step.
type stepResult struct {
	sent    string
	replies []string
}

type difference struct {
	role, seq, step string
	sent            string
	nm, gw          []string
	allowed         string // the allow-list's reason, or ""
}

func (d difference) id() string { return d.role + "/" + d.seq + "/" + d.step }

type totals struct {
	sequences, steps, replies, differences, allowed int
	skipped                                         int // steps not compared: a server was lost before them
}

// options are the run's settings from the environment.
type options struct {
	roles    []string // NDBMEMCACHE_DIFF_ROLES, or every demo role
	seqs     []string // NDBMEMCACHE_DIFF_SEQUENCES: run only these (nil: all)
	flushDB  bool     // NDBMEMCACHE_DIFF_FLUSH=1: flush_all under default_role too
	parallel bool     // roles at once (not with flushDB: it empties demo_table)
	reconfig bool     // NDBMEMCACHE_DIFF_RECONFIG=1: run under a prefix both servers loaded online
	tag      string   // in every key: rows an earlier run left are not this run's
	intTag   int64    // tag's number, for keys that are numbers (sequence.intKeys)
}

// result is what a role's run found.
type result struct {
	tot   totals
	diffs []difference
	seen  map[string]bool // allow-list keys that matched
}

func TestDifferential(t *testing.T) {
	e := testEnv(t)
	o := options{roles: roles, flushDB: os.Getenv("NDBMEMCACHE_DIFF_FLUSH") == "1",
		tag: strconv.FormatInt(time.Now().Unix()%(36*36*36*36), 36), intTag: time.Now().Unix() % 1000}
	if r := os.Getenv("NDBMEMCACHE_DIFF_ROLES"); r != "" {
		o.roles = strings.Split(r, ",")
	}
	if q := os.Getenv("NDBMEMCACHE_DIFF_SEQUENCES"); q != "" {
		o.seqs = strings.Split(q, ",")
	}
	o.reconfig = os.Getenv("NDBMEMCACHE_DIFF_RECONFIG") == "1"
	// A reconfiguration run is serial: run at once, four roles' ndbmemcache
	// crashes (22 in README.md) once left every API node of the cluster
	// without data nodes for 3 s, and the reconfiguration's own writes failed.
	o.parallel = !o.flushDB && !o.reconfig && os.Getenv("NDBMEMCACHE_DIFF_SERIAL") != "1"

	results := make([]result, len(o.roles))
	t.Run("roles", func(t *testing.T) {
		for ri, role := range o.roles {
			t.Run(role, func(t *testing.T) {
				if o.parallel {
					t.Parallel()
				}
				results[ri] = runRole(t, e, o, ri, role)
			})
		}
	})

	var all totals
	var diffs []difference
	seen := map[string]bool{}
	for _, r := range results {
		all.sequences += r.tot.sequences
		all.steps += r.tot.steps
		all.replies += r.tot.replies
		all.differences += r.tot.differences
		all.allowed += r.tot.allowed
		all.skipped += r.tot.skipped
		diffs = append(diffs, r.diffs...)
		for k := range r.seen {
			seen[k] = true
		}
	}
	t.Logf("TOTAL: %d sequences, %d steps compared (%d not: a server lost), %d replies compared, %d differences (%d allowed, %d not)",
		all.sequences, all.steps, all.skipped, all.replies, all.differences, all.allowed, all.differences-all.allowed)
	var unused []string
	for k := range allowList {
		if r := strings.SplitN(k, "/", 2)[0]; !seen[k] && o.seqs == nil && (r == "*" || r == "ndb" || slices.Contains(o.roles, r)) {
			unused = append(unused, k)
		}
	}
	slices.Sort(unused)
	for _, k := range unused {
		t.Logf("allow-list entry %q matched no difference in this run", k)
	}
	if path := os.Getenv("NDBMEMCACHE_DIFF_REPORT"); path != "" {
		writeReport(t, path, all, diffs)
	}
	for _, d := range diffs {
		if d.allowed == "" {
			t.Errorf("difference not in the allow-list: %s", d.id())
		}
	}
}

// runRole starts both servers for role and runs every sequence on each.
func runRole(t *testing.T, e env, o options, ri int, role string) result {
	starts := [2]func() *server{
		func() *server { return startNdbmemcache(t, e, role) },
		func() *server { return startNdbgate(t, e, role) },
	}
	var srvs [2]*server
	for i := range srvs {
		srvs[i] = starts[i]()
	}
	res := result{seen: map[string]bool{}}
	tot := &res.tot
	keyPrefix := ""
	if o.reconfig {
		undo := reconfigure(t, role, srvs[0], srvs[1], time.Now().Add(time.Duration(ri)*time.Minute))
		defer func() { undo(srvs[1]) }()
		keyPrefix = reconfigPrefix
	}
	var used []string
	for si, seq := range sequences() {
		if seq.only != nil && !slices.Contains(seq.only, role) || o.seqs != nil && !slices.Contains(o.seqs, seq.name) {
			continue
		}
		if seq.flushesDB && (role == "default_role" || role == policiesRole) && !o.flushDB {
			t.Logf("%s/%s: skipped: flush_all deletes every row of demo_table under default_role's ndb-test policy (NDBMEMCACHE_DIFF_FLUSH=1 runs it)", role, seq.name)
			continue
		}
		base := fmt.Sprintf("diff%s%d%02d_", o.tag, ri, si)
		if seq.intKeys {
			if keyPrefix != "" {
				t.Logf("%s/%s: skipped: its keys are numbers, which the reconfiguration's prefix is not", role, seq.name)
				continue
			}
			base = fmt.Sprintf("7%03d%d%02d", o.intTag, ri, si)
		}
		var keys []string
		steps := seq.steps(func(name string) string {
			k := seq.prefix + keyPrefix + base + name
			keys = append(keys, k)
			return k
		})
		used = append(used, keys...)
		var out [2][]stepResult
		var lostAt [2]int
		for i := range srvs {
			if srvs[i].lost != "" {
				t.Logf("%s: restarting %s, which %s", role, srvs[i].name, srvs[i].lost)
				srvs[i].stop(true)
				srvs[i] = starts[i]()
			}
			clean(srvs[i], keys)
			out[i], lostAt[i] = run(srvs[i], steps)
			if lostAt[i] < len(steps) {
				t.Logf("%s/%s: %s %s at step %q (log: %s)", role, seq.name, srvs[i].name, srvs[i].lost, steps[lostAt[i]].name, srvs[i].log)
				time.Sleep(1500 * time.Millisecond) // NDB aborts a dead API node's transactions, releasing their locks
			}
		}
		if seq.corrupts && srvs[0].lost == "" {
			srvs[0].lost = "ran " + seq.name + ", after which its memory may be corrupt"
		}
		tot.sequences++
		ndiff := 0
		upto := min(lostAt[0], lostAt[1])
		for j, st := range steps[:min(upto+1, len(steps))] {
			a, b := out[0][j], out[1][j]
			tot.steps++
			tot.replies += max(len(a.replies), len(b.replies))
			if slices.Equal(a.replies, b.replies) {
				continue
			}
			bin := st.bin != nil
			d := difference{role: role, seq: seq.name, step: st.name, sent: display(a.sent, base, bin), nm: displayAll(a.replies, base, bin), gw: displayAll(b.replies, base, bin)}
			d.allowed = allowed(d)
			tot.differences++
			ndiff++
			if d.allowed != "" {
				tot.allowed++
				res.seen[allowKey(d)] = true
			}
			res.diffs = append(res.diffs, d)
			t.Log(d.String())
		}
		note := ""
		if upto+1 < len(steps) {
			note = fmt.Sprintf(" (the %d after a lost server not compared)", len(steps)-upto-1)
			tot.skipped += len(steps) - upto - 1
		}
		t.Logf("%s/%s: %d steps, %d differences%s", role, seq.name, len(steps), ndiff, note)
	}
	for _, srv := range srvs {
		clean(srv, used)
	}
	t.Logf("role %s: %d sequences, %d steps compared (%d not), %d replies compared, %d differences (%d allowed)",
		role, tot.sequences, tot.steps, tot.skipped, tot.replies, tot.differences, tot.allowed)
	return res
}

// clean deletes keys through srv (its cache, and the rows its policy
// deletes); the replies do not matter.
func clean(srv *server, keys []string) {
	s := newSession(srv.addr)
	defer s.close()
	var b strings.Builder
	for i, k := range keys {
		if len(k) <= 250 {
			b.WriteString("delete " + k + "\r\n")
		}
		if b.Len() > 8000 || i == len(keys)-1 {
			s.exchange(step{text: b.String()})
			b.Reset()
		}
	}
}

// run sends steps to srv on one connection (another after a step that lost
// it) and returns the replies, and the index of the step at which the
// server was lost (it crashed, or stopped answering: srv.lost says which),
// or len(steps). The steps after that one are not sent.
func run(srv *server, steps []step) ([]stepResult, int) {
	s := newSession(srv.addr)
	defer s.close()
	out := make([]stepResult, len(steps))
	for i, st := range steps {
		sent, replies := s.exchange(st)
		out[i] = stepResult{sent: sent, replies: replies}
		last := ""
		if len(replies) > 0 {
			last = replies[len(replies)-1]
		}
		if !strings.HasPrefix(last, "<") {
			continue
		}
		// A crashed server's socket may close before its process is gone.
		for wait := 0; wait < 15 && !srv.exited(); wait++ {
			time.Sleep(100 * time.Millisecond)
		}
		switch {
		case srv.exited():
			srv.lost = "crashed"
		case strings.Contains(last, "no reply"), strings.HasPrefix(last, "<connect:"):
			srv.lost = "stopped answering"
		default:
			continue // it closed the connection: the next step opens another
		}
		return out, i
	}
	return out, len(steps)
}

// display renders a reply or a command for the log: quoted, long runs of a
// byte shortened, the run's key base left out (key "a" is base+"a").
func display(s, base string, bin bool) string {
	if !bin || strings.HasPrefix(s, "<") {
		s = show([]byte(s))
	}
	return strings.ReplaceAll(s, base, "")
}

func displayAll(replies []string, base string, bin bool) []string {
	out := make([]string, len(replies))
	for i, r := range replies {
		out[i] = display(r, base, bin)
	}
	return out
}

func (d difference) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "DIFFERENCE %s", d.id())
	if d.allowed != "" {
		fmt.Fprintf(&b, " (allowed by %q)", allowKey(d))
	} else {
		b.WriteString(" (NOT in the allow-list)")
	}
	fmt.Fprintf(&b, "\n  sent:        %s\n  ndbmemcache: %s\n  ndbgate:     %s", d.sent, strings.Join(d.nm, " "), strings.Join(d.gw, " "))
	return b.String()
}

func writeReport(t *testing.T, path string, all totals, diffs []difference) {
	var b strings.Builder
	fmt.Fprintf(&b, "# ndbmemcache vs ndbgate: %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%d sequences, %d steps compared (%d not: a server lost), %d replies compared, %d differences (%d allowed)\n\n",
		all.sequences, all.steps, all.skipped, all.replies, all.differences, all.allowed)
	for _, d := range diffs {
		fmt.Fprintf(&b, "## %s\n\n", d.id())
		if d.allowed != "" {
			fmt.Fprintf(&b, "Allowed by `%s`: %s\n\n", allowKey(d), d.allowed)
		} else {
			b.WriteString("NOT in the allow-list.\n\n")
		}
		fmt.Fprintf(&b, "```\nsent:        %s\nndbmemcache: %s\nndbgate:     %s\n```\n\n", d.sent, strings.Join(d.nm, " "), strings.Join(d.gw, " "))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("report: %v", err)
	}
}
