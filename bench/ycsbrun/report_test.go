package ycsbrun

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/floors"
)

// result builds a result with a throughput, a p50 and, for workload A, an
// UPDATE kind whose p50 is twice the read's.
func result(mode, workload string, clients, round int, ops, p50 float64) Result {
	r := Result{Mode: mode, System: drivers.SystemOf(mode), Workload: workload, Round: round, Measurement: core.Measurement{
		Clients: clients, Throughput: ops, Ops: int64(ops * 10), WindowS: 10,
		Latency: core.Latency{Count: int64(ops * 10), P50Ms: p50, P95Ms: 3 * p50, P99Ms: 4 * p50, P999Ms: 5 * p50},
		CPU:     core.CPUUse{Machine: 1.5, Servers: 1, Client: 0.4, Total: 2},
	}}
	r.Kinds = []core.KindResult{{Kind: "READ", Ops: r.Ops / 2, Latency: r.Latency}}
	if workload == "A" {
		r.Kinds = append(r.Kinds, core.KindResult{Kind: "UPDATE", Ops: r.Ops / 2, Latency: core.Latency{Count: r.Ops / 2, P50Ms: p50 * 2, P99Ms: p50 * 8}})
	}
	return r
}

// roundFactor is each round's throughput factor: medians are the base.
var roundFactor = []float64{0.9, 1.1, 1}

