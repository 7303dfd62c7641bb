package ycsbrun

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/floors"
)

// result builds a result with a throughput, a p50 and, for workload A, an
// UPDATE kind.
func result(mode, workload string, clients int, ops, p50 float64) Result {
	r := Result{Mode: mode, System: drivers.SystemOf(mode), Workload: workload, Clients: clients,
		Throughput: ops, Ops: int64(ops * 10), WindowS: 10, Latency: Latency{Count: int64(ops * 10), P50Ms: p50, P99Ms: 4 * p50}}
	r.Kinds = []KindResult{{Kind: "READ", Ops: r.Ops / 2, Latency: r.Latency}}
	if workload == "A" {
		r.Kinds = append(r.Kinds, KindResult{Kind: "UPDATE", Ops: r.Ops / 2, Latency: Latency{Count: r.Ops / 2, P50Ms: p50 * 2, P99Ms: p50 * 8}})
	}
	return r
}

func sampleReport() Report {
	r := Report{
		Title: "test",
		Setup: Setup{Records: 1000, ValueSize: 1024, Warmup: "1s", Duration: "2s", Seed: 1, ClientsPerConn: 8,
			Workloads: []string{"A", "B", "C"}, Clients: []int{1, 16},
			Modes: []string{drivers.ModeEtcdLin, drivers.ModeEtcdSer, drivers.ModeCausewayCausal, drivers.ModeCausewayStrong}},
		Floors: &floors.Floors{Fsync: floors.Result{Samples: 100, P50Ms: 0.5, P99Ms: 1}, GRPCEcho: floors.Result{Samples: 100, P50Ms: 0.05, P99Ms: 0.2}},
	}
	add := func(mode string, mult float64) {
		for _, w := range []string{"A", "B", "C"} {
			base := map[string]float64{"A": 1000, "B": 4000, "C": 5000}[w]
			r.Results = append(r.Results, result(mode, w, 1, base/10*mult, 0.6), result(mode, w, 16, base*mult, 2))
		}
	}
	add(drivers.ModeEtcdSer, 1)
	add(drivers.ModeEtcdLin, 0.5)
	add(drivers.ModeCausewayCausal, 2)   // 2× etcd-ser everywhere
	add(drivers.ModeCausewayStrong, 0.4) // 0.8× etcd-lin
	return r
}

func TestComputeRatios(t *testing.T) {
	r := sampleReport()
	rs := ComputeRatios(&r)
	if len(rs) != 3*2*2 {
		t.Fatalf("%d ratios, want 12", len(rs))
	}
	for _, ra := range rs {
		want := 2.0
		if ra.Causeway == drivers.ModeCausewayStrong {
			want = 0.8
			if ra.Etcd != drivers.ModeEtcdLin {
				t.Errorf("strong paired with %s", ra.Etcd)
			}
		} else if ra.Etcd != drivers.ModeEtcdSer {
			t.Errorf("causal paired with %s", ra.Etcd)
		}
		if math.Abs(ra.Ratio-want) > 1e-9 || math.Abs(ra.CausewayOps/ra.EtcdOps-ra.Ratio) > 1e-9 {
			t.Errorf("%s %d %s: ratio %.3f, want %.1f", ra.Workload, ra.Clients, ra.Causeway, ra.Ratio, want)
		}
	}
	// etcd did nothing: ratio 0, not a division by zero.
	r.Results = []Result{result(drivers.ModeCausewayCausal, "C", 1, 10, 1), result(drivers.ModeEtcdSer, "C", 1, 0, 0)}
	if rs := ComputeRatios(&r); len(rs) != 1 || rs[0].Ratio != 0 {
		t.Errorf("zero etcd throughput: %+v", rs)
	}
}

