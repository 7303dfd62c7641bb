package core

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
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
	if m.GOMAXPROCS != m.CPUs && m.GOMAXPROCS > 0 {
		s += fmt.Sprintf(", GOMAXPROCS %d", m.GOMAXPROCS)
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
