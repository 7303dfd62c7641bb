package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Target is one query of a dashboard panel.
type Target struct {
	Dashboard string // file name, e.g. geo.json
	Panel     string // panel title
	RefID     string
	Expr      string
	Legend    string
	Unit      string // the panel's fieldConfig.defaults.unit
}

func (t Target) String() string {
	return fmt.Sprintf("%s / %q (%s): %s", t.Dashboard, t.Panel, t.RefID, t.Expr)
}

// dashboardJSON is the part of a Grafana dashboard the checker reads.
type dashboardJSON struct {
	Title  string      `json:"title"`
	Panels []panelJSON `json:"panels"`
}

type panelJSON struct {
	Title       string `json:"title"`
	Type        string `json:"type"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
		Hide         bool   `json:"hide"`
	} `json:"targets"`
	Panels []panelJSON `json:"panels"` // the panels of a collapsed row
}

// ExtractTargets returns the query of every target of every panel (rows'
// nested panels included) of the dashboard JSON data, in panel order.
// Hidden targets and targets without an expression are left out.
func ExtractTargets(name string, data []byte) ([]Target, error) {
	var d dashboardJSON
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: no panels", name)
	}
	var out []Target
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if t.Hide || strings.TrimSpace(t.Expr) == "" {
					continue
				}
				out = append(out, Target{Dashboard: name, Panel: p.Title, RefID: t.RefID, Expr: t.Expr,
					Legend: t.LegendFormat, Unit: p.FieldConfig.Defaults.Unit})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

// LoadDashboards extracts the targets of every *.json file of dir, in file
// name order.
func LoadDashboards(dir string) ([]Target, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards (*.json) in %s", dir)
	}
	slices.Sort(files)
	var out []Target
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		ts, err := ExtractTargets(filepath.Base(f), data)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// grafanaVar matches a dashboard variable: $name, ${name} or ${name:fmt}.
var grafanaVar = regexp.MustCompile(`\$(\{[A-Za-z0-9_]+(:[A-Za-z0-9_]+)?\}|[A-Za-z0-9_]+)`)

// Substitute replaces Grafana's interval variables with fixed durations
// and every other dashboard variable with ".*" (use them only in =~
// matchers), so that the expression can be sent to Prometheus as is.
func Substitute(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		name, _, _ = strings.Cut(name, ":")
		switch name {
		case "__rate_interval":
			return "1m"
		case "__interval", "__range":
			return "5m"
		case "__interval_ms", "__range_ms":
			return "300000"
		case "__range_s":
			return "300"
		}
		return ".*"
	})
}

// apiResponse is the envelope of Prometheus's HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// queryData is the data of /api/v1/query and /api/v1/query_range.
type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

// Series is one series of a query's result: its labels and samples (one for
// an instant query).
type Series struct {
	Metric map[string]string
	Points []Point
}

// Point is one sample.
type Point struct {
	T time.Time
	V float64
}

// QueryError is an error Prometheus reported (an invalid expression is
// errorType bad_data): retrying does not help.
type QueryError struct {
	Type, Msg string
}

func (e *QueryError) Error() string { return e.Type + ": " + e.Msg }

// ErrNoData is what CheckSeries returns for a result without data.
var ErrNoData = errors.New("no data")

// ParseResponse decodes a /api/v1/query or /api/v1/query_range response
// body into its series.
func ParseResponse(body []byte) ([]Series, error) {
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	if r.Status != "success" {
		return nil, &QueryError{Type: r.ErrorType, Msg: r.Error}
	}
	var d queryData
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return nil, fmt.Errorf("decoding the response data: %w", err)
	}
	switch d.ResultType {
	case "vector", "matrix":
		var raw []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		}
		if err := json.Unmarshal(d.Result, &raw); err != nil {
			return nil, fmt.Errorf("decoding the %s: %w", d.ResultType, err)
		}
		out := make([]Series, 0, len(raw))
		for _, s := range raw {
			sr := Series{Metric: s.Metric}
			samples := s.Values
			if s.Value != nil {
				samples = [][]any{s.Value}
			}
			for _, v := range samples {
				p, err := parsePoint(v)
				if err != nil {
					return nil, err
				}
				sr.Points = append(sr.Points, p)
			}
			out = append(out, sr)
		}
		return out, nil
	case "scalar":
		var v []any
		if err := json.Unmarshal(d.Result, &v); err != nil {
			return nil, fmt.Errorf("decoding the scalar: %w", err)
		}
		p, err := parsePoint(v)
		if err != nil {
			return nil, err
		}
		return []Series{{Metric: map[string]string{}, Points: []Point{p}}}, nil
	}
	return nil, fmt.Errorf("result type %q: want vector, matrix or scalar", d.ResultType)
}

// parsePoint decodes [unix seconds, "value"].
func parsePoint(v []any) (Point, error) {
	if len(v) != 2 {
		return Point{}, fmt.Errorf("sample %v: want [time, value]", v)
	}
	ts, ok := v[0].(float64)
	s, ok2 := v[1].(string)
	if !ok || !ok2 {
		return Point{}, fmt.Errorf("sample %v: want [time, value]", v)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Point{}, fmt.Errorf("sample %v: %w", v, err)
	}
	sec, frac := math.Modf(ts)
	return Point{T: time.Unix(int64(sec), int64(frac*1e9)), V: f}, nil
}

// CheckSeries accepts a result with at least one sample that is a number:
// no series, or only NaN (a histogram_quantile or ratio over a window
// without events), is ErrNoData.
func CheckSeries(ss []Series) error {
	if len(ss) == 0 {
		return fmt.Errorf("%w: no series", ErrNoData)
	}
	for _, s := range ss {
		for _, p := range s.Points {
			if !math.IsNaN(p.V) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %d series, every value NaN", ErrNoData, len(ss))
}

// Prometheus queries Prometheus's HTTP API.
type Prometheus struct {
	URL    string // e.g. http://127.0.0.1:9090
	Client *http.Client
}

func (p *Prometheus) get(ctx context.Context, path string, q url.Values) ([]Series, error) {
	u := strings.TrimRight(p.URL, "/") + path + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	ss, err := ParseResponse(body)
	var qe *QueryError
	if err != nil && !errors.As(err, &qe) && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %s", path, resp.Status)
	}
	return ss, err
}

// Query runs an instant query at time now.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Series, error) {
	return p.get(ctx, "/api/v1/query", url.Values{"query": {Substitute(expr)}, "time": {fmtTime(time.Now())}})
}

// QueryRange runs a range query from start to end.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	return p.get(ctx, "/api/v1/query_range", url.Values{"query": {Substitute(expr)},
		"start": {fmtTime(start)}, "end": {fmtTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func fmtTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// Failure is a target whose query failed or returned no data.
type Failure struct {
	Target Target
	Err    error
}

// Permanent reports whether retrying cannot fix the failure (Prometheus
// refused the expression).
func (f Failure) Permanent() bool {
	var qe *QueryError
	return errors.As(f.Err, &qe)
}

func (f Failure) String() string {
	return fmt.Sprintf("%s / %q (%s)\n    expr:  %s\n    error: %v", f.Target.Dashboard, f.Target.Panel, f.Target.RefID, f.Target.Expr, f.Err)
}

// Check evaluates every target and returns those that failed.
func Check(ctx context.Context, p *Prometheus, targets []Target) []Failure {
	var out []Failure
	for _, t := range targets {
		ss, err := p.Query(ctx, t.Expr)
		if err == nil {
			err = CheckSeries(ss)
		}
		if err != nil {
			out = append(out, Failure{Target: t, Err: err})
		}
	}
	return out
}

// Legend formats a Grafana legend ({{label}} replaced by the series'
// value of label); an empty format gives the series' labels.
func Legend(format string, metric map[string]string) string {
	if format == "" || format == "__auto" {
		keys := make([]string, 0, len(metric))
		for k := range metric {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+metric[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return legendVar.ReplaceAllStringFunc(format, func(m string) string {
		return metric[strings.TrimSpace(m[2:len(m)-2])]
	})
}

var legendVar = regexp.MustCompile(`\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}`)
