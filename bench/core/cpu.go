package core

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux builds
// for every common architecture).
const clockTicks = 100

// CPUSample is a reading of the CPU time used so far by the machine, this
// process and the server processes.
type CPUSample struct {
	At time.Time
	// Busy and Idle are the machine's busy and idle (idle + iowait) time
	// over all CPUs, in ticks of /proc/stat; CPUs is how many CPUs it
	// lists. All zero when /proc/stat is unreadable.
	Busy, Idle uint64
	CPUs       int
	// Self is this process's user and system time (getrusage, µs
	// resolution): the clients and, for an embedded site, its servers.
	Self time.Duration
	// Servers are the user and system ticks of the server processes
	// and of every process they started: the live descendants and the
	// children they have reaped (cutime, cstime).
	Servers uint64
	selfOK  bool
}

// TakeCPUSample reads /proc/stat, this process's rusage and, for the
// server pids, /proc/PID/stat of them and their descendants.
func TakeCPUSample(serverPIDs []int) CPUSample {
	s := CPUSample{At: time.Now()}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		s.selfOK = true
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
				continue
			}
			if f[0] != "cpu" {
				s.CPUs++
				continue
			}
			for i, v := range f[1:] {
				n, _ := strconv.ParseUint(v, 10, 64)
				if i >= 8 { // guest times are already in user and nice
					break
				}
				if i == 3 || i == 4 { // idle, iowait
					s.Idle += n
				} else {
					s.Busy += n
				}
			}
		}
	}
	if len(serverPIDs) > 0 {
		s.Servers = treeTicks(serverPIDs)
	}
	return s
}

// procStat is what treeTicks needs of /proc/PID/stat.
type procStat struct {
	ppid  int
	ticks uint64 // utime + stime + cutime + cstime
}

// readProcStat parses /proc/PID/stat; ok is false if it is unreadable.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) may hold spaces: fields restart after ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 15 {
		return procStat{}, false
	}
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	ppid, _ := strconv.Atoi(f[1])
	var st procStat
	st.ppid = ppid
	for _, j := range []int{11, 12, 13, 14} {
		n, _ := strconv.ParseUint(f[j], 10, 64)
		st.ticks += n
	}
	return st, true
}

// treeTicks sums the CPU ticks of the processes roots and of all their
// descendants still alive (a server started through a wrapper, or one
// that forks helpers, is counted whole); the time of children already
// reaped is in their parent's cutime and cstime.
func treeTicks(roots []int) uint64 {
	procs := map[int]procStat{}
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if st, ok := readProcStat(pid); ok {
				procs[pid] = st
				children[st.ppid] = append(children[st.ppid], pid)
			}
		}
	}
	var total uint64
	seen := map[int]bool{}
	var walk func(pid int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		st, ok := procs[pid]
		if !ok { // started after the scan, or /proc was not listable
			if st, ok = readProcStat(pid); !ok {
				return
			}
		}
		total += st.ticks
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, pid := range roots {
		walk(pid)
	}
	return total
}

// CPUUse is the average number of CPUs busy over an interval.
type CPUUse struct {
	// Machine is every process and the kernel (0 when unknown).
	Machine float64 `json:"machine"`
	// Client is this process: the benchmark clients and, for an embedded
	// site, its servers too.
	Client float64 `json:"client"`
	// Servers are the server processes given by pid, with their
	// descendants (0 when none were given).
	Servers float64 `json:"servers"`
	// Total is the number of CPUs this process may use.
	Total int `json:"total"`
}

// CPUBetween returns the CPU use between two samples.
func CPUBetween(a, b CPUSample) CPUUse {
	el := b.At.Sub(a.At).Seconds()
	if el <= 0 {
		return CPUUse{}
	}
	d := func(x, y uint64) float64 {
		if y < x {
			return 0
		}
		return float64(y - x)
	}
	u := CPUUse{Total: runtime.NumCPU()}
	if busy, idle := d(a.Busy, b.Busy), d(a.Idle, b.Idle); busy+idle > 0 && b.CPUs > 0 {
		u.Machine = float64(b.CPUs) * busy / (busy + idle)
	}
	if a.selfOK && b.selfOK {
		u.Client = max(b.Self-a.Self, 0).Seconds() / el
	}
	u.Servers = d(a.Servers, b.Servers) / clockTicks / el
	return u
}
