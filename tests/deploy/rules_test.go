package deploy

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"sigs.k8s.io/yaml"
)

const (
	// rulesFile is the alerting and recording rules users load; rulesTests
	// its promtool unit tests; chartRulesFile the chart's copy, which it
	// renders as a PrometheusRule.
	rulesFile      = "deploy/prometheus/ndbgate-rules.yaml"
	rulesTests     = "deploy/prometheus/ndbgate-rules.test.yaml"
	chartRulesFile = chartDir + "/files/ndbgate-rules.yaml"
)

func promtoolBin(t testing.TB) string {
	return pinnedPrometheus(t, tool(t, "PROMTOOL", "promtool", "bin/tools/promtool"))
}

func prometheusBin(t testing.TB) string {
	return pinnedPrometheus(t, tool(t, "PROMETHEUS", "prometheus", "bin/tools/prometheus"))
}

// pinnedPrometheus checks that bin was built from the Prometheus module at
// the version tests/deploy uses (its PromQL parser and rulefmt), which
// scripts/tools/prometheus/go.mod pins for install-test-deps.sh, and
// returns it.
func pinnedPrometheus(t testing.TB, bin string) string {
	t.Helper()
	version := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/prometheus (v\S+)`)
	var pins []string
	for _, f := range []string{"tests/deploy/go.mod", "scripts/tools/prometheus/go.mod"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		m := version.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s does not require github.com/prometheus/prometheus", f)
		}
		pins = append(pins, string(m[1]))
	}
	if pins[0] != pins[1] {
		t.Fatalf("tests/deploy uses prometheus %s, scripts/tools/prometheus builds %s: make them one", pins[0], pins[1])
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	got := ""
	for _, d := range append([]*debug.Module{&info.Main}, info.Deps...) {
		if d.Path == "github.com/prometheus/prometheus" {
			got = d.Version
		}
	}
	if got != pins[0] {
		t.Fatalf("%s is built from prometheus %q, the pin is %s: run scripts/install-test-deps.sh", bin, got, pins[0])
	}
	return bin
}

// loadRules parses the rules file as Prometheus does, strictly (unknown
// fields refused), and validates every rule.
func loadRules(t testing.TB) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(filepath.Join(repoRoot, rulesFile), false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	if len(groups.Groups) == 0 {
		t.Fatalf("%s has no groups", rulesFile)
	}
	return groups
}

// ruleQueries are the rules' expressions, for the checks that the metrics
// and labels they select are exported (TestDashboardMetricsExported), and
// recorded the names the rules record (Prometheus makes them, not ndbgate).
func ruleQueries(t testing.TB) (qs []query, recorded map[string]bool) {
	t.Helper()
	recorded = map[string]bool{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if r.Record != "" {
				name = r.Record
				recorded[r.Record] = true
			}
			qs = append(qs, query{fmt.Sprintf("%s rule %s", rulesFile, name), r.Expr})
		}
	}
	return qs, recorded
}

// promtoolTests is the part of promtool's unit test format the coverage
// check reads.
type promtoolTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name           string `json:"name"`
		AlertRuleTests []struct {
			EvalTime  string           `json:"eval_time"`
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
		PromqlExprTests []struct {
			Expr string `json:"expr"`
		} `json:"promql_expr_test"`
	} `json:"tests"`
}

// TestRulesPromtool: promtool (pinned, built by install-test-deps.sh)
// checks the rules and runs their unit tests; every alert has a test where
// it fires and one where it does not, every recording rule is evaluated by
// a test; and a unit test with a wrong expectation fails, so the run above
// is one that can.
func TestRulesPromtool(t *testing.T) {
	promtool := promtoolBin(t)
	t.Log(strings.TrimSpace(mustRun(t, time.Minute, promtool, "--version")))
	out := mustRun(t, time.Minute, promtool, "check", "rules", rulesFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	start := time.Now()
	out = mustRun(t, 2*time.Minute, promtool, "test", "rules", rulesTests)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	t.Logf("promtool test rules %s: SUCCESS in %v", rulesTests, time.Since(start).Round(time.Millisecond))

	raw, err := os.ReadFile(filepath.Join(repoRoot, rulesTests))
	if err != nil {
		t.Fatal(err)
	}
	var tests promtoolTests
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		// Strict about the fields read here only: promtool itself refuses
		// the others' mistakes.
		if err := yaml.Unmarshal(raw, &tests); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(rulesFile)}) {
		t.Fatalf("%s tests %v, want %s", rulesTests, tests.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]int{}, map[string]int{}
	var exprs []string
	for _, tg := range tests.Tests {
		for _, a := range tg.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				quiet[a.Alertname]++
			}
		}
		for _, p := range tg.PromqlExprTests {
			exprs = append(exprs, p.Expr)
		}
	}
	groups := loadRules(t)
	var alerts, records []rulefmt.Rule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r)
			} else {
				records = append(records, r)
			}
		}
	}
	for _, a := range alerts {
		if fires[a.Alert] == 0 {
			t.Errorf("alert %s: no unit test where it fires", a.Alert)
		}
		if quiet[a.Alert] == 0 {
			t.Errorf("alert %s: no unit test where it does not fire", a.Alert)
		}
		delete(fires, a.Alert)
		delete(quiet, a.Alert)
		for _, k := range []string{"summary", "description"} {
			if a.Annotations[k] == "" {
				t.Errorf("alert %s: no %s annotation", a.Alert, k)
			}
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("alert %s: severity %q", a.Alert, s)
		}
	}
	for name := range fires {
		t.Errorf("%s tests alert %s, which %s does not have", rulesTests, name, rulesFile)
	}
	for name := range quiet {
		t.Errorf("%s tests alert %s, which %s does not have", rulesTests, name, rulesFile)
	}
	// A recording rule is tested when a promql_expr_test evaluates it, or
	// evaluates a recording rule that uses it.
	tested := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, r := range records {
			if tested[r.Record] {
				continue
			}
			for _, e := range exprs {
				if strings.Contains(e, r.Record) {
					tested[r.Record] = true
				}
			}
			for _, u := range records {
				if tested[u.Record] && strings.Contains(u.Expr, r.Record) {
					tested[r.Record] = true
				}
			}
			changed = changed || tested[r.Record]
		}
	}
	for _, r := range records {
		if !tested[r.Record] {
			t.Errorf("recording rule %s: no promql_expr_test evaluates it", r.Record)
		}
	}
	t.Logf("%d alerts and %d recording rules, all unit-tested", len(alerts), len(records))

	// The same run with one expectation wrong must fail.
	dir := t.TempDir()
	rules, _ := os.ReadFile(filepath.Join(repoRoot, rulesFile))
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(rulesFile)), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	wrong := bytes.Replace(raw, []byte("severity: warning"), []byte("severity: page"), 1)
	if bytes.Equal(wrong, raw) {
		t.Fatal("no expectation to break")
	}
	if err := os.WriteFile(filepath.Join(dir, "wrong.test.yaml"), wrong, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, 2*time.Minute, promtool, "test", "rules", filepath.Join(dir, "wrong.test.yaml"))
	if err == nil || !strings.Contains(out, "FAILED") {
		t.Errorf("promtool test rules passed a test expecting severity: page (%v):\n%s", err, out)
	}
}

// TestGuideListsAlerts: deploy/README.md's table of alerts names exactly
// the rules file's alerts, each with its `for` and severity.
func TestGuideListsAlerts(t *testing.T) {
	guide, err := os.ReadFile(filepath.Join(repoRoot, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(Ndbgate\\w+)` \\|[^|]*\\| *(\\S*) *\\| *(\\w+) *\\|$")
	listed := map[string][2]string{}
	for _, m := range row.FindAllStringSubmatch(string(guide), -1) {
		listed[m[1]] = [2]string{m[2], m[3]}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			l, ok := listed[r.Alert]
			if !ok {
				t.Errorf("deploy/README.md does not list alert %s", r.Alert)
				continue
			}
			delete(listed, r.Alert)
			wantFor := ""
			if r.For != 0 {
				wantFor = r.For.String()
			}
			if l[0] != wantFor || l[1] != r.Labels["severity"] {
				t.Errorf("deploy/README.md lists %s with for %q severity %q; the rule has %q %q", r.Alert, l[0], l[1], wantFor, r.Labels["severity"])
			}
		}
	}
	for name := range listed {
		t.Errorf("deploy/README.md lists alert %s, which %s does not have", name, rulesFile)
	}
}
