package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sampleDashboard = `{
  "title": "Sample",
  "schemaVersion": 39,
  "panels": [
    {"type": "timeseries", "title": "Lag", "fieldConfig": {"defaults": {"unit": "s"}},
     "targets": [{"refId": "A", "expr": "max by (site) (causeway_geo_replication_lag_seconds)", "legendFormat": "{{site}}"},
                 {"refId": "B", "expr": "hidden_metric", "hide": true},
                 {"refId": "C", "expr": "  "}]},
    {"type": "row", "title": "More", "collapsed": true, "panels": [
      {"type": "stat", "title": "Broken", "targets": [{"refId": "A", "expr": "sum(rate(causeway_rpc_requests_total[1m]"}]},
      {"type": "stat", "title": "Empty", "targets": [{"refId": "A", "expr": "absent_metric_total"}]}
    ]}
  ]
}`

func TestExtractTargets(t *testing.T) {
	ts, err := ExtractTargets("sample.json", []byte(sampleDashboard))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range ts {
		got = append(got, x.Dashboard+"|"+x.Panel+"|"+x.RefID+"|"+x.Unit)
	}
	want := []string{"sample.json|Lag|A|s", "sample.json|Broken|A|", "sample.json|Empty|A|"}
	if !slices.Equal(got, want) {
		t.Fatalf("targets %q, want %q", got, want)
	}
	if ts[0].Legend != "{{site}}" {
		t.Errorf("legend %q", ts[0].Legend)
	}
	if _, err := ExtractTargets("bad.json", []byte(`{"panels": [`)); err == nil {
		t.Error("invalid JSON accepted")
	}
	if _, err := ExtractTargets("none.json", []byte(`{"title": "x"}`)); err == nil {
		t.Error("a dashboard without panels accepted")
	}
}

