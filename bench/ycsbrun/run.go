// Package ycsbrun runs YCSB workloads (package bench/ycsb) against a system
// through a driver (package bench/drivers): the load phase, timed run
// phases with a warm-up that is not measured, latency histograms per
// operation kind (HdrHistogram), error counts, and their rendering as JSON
// and markdown, including the Causeway/etcd comparison with its targets.
//
// Measurement: each client goroutine executes one operation at a time.
// Operations that start during the warm-up are executed but not measured;
// the measured window is [start+Warmup, start+Warmup+Duration), and an
// operation belongs to it when it starts inside it (it may finish after).
// Throughput is the successful operations of the window divided by its
// length; failed operations are counted as errors by class and kept out of
// the latency histograms. Latency is measured from the moment the driver is
// called (with a target rate, not from the intended start: coordinated
// omission is not corrected).
package ycsbrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// RunConfig configures one run phase: one workload, one client count.
type RunConfig struct {
	// Workload is the operation mix, with RecordCount (the loaded records)
	// and FieldLength (the value size) set.
	Workload ycsb.Workload
	// Clients is the number of client goroutines (>= 1).
	Clients int
	// Warmup is run before the measured window and not measured.
	Warmup time.Duration
	// Duration is the measured window; 0 means until Operations.
	Duration time.Duration
	// Operations, when positive, stops the run after that many operations
	// (all clients, warm-up included, as YCSB's operationcount).
	Operations int64
	// MaxTime bounds a run by Operations alone (0 means 10 minutes).
	MaxTime time.Duration
	// TargetRate, when positive, paces the clients to that many
	// operations per second in total (each client 1/Clients of it).
	TargetRate float64
	// Seed is the base seed: client i's generator is seeded with Seed+i.
	Seed uint64
	// OpTimeout bounds each operation (0 means 10s).
	OpTimeout time.Duration
	// Progress, when set, gets a line every ProgressEvery (0 means 5s).
	Progress      io.Writer
	ProgressEvery time.Duration
	// Label prefixes progress lines.
	Label string
	// ServerPIDs are the server processes (on this machine) whose CPU
	// time the result reports.
	ServerPIDs []int
}

// Defaults.
const (
	DefaultOpTimeout     = 10 * time.Second
	DefaultMaxTime       = 10 * time.Minute
	DefaultProgressEvery = 5 * time.Second
	// maxErrorSamples is how many error messages a Result keeps.
	maxErrorSamples = 5
)

// KindResult is the measured outcome of one operation kind.
type KindResult struct {
	Kind    string  `json:"kind"`
	Ops     int64   `json:"ops"`
	Errors  int64   `json:"errors"`
	Latency Latency `json:"latency"`
}

// Result is the outcome of one run phase.
type Result struct {
	Mode       string  `json:"mode"`
	System     string  `json:"system"`
	Workload   string  `json:"workload"`
	Clients    int     `json:"clients"`
	Records    int64   `json:"records"`
	ValueSize  int     `json:"value_size"`
	TargetRate float64 `json:"target_rate,omitempty"`
	// WarmupS and WindowS are the warm-up and the measured window, in
	// seconds.
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
	// ErrorClasses counts measured errors by class (not_found, conflict,
	// timeout, a gRPC code, other).
	ErrorClasses map[string]int64 `json:"error_classes,omitempty"`
	ErrorSamples []string         `json:"error_samples,omitempty"`
	Started      time.Time        `json:"started"`
	// CPU is the CPU use during the measured window (Linux).
	CPU CPUUse `json:"cpu"`
	// ServerMetrics are the server histograms observed during the phase
	// (warm-up included), when the runner was given metrics URLs.
	ServerMetrics []HistDelta `json:"server_metrics,omitempty"`

	hists map[string]*hdrhistogram.Histogram // per kind; "" merged
}

// Histogram returns the merged latency histogram of kind ("" for every
// kind), nil if it has none. It is not kept in JSON.
func (r *Result) Histogram(kind string) *hdrhistogram.Histogram { return r.hists[kind] }

// Kind returns the result of one kind (zero if it did not run).
func (r *Result) Kind(kind string) KindResult {
	for _, k := range r.Kinds {
		if k.Kind == kind {
			return k
		}
	}
	return KindResult{Kind: kind}
}

// clientStats is one client goroutine's measurements.
type clientStats struct {
	hists     [int(ycsb.OpTxnRead) + 1]*hdrhistogram.Histogram
	ops       [int(ycsb.OpTxnRead) + 1]int64
	errs      [int(ycsb.OpTxnRead) + 1]int64
	classes   map[string]int64
	samples   []string
	warmupOps int64
}

