package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
)

// TestChartPrometheusRule: the chart's copy of the rules is the rules file;
// with metrics.prometheusRule.enabled it passes `helm lint --strict` and
// renders a PrometheusRule that decodes strictly into prometheus-operator's type and holds the same
// groups and rules; without it, none.
func TestChartPrometheusRule(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(repoRoot, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	chartCopy := filepath.Join(repoRoot, chartRulesFile)
	if os.Getenv("UPDATE") == "1" {
		if err := os.WriteFile(chartCopy, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(chartCopy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from %s; run `UPDATE=1 go test -run TestChartPrometheusRule` in tests/deploy", chartRulesFile, rulesFile)
	}

	out, err := helmTemplate(t, "rules")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	if strings.Contains(out, "kind: PrometheusRule") {
		t.Error("a PrometheusRule is rendered without metrics.prometheusRule.enabled")
	}

	enabled := "metrics:\n  prometheusRule:\n    enabled: true\n    labels: {release: kube-prometheus-stack}\n"
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(enabled), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, 2*time.Minute, helmBin(t), "lint", "--strict", "--kube-version", kubeVersion, chartDir, "--values", f); !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
		t.Fatalf("helm lint with the PrometheusRule:\n%s", out)
	}
	out, err = helmTemplate(t, "rules", enabled)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := decodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	var pr *monitoringv1.PrometheusRule
	for _, o := range objs {
		if p, ok := o.(*monitoringv1.PrometheusRule); ok {
			if pr != nil {
				t.Fatal("two PrometheusRules rendered")
			}
			pr = p
		}
	}
	if pr == nil {
		t.Fatal("metrics.prometheusRule.enabled rendered no PrometheusRule")
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Name != "rules-ndbgate-sidecar" {
		t.Errorf("PrometheusRule %s %s", pr.APIVersion, pr.Name)
	}
	if pr.Labels["release"] != "kube-prometheus-stack" || pr.Labels["app.kubernetes.io/name"] != "ndbgate-sidecar" {
		t.Errorf("PrometheusRule labels %v", pr.Labels)
	}

	groups := loadRules(t)
	if len(pr.Spec.Groups) != len(groups.Groups) {
		t.Fatalf("PrometheusRule has %d groups, %s %d", len(pr.Spec.Groups), rulesFile, len(groups.Groups))
	}
	n := 0
	for i, g := range groups.Groups {
		pg := pr.Spec.Groups[i]
		if pg.Name != g.Name || len(pg.Rules) != len(g.Rules) || pg.Interval != nil || len(pg.Labels) != len(g.Labels) {
			t.Errorf("group %d: PrometheusRule %q with %d rules, file %q with %d", i, pg.Name, len(pg.Rules), g.Name, len(g.Rules))
			continue
		}
		for j, r := range g.Rules {
			pr := pg.Rules[j]
			name := r.Alert + r.Record
			var forDur model.Duration
			if pr.For != nil {
				d, err := model.ParseDuration(string(*pr.For))
				if err != nil {
					t.Errorf("rule %s: for %q: %v", name, *pr.For, err)
				}
				forDur = d
			}
			switch {
			case pr.Alert != r.Alert || pr.Record != r.Record:
				t.Errorf("rule %d.%d: PrometheusRule alert %q record %q, file %q %q", i, j, pr.Alert, pr.Record, r.Alert, r.Record)
			case pr.Expr.String() != r.Expr:
				t.Errorf("rule %s: expr differs:\n%s\nvs\n%s", name, pr.Expr.String(), r.Expr)
			case forDur != r.For:
				t.Errorf("rule %s: for %v, file %v", name, forDur, r.For)
			case !mapsEqual(pr.Labels, r.Labels) || !mapsEqual(pr.Annotations, r.Annotations):
				t.Errorf("rule %s: labels or annotations differ:\n%v %v\nvs\n%v %v", name, pr.Labels, pr.Annotations, r.Labels, r.Annotations)
			default:
				n++
			}
		}
	}
	t.Logf("the PrometheusRule holds the file's %d rules", n)

	// The strict decoding refuses a misspelled field of the rule type.
	bad := strings.Replace(out, "    - alert: NdbgateDown\n", "    - alert: NdbgateDown\n      severity: critical\n", 1)
	if bad == out {
		bad = regexp.MustCompile(`(?m)^(\s+)expr:`).ReplaceAllString(out, "${1}exprs:")
	}
	if _, err := decodeManifests(bad); err == nil {
		t.Error("a PrometheusRule with a misspelled field decoded")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