// sampleReport has three rounds of workloads A, B and C at 1 and 16
// clients: Causeway CAUSAL 2× etcd serializable, STRONG 0.8× etcd
// linearizable, in every round.
func sampleReport() Report {
	r := Report{
		Title: "test",
		Setup: Setup{Records: 1000, ValueSize: 1024, Warmup: "1s", Duration: "2s", Seed: 1, ClientsPerConn: 8, Rounds: 3,
			Workloads: []string{"A", "B", "C"}, Clients: []int{1, 16},
			Modes: []string{drivers.ModeEtcdLin, drivers.ModeEtcdSer, drivers.ModeCausewayCausal, drivers.ModeCausewayStrong}},
		Floors: &floors.Floors{Fsync: floors.Result{Samples: 100, P50Ms: 0.5, P99Ms: 1}, GRPCEcho: floors.Result{Samples: 100, P50Ms: 0.05, P99Ms: 0.2}},
	}
	add := func(mode string, mult, p50 float64) {
		for round, f := range roundFactor {
			for _, w := range []string{"A", "B", "C"} {
				base := map[string]float64{"A": 1000, "B": 4000, "C": 5000}[w]
				r.Results = append(r.Results, result(mode, w, 1, round+1, base/10*mult*f, p50*f), result(mode, w, 16, round+1, base*mult*f, 4*p50*f))
			}
		}
	}
	add(drivers.ModeEtcdSer, 1, 0.6)
	add(drivers.ModeEtcdLin, 0.5, 0.7)
	add(drivers.ModeCausewayCausal, 2, 0.5)   // faster puts than etcd-ser
	add(drivers.ModeCausewayStrong, 0.4, 0.8) // slower puts than etcd-lin
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestAggregate(t *testing.T) {
	r := sampleReport()
	r.Results[0].Errors = 2
	pts := Aggregate(r.Results)
	if len(pts) != 4*3*2 {
		t.Fatalf("%d points, want 24", len(pts))
	}
	p := pts[0] // etcd-ser A 1 client: 100 ops/s × 0.9, 1.1, 1
	if p.Mode != drivers.ModeEtcdSer || p.Workload != "A" || p.Clients != 1 || p.Rounds != 3 || p.Errors != 2 {
		t.Fatalf("first point %+v", p)
	}
	if !near(p.Throughput.Median, 100) || !near(p.Throughput.Min, 90) || !near(p.Throughput.Max, 110) || p.Throughput.N != 3 {
		t.Errorf("throughput %+v", p.Throughput)
	}
	if !near(p.P50.Median, 0.6) || !near(p.P50.Min, 0.54) || !near(p.P99.Max, 4*0.66) || !near(p.P95.Median, 1.8) || !near(p.P999.Median, 3) {
		t.Errorf("latency p50 %+v p99 %+v", p.P50, p.P99)
	}
	u := p.Kind("UPDATE")
	if u.Ops != 450+550+500 || !near(u.P50.Median, 1.2) || p.Kind("SCAN").Ops != 0 {
		t.Errorf("update kind %+v", u)
	}
	if p.CPU != (core.CPUUse{Machine: 1.5, Servers: 1, Client: 0.4, Total: 2}) {
		t.Errorf("cpu %+v", p.CPU)
	}
}

func TestComputeRatios(t *testing.T) {
	r := sampleReport()
	Evaluate(&r)
	if len(r.Ratios) != 3*2*2 {
		t.Fatalf("%d ratios, want 12", len(r.Ratios))
	}
	for _, ra := range r.Ratios {
		want := 2.0
		if ra.Causeway == drivers.ModeCausewayStrong {
			want = 0.8
			if ra.Etcd != drivers.ModeEtcdLin {
				t.Errorf("strong paired with %s", ra.Etcd)
			}
		} else if ra.Etcd != drivers.ModeEtcdSer {
			t.Errorf("causal paired with %s", ra.Etcd)
		}
		// The range pairs Causeway's slowest round (0.9) with etcd's
		// fastest (1.1), and the reverse.
		if !near(ra.Ratio, want) || !near(ra.RatioMin, want*0.9/1.1) || !near(ra.RatioMax, want*1.1/0.9) {
			t.Errorf("%s %d %s: ratio %.3f (%.3f–%.3f), want %.1f", ra.Workload, ra.Clients, ra.Causeway, ra.Ratio, ra.RatioMin, ra.RatioMax, want)
		}
	}
	// etcd did nothing: ratio 0, not a division by zero.
	r.Results = []Result{result(drivers.ModeCausewayCausal, "C", 1, 0, 10, 1), result(drivers.ModeEtcdSer, "C", 1, 0, 0, 0)}
	Evaluate(&r)
	if len(r.Ratios) != 1 || r.Ratios[0].Ratio != 0 {
		t.Errorf("zero etcd throughput: %+v", r.Ratios)
	}
}

func TestEvaluateTargets(t *testing.T) {
	r := sampleReport()
	Evaluate(&r)
	got := map[string]Verdict{}
	for _, v := range r.Targets {
		got[v.Target] = v
	}
	check := func(name string, met bool, value float64) {
		t.Helper()
		v, ok := got[name]
		if !ok {
			t.Errorf("no target %q in %v", name, r.Targets)
			return
		}
		if !v.Evaluated || v.Met != met || !near(v.Value, value) {
			t.Errorf("%s: evaluated %v met %v value %.3f, want met %v value %.3f", name, v.Evaluated, v.Met, v.Value, met, value)
		}
	}
	check("YCSB-A CAUSAL ≥ 1.0× etcd serializable", true, 2)
	check("YCSB-A STRONG ≥ 1.0× etcd linearizable", false, 0.8)
	check("YCSB-B CAUSAL ≥ 1.5× etcd serializable", true, 2)
	check("YCSB-C CAUSAL ≥ 1.5× etcd serializable", true, 2)
	check("YCSB-C STRONG ≥ 1.0× etcd linearizable", false, 0.8)
	// Put latency: A's UPDATE p50 at 1 client is twice the read p50:
	// Causeway CAUSAL 1.0 ms against etcd-ser 1.2, STRONG 1.6 against 1.4.
	check("1-client put p50, causeway-causal ≤ etcd-ser", true, 1.0)
	check("1-client put p50, causeway-strong ≤ etcd-lin", false, 1.6)
	if v := got["1-client put p50, causeway-causal ≤ etcd-ser"]; !near(v.Limit, 1.2) || !strings.Contains(v.Detail, "fdatasync p50 0.500 ms") ||
		!strings.Contains(v.Detail, "1.000 (0.900–1.100)") {
		t.Errorf("put verdict %+v", v)
	}
	// Workload F was not run: its targets are not measured.
	for _, name := range []string{"YCSB-F CAUSAL ≥ 1.0× etcd serializable", "YCSB-F STRONG ≥ 1.0× etcd linearizable"} {
		if v := got[name]; v.Evaluated || v.Status() != "not measured" {
			t.Errorf("%s: %s", name, v.Status())
		}
	}
	if v := got["YCSB-C CAUSAL ≥ 1.5× etcd serializable"]; v.Detail != "1 clients 2.00× (1.64–2.44), 16 clients 2.00× (1.64–2.44)" || v.Status() != "pass" {
		t.Errorf("detail %q, status %s", v.Detail, v.Status())
	}
	if v := got["YCSB-C STRONG ≥ 1.0× etcd linearizable"]; v.Status() != "FAIL" {
		t.Errorf("status %s", v.Status())
	}
	// Without etcd results the targets are not measured.
	r2 := sampleReport()
	var cw []Result
	for _, res := range r2.Results {
		if res.System == "causeway" {
			cw = append(cw, res)
		}
	}
	r2.Results = cw
	Evaluate(&r2)
	for _, v := range r2.Targets {
		if v.Evaluated || v.Status() != "not measured" {
			t.Errorf("%s: %s with missing results", v.Target, v.Status())
		}
	}
}

// TestPeakUsesMedians: the peak is the client count with the best median,
// not the best single round.
func TestPeakUsesMedians(t *testing.T) {
	r := Report{Results: []Result{
		result(drivers.ModeEtcdSer, "C", 1, 1, 100, 1), result(drivers.ModeEtcdSer, "C", 1, 2, 100, 1), result(drivers.ModeEtcdSer, "C", 1, 3, 400, 1),
		result(drivers.ModeEtcdSer, "C", 16, 1, 200, 1), result(drivers.ModeEtcdSer, "C", 16, 2, 200, 1), result(drivers.ModeEtcdSer, "C", 16, 3, 200, 1),
	}}
	Evaluate(&r)
	p, ok := r.Peak(drivers.ModeEtcdSer, "C")
	if !ok || p.Clients != 16 || p.Throughput.Median != 200 {
		t.Errorf("peak %+v", p)
	}
	if _, ok := r.Peak(drivers.ModeEtcdSer, "Z"); ok {
		t.Error("peak of a missing workload")
	}
}

// checkTables fails when a markdown table row has another number of
// cells than its header.
func checkTables(t *testing.T, md string) {
	t.Helper()
	lines := strings.Split(md, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "|--") || strings.HasPrefix(lines[i], "|---") {
			cols := strings.Count(lines[i], "|")
			if strings.Count(lines[i-1], "|") != cols {
				t.Errorf("header %q has %d bars, separator %d", lines[i-1], strings.Count(lines[i-1], "|"), cols)
			}
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
				if n := strings.Count(lines[j], "|") - strings.Count(lines[j], `\|`); n != cols {
					t.Errorf("row %q has %d bars, want %d", lines[j], n, cols)
				}
			}
		}
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	r := sampleReport()
	r.Results[0].Errors = 3
	r.Results[0].ErrorClasses = map[string]int64{"timeout": 3}
	r.Results[0].ErrorSamples = []string{"READ: context deadline exceeded"}
	for round := 1; round <= 3; round++ {
		r.Results = append(r.Results, result(drivers.ModeCausewayRaw, "C", 16, round, 15000, 1))
	}
	r.Loads = []LoadPhase{{LoadResult: core.LoadResult{Mode: drivers.ModeEtcdLin, Records: 1000, Loaded: 1000, Clients: 32, Seconds: 1, Throughput: 1000}, Round: 2}}
	Evaluate(&r)
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"# test", "- 3 rounds; every figure is the median", "## Floors", "## Targets", "**pass**", "**FAIL**", "**not measured**",
		"## Throughput, Causeway / etcd", "| C | 16 | 10000 | 5000 | 2.00× | 1.64×–2.44× |", "## Diagnostic",
		"| C | 16 | 15000 | 10000 | 1.50× | 1.000 | 2.000 | 3.00× |", "## Results",
		"| C | 16 | causeway-causal | 3 | 10000 (9000–11000) | 20.0% | 2.000 (1.800–2.200) |",
		"## Latency per operation", "| A | 1 | causeway-causal | UPDATE | 3000 | 1.000 (0.900–1.100) |",
		"## Throughput per round", "| C | 16 | causeway-causal | 9000 | 11000 | 10000 |",
		"## Load phase", "| etcd-lin | 2 | 1000 |", "## Errors", "round 1: 3 errors (timeout 3)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	checkTables(t, out)

	path := filepath.Join(t.TempDir(), "r.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	back, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || len(back.Ratios) != len(r.Ratios) || len(back.Targets) != len(r.Targets) || len(back.Points) != len(r.Points) ||
		back.Floors == nil || back.Floors.Fsync.P50Ms != 0.5 || back.Results[0].Latency != r.Results[0].Latency || back.Results[5].Round != r.Results[5].Round ||
		back.Points[0].Throughput != r.Points[0].Throughput || back.Loads[0].Round != 2 || back.Loads[0].Loaded != 1000 {
		t.Errorf("JSON round trip lost data")
	}
}

func TestSortResults(t *testing.T) {
	r := sampleReport()
	r.SortResults()
	prev := r.Results[0]
	for _, res := range r.Results[1:] {
		if res.Workload == prev.Workload && res.Clients == prev.Clients && modeOrder(res.Mode) < modeOrder(prev.Mode) {
			t.Fatalf("%s before %s", prev.Mode, res.Mode)
		}
		if res.Workload == prev.Workload && res.Clients < prev.Clients {
			t.Fatalf("clients %d before %d", prev.Clients, res.Clients)
		}
		if keyOf(res) == keyOf(prev) && res.Round != prev.Round+1 {
			t.Fatalf("round %d after %d", res.Round, prev.Round)
		}
		prev = res
	}
	if r.Results[0].Workload != "A" || r.Results[len(r.Results)-1].Workload != "C" {
		t.Errorf("workload order %s..%s", r.Results[0].Workload, r.Results[len(r.Results)-1].Workload)
	}
}

// TestMergeReports merges per-system runs of two rounds given in the order
// they ran, without round numbers, and a floors report.
func TestMergeReports(t *testing.T) {
	all := sampleReport()
	var runs []Report
	for round := 1; round <= 2; round++ {
		for _, sys := range []string{"etcd", "causeway"} {
			r := Report{Setup: all.Setup}
			r.Setup.Modes = nil
			for _, res := range all.Results {
				if res.System == sys && res.Round == round {
					res.Round = 0
					r.Results = append(r.Results, res)
					r.Setup.Modes = appendNew(r.Setup.Modes, res.Mode)
				}
			}
			r.Setup.Endpoints = map[string][]string{sys: {sys + ":1"}}
			r.Setup.Notes = []string{sys + " note"}
			r.IdleCPU = map[string]core.CPUUse{sys: {Servers: float64(round)}}
			if sys == "causeway" {
				r.Setup.Versions = map[string]string{"causeway": "v1"}
				r.ServerMetrics = map[string][]core.HistDelta{"causeway": {{Name: "x", Count: float64(round)}}}
			}
			runs = append(runs, r)
		}
	}
	m := MergeReports("merged", append(runs, Report{Floors: all.Floors})...)
	if m.Title != "merged" || len(m.Results) != len(all.Results)*2/3 || m.Floors == nil || len(m.Setup.Modes) != 4 || m.Setup.Rounds != 2 ||
		len(m.Setup.Endpoints) != 2 || m.Setup.Versions["causeway"] != "v1" || len(m.Setup.Notes) != 2 || len(m.ServerMetrics) != 1 {
		t.Errorf("merged report: %d results, setup %+v", len(m.Results), m.Setup)
	}
	rounds := map[int]int{}
	for _, res := range m.Results {
		rounds[res.Round]++
	}
	if rounds[1] != 24 || rounds[2] != 24 {
		t.Errorf("results per round %v", rounds)
	}
	// Explicit rounds name the per-system entries.
	runs[2].Setup.Round, runs[3].Setup.Round = 2, 2
	m = MergeReports("merged", runs...)
	if m.IdleCPU["etcd, round 2"].Servers != 2 || m.IdleCPU["etcd"].Servers != 1 || len(m.ServerMetrics["causeway, round 2"]) != 1 {
		t.Errorf("idle %v metrics %v", m.IdleCPU, m.ServerMetrics)
	}
	Evaluate(&m)
	if len(m.Ratios) != 12 || m.Points[0].Rounds != 2 {
		t.Errorf("%d ratios, %d rounds after merging", len(m.Ratios), m.Points[0].Rounds)
	}
}