func TestEvaluateTargets(t *testing.T) {
	r := sampleReport()
	Evaluate(&r)
	got := map[string]Verdict{}
	for _, v := range r.Targets {
		got[v.Target] = v
	}
	check := func(prefix string, met bool, value float64) {
		t.Helper()
		for name, v := range got {
			if strings.HasPrefix(name, prefix) {
				if !v.Evaluated || v.Met != met || math.Abs(v.Value-value) > 1e-9 {
					t.Errorf("%s: evaluated %v met %v value %.3f, want met %v value %.3f", name, v.Evaluated, v.Met, v.Value, met, value)
				}
				return
			}
		}
		t.Errorf("no target %q in %v", prefix, r.Targets)
	}
	check("YCSB-A throughput ≥ 1.5×", true, 2)
	check("YCSB-B (CAUSAL)", true, 2)
	check("YCSB-C (CAUSAL)", true, 2)
	check("STRONG reads ≥ 1.0× etcd linearizable (YCSB-C)", false, 0.8)
	// Put latency: Causeway A UPDATE p50 at 1 client is 1.2 ms; the limit
	// is 2 × 0.5 + 0.5 = 1.5 ms.
	check("1-client put latency", true, 1.2)
	if v := got["YCSB-C (CAUSAL) ≥ 1.5× etcd serializable"]; !strings.Contains(v.Detail, "1 clients 2.00×") || !strings.Contains(v.Detail, "16 clients 2.00×") {
		t.Errorf("detail %q", v.Detail)
	}
	// Without floors or etcd results the targets are not measured.
	r2 := sampleReport()
	r2.Floors = nil
	r2.Results = r2.Results[:6] // etcd-ser only
	Evaluate(&r2)
	for _, v := range r2.Targets {
		if v.Evaluated || v.Status() != "not measured" {
			t.Errorf("%s: %s with missing results", v.Target, v.Status())
		}
	}
}

func TestPeakUsesBestClientCount(t *testing.T) {
	r := sampleReport()
	p, ok := r.Peak(drivers.ModeEtcdSer, "C")
	if !ok || p.Clients != 16 || p.Throughput != 5000 {
		t.Errorf("peak %+v", p)
	}
	if _, ok := r.Peak(drivers.ModeEtcdSer, "Z"); ok {
		t.Error("peak of a missing workload")
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	r := sampleReport()
	r.Results[0].Errors = 3
	r.Results[0].ErrorClasses = map[string]int64{"timeout": 3}
	r.Results[0].ErrorSamples = []string{"READ: context deadline exceeded"}
	r.Results = append(r.Results, result(drivers.ModeCausewayRaw, "C", 16, 15000, 1))
	r.Loads = []LoadResult{{Mode: drivers.ModeEtcdLin, Records: 1000, Loaded: 1000, Clients: 32, Seconds: 1, Throughput: 1000}}
	r.SortResults()
	Evaluate(&r)
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	for _, want := range []string{
		"# test", "## Floors", "## Targets", "**met**", "**not met**", "## Throughput, Causeway / etcd",
		"| C | 16 | 10000 | 5000 | 2.00× |", "## Diagnostic", "| C | 16 | 15000 | 10000 | 1.50× | 1.000 | 2.000 | 3.00× |", "## Results", "## Latency per operation", "## Load phase", "## Errors", "timeout 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	// Every table row has as many cells as its header.
	lines := strings.Split(out, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "|--") || strings.HasPrefix(lines[i], "|---") {
			cols := strings.Count(lines[i], "|")
			if strings.Count(lines[i-1], "|") != cols {
				t.Errorf("header %q has %d bars, separator %d", lines[i-1], strings.Count(lines[i-1], "|"), cols)
			}
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
				if n := strings.Count(lines[j], "|"); n != cols {
					t.Errorf("row %q has %d bars, want %d", lines[j], n, cols)
				}
			}
		}
	}

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
	if len(back.Results) != len(r.Results) || len(back.Ratios) != len(r.Ratios) || len(back.Targets) != len(r.Targets) ||
		back.Floors == nil || back.Floors.Fsync.P50Ms != 0.5 || back.Results[0].Latency != r.Results[0].Latency {
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
		prev = res
	}
	if r.Results[0].Workload != "A" || r.Results[len(r.Results)-1].Workload != "C" {
		t.Errorf("workload order %s..%s", r.Results[0].Workload, r.Results[len(r.Results)-1].Workload)
	}
}

