package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuSample is the CPU time used so far by this process and by the whole
// machine (all processes, from /proc/stat when readable).
type cpuSample struct {
	at          time.Time
	process     time.Duration
	machineBusy time.Duration
	machineOK   bool
}

// clockTick is USER_HZ, the unit of /proc/stat; 100 on every Linux
// platform Go supports.
const clockTick = 100

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.process = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) > 5 && f[0] == "cpu" {
			var busy int64
			for i, v := range f[1:] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					break
				}
				if i == 3 || i == 4 { // idle, iowait
					continue
				}
				if i >= 8 { // guest time is already counted in user
					break
				}
				busy += n
			}
			s.machineBusy = time.Duration(busy) * time.Second / clockTick
			s.machineOK = true
		}
	}
	return s
}

// CPUUsage is the average number of CPUs kept busy during a phase.
type CPUUsage struct {
	// Process counts this process: clients and, when embedded, the server.
	Process float64 `json:"process_cpus"`
	// Machine counts every process on the machine (0 when unknown); the
	// difference to Process is other load competing for the CPUs.
	Machine float64 `json:"machine_cpus,omitempty"`
}

func cpuBetween(a, b cpuSample) CPUUsage {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return CPUUsage{}
	}
	u := CPUUsage{Process: (b.process - a.process).Seconds() / wall}
	if a.machineOK && b.machineOK {
		u.Machine = (b.machineBusy - a.machineBusy).Seconds() / wall
	}
	return u
}
