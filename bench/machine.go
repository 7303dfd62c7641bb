package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where a benchmark ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	GoVersion  string `json:"go_version"`
	Kernel     string `json:"kernel,omitempty"`
	Hostname   string `json:"hostname,omitempty"`
}

// DescribeMachine reports the CPU count, platform, Go version and (on
// Linux) the kernel release.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Hostname, _ = os.Hostname()
	return m
}

func (m Machine) String() string {
	s := fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s/%s, %s", m.CPUs, m.GOMAXPROCS, m.GOOS, m.GOARCH, m.GoVersion)
	if m.Kernel != "" {
		s += ", kernel " + m.Kernel
	}
	return s
}
