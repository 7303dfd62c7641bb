package ycsbrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// LoadConfig configures the load phase.
type LoadConfig struct {
	// Records are inserted as record numbers 0..Records-1 (ycsb.KeyName).
	Records int64
	// ValueSize is the size of each value in bytes.
	ValueSize int
	// Seed determines the values: record n's value depends only on Seed
	// and n (RecordValue), so every system gets the same bytes whatever
	// the concurrency.
	Seed uint64
	// Concurrency is the number of inserting goroutines (0 means 32).
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

// LoadResult is the outcome of the load phase.
type LoadResult struct {
	Mode       string  `json:"mode"`
	Records    int64   `json:"records"`
	ValueSize  int     `json:"value_size"`
	Loaded     int64   `json:"loaded"`
	Retries    int64   `json:"retries"`
	Clients    int     `json:"clients"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_ops"`
	// Latency of the successful attempts.
	Latency Latency `json:"latency"`
}

// valueSeedMix separates the per-record value seeds from the run seeds.
const valueSeedMix = 0x6c6f61642d76616c // "load-val"

// RecordValue returns the load-phase value of record n: size printable
// bytes from a ycsb generator seeded with a mix of seed and n.
func RecordValue(seed uint64, n int64, size int) []byte {
	w := ycsb.Workload{Name: "load", ReadProportion: 1, RequestDistribution: ycsb.DistUniform,
		RecordCount: 1, FieldLength: size}
	g, err := ycsb.NewGenerator(w, (seed^valueSeedMix)+uint64(n)*0x9e3779b97f4a7c15, ycsb.NewCounter(1))
	if err != nil {
		panic(err) // the workload above is valid
	}
	return g.Value()
}

// Load inserts cfg.Records records through sys's drivers with
// cfg.Concurrency goroutines taking record numbers in order.
func Load(ctx context.Context, sys drivers.System, cfg LoadConfig) (LoadResult, error) {
	if cfg.Records < 0 || cfg.ValueSize < 0 {
		return LoadResult{}, errors.New("ycsbrun: negative record count or value size")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	cfg.Concurrency = int(min(int64(cfg.Concurrency), max(cfg.Records, 1)))
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultMaxTime
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	res := LoadResult{Mode: sys.Mode(), Records: cfg.Records, ValueSize: cfg.ValueSize, Clients: cfg.Concurrency}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	var (
		next, loaded, retries atomic.Int64
		errOnce               sync.Once
		firstErr              error
		wg                    sync.WaitGroup
	)
	hists := make([]*clientStats, cfg.Concurrency)
	start := time.Now()
	for c := range cfg.Concurrency {
		d, err := sys.Driver(c)
		if err != nil {
			cancel()
			wg.Wait()
			return res, fmt.Errorf("ycsbrun: load driver %d: %w", c, err)
		}
		st := &clientStats{}
		hists[c] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer d.Close()
			for {
				n := next.Add(1) - 1
				if n >= cfg.Records || ctx.Err() != nil {
					return
				}
				key, val := ycsb.KeyName(n), RecordValue(cfg.Seed, n, cfg.ValueSize)
				var err error
				for attempt := 0; attempt < cfg.Attempts; attempt++ {
					if attempt > 0 {
						retries.Add(1)
						select {
						case <-ctx.Done():
						case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
						}
					}
					octx, ocancel := context.WithTimeout(ctx, cfg.OpTimeout)
					t0 := time.Now()
					err = d.Insert(octx, key, val)
					lat := time.Since(t0)
					ocancel()
					if err == nil {
						st.record(ycsb.OpInsert, lat, nil)
						break
					}
					if ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errOnce.Do(func() {
						firstErr = fmt.Errorf("ycsbrun: load record %d (%s): %w", n, key, err)
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
	tick := time.NewTicker(cfg.ProgressEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-tick.C:
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "  load %s: %d/%d records, %.0f/s\n", sys.Mode(),
					loaded.Load(), cfg.Records, float64(loaded.Load())/time.Since(start).Seconds())
			}
		}
	}
	el := time.Since(start)
	res.Loaded, res.Retries, res.Seconds = loaded.Load(), retries.Load(), el.Seconds()
	if el > 0 {
		res.Throughput = float64(res.Loaded) / el.Seconds()
	}
	h := NewHistogram()
	for _, st := range hists {
		if st != nil && st.hists[ycsb.OpInsert] != nil {
			h.Merge(st.hists[ycsb.OpInsert])
		}
	}
	res.Latency = Summarize(h)
	if firstErr != nil {
		return res, firstErr
	}
	if res.Loaded < cfg.Records {
		return res, fmt.Errorf("ycsbrun: load stopped after %d of %d records: %w", res.Loaded, cfg.Records, ctx.Err())
	}
	return res, nil
}
