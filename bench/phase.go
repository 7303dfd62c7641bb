package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/status"
)

// OpFunc performs one operation for one client goroutine. rng belongs to
// that goroutine.
type OpFunc func(ctx context.Context, rng *rand.Rand) error

// PhaseSpec describes one timed phase: Clients goroutines run their
// operation back to back for Warmup+Duration; only operations started
// after the warmup are measured.
type PhaseSpec struct {
	Name      string
	Clients   int
	Warmup    time.Duration
	Duration  time.Duration
	OpTimeout time.Duration // per operation; zero means 10s
	Seed      uint64
	// Progress, when set, receives a line every ProgressEvery (default 2s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// PhaseResult is what one phase measured.
type PhaseResult struct {
	Op string `json:"op"`
	// Consistency is the reads' consistency ("CAUSAL", "STRONG"); empty
	// for writes.
	Consistency string `json:"consistency,omitempty"`
	Clients     int    `json:"clients"`
	Conns       int    `json:"conns,omitempty"`
	Ops         int64  `json:"ops"`
	Errors      int64  `json:"errors"`
	// Attempts counts every operation that finished, warmup included,
	// successes and errors alike (what the servers saw).
	Attempts   int64            `json:"attempts"`
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
	ElapsedSec float64          `json:"elapsed_sec"`
	OpsPerSec  float64          `json:"ops_per_sec"`
	Latency    Summary          `json:"latency"`
	// Server is the embedded server's storage activity during the phase.
	Server *ServerStats `json:"server,omitempty"`
	// CPU is the CPU use during the measured part of the phase.
	CPU CPUUsage `json:"cpu"`
	// Hist holds the merged latencies in microseconds.
	Hist *hdrhistogram.Histogram `json:"-"`
}

// ErrorKind names the class of an operation error for reporting.
type ErrorKind string

// kindError tags an error with an explicit kind (e.g. "not_found").
type kindError struct {
	kind ErrorKind
	err  error
}

func (e *kindError) Error() string { return string(e.kind) + ": " + e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// KindError returns err tagged with kind.
func KindError(kind ErrorKind, err error) error { return &kindError{kind: kind, err: err} }

func classify(err error) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return string(ke.kind)
	}
	if s, ok := status.FromError(err); ok {
		return s.Code().String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "DeadlineExceeded"
	}
	return "other"
}

type clientStats struct {
	hist   *hdrhistogram.Histogram
	ops    int64
	errors int64
	kinds  map[string]int64
}

// RunPhase runs spec, calling newOp once per client goroutine to get its
// operation. Errors are counted separately and never recorded as
// latencies. Cancelling ctx ends the phase early; the result then covers
// the time actually measured.
func RunPhase(ctx context.Context, spec PhaseSpec, newOp func(client int) OpFunc) (PhaseResult, error) {
	if spec.Clients < 1 {
		return PhaseResult{}, fmt.Errorf("phase %s: clients must be positive", spec.Name)
	}
	if spec.Duration <= 0 {
		return PhaseResult{}, fmt.Errorf("phase %s: duration must be positive", spec.Name)
	}
	opTimeout := spec.OpTimeout
	if opTimeout <= 0 {
		opTimeout = 10 * time.Second
	}
	every := spec.ProgressEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	ops := make([]OpFunc, spec.Clients)
	for i := range ops {
		ops[i] = newOp(i)
	}

	begin := time.Now()
	measureStart := begin.Add(spec.Warmup)
	end := measureStart.Add(spec.Duration)
	var done, failed atomic.Int64 // every completion, warmup included, for progress
	stats := make([]clientStats, spec.Clients)
	var wg sync.WaitGroup
	for i := range spec.Clients {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st := &stats[i]
			st.hist = NewHistogram()
			st.kinds = map[string]int64{}
			rng := rand.New(rand.NewPCG(spec.Seed, uint64(i)+1))
			op := ops[i]
			for {
				start := time.Now()
				if !start.Before(end) || ctx.Err() != nil {
					return
				}
				opCtx, cancel := context.WithTimeout(ctx, opTimeout)
				err := op(opCtx, rng)
				cancel()
				lat := time.Since(start)
				if err != nil && ctx.Err() != nil {
					return // interrupted, not a server error
				}
				measured := !start.Before(measureStart)
				if err != nil {
					failed.Add(1)
					if measured {
						st.errors++
						st.kinds[classify(err)]++
					}
					time.Sleep(time.Millisecond) // no hot spin against a failing server
					continue
				}
				done.Add(1)
				if measured {
					st.ops++
					RecordLatency(st.hist, lat)
				}
			}
		}(i)
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	last, lastAt := int64(0), begin
	cpuStart := sampleCPU() // replaced at the end of the warmup
	var warmupOver <-chan time.Time
	if spec.Warmup > 0 {
		warmupTimer := time.NewTimer(spec.Warmup)
		defer warmupTimer.Stop()
		warmupOver = warmupTimer.C
	}
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-warmupOver:
			cpuStart = sampleCPU()
		case now := <-ticker.C:
			if spec.Progress == nil {
				continue
			}
			n := done.Load()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			tag := ""
			if now.Before(measureStart) {
				tag = " (warmup)"
			}
			fmt.Fprintf(spec.Progress, "  %s clients=%d t=%4.1fs ops/s=%.0f errors=%d%s\n",
				spec.Name, spec.Clients, now.Sub(begin).Seconds(), rate, failed.Load(), tag)
		}
	}
	stop := time.Now()
	cpuStop := sampleCPU()

	res := PhaseResult{Op: spec.Name, Clients: spec.Clients, ErrorKinds: map[string]int64{}, Attempts: done.Load() + failed.Load()}
	hists := make([]*hdrhistogram.Histogram, len(stats))
	for i, st := range stats {
		hists[i] = st.hist
		res.Ops += st.ops
		res.Errors += st.errors
		for k, v := range st.kinds {
			res.ErrorKinds[k] += v
		}
	}
	if len(res.ErrorKinds) == 0 {
		res.ErrorKinds = nil
	}
	res.CPU = cpuBetween(cpuStart, cpuStop)
	res.Hist = MergeHistograms(hists...)
	res.Latency = Summarize(res.Hist)
	if elapsed := stop.Sub(measureStart); elapsed > 0 {
		res.ElapsedSec = elapsed.Seconds()
		res.OpsPerSec = float64(res.Ops) / res.ElapsedSec
	}
	return res, ctx.Err()
}

// ErrorSummary renders error kinds as "Code=n, ..." in a stable order.
func (r PhaseResult) ErrorSummary() string {
	if len(r.ErrorKinds) == 0 {
		return ""
	}
	keys := make([]string, 0, len(r.ErrorKinds))
	for k := range r.ErrorKinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s=%d", k, r.ErrorKinds[k])
	}
	return s
}
