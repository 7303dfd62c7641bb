// Package core is the measurement library of Causeway's benchmark
// harnesses, kvbench (package bench) and ycsb (package bench/ycsbrun),
// which add their workloads on top of it: latency histograms
// (HdrHistogram), CPU sampling, the machine's description, the closed-loop
// phase runner, the load phase, server metrics (in-process registries or
// /metrics endpoints), markdown and JSON report primitives, medians and
// spreads of repeated runs, and the gRPC connection pool.
//
// Measurement: each client goroutine executes one operation at a time.
// Operations that start during the warm-up are executed but not measured;
// the measured window is [start+Warmup, start+Warmup+Duration), and an
// operation belongs to it when it starts inside it (it may finish after).
// Throughput is the successful operations of the window divided by its
// length; failed operations are counted as errors by class and kept out of
// the latency histograms; an operation cut short because the caller's
// context ended is neither. Latency is measured from the moment the
// operation is sent (with a target rate, not from the intended start:
// coordinated omission is not corrected).
package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client is one client goroutine's operations. The runner calls Next to
// prepare an operation (not timed) and then Do to perform it (timed). A
// Client is used by one goroutine.
type Client interface {
	// Next prepares the next operation and returns its kind: an index
	// into PhaseSpec.Kinds.
	Next() int
	// Do performs the prepared operation.
	Do(ctx context.Context) error
	// Skip is called instead of Do when the phase ended after Next.
	Skip()
}

// PhaseSpec describes one timed phase.
type PhaseSpec struct {
	// Label prefixes progress lines.
	Label string
	// Kinds names the operation kinds a Client's Next returns.
	Kinds []string
	// Warmup is run before the measured window and not measured.
	Warmup time.Duration
	// Duration is the measured window; 0 means until Operations.
	Duration time.Duration
	// Operations, when positive, stops the phase after that many
	// operations (all clients, warm-up included, as YCSB's
	// operationcount).
	Operations int64
	// MaxTime bounds a phase bounded by Operations alone (0 means 10
	// minutes).
	MaxTime time.Duration
	// TargetRate, when positive, paces the clients to that many
	// operations per second in total (each client 1/Clients of it).
	TargetRate float64
	// OpTimeout bounds each operation (0 means 10s).
	OpTimeout time.Duration
	// Progress, when set, gets a line every ProgressEvery (0 means 5s).
	Progress      io.Writer
	ProgressEvery time.Duration
	// ServerPIDs are the server processes (on this machine) whose CPU
	// time the result reports.
	ServerPIDs []int
}

// Defaults.
const (
	DefaultOpTimeout     = 10 * time.Second
	DefaultMaxTime       = 10 * time.Minute
	DefaultProgressEvery = 5 * time.Second
	// MaxErrorSamples is how many error messages a Measurement keeps.
	MaxErrorSamples = 5
	// errorBackoff is how long a client waits after a failed operation,
	// so that it does not spin against a server that fails at once.
	errorBackoff = time.Millisecond
)

// KindResult is the measured outcome of one operation kind.
type KindResult struct {
	Kind    string  `json:"kind"`
	Ops     int64   `json:"ops"`
	Errors  int64   `json:"errors"`
	Latency Latency `json:"latency"`
}

// Measurement is what one phase measured.
type Measurement struct {
	Clients    int     `json:"clients"`
	TargetRate float64 `json:"target_rate,omitempty"`
	// WarmupS and WindowS are the warm-up and the measured window, in
	// seconds (the window is shorter than the duration asked for when the
	// phase was cancelled).
	WarmupS float64 `json:"warmup_s"`
	WindowS float64 `json:"window_s"`
	// Ops and Errors are the measured successful and failed operations.
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
	// WarmupOps are the operations (successful or not) of the warm-up.
	WarmupOps int64 `json:"warmup_ops"`
	// Throughput is Ops / WindowS.
	Throughput float64 `json:"throughput_ops"`
	// Latency merges every kind's successful operations.
	Latency Latency      `json:"latency"`
	Kinds   []KindResult `json:"kinds"`
	// ErrorClasses counts measured errors by class (ErrorClass).
	ErrorClasses map[string]int64 `json:"error_classes,omitempty"`
	ErrorSamples []string         `json:"error_samples,omitempty"`
	Started      time.Time        `json:"started"`
	// CPU is the CPU use during the measured window.
	CPU CPUUse `json:"cpu"`

	hists map[string]*hdrhistogram.Histogram // per kind; "" merged
}

// Histogram returns the merged latency histogram of kind ("" for every
// kind), nil if it has none. It is not kept in JSON.
func (m *Measurement) Histogram(kind string) *hdrhistogram.Histogram { return m.hists[kind] }