func (s *clientStats) record(kind ycsb.OpKind, lat time.Duration, err error) {
	if err != nil {
		s.errs[kind]++
		if s.classes == nil {
			s.classes = make(map[string]int64)
		}
		s.classes[ErrorClass(err)]++
		if len(s.samples) < maxErrorSamples {
			s.samples = append(s.samples, fmt.Sprintf("%s: %v", kind, err))
		}
		return
	}
	s.ops[kind]++
	if s.hists[kind] == nil {
		s.hists[kind] = NewHistogram()
	}
	Record(s.hists[kind], lat)
}

// ErrorClass names the class of an operation error for the error counts.
func ErrorClass(err error) string {
	switch {
	case errors.Is(err, drivers.ErrNotFound):
		return "not_found"
	case errors.Is(err, drivers.ErrConflict):
		return "conflict"
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

// Execute runs one operation on d. A read-modify-write is one operation
// (its latency covers the read and the write); an insert acknowledges its
// record number in inserted whatever its outcome.
func Execute(ctx context.Context, d drivers.Driver, op ycsb.Op, inserted *ycsb.Counter) error {
	switch op.Kind {
	case ycsb.OpRead:
		_, err := d.Read(ctx, op.Key)
		return err
	case ycsb.OpUpdate:
		return d.Update(ctx, op.Key, op.Value)
	case ycsb.OpInsert:
		err := d.Insert(ctx, op.Key, op.Value)
		if inserted != nil {
			_ = inserted.Acknowledge(op.KeyNum)
		}
		return err
	case ycsb.OpScan:
		_, err := d.Scan(ctx, op.Key, op.ScanLen)
		return err
	case ycsb.OpReadModifyWrite:
		return d.ReadModifyWrite(ctx, op.Key, op.Value)
	case ycsb.OpTxnRead:
		return d.TxnRead(ctx, op.Keys)
	}
	return fmt.Errorf("ycsbrun: unknown operation kind %v", op.Kind)
}

// Run executes one run phase of cfg.Workload with cfg.Clients client
// goroutines, each with a driver of sys and its own generator. It returns
// when the window (or the operation budget) is over and every operation in
// flight has finished, or ctx is done (then with ctx's error and what was
// measured so far).
func Run(ctx context.Context, sys drivers.System, cfg RunConfig) (Result, error) {
	w := cfg.Workload
	if cfg.Clients < 1 {
		return Result{}, errors.New("ycsbrun: clients must be at least 1")
	}
	if cfg.Duration <= 0 && cfg.Operations <= 0 {
		return Result{}, errors.New("ycsbrun: set a duration or an operation count")
	}
	if cfg.Warmup < 0 || cfg.Duration < 0 || cfg.TargetRate < 0 {
		return Result{}, errors.New("ycsbrun: negative warm-up, duration or target rate")
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	if cfg.MaxTime <= 0 {
		cfg.MaxTime = DefaultMaxTime
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if w.OperationCount <= 0 {
		// Only sizes the zipfian space for inserts (see ycsb.Workload).
		w.OperationCount = max(cfg.Operations, w.RecordCount)
	}
	inserted := ycsb.NewCounter(w.RecordCount)
	gens := make([]*ycsb.Generator, cfg.Clients)
	drvs := make([]drivers.Driver, cfg.Clients)
	defer func() {
		for _, d := range drvs {
			if d != nil {
				d.Close()
			}
		}
	}()
	for i := range cfg.Clients {
		g, err := ycsb.NewGenerator(w, cfg.Seed+uint64(i), inserted)
		if err != nil {
			return Result{}, err
		}
		gens[i] = g
		d, err := sys.Driver(i)
		if err != nil {
			return Result{}, fmt.Errorf("ycsbrun: driver %d: %w", i, err)
		}
		drvs[i] = d
	}

	start := time.Now()
	warmEnd := start.Add(cfg.Warmup)
	stopAt := start.Add(cfg.MaxTime)
	if cfg.Duration > 0 {
		stopAt = warmEnd.Add(cfg.Duration)
	}
	// Operations in flight when the window closes may run OpTimeout more.
	runCtx, cancel := context.WithDeadline(ctx, stopAt.Add(cfg.OpTimeout+5*time.Second))
	defer cancel()

	var (
		issued, done, failed atomic.Int64
		lastEnd              atomic.Int64 // unix ns of the latest completion
		wg                   sync.WaitGroup
	)
	stats := make([]clientStats, cfg.Clients)
	var interval time.Duration
	if cfg.TargetRate > 0 {
		interval = time.Duration(float64(cfg.Clients) / cfg.TargetRate * float64(time.Second))
	}
	for i := range cfg.Clients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			g, d, st := gens[i], drvs[i], &stats[i]
			next := start.Add(interval * time.Duration(i) / time.Duration(cfg.Clients))
			for runCtx.Err() == nil {
				if cfg.Operations > 0 && issued.Add(1) > cfg.Operations {
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
				op := g.Next()
				t0 := time.Now()
				if !t0.Before(stopAt) {
					if op.Kind == ycsb.OpInsert {
						_ = inserted.Acknowledge(op.KeyNum) // never issued
					}
					return
				}
				octx, ocancel := context.WithTimeout(runCtx, cfg.OpTimeout)
				err := Execute(octx, d, op, inserted)
				ocancel()
				t1 := time.Now()
				done.Add(1)
				if err != nil {
					failed.Add(1)
				}
				if t0.Before(warmEnd) {
					st.warmupOps++
					continue
				}
				st.record(op.Kind, t1.Sub(t0), err)
				for {
					old := lastEnd.Load()
					if t1.UnixNano() <= old || lastEnd.CompareAndSwap(old, t1.UnixNano()) {
						break
					}
				}
			}
		}(i)
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	cpu := make(chan CPUUse, 1)
	go func() {
		wait := func(at time.Time) bool {
			t := time.NewTimer(time.Until(at))
			defer t.Stop()
			select {
			case <-finished:
				return false
			case <-t.C:
				return true
			}
		}
		if !wait(warmEnd) {
			cpu <- CPUUse{}
			return
		}
		a := TakeCPUSample(cfg.ServerPIDs)
		wait(stopAt)
		cpu <- CPUBetween(a, TakeCPUSample(cfg.ServerPIDs), runtime.NumCPU())
	}()
	if cfg.Progress != nil {
		tick := time.NewTicker(cfg.ProgressEvery)
		defer tick.Stop()
		var prevDone int64
		prevT := start
	loop:
		for {
			select {
			case <-finished:
				break loop
			case now := <-tick.C:
				n := done.Load()
				phase := "run"
				if now.Before(warmEnd) {
					phase = "warm-up"
				} else if !now.Before(stopAt) {
					phase = "draining"
				}
				fmt.Fprintf(cfg.Progress, "  %s %5.1fs %-8s %9d ops %9.0f ops/s %6d errors\n",
					cfg.Label, now.Sub(start).Seconds(), phase, n,
					float64(n-prevDone)/now.Sub(prevT).Seconds(), failed.Load())
				prevDone, prevT = n, now
			}
		}
	}
	<-finished

	res := Result{
		Mode:       sys.Mode(),
		System:     drivers.SystemOf(sys.Mode()),
		Workload:   w.Name,
		Clients:    cfg.Clients,
		Records:    w.RecordCount,
		ValueSize:  w.FieldLength,
		TargetRate: cfg.TargetRate,
		WarmupS:    cfg.Warmup.Seconds(),
		Started:    start.UTC(),
	}
	window := cfg.Duration
	if window <= 0 { // operation budget: until the last measured completion
		if le := lastEnd.Load(); le > 0 {
			window = time.Unix(0, le).Sub(warmEnd)
		}
	}
	res.WindowS = window.Seconds()
	res.CPU = <-cpu
	aggregate(&res, stats)
	if res.WindowS > 0 {
		res.Throughput = float64(res.Ops) / res.WindowS
	}
	return res, ctx.Err()
}

// aggregate merges the clients' measurements into res.
func aggregate(res *Result, stats []clientStats) {
	res.hists = make(map[string]*hdrhistogram.Histogram)
	all := NewHistogram()
	for k := ycsb.OpRead; k <= ycsb.OpTxnRead; k++ {
		var kr KindResult
		kr.Kind = k.String()
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
		res.hists[kr.Kind] = h
		all.Merge(h)
		res.Kinds = append(res.Kinds, kr)
		res.Ops += kr.Ops
		res.Errors += kr.Errors
	}
	res.hists[""] = all
	res.Latency = Summarize(all)
	for i := range stats {
		res.WarmupOps += stats[i].warmupOps
		for c, n := range stats[i].classes {
			if res.ErrorClasses == nil {
				res.ErrorClasses = make(map[string]int64)
			}
			res.ErrorClasses[c] += n
		}
		for _, s := range stats[i].samples {
			if len(res.ErrorSamples) < maxErrorSamples {
				res.ErrorSamples = append(res.ErrorSamples, s)
			}
		}
	}
}
