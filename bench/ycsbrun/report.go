package ycsbrun

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/floors"
)

// Machine describes where a benchmark ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model,omitempty"`
	MemoryMiB  int64  `json:"memory_mib,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
	Kernel     string `json:"kernel,omitempty"`
	OS         string `json:"os,omitempty"`
	Hostname   string `json:"hostname,omitempty"`
	// LoadAvg is /proc/loadavg when the description was taken: other work
	// on a shared machine skews the results.
	LoadAvg string `json:"loadavg,omitempty"`
}

// DescribeMachine reports the CPUs, memory, platform, Go version, kernel,
// OS release and load average (the last four on Linux).
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS,
		GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryMiB = kb / 1024
		}
	}
	if f, err := os.Open("/etc/os-release"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
		f.Close()
	}
	m.Hostname, _ = os.Hostname()
	return m
}

func (m Machine) String() string {
	s := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.MemoryMiB > 0 {
		s += fmt.Sprintf(", %.1f GiB RAM", float64(m.MemoryMiB)/1024)
	}
	s += fmt.Sprintf(", %s/%s, %s", m.GOOS, m.GOARCH, m.GoVersion)
	if m.Kernel != "" {
		s += ", kernel " + m.Kernel
	}
	if m.OS != "" {
		s += ", " + m.OS
	}
	return s
}

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
}

// Report is the JSON document of one or several runs.
type Report struct {
	Title   string         `json:"title"`
	Date    time.Time      `json:"date"`
	Machine Machine        `json:"machine"`
	Setup   Setup          `json:"setup"`
	Floors  *floors.Floors `json:"floors,omitempty"`
	Loads   []LoadResult   `json:"loads,omitempty"`
	Results []Result       `json:"results"`
	// Targets are filled by Evaluate.
	Ratios  []Ratio   `json:"ratios,omitempty"`
	Targets []Verdict `json:"targets,omitempty"`
	// ServerMetrics are server histograms over a whole run, per system.
	ServerMetrics map[string][]HistDelta `json:"server_metrics,omitempty"`
	// IdleCPU is the CPU use of each system's servers, idle, before the
	// load (their background work: heartbeats, gossip).
	IdleCPU map[string]CPUUse `json:"idle_cpu,omitempty"`
}

// ReadReport reads a Report written by WriteJSON.
func ReadReport(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteJSON writes r indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// MergeReports combines the runs of several reports (for example one per
// system) into one: results, loads and notes concatenated, the first
// report's machine, date and setup, the union of modes, endpoints and
// versions, and the first floors found.
func MergeReports(title string, rs ...Report) Report {
	out := Report{Title: title}
	for i, r := range rs {
		if i == 0 {
			out.Date, out.Machine, out.Setup = r.Date, r.Machine, r.Setup
			out.Setup.Modes = slices.Clone(r.Setup.Modes)
			out.Setup.Notes = slices.Clone(r.Setup.Notes)
			out.Setup.Endpoints = map[string][]string{}
			out.Setup.Versions = map[string]string{}
		} else {
			for _, m := range r.Setup.Modes {
				if !slices.Contains(out.Setup.Modes, m) {
					out.Setup.Modes = append(out.Setup.Modes, m)
				}
			}
			out.Setup.Notes = append(out.Setup.Notes, r.Setup.Notes...)
			for _, c := range r.Setup.Clients {
				if !slices.Contains(out.Setup.Clients, c) {
					out.Setup.Clients = append(out.Setup.Clients, c)
				}
			}
			for _, w := range r.Setup.Workloads {
				if !slices.Contains(out.Setup.Workloads, w) {
					out.Setup.Workloads = append(out.Setup.Workloads, w)
				}
			}
		}
		for k, v := range r.Setup.Endpoints {
			out.Setup.Endpoints[k] = v
		}
		for k, v := range r.Setup.Versions {
			out.Setup.Versions[k] = v
		}
		if out.Floors == nil && r.Floors != nil {
			out.Floors = r.Floors
		}
		out.Loads = append(out.Loads, r.Loads...)
		out.Results = append(out.Results, r.Results...)
		for k, v := range r.IdleCPU {
			if out.IdleCPU == nil {
				out.IdleCPU = map[string]CPUUse{}
			}
			out.IdleCPU[k] = v
		}
		for k, v := range r.ServerMetrics {
			if out.ServerMetrics == nil {
				out.ServerMetrics = map[string][]HistDelta{}
			}
			out.ServerMetrics[k] = v
		}
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

// SortResults orders results by workload (in setup order, then by name),
// client count and mode.
func (r *Report) SortResults() {
	wl := func(w string) int {
		if i := slices.Index(r.Setup.Workloads, w); i >= 0 {
			return i
		}
		return len(r.Setup.Workloads)
	}
	slices.SortStableFunc(r.Results, func(a, b Result) int {
		if c := wl(a.Workload) - wl(b.Workload); c != 0 {
			return c
		}
		if c := strings.Compare(a.Workload, b.Workload); c != 0 {
			return c
		}
		if c := a.Clients - b.Clients; c != 0 {
			return c
		}
		return modeOrder(a.Mode) - modeOrder(b.Mode)
	})
}

// Find returns the result of a mode, workload and client count.
func (r *Report) Find(mode, workload string, clients int) (Result, bool) {
	for _, res := range r.Results {
		if res.Mode == mode && res.Workload == workload && res.Clients == clients {
			return res, true
		}
	}
	return Result{}, false
}

// Peak returns the result with the highest throughput of a mode and
// workload over every client count.
func (r *Report) Peak(mode, workload string) (Result, bool) {
	var best Result
	found := false
	for _, res := range r.Results {
		if res.Mode == mode && res.Workload == workload && (!found || res.Throughput > best.Throughput) {
			best, found = res, true
		}
	}
	return best, found
}
