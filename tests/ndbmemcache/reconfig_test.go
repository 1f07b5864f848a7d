package ndbmemcache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reconfigPrefix is the key prefix a reconfiguration adds to a role
// (NDBMEMCACHE_DIFF_RECONFIG=1): a copy of the role's "" prefix, so that
// the sequences run again, under it, on routes both servers loaded online.
const reconfigPrefix = "rc:"

// reconfigure adds reconfigPrefix to role's key_prefixes, as a copy of its
// "" prefix, and updates the role's update_timestamp, which is what makes
// ndbmemcache and ndbgate read their configuration again. It writes through
// ndbgate's row API (NDB API writes, as any client's), waits until both
// servers have reloaded, and returns what undoes it, through the ndbgate
// then serving.
func reconfigure(t *testing.T, role string, nm, gw *server, stamp time.Time) (undo func(gw *server)) {
	t.Helper()
	roleRow := rowAPI(t, gw, "memcache_server_roles", "pk-read", map[string]any{"filters": []map[string]any{{"column": "role_name", "value": role}}})
	id := roleRow["role_id"]
	catchAll := rowAPI(t, gw, "key_prefixes", "pk-read", map[string]any{"filters": []map[string]any{{"column": "server_role_id", "value": id}, {"column": "key_prefix", "value": ""}}})
	key := []map[string]any{{"column": "server_role_id", "value": id}, {"column": "key_prefix", "value": reconfigPrefix}}
	values := []map[string]any{{"column": "cluster_id", "value": catchAll["cluster_id"]}, {"column": "policy", "value": catchAll["policy"]}, {"column": "container", "value": catchAll["container"]}}
	nmBefore := reconfStat(t, nm)
	rowAPI(t, gw, "key_prefixes", "pk-write", map[string]any{"filters": key, "values": values})
	touch := func(gw *server, at time.Time) {
		rowAPI(t, gw, "memcache_server_roles", "pk-update", map[string]any{
			"filters": []map[string]any{{"column": "role_name", "value": role}},
			"values":  []map[string]any{{"column": "update_timestamp", "value": at.UTC().Format(time.DateTime)}}})
	}
	touch(gw, stamp)
	deadline := time.Now().Add(30 * time.Second)
	for reloads(t, gw) < 1 || reconfStat(t, nm) == nmBefore {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no reload within 30 s: ndbgate reloads %d, ndbmemcache's stats reconf %q (was %q)", role, reloads(t, gw), reconfStat(t, nm), nmBefore)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s: both servers reloaded after the update of the role's update_timestamp (ndbmemcache's stats reconf: %q -> %q)", role, nmBefore, reconfStat(t, nm))
	return func(gw *server) {
		rowAPI(t, gw, "key_prefixes", "pk-delete", map[string]any{"filters": key})
		touch(gw, stamp.Add(time.Second))
	}
}

// rowAPI calls ndbgate's RonDB row API on an ndbmemcache table and returns
// a pk-read's row.
func rowAPI(t *testing.T, gw *server, table, op string, body map[string]any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+gw.rest+"/0.1.0/ndbmemcache/"+table+"/"+op, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s %s: %v", op, table, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", op, table, resp.StatusCode, out)
	}
	var r struct{ Data map[string]any }
	_ = json.Unmarshal(out, &r)
	return r.Data
}

var reReloadsOK = regexp.MustCompile(`(?m)^ndbgate_ndbmemcache_reloads_total\{outcome="ok"\} (\d+)`)

// reloads is ndbgate's count of successful reloads.
func reloads(t *testing.T, gw *server) int {
	resp, err := http.Get("http://" + gw.rest + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := reReloadsOK.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// reconfStat is ndbmemcache's "stats reconf" (its configuration version).
func reconfStat(t *testing.T, nm *server) string {
	c, err := net.DialTimeout("tcp", nm.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("ndbmemcache: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "stats reconf\r\n")
	r := bufio.NewReader(c)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("ndbmemcache stats reconf: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "END" {
			return strings.Join(lines, "; ")
		}
		lines = append(lines, line)
	}
}
