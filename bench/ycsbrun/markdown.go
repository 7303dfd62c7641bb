package ycsbrun

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
)

// fmtRatio formats a ratio, "-" when undefined.
func fmtRatio(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", v)
}

// fmtMetric formats a server histogram value: seconds as milliseconds.
func fmtMetric(name string, v float64) string {
	if strings.HasSuffix(name, "_seconds") {
		return fmt.Sprintf("%.3f ms", v*1000)
	}
	return fmt.Sprintf("%.2f", v)
}

// fmtPct formats a spread's range as a percentage of its median.
func fmtPct(s core.Spread) string {
	if s.N < 2 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*s.RelRange())
}

// WriteMarkdown renders r: setup, floors, targets, ratios, the points
// (medians over the rounds with their ranges) and per-operation latency,
// the throughput of each round, load phases, errors and server
// histograms. Sections without data are left out. Call Summarize or
// Evaluate first.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	title := r.Title
	if title == "" {
		title = "YCSB results"
	}
	p("# %s\n\n", title)
	p("- date: %s\n", r.Date.UTC().Format("2006-01-02 15:04:05 UTC"))
	p("- machine: %s\n", r.Machine)
	if r.Machine.LoadAvg != "" {
		p("- load average when the run started (/proc/loadavg): %s\n", r.Machine.LoadAvg)
	}
	s := r.Setup
	repeated := s.Rounds > 1
	for _, sys := range slices.Sorted(maps.Keys(s.Endpoints)) {
		v := s.Versions[sys]
		if v != "" {
			v = " " + v
		}
		p("- %s%s: endpoints %s\n", sys, v, strings.Join(s.Endpoints[sys], ", "))
	}
	p("- workloads %s (ycsb package: YCSB core workloads, zipfian θ=0.99 unless the mix says otherwise), %d records of %d bytes\n",
		strings.Join(s.Workloads, ", "), s.Records, s.ValueSize)
	clients := make([]string, len(s.Clients))
	for i, c := range s.Clients {
		clients[i] = fmt.Sprint(c)
	}
	p("- client counts %s (%d client goroutines share a connection); modes %s\n", strings.Join(clients, ", "), s.ClientsPerConn, strings.Join(s.Modes, ", "))
	p("- each point: %s warm-up (not measured), then %s measured", s.Warmup, s.Duration)
	if s.Operations > 0 {
		p(" or %d operations", s.Operations)
	}
	if s.TargetRate > 0 {
		p(", target rate %.0f ops/s", s.TargetRate)
	}
	p("; seed %d\n", s.Seed)
	if repeated {
		p("- %d rounds; every figure is the median over the rounds, with the lowest and highest round in brackets (spread: that range as a percentage of the median)\n", s.Rounds)
	}
	for _, n := range s.Notes {
		p("- %s\n", n)
	}
	for _, sys := range slices.Sorted(maps.Keys(r.IdleCPU)) {
		c := r.IdleCPU[sys]
		p("- %s servers idle (before the load): %.3f CPUs busy (machine %.3f of %d)\n", sys, c.Servers, c.Machine, c.Total)
	}
	p("\n")

	if f := r.Floors; f != nil {
		t := core.NewTable("floor", "samples", "p50 ms", "p99 ms", "max ms")
		if f.Fsync.Samples > 0 {
			t.Row(f.Fsync.Method+" in "+f.Fsync.Dir, f.Fsync.Samples, core.Ms(f.Fsync.P50Ms), core.Ms(f.Fsync.P99Ms), core.Ms(f.Fsync.MaxMs))
		}
		if f.GRPCEcho.Samples > 0 {
			t.Row(f.GRPCEcho.Method, f.GRPCEcho.Samples, core.Ms(f.GRPCEcho.P50Ms), core.Ms(f.GRPCEcho.P99Ms), core.Ms(f.GRPCEcho.MaxMs))
		}
		p("## Floors\n\n%s\n", t)
	}

	if len(r.Targets) > 0 {
		p("## Targets\n\n")
		p("Pairs: Causeway CAUSAL against etcd serializable, STRONG against etcd linearizable. Throughput targets compare the peak over the client counts of each system's median throughput; the per-client-count ratios of the medians follow, with their range over the rounds (Causeway's slowest round against etcd's fastest, and the reverse). The put latency is workload A's UPDATE p50 with one client, median over the rounds.\n\n")
		t := core.NewTable("target", "want", "measured", "verdict")
		for _, v := range r.Targets {
			m := v.Measured
			if v.Detail != "" {
				m += "; " + v.Detail
			}
			t.Row(v.Target, v.Want, m, "**"+v.Status()+"**")
		}
		p("%s\n", t)
	}

	if len(r.Ratios) > 0 {
		p("## Throughput, Causeway / etcd\n\n")
		p("Like for like: Causeway CAUSAL reads against etcd serializable reads (both served by the replica contacted), STRONG against linearizable. Writes: Causeway LOCAL durability, etcd Put (both a raft commit, fsynced on a quorum). Medians over the rounds; the ratio's range pairs the rounds' extremes.\n\n")
		cols := []string{"workload", "clients"}
		for _, pr := range Pairs {
			cols = append(cols, pr[0]+" ops/s", pr[1]+" ops/s", "ratio", "range", "p50 ms C/E", "p99 ms C/E")
		}
		t := core.NewTable(cols...)
		var rows []pointKey
		for _, ra := range r.Ratios {
			rows = appendNew(rows, pointKey{workload: ra.Workload, clients: ra.Clients})
		}
		for _, rw := range rows {
			cells := []any{rw.workload, rw.clients}
			for _, pr := range Pairs {
				i := slices.IndexFunc(r.Ratios, func(ra Ratio) bool {
					return ra.Workload == rw.workload && ra.Clients == rw.clients && ra.Causeway == pr[0] && ra.Etcd == pr[1]
				})
				if i < 0 {
					cells = append(cells, "-", "-", "-", "-", "-", "-")
					continue
				}
				ra := r.Ratios[i]
				cells = append(cells, core.Ops(ra.CausewayOps), core.Ops(ra.EtcdOps), fmtRatio(ra.Ratio),
					fmtRatio(ra.RatioMin)+"–"+fmtRatio(ra.RatioMax),
					fmt.Sprintf("%.2f / %.2f", ra.CausewayP50, ra.EtcdP50), fmt.Sprintf("%.2f / %.2f", ra.CausewayP99, ra.EtcdP99))
			}
			t.Row(cells...)
		}
		p("%s\n", t)
	}

	if slices.ContainsFunc(r.Points, func(pt Point) bool { return pt.Mode == drivers.ModeCausewayRaw }) {
		p("## Diagnostic: Causeway without the client library's session\n\n")
		p("%s calls Causeway's gRPC API directly with CAUSAL reads and no session token, request id or retries (what kvbench does); %s uses the Go client, whose session token (up to 64 key floors) travels with every request and reply. Not a configuration with causal guarantees: it shows what the session costs. Medians over the rounds.\n\n",
			drivers.ModeCausewayRaw, drivers.ModeCausewayCausal)
		t := core.NewTable("workload", "clients", "raw ops/s", "causal ops/s", "raw / causal", "raw p50 ms", "causal p50 ms", "raw / etcd-ser")
		for _, raw := range r.Points {
			if raw.Mode != drivers.ModeCausewayRaw {
				continue
			}
			c, _ := r.Point(drivers.ModeCausewayCausal, raw.Workload, raw.Clients)
			e, _ := r.Point(drivers.ModeEtcdSer, raw.Workload, raw.Clients)
			t.Row(raw.Workload, raw.Clients, core.Ops(raw.Throughput.Median), core.Ops(c.Throughput.Median),
				fmtRatio(ratio(raw.Throughput.Median, c.Throughput.Median)), core.Ms(raw.P50.Median), core.Ms(c.P50.Median),
				fmtRatio(ratio(raw.Throughput.Median, e.Throughput.Median)))
		}
		p("%s\n", t)
	}

	if len(r.Points) > 0 {
		p("## Results\n\n")
		if repeated {
			p("Medians over the rounds (lowest–highest round in brackets; spread: that range as a percentage of the median). ")
		}
		p("CPUs: average CPUs busy during the measured window, for the whole machine, the server processes and the benchmark client.\n\n")
		t := core.NewTable("workload", "clients", "mode", "rounds", "ops/s", "spread", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "errors", "CPUs machine / servers / client")
		for _, pt := range r.Points {
			cpu := "-"
			if c := pt.CPU; c.Total > 0 {
				cpu = fmt.Sprintf("%.2f / %.2f / %.2f of %d", c.Machine, c.Servers, c.Client, c.Total)
			}
			t.Row(pt.Workload, pt.Clients, pt.Mode, pt.Rounds, pt.Throughput.Format("%.0f"), fmtPct(pt.Throughput),
				pt.P50.Format("%.3f"), pt.P95.Format("%.3f"), pt.P99.Format("%.3f"), pt.P999.Format("%.3f"), pt.Errors, cpu)
		}
		p("%s\n", t)
		p("## Latency per operation\n\n")
		if repeated {
			p("Medians over the rounds of each round's percentiles; ops and errors summed over the rounds.\n\n")
		}
		t = core.NewTable("workload", "clients", "mode", "op", "ops", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "errors")
		for _, pt := range r.Points {
			for _, k := range pt.Kinds {
				t.Row(pt.Workload, pt.Clients, pt.Mode, k.Kind, k.Ops, k.P50.Format("%.3f"), k.P95.Format("%.3f"), k.P99.Format("%.3f"), k.P999.Format("%.3f"), k.Errors)
			}
		}
		p("%s\n", t)
	}

	if repeated {
		p("## Throughput per round\n\nops/s of each round, in the order the rounds ran.\n\n")
		cols := []string{"workload", "clients", "mode"}
		for i := range r.Setup.Rounds {
			cols = append(cols, fmt.Sprintf("round %d", i+1))
		}
		t := core.NewTable(cols...)
		for _, pt := range r.Points {
			cells := []any{pt.Workload, pt.Clients, pt.Mode}
			for i := range r.Setup.Rounds {
				cell := "-"
				for _, res := range r.Results {
					if keyOf(res) == (pointKey{pt.Workload, pt.Mode, pt.Clients}) && res.Round == i+1 {
						cell = core.Ops(res.Throughput)
					}
				}
				cells = append(cells, cell)
			}
			t.Row(cells...)
		}
		p("%s\n", t)
	}

	if len(r.Loads) > 0 {
		t := core.NewTable("mode", "round", "records", "clients", "seconds", "records/s", "p50 ms", "p99 ms", "retries")
		for _, l := range r.Loads {
			round := "-"
			if l.Round > 0 {
				round = fmt.Sprint(l.Round)
			}
			t.Row(l.Mode, round, l.Loaded, l.Clients, fmt.Sprintf("%.1f", l.Seconds), core.Ops(l.Throughput),
				core.Ms(l.Latency.P50Ms), core.Ms(l.Latency.P99Ms), l.Retries)
		}
		p("## Load phase\n\n%s\n", t)
	}

	var errs []Result
	for _, res := range r.Results {
		if res.Errors > 0 {
			errs = append(errs, res)
		}
	}
	if len(errs) > 0 {
		p("## Errors\n\n")
		for _, res := range errs {
			p("- %s, %d clients, %s", res.Workload, res.Clients, res.Mode)
			if repeated {
				p(", round %d", res.Round)
			}
			p(": %d errors (%s)", res.Errors, res.ErrorSummary())
			if len(res.ErrorSamples) > 0 {
				p("; e.g. `%s`", strings.ReplaceAll(res.ErrorSamples[0], "`", "'"))
			}
			p("\n")
		}
		p("\n")
	}

	if len(r.ServerMetrics) > 0 || slices.ContainsFunc(r.Results, func(res Result) bool { return len(res.ServerMetrics) > 0 }) {
		p("## Server histograms\n\n")
		p("Summed over the nodes (and shards) from their /metrics, per phase (warm-up included; the first round's phases, the JSON has every round); quantiles interpolated inside the Prometheus buckets.\n\n")
		t := core.NewTable("phase", "histogram", "label", "count", "mean", "p50", "p90", "p99")
		row := func(phase string, h core.HistDelta) {
			t.Row(phase, strings.TrimPrefix(h.Name, "causeway_"), h.Label, fmt.Sprintf("%.0f", h.Count),
				fmtMetric(h.Name, h.Mean), fmtMetric(h.Name, h.P50), fmtMetric(h.Name, h.P90), fmtMetric(h.Name, h.P99))
		}
		for _, sys := range slices.Sorted(maps.Keys(r.ServerMetrics)) {
			for _, h := range r.ServerMetrics[sys] {
				row(sys+", whole run", h)
			}
		}
		for _, res := range r.Results {
			if res.Round > 1 || !ShowPhaseMetrics(res) {
				continue
			}
			for _, h := range res.ServerMetrics {
				row(fmt.Sprintf("%s %d clients %s", res.Workload, res.Clients, res.Mode), h)
			}
		}
		p("%s\n", t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ShowPhaseMetrics selects the results whose server histograms the markdown
// shows (the JSON has all): Causeway CAUSAL phases with writes, and
// Causeway STRONG phases of read-only workloads.
var ShowPhaseMetrics = func(res Result) bool {
	writes := slices.ContainsFunc(res.Kinds, func(k core.KindResult) bool {
		return k.Kind == "UPDATE" || k.Kind == "INSERT" || k.Kind == "READ-MODIFY-WRITE"
	})
	switch res.Mode {
	case drivers.ModeCausewayCausal:
		return writes
	case drivers.ModeCausewayStrong:
		return !writes
	}
	return false
}