func TestSubstitute(t *testing.T) {
	for in, want := range map[string]string{
		`rate(x[$__rate_interval])`:           `rate(x[1m])`,
		`rate(x{site=~"$site"}[$__interval])`: `rate(x{site=~".*"}[5m])`,
		`x{site=~"${site:regex}"}`:            `x{site=~".*"}`,
		`x{a=~"b$"}`:                          `x{a=~"b$"}`,
	} {
		if got := Substitute(in); got != want {
			t.Errorf("Substitute(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseResponseAndCheckSeries(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		series     int
		err        string // of ParseResponse
		noData     bool   // CheckSeries fails
	}{
		{"vector", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"site":"s1"},"value":[1700000000.5,"0.25"]}]}}`, 1, "", false},
		{"empty", `{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, "", true},
		{"nan", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]},{"metric":{"a":"b"},"value":[1,"NaN"]}]}}`, 2, "", true},
		{"nan and number", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]},{"metric":{"a":"b"},"value":[1,"+Inf"]}]}}`, 2, "", false},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}`, 1, "", false},
		{"matrix", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"NaN"],[3,"2"]]}]}}`, 1, "", false},
		{"bad data", `{"status":"error","errorType":"bad_data","error":"1:10: parse error: unclosed left parenthesis"}`, 0, "bad_data: 1:10: parse error", false},
		{"garbage", `<html>`, 0, "decoding", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss, err := ParseResponse([]byte(tc.body))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ss) != tc.series {
				t.Fatalf("%d series, want %d", len(ss), tc.series)
			}
			if err := CheckSeries(ss); (err != nil) != tc.noData || (err != nil && !errors.Is(err, ErrNoData)) {
				t.Fatalf("CheckSeries: %v, want no data %v", err, tc.noData)
			}
		})
	}
	ss, _ := ParseResponse([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.5,"0.25"]}]}}`))
	if p := ss[0].Points[0]; !p.T.Equal(time.UnixMilli(1700000000500)) || p.V != 0.25 {
		t.Errorf("point %+v", p)
	}
}

// fakePrometheus answers like Prometheus's HTTP API: expressions with
// unbalanced parentheses are bad_data (HTTP 400), absent_* selects
// nothing, anything else returns one series per site.
func fakePrometheus(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		w.Header().Set("Content-Type", "application/json")
		if strings.Count(q, "(") != strings.Count(q, ")") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":"1:%d: parse error: unclosed left parenthesis"}`, len(q))
			return
		}
		var result []any
		if !strings.Contains(q, "absent_") {
			for i, site := range []string{"s1", "s2"} {
				switch r.URL.Path {
				case "/api/v1/query":
					if r.FormValue("time") == "" {
						t.Errorf("instant query without time")
					}
					result = append(result, map[string]any{"metric": map[string]string{"site": site}, "value": []any{1700000000, "1"}})
				case "/api/v1/query_range":
					var vals [][]any
					for k := range 20 {
						v := fmt.Sprint(0.01 * float64(k+i))
						if k == 10 {
							v = "NaN"
						}
						vals = append(vals, []any{1700000000 + 5*k, v})
					}
					result = append(result, map[string]any{"metric": map[string]string{"site": site}, "values": vals})
				default:
					http.NotFound(w, r)
					return
				}
			}
		}
		typ := "vector"
		if r.URL.Path == "/api/v1/query_range" {
			typ = "matrix"
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": typ, "result": result}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A dashboard with an invalid expression and one without data is reported:
// dashboard, panel, expression and Prometheus's error.
func TestCheckReportsFailures(t *testing.T) {
	srv := fakePrometheus(t)
	ts, err := ExtractTargets("sample.json", []byte(sampleDashboard))
	if err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{URL: srv.URL}
	fs := Check(context.Background(), p, ts)
	if len(fs) != 2 {
		t.Fatalf("%d failures, want 2: %v", len(fs), fs)
	}
	broken, empty := fs[0], fs[1]
	if !broken.Permanent() || empty.Permanent() {
		t.Errorf("permanent: broken %v, empty %v", broken.Permanent(), empty.Permanent())
	}
	for _, want := range []string{"sample.json", `"Broken"`, "sum(rate(causeway_rpc_requests_total[1m]", "bad_data", "unclosed left parenthesis"} {
		if !strings.Contains(broken.String(), want) {
			t.Errorf("report %q lacks %q", broken.String(), want)
		}
	}
	if !errors.Is(empty.Err, ErrNoData) || !strings.Contains(empty.String(), `"Empty"`) {
		t.Errorf("empty: %v", empty)
	}

	// The command: exit 1 without waiting for an invalid expression.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sample.json"), []byte(sampleDashboard), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := run(context.Background(), srv.URL, dir, "", time.Minute, time.Minute, ""); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	// A panel allowed to be empty (--may-be-empty) is not a failure.
	only := t.TempDir()
	const emptyOnly = `{"title": "E", "panels": [{"type": "stat", "title": "Empty", "targets": [{"refId": "A", "expr": "absent_metric_total"}]}]}`
	if err := os.WriteFile(filepath.Join(only, "empty.json"), []byte(emptyOnly), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), srv.URL, only, "", 0, time.Minute, ""); code != 1 {
		t.Errorf("a panel without data: exit %d, want 1", code)
	}
	if code := run(context.Background(), srv.URL, only, "", 0, time.Minute, "Other,Empty"); code != 0 {
		t.Errorf("a panel without data allowed to be empty: exit %d, want 0", code)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("an invalid expression was retried")
	}
	if code := run(context.Background(), srv.URL, t.TempDir(), "", 0, 0, ""); code != 2 {
		t.Errorf("exit %d without dashboards, want 2", code)
	}
}

func TestRenderPanels(t *testing.T) {
	srv := fakePrometheus(t)
	ts := []Target{
		{Dashboard: "geo.json", Panel: "Lag", RefID: "A", Expr: "lag", Legend: "p50 {{site}}", Unit: "s"},
		{Dashboard: "geo.json", Panel: "Lag", RefID: "B", Expr: "lag2", Legend: "p99 {{site}}", Unit: "s"},
		{Dashboard: "geo.json", Panel: "Nothing", RefID: "A", Expr: "absent_x"},
	}
	dir := t.TempDir()
	files, err := RenderPanels(context.Background(), &Prometheus{URL: srv.URL}, ts, "geo.json", []string{"Lag", "Nothing"}, dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "dashboard-geo-lag.png"), filepath.Join(dir, "dashboard-geo-nothing.png")}
	if !slices.Equal(files, want) {
		t.Fatalf("files %q, want %q", files, want)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 400 {
		t.Errorf("image %v, want 800x400", b)
	}
	if _, err := RenderPanels(context.Background(), &Prometheus{URL: srv.URL}, ts, "geo.json", []string{"Missing"}, dir, time.Minute); err == nil {
		t.Error("a missing panel was not reported")
	}
}

