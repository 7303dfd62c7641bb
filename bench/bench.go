// Package bench measures Causeway's client API: timed put and get phases
// at several client counts against an embedded single-node kvd (fsync on)
// or running servers, with latency histograms, plus the disk's fdatasync
// latency for context. cmd/kvbench is its command line.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/server"
)

// Config is one benchmark run.
type Config struct {
	// Endpoints are host:port client addresses of running servers. Empty
	// starts an embedded single-node server.
	Endpoints []string
	// DataDirParent is where the embedded server's temporary data
	// directory and the fsync probe file go (default os.TempDir()).
	DataDirParent string
	// Shards overrides the embedded server's shard count when positive.
	Shards uint32
	// NoSync turns fsync off in the embedded server (not for results).
	NoSync bool
	// Clients lists the client counts; each gets every phase of Ops.
	Clients []int
	// Ops lists the phases run per client count, in order: "put", "get".
	Ops []string
	// Duration is the measured part of each phase, after Warmup.
	Duration time.Duration
	Warmup   time.Duration
	// ValueSize is the size of written values; Keys the record count.
	ValueSize int
	Keys      int
	// KeyPrefix is prepended to every key (default "kvbench/").
	KeyPrefix string
	// FsyncSamples is the number of fdatasync probes (0 skips the probe);
	// FsyncMaxDuration bounds the probe (default 2s).
	FsyncSamples     int
	FsyncMaxDuration time.Duration
	// OpTimeout bounds each operation (default 10s).
	OpTimeout time.Duration
	// Seed makes key and value choices reproducible.
	Seed uint64
	// Progress receives progress lines (typically os.Stderr); nil is quiet.
	Progress io.Writer
	// ProgressEvery is the progress interval within a phase (default 2s).
	ProgressEvery time.Duration
	// ServerLogger receives the embedded server's logs; nil discards them.
	ServerLogger *slog.Logger
	// ServerTweak adjusts the embedded server's configuration (tests).
	ServerTweak func(*server.Config)
}

