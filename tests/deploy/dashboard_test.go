package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	gprom "github.com/grafana/grafana-foundation-sdk/go/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

const dashboardFile = "deploy/grafana/ndbgate.json"

// strictErr undoes a quirk of the Grafana Foundation SDK (v0.0.22): its
// strict decoders return their error list, empty, as a non-nil error.
func strictErr(err error) error {
	if be, ok := err.(cog.BuildErrors); ok && len(be) == 0 {
		return nil
	}
	return err
}

// grafanaDashboard is the dashboard decoded strictly with Grafana's own
// schema types (the Grafana Foundation SDK, generated from Grafana's
// schemas): unknown fields, wrong types, missing required fields and
// unknown panel options all fail.
type grafanaDashboard struct {
	*dashboard.Dashboard
	panels    []dashboard.Panel
	variables []dashboard.VariableModel
}

// strictPanel decodes a panel and, again, its targets (the SDK drops the
// targets its strict decoder accepted).
func strictPanel(t *testing.T, where string, raw json.RawMessage) dashboard.Panel {
	t.Helper()
	var p dashboard.Panel
	if err := strictErr(p.UnmarshalJSONStrict(raw)); err != nil {
		t.Fatalf("%s: %s: %v", dashboardFile, where, err)
	}
	var generic struct{ Targets []json.RawMessage }
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	if p.Datasource == nil || p.Datasource.Type == nil || *p.Datasource.Type != "prometheus" {
		t.Errorf("%s: %s: datasource %+v, want prometheus", dashboardFile, where, p.Datasource)
	}
	p.Targets = nil
	for i, rt := range generic.Targets {
		var q gprom.Dataquery
		if err := strictErr(q.UnmarshalJSONStrict(rt)); err != nil {
			t.Fatalf("%s: %s.targets[%d]: %v", dashboardFile, where, i, err)
		}
		p.Targets = append(p.Targets, &q)
	}
	return p
}

func loadDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	plugins.RegisterDefaultPlugins()
	d := grafanaDashboard{Dashboard: &dashboard.Dashboard{}}
	if err := strictErr(d.UnmarshalJSONStrict(raw)); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	// The SDK drops the panels and variables its strict decoder accepted
	// (the same quirk, one level down): decode each again, as strictly.
	var generic struct {
		Panels     []json.RawMessage
		Templating struct{ List []json.RawMessage }
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	for i, rp := range generic.Panels {
		var kind struct{ Type string }
		_ = json.Unmarshal(rp, &kind)
		if kind.Type == "row" {
			var row dashboard.RowPanel
			if err := strictErr(row.UnmarshalJSONStrict(rp)); err != nil {
				t.Fatalf("%s: panels[%d]: %v", dashboardFile, i, err)
			}
			var nested struct{ Panels []json.RawMessage }
			_ = json.Unmarshal(rp, &nested)
			for j, np := range nested.Panels {
				d.panels = append(d.panels, strictPanel(t, fmt.Sprintf("panels[%d].panels[%d]", i, j), np))
			}
			continue
		}
		d.panels = append(d.panels, strictPanel(t, fmt.Sprintf("panels[%d]", i), rp))
	}
	for i, rv := range generic.Templating.List {
		var v dashboard.VariableModel
		if err := strictErr(v.UnmarshalJSONStrict(rv)); err != nil {
			t.Fatalf("%s: templating.list[%d]: %v", dashboardFile, i, err)
		}
		d.variables = append(d.variables, v)
	}
	return d
}

// query is one PromQL expression of the dashboard, where it is.
type query struct {
	where, expr string
}