func TestLegendAndSlug(t *testing.T) {
	m := map[string]string{"site": "s1", "exported_site": "s2"}
	if got := Legend("{{site}} → {{ exported_site }}", m); got != "s1 → s2" {
		t.Errorf("legend %q", got)
	}
	if got := Legend("", m); got != "{exported_site=s2, site=s1}" {
		t.Errorf("legend %q", got)
	}
	if got := Slug("Request latency by site (p99)"); got != "request-latency-by-site-p99" {
		t.Errorf("slug %q", got)
	}
}

// The dashboards of deploy/grafana: well formed, every expression
// balanced, every causeway_ metric documented in docs/operations.md, and
// the panels --png-dir draws present. make dashboards checks them against
// a real Prometheus.
func TestRepoDashboards(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	dir := filepath.Join(root, "deploy", "grafana", "dashboards")
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(causeway_[a-z_]+)\\*?`").FindAllStringSubmatch(string(ops), -1) {
		documented[m[1]] = true
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	slices.Sort(files)
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if want := []string{"cluster.json", "geo.json", "raft-storage.json", "requests.json"}; !slices.Equal(names, want) {
		t.Fatalf("dashboards %q, want %q", names, want)
	}
	uids := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID           string `json:"uid"`
			SchemaVersion int    `json:"schemaVersion"`
			Panels        []struct {
				ID         int    `json:"id"`
				Type       string `json:"type"`
				Title      string `json:"title"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
				Targets []struct {
					Datasource struct {
						UID string `json:"uid"`
					} `json:"datasource"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.SchemaVersion != 39 || d.UID == "" || uids[d.UID] {
			t.Errorf("%s: schemaVersion %d, uid %q (duplicate: %v)", f, d.SchemaVersion, d.UID, uids[d.UID])
		}
		uids[d.UID] = true
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if p.Type != "timeseries" && p.Type != "stat" {
				t.Errorf("%s / %q: type %q", f, p.Title, p.Type)
			}
			if ids[p.ID] {
				t.Errorf("%s / %q: duplicate id %d", f, p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Datasource.UID != "prometheus" || len(p.Targets) == 0 {
				t.Errorf("%s / %q: datasource %q, %d targets", f, p.Title, p.Datasource.UID, len(p.Targets))
			}
			for _, tg := range p.Targets {
				if tg.Datasource.UID != "prometheus" {
					t.Errorf("%s / %q: target datasource %q", f, p.Title, tg.Datasource.UID)
				}
			}
		}
	}
	ts, err := LoadDashboards(dir)
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`\bcauseway_[a-z_]+`)
	for _, tg := range ts {
		if err := balanced(tg.Expr); err != nil {
			t.Errorf("%v: %v", tg, err)
		}
		if strings.Contains(tg.Expr, "$") {
			t.Errorf("%v: dashboard variables are not used", tg)
		}
		for _, m := range metric.FindAllString(tg.Expr, -1) {
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && documented[b] {
					base = b
				}
			}
			if !documented[base] && !(strings.HasPrefix(base, "causeway_transport_") && documented["causeway_transport_"]) {
				t.Errorf("%v: metric %s is not in docs/operations.md", tg, m)
			}
		}
	}
	for _, title := range keyPanels {
		if len(panelTargets(ts, "geo.json", title)) == 0 {
			t.Errorf("geo.json has no panel %q (drawn by --png-dir)", title)
		}
	}
}

// balanced checks that the brackets of a PromQL expression pair up outside
// its strings.
func balanced(expr string) error {
	var stack []rune
	pair := map[rune]rune{')': '(', ']': '[', '}': '{'}
	var quote rune
	for i, r := range expr {
		switch {
		case quote != 0:
			if r == quote && (i == 0 || expr[i-1] != '\\') {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case r == ')' || r == ']' || r == '}':
			if len(stack) == 0 || stack[len(stack)-1] != pair[r] {
				return fmt.Errorf("unbalanced %q at %d", r, i)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if quote != 0 || len(stack) > 0 {
		return fmt.Errorf("unclosed %q", append(stack, quote))
	}
	return nil
}

func TestBalanced(t *testing.T) {
	for expr, ok := range map[string]bool{
		`sum by (a) (rate(x{b="(("}[1m]))`: true,
		`sum(rate(x[1m])`:                  false,
		`x{a="b"]`:                         false,
		`x{a="b}`:                          false,
	} {
		if err := balanced(expr); (err == nil) != ok {
			t.Errorf("balanced(%q) = %v", expr, err)
		}
	}
}