// DefaultConfig returns the settings of kvbench without flags.
func DefaultConfig() Config {
	return Config{
		Clients:          []int{1, 64},
		Ops:              []string{"put", "get"},
		Duration:         10 * time.Second,
		Warmup:           2 * time.Second,
		ValueSize:        1024,
		Keys:             10000,
		KeyPrefix:        "kvbench/",
		FsyncSamples:     500,
		FsyncMaxDuration: 2 * time.Second,
		OpTimeout:        10 * time.Second,
		Seed:             1,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if len(c.Clients) == 0 {
		errs = append(errs, errors.New("clients: need at least one client count"))
	}
	for _, n := range c.Clients {
		if n < 1 {
			errs = append(errs, fmt.Errorf("clients: %d is not positive", n))
		}
	}
	if len(c.Ops) == 0 {
		errs = append(errs, errors.New("ops: need at least one of put, get"))
	}
	for _, op := range c.Ops {
		if op != "put" && op != "get" {
			errs = append(errs, fmt.Errorf("ops: unknown op %q (want put or get)", op))
		}
	}
	if c.Duration <= 0 {
		errs = append(errs, errors.New("duration must be positive"))
	}
	if c.Warmup < 0 {
		errs = append(errs, errors.New("warmup must not be negative"))
	}
	if c.Keys < 1 {
		errs = append(errs, errors.New("keys must be positive"))
	}
	if c.ValueSize < 0 {
		errs = append(errs, errors.New("value size must not be negative"))
	}
	return errors.Join(errs...)
}

// Report is the outcome of a run.
type Report struct {
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Machine  Machine      `json:"machine"`
	Target   string       `json:"target"`
	DataDir  string       `json:"data_dir_parent,omitempty"`
	Shards   uint32       `json:"shards,omitempty"`
	Fsync    bool         `json:"fsync"`
	Workload WorkloadInfo `json:"workload"`
	// Load is the initial load of Keys records before the first get phase.
	Load       *LoadInfo     `json:"load,omitempty"`
	DiskSync   *FsyncResult  `json:"disk_sync,omitempty"`
	Results    []PhaseResult `json:"results"`
	Incomplete bool          `json:"incomplete,omitempty"`
}

// WorkloadInfo records the workload parameters.
type WorkloadInfo struct {
	ValueSize   int     `json:"value_size"`
	Keys        int     `json:"keys"`
	DurationSec float64 `json:"duration_sec"`
	WarmupSec   float64 `json:"warmup_sec"`
	Consistency string  `json:"get_consistency"`
}

// LoadInfo describes the initial load.
type LoadInfo struct {
	Records     int     `json:"records"`
	Concurrency int     `json:"concurrency"`
	ElapsedSec  float64 `json:"elapsed_sec"`
}

func (c Config) progressf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

// Run executes the benchmark. On cancellation it returns the results
// measured so far together with the context's error.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "kvbench/"
	}
	parent := c.DataDirParent
	if parent == "" {
		parent = os.TempDir()
	}
	rep := &Report{
		Started: time.Now().UTC(),
		Machine: DescribeMachine(),
		DataDir: absDir(parent),
		Workload: WorkloadInfo{
			ValueSize: c.ValueSize, Keys: c.Keys,
			DurationSec: c.Duration.Seconds(), WarmupSec: c.Warmup.Seconds(),
			Consistency: "CAUSAL",
		},
	}
	defer func() { rep.Finished = time.Now().UTC() }()
	c.progressf("kvbench: %s", rep.Machine)

	if c.FsyncSamples > 0 {
		maxDur := c.FsyncMaxDuration
		if maxDur <= 0 {
			maxDur = 2 * time.Second
		}
		c.progressf("kvbench: probing %s latency in %s", syncMethod, rep.DataDir)
		fs, err := ProbeFsync(parent, c.FsyncSamples, maxDur)
		if err != nil {
			return rep, err
		}
		rep.DiskSync = &fs
		c.progressf("kvbench: %s 4 KiB: p50 %.3f ms, p99 %.3f ms (%d samples)", syncMethod, fs.P50Ms, fs.P99Ms, fs.Samples)
	}

	endpoints := c.Endpoints
	var gatherer prometheus.Gatherer
	if len(endpoints) == 0 {
		c.progressf("kvbench: starting embedded kvd under %s (fsync %s)", rep.DataDir, onOff(!c.NoSync))
		e, err := StartEmbedded(EmbeddedOptions{
			Parent: parent, Shards: c.Shards, NoSync: c.NoSync,
			Logger: c.ServerLogger, Tweak: c.ServerTweak,
		})
		if err != nil {
			return rep, err
		}
		defer func() {
			c.progressf("kvbench: stopping embedded kvd and removing %s", e.DataDir)
			if err := e.Close(); err != nil {
				c.progressf("kvbench: cleanup: %v", err)
			}
		}()
		endpoints = []string{e.Addr()}
		gatherer = e.Srv.Registry()
		rep.Shards = e.Config.Shards
		rep.Fsync = !e.Config.NoSync
		rep.Target = fmt.Sprintf("embedded single-node kvd, %d shards, fsync %s", e.Config.Shards, onOff(rep.Fsync))
	} else {
		rep.DataDir = "" // the servers' disks are unknown
		rep.Fsync = true // assumed: kvd has no flag to turn it off
		rep.Target = "endpoints " + strings.Join(endpoints, ",")
		if err := probeEndpoints(ctx, endpoints); err != nil {
			return rep, err
		}
	}

	w, err := NewKVWorkload(c.KeyPrefix, c.Keys, c.ValueSize, c.Seed)
	if err != nil {
		return rep, err
	}
	loaded := false
	for _, clients := range c.Clients {
		for pi, op := range c.Ops {
			if op == "get" && !loaded {
				if err := load(ctx, c, w, endpoints, rep); err != nil {
					rep.Incomplete = true
					return rep, err
				}
				loaded = true
			}
			pool, err := Dial(endpoints, clients)
			if err != nil {
				return rep, err
			}
			newOp := w.PutOp(pool)
			if op == "get" {
				newOp = w.GetOp(pool)
			}
			c.progressf("kvbench: %s phase, %d clients over %d connections, %s warmup + %s", op, clients, pool.Conns(), c.Warmup, c.Duration)
			before, haveMetrics := gatherTotals(gatherer)
			phaseStart := time.Now()
			res, err := RunPhase(ctx, PhaseSpec{
				Name: op, Clients: clients, Warmup: c.Warmup, Duration: c.Duration,
				OpTimeout: c.OpTimeout, Seed: c.Seed + uint64(clients)*16 + uint64(pi),
				Progress: c.Progress, ProgressEvery: c.ProgressEvery,
			}, newOp)
			pool.Close()
			res.Conns = pool.Conns()
			if after, ok := gatherTotals(gatherer); ok && haveMetrics {
				res.Server = diffStats(before, after, time.Since(phaseStart).Seconds())
			}
			if err != nil {
				rep.Incomplete = true
				if res.Ops > 0 {
					rep.Results = append(rep.Results, res)
				}
				return rep, err
			}
			rep.Results = append(rep.Results, res)
			l := res.Latency
			c.progressf("kvbench: %s clients=%d: %.0f ops/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms, errors %d %s",
				op, clients, res.OpsPerSec, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, res.Errors, res.ErrorSummary())
			if res.CPU.Machine > 0 {
				c.progressf("kvbench:   cpu: this process %.2f of %d CPUs, whole machine %.2f", res.CPU.Process, rep.Machine.CPUs, res.CPU.Machine)
			}
			if s := res.Server; s != nil && s.Commits > 0 {
				c.progressf("kvbench:   server: %.0f storage commits/s, %.1f updates per commit, %.2f ms per commit, propose→applied %.2f ms",
					s.CommitsPerSec, s.MeanBatch, s.MeanCommitMs, s.MeanProposeMs)
			}
		}
	}
	return rep, nil
}

