package ycsbrun

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/floors"
)

// Setup records how the results were obtained.
type Setup struct {
	Records        int64               `json:"records"`
	ValueSize      int                 `json:"value_size"`
	Warmup         string              `json:"warmup"`
	Duration       string              `json:"duration"`
	Operations     int64               `json:"operations,omitempty"`
	TargetRate     float64             `json:"target_rate,omitempty"`
	Seed           uint64              `json:"seed"`
	ClientsPerConn int                 `json:"clients_per_conn"`
	Workloads      []string            `json:"workloads"`
	Clients        []int               `json:"clients"`
	Modes          []string            `json:"modes"`
	Endpoints      map[string][]string `json:"endpoints,omitempty"`
	// Versions of the systems under test, e.g. {"etcd": "3.4.23"}.
	Versions map[string]string `json:"versions,omitempty"`
	Notes    []string          `json:"notes,omitempty"`
	// Round is the round a single run belongs to (0: not repeated);
	// Rounds is how many rounds a merged report holds.
	Round  int `json:"round,omitempty"`
	Rounds int `json:"rounds,omitempty"`
}

// LoadPhase is one load phase of a report.
type LoadPhase struct {
	core.LoadResult
	Round int `json:"round,omitempty"`
}

// Report is the JSON document of one or several runs.
type Report struct {
	Title   string         `json:"title"`
	Date    time.Time      `json:"date"`
	Machine core.Machine   `json:"machine"`
	Setup   Setup          `json:"setup"`
	Floors  *floors.Floors `json:"floors,omitempty"`
	Loads   []LoadPhase    `json:"loads,omitempty"`
	// Results holds every run phase, of every round.
	Results []Result `json:"results"`
	// Points, Ratios and Targets are filled by Evaluate: Points
	// aggregates the rounds of each workload, mode and client count.
	Points  []Point   `json:"points,omitempty"`
	Ratios  []Ratio   `json:"ratios,omitempty"`
	Targets []Verdict `json:"targets,omitempty"`
	// ServerMetrics are server histograms over a whole run, by system
	// (and round).
	ServerMetrics map[string][]core.HistDelta `json:"server_metrics,omitempty"`
	// IdleCPU is the CPU use of each system's servers, idle, before the
	// load (their background work: heartbeats, gossip), by system (and
	// round).
	IdleCPU map[string]core.CPUUse `json:"idle_cpu,omitempty"`
}

// ReadReport reads a Report written by WriteJSON.
func ReadReport(path string) (Report, error) {
	var r Report
	err := core.ReadJSON(path, &r)
	return r, err
}

// WriteJSON writes r indented.
func (r *Report) WriteJSON(w io.Writer) error { return core.WriteJSON(w, r) }

// roundKey names a per-system entry of a report of round round.
func roundKey(sys string, round int) string {
	if round > 0 {
		return fmt.Sprintf("%s, round %d", sys, round)
	}
	return sys
}

// appendNew appends the elements of add that dst lacks.
func appendNew[T comparable](dst []T, add ...T) []T {
	for _, v := range add {
		if !slices.Contains(dst, v) {
			dst = append(dst, v)
		}
	}
	return dst
}

// MergeReports combines the runs of several reports (one per system, or
// per system and round) into one: results, loads and notes concatenated,
// the first report's machine, date and setup, the union of modes,
// workloads, client counts, endpoints and versions, and the first floors
// found. A result without a round gets the number of earlier results of
// its workload, mode and client count plus one, so that reports of the
// same runs given in round order are told apart.
func MergeReports(title string, rs ...Report) Report {
	out := Report{Title: title}
	for i, r := range rs {
		if i == 0 {
			out.Date, out.Machine, out.Setup = r.Date, r.Machine, r.Setup
			out.Setup.Modes = slices.Clone(r.Setup.Modes)
			out.Setup.Notes = slices.Clone(r.Setup.Notes)
			out.Setup.Clients = slices.Clone(r.Setup.Clients)
			out.Setup.Workloads = slices.Clone(r.Setup.Workloads)
			out.Setup.Endpoints = map[string][]string{}
			out.Setup.Versions = map[string]string{}
			out.Setup.Round, out.Setup.Rounds = 0, 0
		} else {
			out.Setup.Modes = appendNew(out.Setup.Modes, r.Setup.Modes...)
			out.Setup.Notes = appendNew(out.Setup.Notes, r.Setup.Notes...)
			out.Setup.Clients = appendNew(out.Setup.Clients, r.Setup.Clients...)
			out.Setup.Workloads = appendNew(out.Setup.Workloads, r.Setup.Workloads...)
		}
		maps.Copy(out.Setup.Endpoints, r.Setup.Endpoints)
		maps.Copy(out.Setup.Versions, r.Setup.Versions)
		if out.Floors == nil && r.Floors != nil {
			out.Floors = r.Floors
		}
		for _, l := range r.Loads {
			l.Round = max(l.Round, r.Setup.Round)
			out.Loads = append(out.Loads, l)
		}
		out.Results = append(out.Results, r.Results...)
		for k, v := range r.IdleCPU {
			if out.IdleCPU == nil {
				out.IdleCPU = map[string]core.CPUUse{}
			}
			out.IdleCPU[roundKey(k, r.Setup.Round)] = v
		}
		for k, v := range r.ServerMetrics {
			if out.ServerMetrics == nil {
				out.ServerMetrics = map[string][]core.HistDelta{}
			}
			out.ServerMetrics[roundKey(k, r.Setup.Round)] = v
		}
	}
	seen := map[pointKey]int{}
	for i := range out.Results {
		res := &out.Results[i]
		k := keyOf(*res)
		if res.Round == 0 {
			res.Round = seen[k] + 1
		}
		seen[k] = max(seen[k], res.Round)
		out.Setup.Rounds = max(out.Setup.Rounds, res.Round)
	}
	slices.Sort(out.Setup.Clients)
	return out
}

// modeOrder sorts modes as drivers.Modes lists them.
func modeOrder(m string) int {
	if i := slices.Index(drivers.Modes, m); i >= 0 {
		return i
	}
	return len(drivers.Modes)
}

// workloadOrder sorts workloads in setup order, then the others last.
func (r *Report) workloadOrder(w string) int {
	if i := slices.Index(r.Setup.Workloads, w); i >= 0 {
		return i
	}
	return len(r.Setup.Workloads)
}

// compareKeys orders by workload (in setup order, then by name), client
// count and mode.
func (r *Report) compareKeys(a, b pointKey) int {
	if c := r.workloadOrder(a.workload) - r.workloadOrder(b.workload); c != 0 {
		return c
	}
	if c := strings.Compare(a.workload, b.workload); c != 0 {
		return c
	}
	if c := a.clients - b.clients; c != 0 {
		return c
	}
	return modeOrder(a.mode) - modeOrder(b.mode)
}

// SortResults orders results by workload (in setup order, then by name),
// client count, mode and round.
func (r *Report) SortResults() {
	slices.SortStableFunc(r.Results, func(a, b Result) int {
		if c := r.compareKeys(keyOf(a), keyOf(b)); c != 0 {
			return c
		}
		return a.Round - b.Round
	})
}

// Find returns the result of a mode, workload and client count (the first
// round's when there are several).
func (r *Report) Find(mode, workload string, clients int) (Result, bool) {
	for _, res := range r.Results {
		if res.Mode == mode && res.Workload == workload && res.Clients == clients {
			return res, true
		}
	}
	return Result{}, false
}