// Kind returns the result of one kind (zero if it did not run).
func (m *Measurement) Kind(kind string) KindResult {
	for _, k := range m.Kinds {
		if k.Kind == kind {
			return k
		}
	}
	return KindResult{Kind: kind}
}

// Attempts counts every operation that finished, warm-up included,
// successes and errors alike: what the servers saw.
func (m *Measurement) Attempts() int64 { return m.WarmupOps + m.Ops + m.Errors }

// ErrorSummary renders the error classes as "class n, ..." by class name.
func (m *Measurement) ErrorSummary() string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(m.ErrorClasses)) {
		out = append(out, fmt.Sprintf("%s %d", c, m.ErrorClasses[c]))
	}
	return strings.Join(out, ", ")
}

// kindError tags an error with an explicit class.
type kindError struct {
	class string
	err   error
}

func (e *kindError) Error() string { return e.class + ": " + e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// KindError returns err tagged with class, which ErrorClass reports.
func KindError(class string, err error) error { return &kindError{class: class, err: err} }

// ErrorClass names the class of an operation error: the class it was
// tagged with (KindError), "timeout" or "canceled" for a context error,
// the gRPC code, or "other".
func ErrorClass(err error) string {
	var ke *kindError
	switch {
	case errors.As(err, &ke):
		return ke.class
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK && s.Code() != codes.Unknown {
		return s.Code().String()
	}
	return "other"
}

// clientStats is one client goroutine's measurements.
type clientStats struct {
	hists     []*hdrhistogram.Histogram // per kind
	ops, errs []int64
	classes   map[string]int64
	samples   []string
	warmupOps int64
}

func newClientStats(kinds int) clientStats {
	return clientStats{hists: make([]*hdrhistogram.Histogram, kinds), ops: make([]int64, kinds), errs: make([]int64, kinds)}
}

func (s *clientStats) record(kinds []string, kind int, lat time.Duration, err error) {
	if err != nil {
		s.errs[kind]++
		if s.classes == nil {
			s.classes = make(map[string]int64)
		}
		s.classes[ErrorClass(err)]++
		if len(s.samples) < MaxErrorSamples {
			s.samples = append(s.samples, fmt.Sprintf("%s: %v", kinds[kind], err))
		}
		return
	}
	s.ops[kind]++
	if s.hists[kind] == nil {
		s.hists[kind] = NewHistogram()
	}
	Record(s.hists[kind], lat)
}

// RunPhase runs spec with one goroutine per client. It returns when the
// window (or the operation budget) is over and every operation in flight
// has finished, or ctx is done (then with ctx's error and what was
// measured so far).
func RunPhase(ctx context.Context, spec PhaseSpec, clients []Client) (Measurement, error) {
	n := len(clients)
	switch {
	case n < 1:
		return Measurement{}, errors.New("phase: clients must be at least 1")
	case len(spec.Kinds) == 0:
		return Measurement{}, errors.New("phase: no operation kinds")
	case spec.Duration <= 0 && spec.Operations <= 0:
		return Measurement{}, errors.New("phase: set a duration or an operation count")
	case spec.Warmup < 0 || spec.Duration < 0 || spec.TargetRate < 0:
		return Measurement{}, errors.New("phase: negative warm-up, duration or target rate")
	}
	if spec.OpTimeout <= 0 {
		spec.OpTimeout = DefaultOpTimeout
	}
	if spec.MaxTime <= 0 {
		spec.MaxTime = DefaultMaxTime
	}
	if spec.ProgressEvery <= 0 {
		spec.ProgressEvery = DefaultProgressEvery
	}

	start := time.Now()
	warmEnd := start.Add(spec.Warmup)
	stopAt := start.Add(spec.MaxTime)
	if spec.Duration > 0 {
		stopAt = warmEnd.Add(spec.Duration)
	}
	// Operations in flight when the window closes may run OpTimeout more.
	runCtx, cancel := context.WithDeadline(ctx, stopAt.Add(spec.OpTimeout+5*time.Second))
	defer cancel()

	var (
		issued, done, failed atomic.Int64
		lastEnd              atomic.Int64 // unix ns of the latest measured completion
		wg                   sync.WaitGroup
	)
	stats := make([]clientStats, n)
	var interval time.Duration
	if spec.TargetRate > 0 {
		interval = time.Duration(float64(n) / spec.TargetRate * float64(time.Second))
	}
	for i, c := range clients {
		stats[i] = newClientStats(len(spec.Kinds))
		st := &stats[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := start.Add(interval * time.Duration(i) / time.Duration(n))
			for runCtx.Err() == nil {
				if spec.Operations > 0 && issued.Add(1) > spec.Operations {
					return
				}
				if interval > 0 {
					if wait := time.Until(next); wait > 0 {
						t := time.NewTimer(min(wait, time.Until(stopAt)))
						select {
						case <-runCtx.Done():
							t.Stop()
							return
						case <-t.C:
						}
					}
					next = next.Add(interval)
				}
				kind := c.Next()
				t0 := time.Now()
				if !t0.Before(stopAt) || ctx.Err() != nil {
					c.Skip()
					return
				}
				octx, ocancel := context.WithTimeout(runCtx, spec.OpTimeout)
				err := c.Do(octx)
				ocancel()
				t1 := time.Now()
				if err != nil && ctx.Err() != nil {
					return // interrupted by the caller, not a failure of the system
				}
				done.Add(1)
				if err != nil {
					failed.Add(1)
				}
				if t0.Before(warmEnd) {
					st.warmupOps++
				} else {
					st.record(spec.Kinds, kind, t1.Sub(t0), err)
					for {
						old := lastEnd.Load()
						if t1.UnixNano() <= old || lastEnd.CompareAndSwap(old, t1.UnixNano()) {
							break
						}
					}
				}
				if err != nil && interval == 0 {
					time.Sleep(errorBackoff)
				}
			}
		}()
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	cpu := make(chan CPUUse, 1)
	go func() {
		wait := func(at time.Time) bool { // false when the clients finished first
			select {
			case <-finished:
				return false
			case <-time.After(time.Until(at)):
				return true
			}
		}
		if !wait(warmEnd) {
			cpu <- CPUUse{}
			return
		}
		a := TakeCPUSample(spec.ServerPIDs)
		wait(stopAt)
		cpu <- CPUBetween(a, TakeCPUSample(spec.ServerPIDs))
	}()
	if spec.Progress != nil {
		tick := time.NewTicker(spec.ProgressEvery)
		defer tick.Stop()
		var prevDone int64
		prevT := start
	loop:
		for {
			select {
			case <-finished:
				break loop
			case now := <-tick.C:
				d := done.Load()
				phase := "run"
				if now.Before(warmEnd) {
					phase = "warm-up"
				} else if !now.Before(stopAt) {
					phase = "draining"
				}
				fmt.Fprintf(spec.Progress, "  %s %5.1fs %-8s %9d ops %9.0f ops/s %6d errors\n",
					spec.Label, now.Sub(start).Seconds(), phase, d,
					float64(d-prevDone)/now.Sub(prevT).Seconds(), failed.Load())
				prevDone, prevT = d, now
			}
		}
	}
	<-finished
	ended := time.Now()

	m := Measurement{Clients: n, TargetRate: spec.TargetRate, WarmupS: spec.Warmup.Seconds(), Started: start.UTC()}
	window := spec.Duration
	switch {
	case window <= 0: // operation budget: until the last measured completion
		if le := lastEnd.Load(); le > 0 {
			window = time.Unix(0, le).Sub(warmEnd)
		}
	case ctx.Err() != nil: // cancelled: the part of the window that passed
		window = max(min(window, ended.Sub(warmEnd)), 0)
	}
	m.WindowS = window.Seconds()
	m.CPU = <-cpu
	m.aggregate(spec.Kinds, stats)
	if m.WindowS > 0 {
		m.Throughput = float64(m.Ops) / m.WindowS
	}
	return m, ctx.Err()
}

// aggregate merges the clients' measurements into m.
func (m *Measurement) aggregate(kinds []string, stats []clientStats) {
	m.hists = make(map[string]*hdrhistogram.Histogram)
	all := NewHistogram()
	for k, name := range kinds {
		kr := KindResult{Kind: name}
		var hs []*hdrhistogram.Histogram
		for i := range stats {
			kr.Ops += stats[i].ops[k]
			kr.Errors += stats[i].errs[k]
			hs = append(hs, stats[i].hists[k])
		}
		if kr.Ops == 0 && kr.Errors == 0 {
			continue
		}
		h := Merge(hs...)
		kr.Latency = Summarize(h)
		m.hists[name] = h
		all.Merge(h)
		m.Kinds = append(m.Kinds, kr)
		m.Ops += kr.Ops
		m.Errors += kr.Errors
	}
	m.hists[""] = all
	m.Latency = Summarize(all)
	for i := range stats {
		m.WarmupOps += stats[i].warmupOps
		for c, n := range stats[i].classes {
			if m.ErrorClasses == nil {
				m.ErrorClasses = make(map[string]int64)
			}
			m.ErrorClasses[c] += n
		}
		for _, s := range stats[i].samples {
			if len(m.ErrorSamples) < MaxErrorSamples {
				m.ErrorSamples = append(m.ErrorSamples, s)
			}
		}
	}
}