func load(ctx context.Context, c Config, w *KVWorkload, endpoints []string, rep *Report) error {
	conc := min(max(slices.Max(c.Clients), 16), 64)
	pool, err := Dial(endpoints, conc)
	if err != nil {
		return err
	}
	defer pool.Close()
	c.progressf("kvbench: loading %d records of %d bytes with %d clients", w.Keys, w.ValueSize, conc)
	start := time.Now()
	if err := w.Load(ctx, pool, conc, c.Progress); err != nil {
		return err
	}
	rep.Load = &LoadInfo{Records: w.Keys, Concurrency: conc, ElapsedSec: time.Since(start).Seconds()}
	c.progressf("kvbench: loaded in %.1fs", rep.Load.ElapsedSec)
	return nil
}

// probeEndpoints waits (up to 30s) until every endpoint reports, through
// the admin API, a leader for each shard it hosts.
func probeEndpoints(ctx context.Context, endpoints []string) error {
	for _, ep := range endpoints {
		pool, err := Dial([]string{ep}, 1)
		if err != nil {
			return err
		}
		admin := adminv1.NewAdminClient(pool.conns[0])
		deadline := time.Now().Add(30 * time.Second)
		for {
			opCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			var st *adminv1.StatusResponse
			st, err = admin.Status(opCtx, &adminv1.StatusRequest{})
			cancel()
			if err == nil {
				for _, sh := range st.Shards {
					if sh.Leader == "" {
						err = fmt.Errorf("shard %s/%d has no leader", sh.Keyspace, sh.Shard)
						break
					}
				}
			}
			if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		pool.Close()
		if err != nil {
			return fmt.Errorf("endpoint %s is not ready: %w", ep, err)
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
