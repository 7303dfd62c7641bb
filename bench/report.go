package bench

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Markdown renders the report: a short header, the results table and the
// disk's sync latency.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kvbench results\n\n")
	fmt.Fprintf(&b, "- date: %s\n", r.Started.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- target: %s\n", r.Target)
	if r.Leaders != "" {
		fmt.Fprintf(&b, "- shard leaders after the site settled: %s\n", r.Leaders)
	}
	if r.DataDir != "" {
		fmt.Fprintf(&b, "- data dir parent: %s\n", r.DataDir)
	}
	wl := r.Workload
	fmt.Fprintf(&b, "- workload: %d-byte values, %d keys, uniform random keys, reads %s (no session token); %gs phases after %gs warmup\n",
		wl.ValueSize, wl.Keys, wl.Consistency, wl.DurationSec, wl.WarmupSec)
	if r.Load != nil {
		fmt.Fprintf(&b, "- initial load: %d records with %d clients in %.1fs\n", r.Load.Records, r.Load.Concurrency, r.Load.ElapsedSec)
	}
	if r.Incomplete {
		fmt.Fprintf(&b, "- **incomplete run** (interrupted or failed)\n")
	}
	b.WriteString("\n")
	b.WriteString(r.Table())
	if s := r.DiskSync; s != nil {
		fmt.Fprintf(&b, "\n%s (4 KiB at increasing offsets, %d samples) in %s: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
			s.Method, s.Samples, s.Dir, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	b.WriteString(r.Diagnostics())
	var errs []string
	for _, res := range r.Results {
		if res.Errors > 0 {
			errs = append(errs, fmt.Sprintf("- %s, %d clients: %s", res.label(), res.Clients, res.ErrorSummary()))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "\nErrors by kind:\n\n%s\n", strings.Join(errs, "\n"))
	}
	return b.String()
}

// Table renders the results as a markdown table.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| op | clients | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | errors |\n")
	b.WriteString("|----|--------:|------:|-------:|-------:|---------:|-------:|-------:|\n")
	for _, res := range r.Results {
		l := res.Latency
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.3f | %.3f | %.3f | %.3f | %d |\n",
			res.label(), res.Clients, res.OpsPerSec, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, res.Errors)
	}
	return b.String()
}

// label is the op as shown in tables: "put", "get (CAUSAL)", "sget
// (STRONG)".
func (r PhaseResult) label() string {
	if r.Consistency == "" {
		return r.Op
	}
	return r.Op + " (" + r.Consistency + ")"
}

// Diagnostics renders CPU use and, for an embedded server, its storage
// commits per phase: the context needed to tell a disk-bound result from
// a CPU-bound one on a shared machine.
func (r *Report) Diagnostics() string {
	if len(r.Results) == 0 {
		return ""
	}
	var b strings.Builder
	multi := r.Nodes > 1
	scope := "embedded server only"
	if multi {
		scope = fmt.Sprintf("summed over the %d embedded nodes", r.Nodes)
	}
	fmt.Fprintf(&b, "\nDiagnostics (CPUs busy out of %d during the measured window; storage commits over the whole phase, %s):\n\n", r.Machine.CPUs, scope)
	b.WriteString("| op | clients | process CPUs | machine CPUs | commits/s | updates/commit | ms/commit | propose→applied ms |")
	if multi {
		b.WriteString(" forwards/request |")
	}
	b.WriteString("\n|----|--------:|-------------:|-------------:|----------:|---------------:|----------:|-------------------:|")
	if multi {
		b.WriteString("-----------------:|")
	}
	b.WriteString("\n")
	for _, res := range r.Results {
		machine, srv := "-", "- | - | - | -"
		if res.CPU.Machine > 0 {
			machine = fmt.Sprintf("%.2f", res.CPU.Machine)
		}
		if s := res.Server; s != nil && s.Commits > 0 {
			srv = fmt.Sprintf("%.0f | %.1f | %.2f | %.2f", s.CommitsPerSec, s.MeanBatch, s.MeanCommitMs, s.MeanProposeMs)
		}
		if multi {
			fwd := "-"
			if s := res.Server; s != nil {
				fwd = fmt.Sprintf("%.2f", s.ForwardsPerOp)
			}
			srv += " | " + fwd
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %s | %s |\n", res.label(), res.Clients, res.CPU.Process, machine, srv)
	}
	if multi {
		b.WriteString(r.dbTable())
	}
	return b.String()
}

// dbTable breaks the commits of the put phases down per node and
// database: a database has one committer goroutine, so one whose busy
// fraction nears 1 limits the writes.
func (r *Report) dbTable() string {
	var b strings.Builder
	for _, res := range r.Results {
		s := res.Server
		if res.Op != "put" || s == nil || len(s.DBs) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nStorage commits per node and database during put phases (busy: fraction of the phase its committer spent committing):\n\n")
			b.WriteString("| op | clients | node | db | commits/s | updates/commit | ms/commit | busy |\n")
			b.WriteString("|----|--------:|------|----|----------:|---------------:|----------:|-----:|\n")
		}
		for _, d := range s.DBs {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %.0f | %.1f | %.2f | %.2f |\n",
				res.label(), res.Clients, d.Node, d.DB, d.CommitsPerSec, d.MeanBatch, d.MeanCommitMs, d.Busy)
		}
	}
	return b.String()
}

// JSON renders the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