func TestMergeReports(t *testing.T) {
	all := sampleReport()
	etcd, cw, fl := all, all, Report{Floors: all.Floors}
	etcd.Floors, cw.Floors = nil, nil
	etcd.Results, cw.Results = all.Results[:12], all.Results[12:]
	etcd.Setup.Modes = []string{drivers.ModeEtcdLin, drivers.ModeEtcdSer}
	cw.Setup.Modes = []string{drivers.ModeCausewayCausal, drivers.ModeCausewayStrong}
	etcd.Setup.Endpoints = map[string][]string{"etcd": {"e:1"}}
	cw.Setup.Endpoints = map[string][]string{"causeway": {"c:1"}}
	cw.Setup.Versions = map[string]string{"causeway": "v1"}
	etcd.Setup.Notes, cw.Setup.Notes = []string{"etcd note"}, []string{"cw note"}
	cw.ServerMetrics = map[string][]HistDelta{"causeway": {{Name: "x", Count: 1}}}
	m := MergeReports("merged", etcd, cw, fl)
	if m.Title != "merged" || len(m.Results) != len(all.Results) || m.Floors == nil || len(m.Setup.Modes) != 4 ||
		len(m.Setup.Endpoints) != 2 || m.Setup.Versions["causeway"] != "v1" || len(m.Setup.Notes) != 2 || len(m.ServerMetrics["causeway"]) != 1 {
		t.Errorf("merged report: %+v", m.Setup)
	}
	Evaluate(&m)
	if len(m.Ratios) != 12 {
		t.Errorf("%d ratios after merging", len(m.Ratios))
	}
}

const exposition = `# HELP causeway_transport_rpc_seconds Latency of raft RPCs sent to peers, by type.
# TYPE causeway_transport_rpc_seconds histogram
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.001"} 10
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.002"} 30
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.004"} 40
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="+Inf"} 40
causeway_transport_rpc_seconds_sum{type="heartbeat"} 0.06
causeway_transport_rpc_seconds_count{type="heartbeat"} 40
causeway_storage_commit_batch_size_bucket{db="raft",le="1"} 5
causeway_storage_commit_batch_size_bucket{db="raft",le="2"} 5
causeway_storage_commit_batch_size_bucket{db="raft",le="+Inf"} 5
causeway_storage_commit_batch_size_sum{db="raft"} 5
causeway_storage_commit_batch_size_count{db="raft"} 5
causeway_shard_apply_seconds_count{shard="default/1",result="ok"} 3
causeway_shard_apply_seconds_count{shard="default/2",result="ok"} 4
causeway_shard_apply_seconds_sum{shard="default/2",result="ok"} 0.7
causeway_other_total{a="b\"c"} 12 1700000000
`

func TestParseMetricsAndDiff(t *testing.T) {
	after, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := ParseMetrics(strings.NewReader(`causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.001"} 10
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.002"} 10
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.004"} 10
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="+Inf"} 10
causeway_transport_rpc_seconds_sum{type="heartbeat"} 0.005
causeway_transport_rpc_seconds_count{type="heartbeat"} 10
`))
	ds := Diff(before, after)
	byName := map[string]HistDelta{}
	for _, d := range ds {
		byName[d.Name+" "+d.Label] = d
	}
	hb := byName["causeway_transport_rpc_seconds type=heartbeat"]
	// 30 new observations: 20 in (1ms, 2ms], 10 in (2ms, 4ms].
	if hb.Count != 30 || math.Abs(hb.Mean-0.055/30) > 1e-12 {
		t.Errorf("heartbeat %+v", hb)
	}
	if math.Abs(hb.P50-0.00175) > 1e-9 || math.Abs(hb.P90-0.0034) > 1e-9 {
		t.Errorf("heartbeat p50 %.6f p90 %.6f, want 0.00175 and 0.0034", hb.P50, hb.P90)
	}
	bs := byName["causeway_storage_commit_batch_size db=raft"]
	if bs.Count != 5 || bs.P50 != 1 || bs.P99 != 1 || bs.Mean != 1 {
		t.Errorf("batch size %+v (the lowest bucket's quantiles are its bound)", bs)
	}
	ap := byName["causeway_shard_apply_seconds result=ok"]
	if ap.Count != 7 || math.Abs(ap.Mean-0.1) > 1e-12 {
		t.Errorf("apply summed over shards: %+v", ap)
	}
	if _, err := ParseMetrics(strings.NewReader("broken{a=\"x\" 1\n")); err == nil {
		t.Error("unterminated labels accepted")
	}
}
