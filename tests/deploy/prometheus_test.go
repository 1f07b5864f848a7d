package deploy

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndbgate/ndbgate/tests/internal/harness"
)

// noDataUnderTestLoad are the dashboard queries that may rightly return
// nothing from this test's ndbgates, each with the reason. Every other
// query must return a number. None today: the NDB panels (data nodes,
// per-node operations, TC hints) have series from the embedded engine's
// simulated data nodes (--nodes 2), and every counter the dashboard rates
// is exported from the start, at 0 if nothing happened.
var noDataUnderTestLoad = map[string]string{}

// TestPrometheus runs a real Prometheus (built from its module at the
// version tests/deploy pins, by install-test-deps.sh) scraping two running
// ndbgates every second and evaluating deploy/prometheus/ndbgate-rules.yaml,
// with every rule's `for:` cut to a few seconds (the only change). Under a
// short memcache and REST load on the first, every query of the Grafana
// dashboard returns data from Prometheus's HTTP API, and every rule
// evaluates without error. Then two faults fire their alerts on the second
// ndbgate and on it alone: memcache SASL authentications with a wrong
// password (NdbgateSASLFailures), and the process stopped (NdbgateDown).
func TestPrometheus(t *testing.T) {
	prom := prometheusBin(t)
	requireBinary(t)
	t.Log(strings.SplitN(mustRun(t, time.Minute, prom, "--version"), "\n", 2)[0])
	dir := t.TempDir()

	// a: the loaded ndbgate, as TestDashboardMetricsExported runs it (a
	// 16 MiB engine that evicts, two simulated data nodes). b: SASL on.
	mcA, restA := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	a := startServer(t, nil, "serve", "--memcache", mcA, "--rest", restA, "--grpc", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--memory-limit", "16m", "--nodes", "2", "--simulated-round-trip", "100us")
	creds := filepath.Join(dir, "sasl.txt")
	if err := os.WriteFile(creds, []byte("alice:wonderland\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcB, restB := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b := startServer(t, nil, "serve", "--memcache", mcB, "--rest", restB, "--grpc", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--memcache-sasl-credentials", creds)
	client := &http.Client{Timeout: 5 * time.Second}
	a.waitHTTP(t, client, "http://"+restA+"/readyz")
	b.waitHTTP(t, client, "http://"+restB+"/readyz")

	// The rules file, `for:` shortened: the expressions are the file's.
	rules, err := os.ReadFile(filepath.Join(repoRoot, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	forLine := regexp.MustCompile(`(?m)^(\s+for:) \S+$`)
	fors := 0
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.For != 0 {
				fors++
			}
		}
	}
	if n := len(forLine.FindAll(rules, -1)); n != fors {
		t.Fatalf("%d `for:` lines, %d rules with a for", n, fors)
	}
	rules = forLine.ReplaceAll(rules, []byte("$1 3s"))
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
  - job_name: ndbgate
    static_configs:
      - targets: [%q, %q]
`, restA, restB)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr)
	promLog := &harness.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = promLog, promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	gone := func() error {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("prometheus exited (%v)", err)
		default:
			return nil
		}
	}
	waitOK(t, client, "http://"+promAddr+"/-/ready", promLog.String, gone)
	api := &promAPI{t: t, base: "http://" + promAddr, client: client, log: promLog}

	// Load on a until the queries are done.
	ctx, stopLoad := context.WithCancel(context.Background())
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		promLoad(ctx, mcA, restA)
	}()
	defer func() { stopLoad(); loadWG.Wait() }()

	// Both targets up, scraped a few times.
	api.waitFor("both targets up", 20*time.Second, func() (bool, string) {
		res := api.query(`up{job="ndbgate"} == 1`)
		return len(res) == 2, fmt.Sprint(res)
	})
	time.Sleep(5 * time.Second)

	// Every dashboard query returns data.
	queries := dashboardQueries(t, loadDashboard(t))
	// $__rate_interval: Grafana's is at least four scrape intervals.
	vars := strings.NewReplacer("$__rate_interval", "4s", "$__interval", "1s", "$__range", "1m", "$job", ".*", "$instance", ".*")
	missing := map[string]string{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		clear(missing)
		for _, q := range queries {
			if _, ok := noDataUnderTestLoad[q.expr]; ok {
				continue
			}
			res := api.query(vars.Replace(q.expr))
			if !hasNumber(res) {
				missing[q.where] = fmt.Sprintf("%s -> %v", vars.Replace(q.expr), res)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for where, why := range missing {
		t.Errorf("%s: no data from Prometheus: %s", where, why)
	}
	for expr, why := range noDataUnderTestLoad {
		t.Logf("not expected to have data here: %s (%s)", expr, why)
	}
	t.Logf("%d dashboard queries answered with data by Prometheus", len(queries)-len(missing)-len(noDataUnderTestLoad))

	// Every rule evaluates, none with an error; the recording rules have
	// series for a's memcache traffic.
	api.waitFor("every rule evaluated", 10*time.Second, func() (bool, string) {
		groups := api.rules()
		var bad []string
		n := 0
		for _, g := range groups {
			for _, r := range g.Rules {
				n++
				if r.Health != "ok" {
					bad = append(bad, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
				}
			}
		}
		return n > 0 && len(bad) == 0, strings.Join(bad, "; ")
	})
	for _, rec := range []string{
		`job_instance_protocol:ndbgate_requests:rate5m{protocol="memcache"}`,
		`job_instance_protocol:ndbgate_request_duration_seconds:p99_5m{protocol="memcache"}`,
		`job_instance:ndbgate_engine_memory_used:ratio`,
	} {
		if res := filterInstance(api.query(rec), restA); !hasNumber(res) {
			t.Errorf("recording rule %s: no series for %s", rec, restA)
		}
	}
	stopLoad()
	loadWG.Wait()

	before := api.alerts()
	for _, al := range before {
		t.Logf("before the faults: %s %s %v", al.Labels["alertname"], al.State, al.Labels)
		if al.Labels["instance"] == restB {
			t.Errorf("alert %s on b before any fault: %v", al.Labels["alertname"], al.Labels)
		}
	}

	// Fault 1: 40 authentications with a wrong password on b.
	for i := range 40 {
		saslFailure(t, mcB, i)
	}
	api.waitFor("NdbgateSASLFailures firing on b", 30*time.Second, func() (bool, string) {
		return alertFiring(api.alerts(), "NdbgateSASLFailures", restB), fmt.Sprint(api.alerts())
	})

	// Fault 2: b stops.
	b.stop(t)
	api.waitFor("NdbgateDown firing on b", 30*time.Second, func() (bool, string) {
		return alertFiring(api.alerts(), "NdbgateDown", restB), fmt.Sprint(api.alerts())
	})
	for _, al := range api.alerts() {
		if al.Labels["instance"] == restA && (al.Labels["alertname"] == "NdbgateDown" || al.Labels["alertname"] == "NdbgateSASLFailures") {
			t.Errorf("%s on a, which had no such fault: %v", al.Labels["alertname"], al.Labels)
		}
	}
}

// promLoad drives a until ctx ends: memcache sets and gets over TCP (hits,
// misses, values large enough to evict under 16 MiB), an unknown command (a
// client error), REST reads.
func promLoad(ctx context.Context, mc, rest string) {
	client := &http.Client{Timeout: 2 * time.Second}
	big := strings.Repeat("x", 32<<10)
	for i := 0; ctx.Err() == nil; i++ {
		c, err := net.DialTimeout("tcp", mc, 2*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		var req strings.Builder
		for j := range 20 {
			key := fmt.Sprintf("load%d", (i*20+j)%2000)
			fmt.Fprintf(&req, "set %s 0 0 %d\r\n%s\r\nget %s missing%d\r\n", key, len(big), big, key, j)
		}
		req.WriteString("bogus\r\nquit\r\n")
		_, _ = io.WriteString(c, req.String())
		_, _ = io.Copy(io.Discard, r)
		c.Close()
		for _, path := range []string{"/v1/kv/default/load1", "/v1/kv/default/nope"} {
			if resp, err := client.Get("http://" + rest + path); err == nil {
				resp.Body.Close()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// saslFailure authenticates with SASL PLAIN and a wrong password over the
// binary protocol, and checks the refusal (status 0x20).
func saslFailure(t *testing.T, addr string, opaque int) {
	t.Helper()
	c := dialMemcache(t, "tcp", addr)
	defer c.Close()
	mech, body := []byte("PLAIN"), []byte("\x00alice\x00wrong")
	hdr := make([]byte, 24)
	hdr[0], hdr[1] = 0x80, 0x21 // request, SASL auth
	binary.BigEndian.PutUint16(hdr[2:], uint16(len(mech)))
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(mech)+len(body)))
	binary.BigEndian.PutUint32(hdr[12:], uint32(opaque))
	if _, err := c.Write(append(append(hdr, mech...), body...)); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, 24)
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("SASL auth: %v", err)
	}
	if st := binary.BigEndian.Uint16(resp[6:]); resp[0] != 0x81 || st != 0x20 {
		t.Fatalf("SASL auth with a wrong password: magic %#x status %#x, want 0x81 0x20", resp[0], st)
	}
}

// promAPI queries Prometheus's HTTP API.
type promAPI struct {
	t      *testing.T
	base   string
	client *http.Client
	log    *harness.SyncBuffer
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p *promAPI) get(path string, v any) {
	p.t.Helper()
	resp, err := p.client.Get(p.base + path)
	if err != nil {
		p.t.Fatalf("prometheus %s: %v\n%s", path, err, p.log)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		p.t.Fatalf("prometheus %s: %v", path, err)
	}
	if env.Status != "success" {
		p.t.Fatalf("prometheus %s: %s %s", path, env.Status, env.Error)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		p.t.Fatalf("prometheus %s: %v: %s", path, err, env.Data)
	}
}

// query evaluates expr now; a scalar comes back as one sample.
func (p *promAPI) query(expr string) []promSample {
	p.t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.get("/api/v1/query?query="+url.QueryEscape(expr), &data)
	var out []promSample
	switch data.ResultType {
	case "vector":
		if err := json.Unmarshal(data.Result, &out); err != nil {
			p.t.Fatal(err)
		}
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			p.t.Fatal(err)
		}
		out = []promSample{{Value: v}}
	default:
		p.t.Fatalf("query %s: result type %s", expr, data.ResultType)
	}
	return out
}

type promRuleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Name      string `json:"name"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		Type      string `json:"type"`
	} `json:"rules"`
}

func (p *promAPI) rules() []promRuleGroup {
	var data struct {
		Groups []promRuleGroup `json:"groups"`
	}
	p.get("/api/v1/rules", &data)
	return data.Groups
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (a promAlert) String() string {
	return fmt.Sprintf("%s(%s)%v", a.Labels["alertname"], a.State, a.Labels)
}

func (p *promAPI) alerts() []promAlert {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.get("/api/v1/alerts", &data)
	sort.Slice(data.Alerts, func(i, j int) bool { return data.Alerts[i].String() < data.Alerts[j].String() })
	return data.Alerts
}

// waitFor polls cond every 500 ms until it holds or timeout passes.
func (p *promAPI) waitFor(what string, timeout time.Duration, cond func() (bool, string)) {
	p.t.Helper()
	start := time.Now()
	for {
		ok, state := cond()
		if ok {
			p.t.Logf("%s after %v", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > timeout {
			p.t.Fatalf("%s: not within %v; last: %s\nprometheus log:\n%s", what, timeout, state, p.log)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func alertFiring(alerts []promAlert, name, instance string) bool {
	for _, a := range alerts {
		if a.Labels["alertname"] == name && a.Labels["instance"] == instance && a.State == "firing" {
			return true
		}
	}
	return false
}

// hasNumber: some sample is a number (not NaN: a histogram_quantile or a
// ratio of nothing).
func hasNumber(res []promSample) bool {
	for _, s := range res {
		str, _ := s.Value[1].(string)
		if v, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(v) {
			return true
		}
	}
	return false
}

func filterInstance(res []promSample, instance string) []promSample {
	var out []promSample
	for _, s := range res {
		if s.Metric["instance"] == instance {
			out = append(out, s)
		}
	}
	return out
}
