package bench

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/causeway-db/causeway/bench/core"
)

// Markdown renders the report: a short header, the results table and the
// disk's sync latency.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# kvbench results\n\n")
	fmt.Fprintf(&b, "- date: %s\n", r.Started.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	if r.Machine.LoadAvg != "" {
		fmt.Fprintf(&b, "- load average when the run started (/proc/loadavg): %s\n", r.Machine.LoadAvg)
	}
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
		fmt.Fprintf(&b, "- initial load: %d records with %d clients in %.1fs\n", r.Load.Loaded, r.Load.Clients, r.Load.Seconds)
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
			e := fmt.Sprintf("- %s, %d clients: %s", res.label(), res.Clients, res.ErrorSummary())
			if len(res.ErrorSamples) > 0 {
				e += fmt.Sprintf("; e.g. `%s`", strings.ReplaceAll(res.ErrorSamples[0], "`", "'"))
			}
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "\nErrors by kind:\n\n%s\n", strings.Join(errs, "\n"))
	}
	return b.String()
}

// Table renders the results as a markdown table.
func (r *Report) Table() string {
	t := core.NewTable("op", "clients", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors")
	for _, res := range r.Results {
		l := res.Latency
		t.Row(res.label(), res.Clients, core.Ops(res.Throughput), core.Ms(l.P50Ms), core.Ms(l.P99Ms), core.Ms(l.P999Ms), core.Ms(l.MaxMs), res.Errors)
	}
	return t.String()
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
	cols := []string{"op", "clients", "process CPUs", "machine CPUs", "commits/s", "updates/commit", "ms/commit", "propose→applied ms"}
	if multi {
		cols = append(cols, "forwards/request")
	}
	t := core.NewTable(cols...)
	for _, res := range r.Results {
		row := []any{res.label(), res.Clients, fmt.Sprintf("%.2f", res.CPU.Client), "-", "-", "-", "-", "-"}
		if res.CPU.Machine > 0 {
			row[3] = fmt.Sprintf("%.2f", res.CPU.Machine)
		}
		if s := res.Server; s != nil && s.Commits > 0 {
			row[4], row[5], row[6], row[7] = core.Ops(s.CommitsPerSec), fmt.Sprintf("%.1f", s.MeanBatch), fmt.Sprintf("%.2f", s.MeanCommitMs), fmt.Sprintf("%.2f", s.MeanProposeMs)
		}
		if s := res.Server; multi && s != nil {
			row = append(row, fmt.Sprintf("%.2f", s.ForwardsPerOp))
		}
		t.Row(row...)
	}
	b.WriteString(t.String())
	if multi {
		b.WriteString(r.dbTable())
	}
	return b.String()
}

// dbTable breaks the commits of the put phases down per node and
// database: a database has one committer goroutine, so one whose busy
// fraction nears 1 limits the writes.
func (r *Report) dbTable() string {
	t := core.NewTable("op", "clients", "node", "db", "commits/s", "updates/commit", "ms/commit", "busy")
	for _, res := range r.Results {
		if s := res.Server; res.Op == "put" && s != nil {
			for _, d := range s.DBs {
				t.Row(res.label(), res.Clients, d.Node, d.DB, core.Ops(d.CommitsPerSec), fmt.Sprintf("%.1f", d.MeanBatch), fmt.Sprintf("%.2f", d.MeanCommitMs), fmt.Sprintf("%.2f", d.Busy))
			}
		}
	}
	if t.Len() == 0 {
		return ""
	}
	return "\nStorage commits per node and database during put phases (busy: fraction of the phase its committer spent committing):\n\n" + t.String()
}

// JSON renders the report as indented JSON.
func (r *Report) JSON() ([]byte, error) {
	var b bytes.Buffer
	err := core.WriteJSON(&b, r)
	return b.Bytes(), err
}
