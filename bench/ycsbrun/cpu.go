package ycsbrun

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux builds
// for every common architecture).
const clockTicks = 100

// CPUSample is a reading of the CPU time used so far by the machine, this
// process and some other processes (the servers), from /proc.
type CPUSample struct {
	At time.Time
	// Machine is the busy time of every CPU, Idle the idle and iowait
	// time, both in ticks; zero if /proc/stat is unreadable.
	Machine, Idle uint64
	// Self and Servers are user+system ticks of this process and of the
	// server processes (those still alive).
	Self, Servers uint64
	ok            bool
}

// TakeCPUSample reads /proc/stat, /proc/self/stat and /proc/PID/stat for
// every pid.
func TakeCPUSample(pids []int) CPUSample {
	s := CPUSample{At: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i >= 8 { // guest times are already in user and nice
			break
		}
		if i == 3 || i == 4 { // idle, iowait
			s.Idle += n
		} else {
			s.Machine += n
		}
	}
	s.Self = procTicks("self")
	for _, p := range pids {
		s.Servers += procTicks(strconv.Itoa(p))
	}
	s.ok = true
	return s
}

// procTicks returns utime+stime of /proc/PID/stat, 0 if unreadable.
func procTicks(pid string) uint64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields restart after ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return u + st
}

// CPUUse is the average number of CPUs busy over an interval.
type CPUUse struct {
	// Machine is every process and the kernel, out of Total CPUs.
	Machine float64 `json:"machine"`
	// Client is the benchmark process, Servers the server processes
	// named with --server-pids (0 when none were).
	Client  float64 `json:"client"`
	Servers float64 `json:"servers"`
	Total   int     `json:"total"`
}

// CPUBetween returns the CPU use between two samples (zero if either
// failed).
func CPUBetween(a, b CPUSample, cpus int) CPUUse {
	el := b.At.Sub(a.At).Seconds()
	if !a.ok || !b.ok || el <= 0 {
		return CPUUse{}
	}
	d := func(x, y uint64) float64 {
		if y < x {
			return 0
		}
		return float64(y - x)
	}
	u := CPUUse{Total: cpus}
	busy, idle := d(a.Machine, b.Machine), d(a.Idle, b.Idle)
	if busy+idle > 0 {
		u.Machine = float64(cpus) * busy / (busy + idle)
	}
	u.Client = d(a.Self, b.Self) / clockTicks / el
	u.Servers = d(a.Servers, b.Servers) / clockTicks / el
	return u
}
