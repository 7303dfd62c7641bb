package ycsbrun

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/causeway-db/causeway/bench/drivers"
)

// fmtMs formats milliseconds with three decimals.
func fmtMs(v float64) string { return fmt.Sprintf("%.3f", v) }

// fmtOps formats a throughput.
func fmtOps(v float64) string { return fmt.Sprintf("%.0f", v) }

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

// WriteMarkdown renders r: setup, floors, targets, ratios, per-run and
// per-operation latency, load phases, errors and server histograms. Sections
// without data are left out. Call Evaluate first for targets and ratios.
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
	for _, n := range s.Notes {
		p("- %s\n", n)
	}
	for _, sys := range slices.Sorted(maps.Keys(r.IdleCPU)) {
		c := r.IdleCPU[sys]
		p("- %s servers idle (before the load): %.3f CPUs busy (machine %.3f of %d)\n", sys, c.Servers, c.Machine, c.Total)
	}
	p("\n")

	if f := r.Floors; f != nil {
		p("## Floors\n\n")
		p("| floor | samples | p50 ms | p99 ms | max ms |\n|---|--:|--:|--:|--:|\n")
		if f.Fsync.Samples > 0 {
			p("| %s in %s | %d | %s | %s | %s |\n", f.Fsync.Method, f.Fsync.Dir, f.Fsync.Samples, fmtMs(f.Fsync.P50Ms), fmtMs(f.Fsync.P99Ms), fmtMs(f.Fsync.MaxMs))
		}
		if f.GRPCEcho.Samples > 0 {
			p("| %s | %d | %s | %s | %s |\n", f.GRPCEcho.Method, f.GRPCEcho.Samples, fmtMs(f.GRPCEcho.P50Ms), fmtMs(f.GRPCEcho.P99Ms), fmtMs(f.GRPCEcho.MaxMs))
		}
		p("\n")
	}

	if len(r.Targets) > 0 {
		p("## Targets\n\n")
		p("Throughput targets compare the peak of each system over the client counts; the per-client-count ratios follow each.\n\n")
		p("| target | want | measured | verdict |\n|---|---|---|---|\n")
		for _, v := range r.Targets {
			m := v.Measured
			if v.Detail != "" {
				m += "; " + v.Detail
			}
			p("| %s | %s | %s | **%s** |\n", v.Target, v.Want, m, v.Status())
		}
		p("\n")
	}

	if len(r.Ratios) > 0 {
		p("## Throughput, Causeway / etcd\n\n")
		p("Like for like: Causeway CAUSAL reads against etcd serializable reads (both served by the replica contacted), STRONG against linearizable. Writes: Causeway LOCAL durability, etcd Put (both a raft commit, fsynced on a quorum).\n\n")
		p("| workload | clients |")
		for _, pr := range Pairs {
			p(" %s ops/s | %s ops/s | ratio | p50 ms C/E | p99 ms C/E |", pr[0], pr[1])
		}
		p("\n|---|--:|")
		for range Pairs {
			p("--:|--:|--:|--:|--:|")
		}
		p("\n")
		type row struct {
			w string
			c int
		}
		var rows []row
		for _, ra := range r.Ratios {
			if !slices.Contains(rows, row{ra.Workload, ra.Clients}) {
				rows = append(rows, row{ra.Workload, ra.Clients})
			}
		}
		for _, rw := range rows {
			p("| %s | %d |", rw.w, rw.c)
			for _, pr := range Pairs {
				i := slices.IndexFunc(r.Ratios, func(ra Ratio) bool {
					return ra.Workload == rw.w && ra.Clients == rw.c && ra.Causeway == pr[0] && ra.Etcd == pr[1]
				})
				if i < 0 {
					p(" - | - | - | - | - |")
					continue
				}
				ra := r.Ratios[i]
				p(" %s | %s | %s | %.2f / %.2f | %.2f / %.2f |", fmtOps(ra.CausewayOps), fmtOps(ra.EtcdOps), fmtRatio(ra.Ratio),
					ra.CausewayP50, ra.EtcdP50, ra.CausewayP99, ra.EtcdP99)
			}
			p("\n")
		}
		p("\n")
	}

	if slices.ContainsFunc(r.Results, func(res Result) bool { return res.Mode == drivers.ModeCausewayRaw }) {
		p("## Diagnostic: Causeway without the client library's session\n\n")
		p("%s calls Causeway's gRPC API directly with CAUSAL reads and no session token, request id or retries (what kvbench does); %s uses the Go client, whose session token (up to 64 key floors) travels with every request and reply. Not a configuration with causal guarantees: it shows what the session costs.\n\n",
			drivers.ModeCausewayRaw, drivers.ModeCausewayCausal)
		p("| workload | clients | raw ops/s | causal ops/s | raw / causal | raw p50 ms | causal p50 ms | raw / etcd-ser |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, raw := range r.Results {
			if raw.Mode != drivers.ModeCausewayRaw {
				continue
			}
			c, _ := r.Find(drivers.ModeCausewayCausal, raw.Workload, raw.Clients)
			e, _ := r.Find(drivers.ModeEtcdSer, raw.Workload, raw.Clients)
			p("| %s | %d | %s | %s | %s | %s | %s | %s |\n", raw.Workload, raw.Clients, fmtOps(raw.Throughput), fmtOps(c.Throughput),
				fmtRatio(ratio(raw.Throughput, c.Throughput)), fmtMs(raw.Latency.P50Ms), fmtMs(c.Latency.P50Ms), fmtRatio(ratio(raw.Throughput, e.Throughput)))
		}
		p("\n")
	}

	if len(r.Results) > 0 {
		p("## Results\n\n")
		p("CPUs: average CPUs busy during the measured window, for the whole machine, the server processes and the benchmark client.\n\n")
		p("| workload | clients | mode | ops/s | p50 ms | p95 ms | p99 ms | p99.9 ms | max ms | errors | CPUs machine / servers / client |\n|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, res := range r.Results {
			l := res.Latency
			cpu := "-"
			if c := res.CPU; c.Total > 0 {
				cpu = fmt.Sprintf("%.2f / %.2f / %.2f of %d", c.Machine, c.Servers, c.Client, c.Total)
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", res.Workload, res.Clients, res.Mode, fmtOps(res.Throughput),
				fmtMs(l.P50Ms), fmtMs(l.P95Ms), fmtMs(l.P99Ms), fmtMs(l.P999Ms), fmtMs(l.MaxMs), res.Errors, cpu)
		}
		p("\n## Latency per operation\n\n")
		p("| workload | clients | mode | op | ops | p50 ms | p95 ms | p99 ms | p99.9 ms | errors |\n|---|--:|---|---|--:|--:|--:|--:|--:|--:|\n")
		for _, res := range r.Results {
			for _, k := range res.Kinds {
				l := k.Latency
				p("| %s | %d | %s | %s | %d | %s | %s | %s | %s | %d |\n", res.Workload, res.Clients, res.Mode, k.Kind, k.Ops,
					fmtMs(l.P50Ms), fmtMs(l.P95Ms), fmtMs(l.P99Ms), fmtMs(l.P999Ms), k.Errors)
			}
		}
		p("\n")
	}

	if len(r.Loads) > 0 {
		p("## Load phase\n\n| mode | records | clients | seconds | records/s | p50 ms | p99 ms | retries |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, l := range r.Loads {
			p("| %s | %d | %d | %.1f | %s | %s | %s | %d |\n", l.Mode, l.Loaded, l.Clients, l.Seconds, fmtOps(l.Throughput),
				fmtMs(l.Latency.P50Ms), fmtMs(l.Latency.P99Ms), l.Retries)
		}
		p("\n")
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
			var cls []string
			for _, c := range slices.Sorted(maps.Keys(res.ErrorClasses)) {
				cls = append(cls, fmt.Sprintf("%s %d", c, res.ErrorClasses[c]))
			}
			p("- %s, %d clients, %s: %d errors (%s)", res.Workload, res.Clients, res.Mode, res.Errors, strings.Join(cls, ", "))
			if len(res.ErrorSamples) > 0 {
				p("; e.g. `%s`", strings.ReplaceAll(res.ErrorSamples[0], "`", "'"))
			}
			p("\n")
		}
		p("\n")
	}

	if len(r.ServerMetrics) > 0 || slices.ContainsFunc(r.Results, func(res Result) bool { return len(res.ServerMetrics) > 0 }) {
		p("## Server histograms\n\n")
		p("Summed over the nodes (and shards) from their /metrics, per phase (warm-up included); quantiles interpolated inside the Prometheus buckets.\n\n")
		p("| phase | histogram | label | count | mean | p50 | p90 | p99 |\n|---|---|---|--:|--:|--:|--:|--:|\n")
		row := func(phase string, h HistDelta) {
			p("| %s | %s | %s | %.0f | %s | %s | %s | %s |\n", phase, strings.TrimPrefix(h.Name, "causeway_"), h.Label, h.Count,
				fmtMetric(h.Name, h.Mean), fmtMetric(h.Name, h.P50), fmtMetric(h.Name, h.P90), fmtMetric(h.Name, h.P99))
		}
		for _, sys := range slices.Sorted(maps.Keys(r.ServerMetrics)) {
			for _, h := range r.ServerMetrics[sys] {
				row(sys+", whole run", h)
			}
		}
		for _, res := range r.Results {
			if !ShowPhaseMetrics(res) {
				continue
			}
			for _, h := range res.ServerMetrics {
				row(fmt.Sprintf("%s %d clients %s", res.Workload, res.Clients, res.Mode), h)
			}
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ShowPhaseMetrics selects the results whose server histograms the markdown
// shows (the JSON has all): Causeway CAUSAL phases with writes, and
// Causeway STRONG phases of read-only workloads.
var ShowPhaseMetrics = func(res Result) bool {
	writes := slices.ContainsFunc(res.Kinds, func(k KindResult) bool {
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
