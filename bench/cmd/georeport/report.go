package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// stats and visibility are what bench/cmd/geobench -json writes.
type stats struct {
	N     int     `json:"n"`
	MinMs float64 `json:"min_ms"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

type visibility struct {
	Addr     string `json:"addr"`
	Name     string `json:"name"`
	Position int    `json:"position"`
	Delay    stats  `json:"delay"`
	Missing  int    `json:"missing"`
}

type geobench struct {
	System     string       `json:"system"`
	Keyspace   string       `json:"keyspace"`
	Addrs      []string     `json:"addrs"`
	Names      []string     `json:"names"`
	Chain      []string     `json:"chain"`
	Leader     string       `json:"leader"`
	Puts       stats        `json:"puts"`
	Visibility []visibility `json:"visibility"`
}

// ycsbRun is the part of a bin/ycsb run --json report used here.
type ycsbRun struct {
	Setup struct {
		Records  int64  `json:"records"`
		Duration string `json:"duration"`
	} `json:"setup"`
	Results []struct {
		Mode       string  `json:"mode"`
		Workload   string  `json:"workload"`
		Clients    int     `json:"clients"`
		Throughput float64 `json:"throughput_ops"`
		Errors     int64   `json:"errors"`
		Latency    struct {
			P50Ms float64 `json:"p50_ms"`
			P99Ms float64 `json:"p99_ms"`
		} `json:"latency"`
	} `json:"results"`
}

// ycsbPoint is one YCSB-B run at one site.
type ycsbPoint struct {
	Mode       string
	Clients    int
	Throughput float64
	P50Ms      float64
	P99Ms      float64
	Errors     int64
}

// site is everything measured with writes or clients at one site.
type site struct {
	Name           string // s1, s2, ...
	CausewaySingle *geobench
	// CausewayLocal: puts into the three-site keyspace with no reader
	// polling the other sites, the same conditions as CausewaySingle.
	CausewayLocal            *geobench
	Causeway, Etcd           *geobench
	CausewayYCSB, EtcdYCSB   *ycsbPoint
	CausewayYCSBAll, EtcdAll *ycsbPoint
}

// report is the whole comparison.
type report struct {
	Title   string
	Delay   time.Duration
	Notes   []string
	Sites   []site
	Records int64
	YCSBFor string // the measured window of each YCSB run
}

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// load reads the measurements of n sites from dir.
func load(dir string, n int) (*report, error) {
	r := &report{}
	found := 0
	for i := 1; i <= n; i++ {
		s := site{Name: fmt.Sprintf("s%d", i)}
		for _, g := range []struct {
			file string
			dst  **geobench
		}{
			{"causeway-single", &s.CausewaySingle},
			{"causeway-local", &s.CausewayLocal},
			{"causeway-put", &s.Causeway},
			{"etcd-put", &s.Etcd},
		} {
			var v geobench
			ok, err := readJSON(filepath.Join(dir, fmt.Sprintf("%s-s%d.json", g.file, i)), &v)
			if err != nil {
				return nil, err
			}
			if ok {
				*g.dst = &v
				found++
			}
		}
		for _, y := range []struct {
			file string
			dst  **ycsbPoint
		}{
			{"causeway-ycsb", &s.CausewayYCSB},
			{"etcd-ycsb", &s.EtcdYCSB},
			{"causeway-ycsb-all", &s.CausewayYCSBAll},
			{"etcd-ycsb-all", &s.EtcdAll},
		} {
			var v ycsbRun
			ok, err := readJSON(filepath.Join(dir, fmt.Sprintf("%s-s%d.json", y.file, i)), &v)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			found++
			if r.Records == 0 {
				r.Records, r.YCSBFor = v.Setup.Records, v.Setup.Duration
			}
			for _, res := range v.Results {
				if res.Workload == "B" {
					*y.dst = &ycsbPoint{Mode: res.Mode, Clients: res.Clients, Throughput: res.Throughput,
						P50Ms: res.Latency.P50Ms, P99Ms: res.Latency.P99Ms, Errors: res.Errors}
				}
			}
		}
		r.Sites = append(r.Sites, s)
	}
	if found == 0 {
		return nil, fmt.Errorf("no measurements in %s", dir)
	}
	return r, nil
}

// verdict is one target's outcome.
type verdict struct {
	Name   string
	Pass   bool
	Known  bool // false: not measured
	Detail string
}

func (v verdict) status() string {
	switch {
	case !v.Known:
		return "not measured"
	case v.Pass:
		return "met"
	}
	return "missed"
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pair formats p50 / p99 in ms.
func pair(s stats) string {
	if s.N == 0 {
		return "–"
	}
	return ms(s.P50Ms) + " / " + ms(s.P99Ms)
}

// bound is the target for remote visibility at a chain position: the
// one-way delays along the chain plus 25 ms.
func (r *report) bound(position int) float64 {
	return float64(position)*durMs(r.Delay) + 25
}

// targets checks the three targets.
func (r *report) targets() []verdict {
	local := verdict{Name: "Causeway LOCAL put p50 at every site ≤ 1.2 × the same site's single-site p50", Known: true, Pass: true}
	var parts []string
	for _, s := range r.Sites {
		ratio, ok := p50Ratio(s.Causeway, s.CausewaySingle)
		if !ok {
			local.Known = false
			continue
		}
		// Compared under the same conditions: no readers polling the
		// other sites, whose requests share this machine's CPUs (on
		// separate machines they would not).
		part := fmt.Sprintf("%s %.2f×", s.Name, ratio)
		if quiet, ok := p50Ratio(s.CausewayLocal, s.CausewaySingle); ok && s.CausewayLocal.Puts.N > 0 {
			part = fmt.Sprintf("%s %.2f× (%.2f× with the readers polling)", s.Name, quiet, ratio)
			ratio = quiet
		}
		parts = append(parts, part)
		if ratio > 1.2 {
			local.Pass = false
		}
	}
	local.Detail = strings.Join(parts, ", ")

	rtt := 2 * durMs(r.Delay)
	etcd := verdict{Name: fmt.Sprintf("the stretched etcd pays at least one inter-site round trip (%s ms) per write", ms(rtt)), Known: true, Pass: true}
	parts = nil
	for _, s := range r.Sites {
		if s.Etcd == nil || s.Etcd.Puts.N == 0 {
			etcd.Known = false
			continue
		}
		parts = append(parts, fmt.Sprintf("%s fastest %s ms", s.Name, ms(s.Etcd.Puts.MinMs)))
		if s.Etcd.Puts.MinMs < rtt {
			etcd.Pass = false
		}
	}
	etcd.Detail = strings.Join(parts, ", ")

	vis := verdict{Name: fmt.Sprintf("Causeway remote visibility p99 ≤ the one-way delays along the chain + 25 ms (%s ms per hop)", ms(durMs(r.Delay))), Known: true, Pass: true}
	parts = nil
	seen := false
	for _, s := range r.Sites {
		if s.Causeway == nil {
			vis.Known = false
			continue
		}
		for _, v := range s.Causeway.Visibility {
			seen = true
			if v.Position <= 0 || v.Delay.N == 0 {
				vis.Pass = false
				parts = append(parts, fmt.Sprintf("%s→%s not measured", s.Name, v.Name))
				continue
			}
			b := r.bound(v.Position)
			if v.Delay.P99Ms > b || v.Missing > 0 {
				vis.Pass = false
				parts = append(parts, fmt.Sprintf("%s→%s %s > %s ms", s.Name, v.Name, ms(v.Delay.P99Ms), ms(b)))
			}
		}
	}
	if !seen {
		vis.Known = false
	}
	if vis.Pass && vis.Known {
		parts = append(parts, "every pair within its bound")
	}
	vis.Detail = strings.Join(parts, ", ")
	return []verdict{local, etcd, vis}
}

func tput(p *ycsbPoint) string {
	if p == nil {
		return "–"
	}
	s := fmt.Sprintf("%.0f", p.Throughput)
	if p.Errors > 0 {
		s += fmt.Sprintf(" (%d errors)", p.Errors)
	}
	return s
}

func ylat(p *ycsbPoint) string {
	if p == nil {
		return "–"
	}
	return ms(p.P50Ms) + " / " + ms(p.P99Ms)
}

// visCell lists a site's writes' visibility at each other site.
func visCell(g *geobench) string {
	if g == nil || len(g.Visibility) == 0 {
		return "–"
	}
	var parts []string
	for _, v := range g.Visibility {
		c := fmt.Sprintf("%s: %s", v.Name, pair(v.Delay))
		if v.Missing > 0 {
			c += fmt.Sprintf(" (%d not seen)", v.Missing)
		}
		parts = append(parts, c)
	}
	return strings.Join(parts, "; ")
}

// role names an etcd member and whether it led the cluster.
func role(g *geobench) string {
	if g == nil || len(g.Names) == 0 {
		return "–"
	}
	if g.Leader != "" && g.Leader == g.Names[0] {
		return g.Names[0] + " (leader)"
	}
	return g.Names[0] + " (follower)"
}

func (r *report) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# %s\n\n", r.Title)
	for _, n := range r.Notes {
		p("- %s\n", n)
	}
	if len(r.Notes) > 0 {
		p("\n")
	}

	p("## Per site\n\n")
	p("Writes and clients at one site at a time; latencies in ms (p50 / p99). Causeway: LOCAL puts, CAUSAL reads, the default keyspace held by every site. etcd: one member per site, every client talking to its own site's member; puts go through the leader, reads are serializable (the member's own state).\n\n")
	p("| site | Causeway LOCAL put | etcd put (member) | Causeway YCSB-B ops/s | etcd YCSB-B ops/s | Causeway: visible at the other sites | etcd: visible at the other sites |\n")
	p("|---|--:|--:|--:|--:|---|---|\n")
	for _, s := range r.Sites {
		p("| %s | %s | %s %s | %s | %s | %s | %s |\n", s.Name, pairOf(s.Causeway), pairOf(s.Etcd), role(s.Etcd),
			tput(s.CausewayYCSB), tput(s.EtcdYCSB), visCell(s.Causeway), visCell(s.Etcd))
	}
	p("\n")

	p("## Targets\n\n")
	p("| target | status | measured |\n|---|---|---|\n")
	for _, v := range r.targets() {
		p("| %s | %s | %s |\n", v.Name, v.status(), v.Detail)
	}
	p("\n")

	p("## Puts\n\n")
	n := 0
	for _, s := range r.Sites {
		if s.Causeway != nil {
			n = s.Causeway.Puts.N
			break
		}
	}
	p("One client at the site, %d puts one after the other (10 ms apart), latency in ms. \"Single site\": Causeway's puts into a keyspace held by that site only, the same setup without replication to the other sites. \"Three sites\": puts into the keyspace of all three sites, with no reader at the other sites (the same conditions as single site: the sites share this machine's CPUs, and readers polling every millisecond elsewhere take some of them) and, in the next column, while the readers of the visibility measurement poll.\n\n", n)
	p("| site | Causeway single site p50 / p99 | Causeway, three sites p50 / p99 | p50 ratio | three sites, readers polling p50 / p99 | p50 ratio | etcd p50 / p99 | etcd fastest | etcd member |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, s := range r.Sites {
		ratio, ratioPolled := "–", "–"
		if v, ok := p50Ratio(s.CausewayLocal, s.CausewaySingle); ok {
			ratio = fmt.Sprintf("%.2f", v)
		}
		if v, ok := p50Ratio(s.Causeway, s.CausewaySingle); ok {
			ratioPolled = fmt.Sprintf("%.2f", v)
		}
		fastest := "–"
		if s.Etcd != nil && s.Etcd.Puts.N > 0 {
			fastest = ms(s.Etcd.Puts.MinMs)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, pairOf(s.CausewaySingle), pairOf(s.CausewayLocal), ratio, pairOf(s.Causeway), ratioPolled, pairOf(s.Etcd), fastest, role(s.Etcd))
	}
	p("\n")

	p("## Remote visibility\n\n")
	p("From the start of a put at the writing site until a reader at the other site finds the key (one reader per other site asks, every 1 ms from the moment the put starts and in one request, for every key put but not yet seen there: Causeway a BatchGet in the reader's own CAUSAL session at that site, etcd a read-only transaction of serializable gets at that site's member). Bound: the one-way delays along Causeway's chain of sites from the writer (position × %s ms) + 25 ms.\n\n", ms(durMs(r.Delay)))
	p("| written at | seen at | chain position | bound | Causeway p50 / p99 | etcd p50 / p99 |\n")
	p("|---|---|--:|--:|--:|--:|\n")
	for _, s := range r.Sites {
		if s.Causeway == nil {
			continue
		}
		for k, v := range s.Causeway.Visibility {
			et := "–"
			if s.Etcd != nil && k < len(s.Etcd.Visibility) {
				et = pair(s.Etcd.Visibility[k].Delay) + " (" + s.Etcd.Visibility[k].Name + ")"
			}
			pos, bound := "–", "–"
			if v.Position > 0 {
				pos, bound = fmt.Sprint(v.Position), ms(r.bound(v.Position))
			}
			cw := pair(v.Delay)
			if v.Missing > 0 {
				cw += fmt.Sprintf(" (%d not seen)", v.Missing)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", s.Name, v.Name, pos, bound, cw, et)
		}
	}
	p("\n")

	p("## YCSB-B\n\n")
	clients, emode := 0, "etcd"
	for _, s := range r.Sites {
		if s.CausewayYCSB != nil {
			clients = s.CausewayYCSB.Clients
		}
		if s.EtcdYCSB != nil {
			emode = s.EtcdYCSB.Mode
		}
	}
	p("95%% reads, 5%% updates, zipfian, %d records of 1 KiB loaded at s1 once per system, %d clients at the site, %s measured per run. Causeway: causeway-causal; etcd: %s. \"Alone\": one site's clients at a time; \"all at once\": every site's clients together. Latency in ms.\n\n", r.Records, clients, r.YCSBFor, emode)
	p("| site | Causeway alone ops/s | p50 / p99 | etcd alone ops/s | p50 / p99 | Causeway all at once ops/s | etcd all at once ops/s |\n")
	p("|---|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range r.Sites {
		p("| %s | %s | %s | %s | %s | %s | %s |\n", s.Name, tput(s.CausewayYCSB), ylat(s.CausewayYCSB), tput(s.EtcdYCSB), ylat(s.EtcdYCSB), tput(s.CausewayYCSBAll), tput(s.EtcdAll))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// p50Ratio is g's put p50 over base's; false when either is missing.
func p50Ratio(g, base *geobench) (float64, bool) {
	if g == nil || base == nil || base.Puts.P50Ms == 0 {
		return 0, false
	}
	return g.Puts.P50Ms / base.Puts.P50Ms, true
}

func pairOf(g *geobench) string {
	if g == nil {
		return "–"
	}
	return pair(g.Puts)
}
