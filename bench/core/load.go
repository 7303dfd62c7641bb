package core

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// LoadSpec configures a load phase: records 0..Records-1 inserted once
// each, by Concurrency goroutines taking record numbers in order.
type LoadSpec struct {
	// Label names what is loaded in progress lines and the result.
	Label   string
	Records int64
	// Concurrency is the number of inserting goroutines (0 means 32; at
	// most Records).
	Concurrency int
	// Timeout bounds the whole load (0 means 10 minutes).
	Timeout time.Duration
	// Attempts per record (0 means 5); a record failing every attempt
	// fails the load.
	Attempts int
	// OpTimeout bounds each attempt (0 means 10s).
	OpTimeout time.Duration
	// Progress, when set, gets a line every ProgressEvery (0 means 5s).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// LoadResult is the outcome of a load phase.
type LoadResult struct {
	Mode       string  `json:"mode,omitempty"`
	Records    int64   `json:"records"`
	ValueSize  int     `json:"value_size,omitempty"`
	Loaded     int64   `json:"loaded"`
	Retries    int64   `json:"retries"`
	Clients    int     `json:"clients"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_ops"`
	// Latency of the successful attempts.
	Latency Latency `json:"latency"`
}

// Inserter writes record n; each loading goroutine has its own.
type Inserter func(ctx context.Context, n int64) error

// Load runs the load phase: newInserter is called once per goroutine
// before any starts. A failed insert is retried after 100 ms × the
// attempt number.
func Load(ctx context.Context, spec LoadSpec, newInserter func(worker int) (Inserter, error)) (LoadResult, error) {
	if spec.Records < 0 {
		return LoadResult{}, fmt.Errorf("load: negative record count %d", spec.Records)
	}
	if spec.Concurrency <= 0 {
		spec.Concurrency = 32
	}
	spec.Concurrency = int(min(int64(spec.Concurrency), max(spec.Records, 1)))
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultMaxTime
	}
	if spec.Attempts <= 0 {
		spec.Attempts = 5
	}
	if spec.OpTimeout <= 0 {
		spec.OpTimeout = DefaultOpTimeout
	}
	if spec.ProgressEvery <= 0 {
		spec.ProgressEvery = DefaultProgressEvery
	}
	res := LoadResult{Mode: spec.Label, Records: spec.Records, Clients: spec.Concurrency}
	inserters := make([]Inserter, spec.Concurrency)
	for w := range inserters {
		ins, err := newInserter(w)
		if err != nil {
			return res, fmt.Errorf("load: inserter %d: %w", w, err)
		}
		inserters[w] = ins
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()

	var (
		next, loaded, retries atomic.Int64
		errOnce               sync.Once
		firstErr              error
		wg                    sync.WaitGroup
	)
	stats := make([]clientStats, spec.Concurrency)
	kinds := []string{"INSERT"}
	start := time.Now()
	for w, insert := range inserters {
		stats[w] = newClientStats(1)
		st := &stats[w]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1) - 1
				if n >= spec.Records || ctx.Err() != nil {
					return
				}
				var err error
				for attempt := 0; attempt < spec.Attempts; attempt++ {
					if attempt > 0 {
						retries.Add(1)
						select {
						case <-ctx.Done():
						case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
						}
					}
					octx, ocancel := context.WithTimeout(ctx, spec.OpTimeout)
					t0 := time.Now()
					err = insert(octx, n)
					lat := time.Since(t0)
					ocancel()
					if err == nil {
						st.record(kinds, 0, lat, nil)
						break
					}
					if ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("load record %d: %w", n, err)
						cancel()
					})
					return
				}
				loaded.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(spec.ProgressEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-tick.C:
			if spec.Progress != nil {
				fmt.Fprintf(spec.Progress, "  load %s: %d/%d records, %.0f/s\n", spec.Label,
					loaded.Load(), spec.Records, float64(loaded.Load())/time.Since(start).Seconds())
			}
		}
	}
	el := time.Since(start)
	res.Loaded, res.Retries, res.Seconds = loaded.Load(), retries.Load(), el.Seconds()
	if el > 0 {
		res.Throughput = float64(res.Loaded) / el.Seconds()
	}
	var hs []*hdrhistogram.Histogram
	for _, st := range stats {
		hs = append(hs, st.hists[0])
	}
	res.Latency = Summarize(Merge(hs...))
	if firstErr != nil {
		return res, firstErr
	}
	if res.Loaded < spec.Records {
		return res, fmt.Errorf("load stopped after %d of %d records: %w", res.Loaded, spec.Records, ctx.Err())
	}
	return res, nil
}