// dashboardQueries are every panel's and variable's PromQL.
func dashboardQueries(t *testing.T, d grafanaDashboard) []query {
	t.Helper()
	var qs []query
	ids := map[uint32]bool{}
	panels := d.panels
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		title := "(untitled)"
		if p.Title != nil {
			title = *p.Title
		}
		if p.Id == nil || ids[*p.Id] {
			t.Errorf("panel %q: missing or duplicated id", title)
		} else {
			ids[*p.Id] = true
		}
		// An unknown panel type would be decoded loosely: it must be one
		// of Grafana's.
		if _, ok := cog.ConfigForPanelcfgVariant(p.Type); !ok {
			t.Errorf("panel %q: type %q is not a Grafana panel", title, p.Type)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for i, tg := range p.Targets {
			pq, ok := tg.(*gprom.Dataquery)
			if !ok {
				t.Errorf("panel %q target %d: %T, want a Prometheus query", title, i, tg)
				continue
			}
			qs = append(qs, query{fmt.Sprintf("panel %q target %s", title, derefString(pq.RefId)), pq.Expr})
		}
	}
	for _, v := range d.variables {
		if v.Type != "query" {
			continue
		}
		raw, _ := json.Marshal(v.Query)
		var q struct{ Query string }
		if err := json.Unmarshal(raw, &q); err != nil || q.Query == "" {
			t.Errorf("variable %s: query %s", v.Name, raw)
			continue
		}
		// label_values(expr, label) is Grafana's: the series selector is
		// PromQL, the label must be on it.
		m := regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`).FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
	}
	return qs
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// grafanaVariables are the macros Grafana replaces before Prometheus sees
// a query, with values of the right type.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "1m", "$__interval", "30s", "$__range", "1h",
	"$job", ".*", "$instance", ".*",
)

// promql is Prometheus's parser with its defaults: stable PromQL only.
var promql = parser.NewParser(parser.Options{})

// selectors parses expr with Prometheus's PromQL parser and returns its
// series selectors and the labels it groups by.
func selectors(expr string) ([]*parser.VectorSelector, []string, error) {
	e, err := promql.ParseExpr(grafanaVariables.Replace(expr))
	if err != nil {
		return nil, nil, err
	}
	if strings.Contains(grafanaVariables.Replace(expr), "$") {
		return nil, nil, fmt.Errorf("a Grafana variable the test does not know")
	}
	var sels []*parser.VectorSelector
	var grouping []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			sels = append(sels, n)
		case *parser.AggregateExpr:
			if !n.Without {
				grouping = append(grouping, n.Grouping...)
			}
		}
		return nil
	})
	return sels, grouping, nil
}

// TestDashboardQueriesParse: the dashboard is Grafana's format, every query
// is valid PromQL, and the dashboard shows what an operator of a sidecar
// needs.
func TestDashboardQueriesParse(t *testing.T) {
	d := loadDashboard(t)
	queried := map[string]bool{}
	for _, q := range dashboardQueries(t, d) {
		sels, _, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
			continue
		}
		for _, s := range sels {
			queried[s.Name] = true
		}
	}
	for _, m := range []string{
		"ndbgate_requests_total",                  // request rate, errors by outcome
		"ndbgate_request_duration_seconds_bucket", // latency percentiles per front end
		"ndbgate_backend_batch_ops_bucket",        // batch sizes
		"ndbgate_backend_round_trips_total",       // flights (round trips)
		"ndbgate_backend_coalesced_rounds_total",  // coalescing
		"ndbgate_backend_inflight_ops",            // in flight
		"ndbgate_backend_retries_total",           // retries
		"ndbgate_engine_bytes",                    // memory
		"process_resident_memory_bytes",
		"ndbgate_engine_evictions_total",     // evictions
		"ndbgate_backend_node_ops_total",     // per-node operations (NDB)
		"ndbgate_backend_live_data_nodes",    // NDB data nodes
		"ndbgate_engine_out_of_memory_total", // writes refused for memory
		"ndbgate_backend_overloaded_total",   // admission refusals
		"ndbgate_protocol_errors_total",      // malformed requests
		"ndbgate_backend_hinted_transactions_total",
	} {
		if !queried[m] {
			t.Errorf("the dashboard does not query %s", m)
		}
	}
}

// TestDashboardMetricsExported starts the real binary, gives every front
// end some traffic, scrapes /metrics, and checks that each metric every
// query (the dashboard's, deploy/prometheus's rules) selects is exported, with the labels the query matches and groups by,
// and a series its matchers select.
//
// All of the dashboard's metrics are exported by the embedded engine too
// (the NDB ones, data nodes and TC hints, report the engine's simulated
// nodes or 0), so all are checked against the running binary; none is
// checked against declarations in the source only. The embedded engine is
// run with simulated nodes and a round-trip delay, so that the dispatcher's
// lanes (round trips, per-node operations, coalescing) are used as on NDB.
func TestDashboardMetricsExported(t *testing.T) {
	d := loadDashboard(t)
	rules, recorded := ruleQueries(t)
	queries := append(dashboardQueries(t, d), rules...)
	// Series Prometheus makes rather than scrapes: up (a scrape's health)
	// and what the rules record.
	prometheusMade := map[string]bool{"up": true}
	for name := range recorded {
		prometheusMade[name] = true
	}
	mc, rest := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := startServer(t, nil, "serve", "--memcache", mc, "--rest", rest, "--grpc", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--memory-limit", "16m", "--nodes", "2", "--simulated-round-trip", "100us")
	client := &http.Client{Timeout: 5 * time.Second}
	srv.waitHTTP(t, client, "http://"+rest+"/readyz")

	// Traffic: memcache hits, misses and a refused command; REST hits and
	// misses; enough writes to evict under the 16 MiB limit.
	memcacheRoundTrip(t, "tcp", mc, "k1", "v1")
	if got := memcacheGet(t, "tcp", mc, "missing"); got != "" {
		t.Fatalf("get missing: %q", got)
	}
	big := strings.Repeat("x", 64<<10)
	for i := range 400 {
		memcacheRoundTrip(t, "tcp", mc, fmt.Sprintf("big%d", i), big)
	}
	httpStatus(t, client, "GET", "http://"+rest+"/v1/kv/default/k1", "")
	httpStatus(t, client, "GET", "http://"+rest+"/v1/kv/default/nope", "")
	httpStatus(t, client, "GET", "http://"+rest+"/0.1.0/ping", "")

	resp, err := client.Get("http://" + rest + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	families := parseMetrics(t, resp.Body)
	resp.Body.Close()

	// Prometheus adds these to every scraped series.
	scrapeLabels := map[string]bool{"job": true, "instance": true}
	checked := map[string]bool{}
	for _, q := range queries {
		sels, grouping, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		for _, s := range sels {
			if prometheusMade[s.Name] {
				continue
			}
			series, ok := seriesOf(families, s.Name)
			if !ok {
				t.Errorf("%s: %s is not exported by ndbgate", q.where, s.Name)
				continue
			}
			checked[s.Name] = true
			names := map[string]bool{}
			for _, ls := range series {
				for k := range ls {
					names[k] = true
				}
			}
			matched := 0
		series:
			for _, ls := range series {
				for _, m := range s.LabelMatchers {
					if m.Name == labels.MetricName || scrapeLabels[m.Name] {
						continue
					}
					if !m.Matches(ls[m.Name]) {
						continue series
					}
				}
				matched++
			}
			for _, m := range s.LabelMatchers {
				if m.Name != labels.MetricName && !scrapeLabels[m.Name] && !names[m.Name] {
					t.Errorf("%s: %s has no label %q", q.where, s.Name, m.Name)
				}
			}
			if matched == 0 {
				t.Errorf("%s: no series of %s matches %s", q.where, s.Name, s)
			}
		}
		for _, g := range grouping {
			if scrapeLabels[g] || g == "le" {
				continue
			}
			found := false
			for _, s := range sels {
				series, _ := seriesOf(families, s.Name)
				for _, ls := range series {
					if _, ok := ls[g]; ok {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s: groups by %q, which none of its metrics has", q.where, g)
			}
		}
	}
	var list []string
	for m := range checked {
		list = append(list, m)
	}
	sort.Strings(list)
	t.Logf("%d queries (the dashboard's and the alert rules'), %d metrics, checked against the running binary: %s",
		len(queries), len(list), strings.Join(list, " "))
	srv.stop(t)
}

func parseMetrics(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// seriesOf returns the label sets of the series PromQL would see under name:
// a family's own name, or a histogram's _bucket (with le), _sum and _count.
func seriesOf(fams map[string]*dto.MetricFamily, name string) ([]map[string]string, bool) {
	base, suffix := name, ""
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := fams[strings.TrimSuffix(name, s)]; ok && strings.HasSuffix(name, s) &&
			(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
			base, suffix = strings.TrimSuffix(name, s), s
		}
	}
	f, ok := fams[base]
	if !ok {
		return nil, false
	}
	if suffix == "" && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
		return nil, false // PromQL has no series named as the histogram itself
	}
	var out []map[string]string
	for _, m := range f.Metric {
		ls := map[string]string{}
		for _, lp := range m.Label {
			ls[lp.GetName()] = lp.GetValue()
		}
		if suffix == "_bucket" {
			for _, b := range m.GetHistogram().GetBucket() {
				withLE := map[string]string{"le": fmt.Sprint(b.GetUpperBound())}
				for k, v := range ls {
					withLE[k] = v
				}
				out = append(out, withLE)
			}
			continue
		}
		out = append(out, ls)
	}
	return out, true
}
