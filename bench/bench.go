// Package bench measures Causeway's client API: timed put, CAUSAL get and
// STRONG get phases at several client counts against an embedded site of
// one or more kvd nodes in this process (fsync on) or running servers,
// with latency histograms, plus the disk's fdatasync latency for context.
// cmd/kvbench is its command line.
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

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/internal/server"
)

// Config is one benchmark run.
type Config struct {
	// Endpoints are host:port client addresses of running servers. Empty
	// starts an embedded site of Nodes servers.
	Endpoints []string
	// Nodes is the number of nodes of the embedded site (default 1); they
	// form one site with 3 replicas per shard (fewer with fewer nodes).
	Nodes int
	// DataDirParent is where the embedded server's temporary data
	// directory and the fsync probe file go (default os.TempDir()).
	DataDirParent string
	// Shards overrides the embedded server's shard count when positive.
	Shards uint32
	// NoSync turns fsync off in the embedded server (not for results).
	NoSync bool
	// Clients lists the client counts; each gets every phase of Ops.
	Clients []int
	// Ops lists the phases run per client count, in order: "put", "get"
	// (CAUSAL read) and "sget" (STRONG read).
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
	// ServerTweak adjusts each embedded node's configuration (tests).
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
		errs = append(errs, errors.New("ops: need at least one of put, get, sget"))
	}
	for _, op := range c.Ops {
		if _, ok := opConsistency[op]; !ok {
			errs = append(errs, fmt.Errorf("ops: unknown op %q (want put, get or sget)", op))
		}
	}
	if c.Nodes < 0 || c.Nodes > 7 {
		errs = append(errs, fmt.Errorf("nodes: %d is not between 1 and 7", c.Nodes))
	}
	if c.Nodes > 1 && len(c.Endpoints) > 0 {
		errs = append(errs, errors.New("nodes: only for the embedded site, not with endpoints"))
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
	Machine  core.Machine `json:"machine"`
	Target   string       `json:"target"`
	// Nodes is the size of the embedded site (0 with endpoints).
	Nodes int `json:"nodes,omitempty"`
	// Leaders is, for an embedded site, how many shards each node led
	// once it had settled (e.g. "n1=16 n2=0 n3=0").
	Leaders  string       `json:"shard_leaders,omitempty"`
	DataDir  string       `json:"data_dir_parent,omitempty"`
	Shards   uint32       `json:"shards,omitempty"`
	Fsync    bool         `json:"fsync"`
	Workload WorkloadInfo `json:"workload"`
	// Load is the initial load of Keys records before the first get phase.
	Load       *core.LoadResult `json:"load,omitempty"`
	DiskSync   *FsyncResult     `json:"disk_sync,omitempty"`
	Results    []PhaseResult    `json:"results"`
	Incomplete bool             `json:"incomplete,omitempty"`
}

// WorkloadInfo records the workload parameters.
type WorkloadInfo struct {
	ValueSize   int     `json:"value_size"`
	Keys        int     `json:"keys"`
	DurationSec float64 `json:"duration_sec"`
	WarmupSec   float64 `json:"warmup_sec"`
	// Consistency describes the reads: "CAUSAL" for get, "STRONG" for
	// sget, or both.
	Consistency string `json:"get_consistency"`
}

// consistencyName is "CAUSAL" or "STRONG" for a read op, "" for put.
func consistencyName(op string) string {
	switch op {
	case "get":
		return "CAUSAL"
	case "sget":
		return "STRONG"
	}
	return ""
}

func describeReads(ops []string) string {
	get, sget := slices.Contains(ops, "get"), slices.Contains(ops, "sget")
	switch {
	case get && sget:
		return "get CAUSAL, sget STRONG"
	case sget:
		return "STRONG"
	}
	return "CAUSAL" // also the server's default when there is no read phase
}

// PhaseResult is what one phase measured.
type PhaseResult struct {
	Op string `json:"op"`
	// Consistency is the reads' consistency ("CAUSAL", "STRONG"); empty
	// for writes.
	Consistency string `json:"consistency,omitempty"`
	Conns       int    `json:"conns,omitempty"`
	core.Measurement
	// Server is the embedded site's storage activity during the phase
	// (warm-up included).
	Server *core.ServerStats `json:"server,omitempty"`
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
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 2 * time.Second
	}
	parent := c.DataDirParent
	if parent == "" {
		parent = os.TempDir()
	}
	rep := &Report{
		Started: time.Now().UTC(),
		Machine: core.DescribeMachine(),
		DataDir: absDir(parent),
		Workload: WorkloadInfo{
			ValueSize: c.ValueSize, Keys: c.Keys,
			DurationSec: c.Duration.Seconds(), WarmupSec: c.Warmup.Seconds(),
			Consistency: describeReads(c.Ops),
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
	var gatherers []core.NodeGatherer
	if len(endpoints) == 0 {
		nodes := max(c.Nodes, 1)
		c.progressf("kvbench: starting embedded site of %d kvd node(s) under %s (fsync %s)", nodes, rep.DataDir, onOff(!c.NoSync))
		e, err := StartEmbedded(EmbeddedOptions{
			Parent: parent, Nodes: nodes, Shards: c.Shards, NoSync: c.NoSync,
			Logger: c.ServerLogger, Tweak: c.ServerTweak, Progress: c.Progress,
		})
		if err != nil {
			return rep, err
		}
		defer func() {
			c.progressf("kvbench: stopping embedded site and removing %s", e.DataDir)
			if err := e.Close(); err != nil {
				c.progressf("kvbench: cleanup: %v", err)
			}
		}()
		endpoints = e.Addrs()
		gatherers = e.Gatherers()
		rep.Shards = e.Config.Shards
		rep.Fsync = !e.Config.NoSync
		rep.Nodes = nodes
		if nodes == 1 {
			rep.Target = fmt.Sprintf("embedded single-node kvd, %d shards, fsync %s", e.Config.Shards, onOff(rep.Fsync))
		} else {
			rep.Leaders = e.LeaderSummary()
			rep.Target = fmt.Sprintf("embedded %d-node site in one process (loopback gRPC), %d shards × %d replicas, fsync %s; clients round-robin over the nodes",
				nodes, e.Config.Shards, min(e.Config.Replicas, nodes), onOff(rep.Fsync))
		}
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
			if op != "put" && !loaded {
				if err := load(ctx, c, w, endpoints, rep); err != nil {
					rep.Incomplete = true
					return rep, err
				}
				loaded = true
			}
			pool, err := core.Dial(endpoints, clients, 0)
			if err != nil {
				return rep, err
			}
			cls, err := w.Clients(pool, clients, op, c.Seed+uint64(clients)*16+uint64(pi))
			if err != nil {
				pool.Close()
				return rep, err
			}
			c.progressf("kvbench: %s phase, %d clients over %d connections, %s warmup + %s", op, clients, pool.Conns(), c.Warmup, c.Duration)
			before, gatherErr := core.Gather(gatherers)
			phaseStart := time.Now()
			m, err := core.RunPhase(ctx, core.PhaseSpec{
				Label: fmt.Sprintf("%s clients=%d", op, clients), Kinds: []string{op},
				Warmup: c.Warmup, Duration: c.Duration, OpTimeout: c.OpTimeout,
				Progress: c.Progress, ProgressEvery: c.ProgressEvery,
			}, cls)
			pool.Close()
			res := PhaseResult{Op: op, Consistency: consistencyName(op), Conns: pool.Conns(), Measurement: m}
			if after, gerr := core.Gather(gatherers); gerr == nil && gatherErr == nil && len(gatherers) > 0 {
				res.Server = core.CommitStats(before, after, time.Since(phaseStart).Seconds())
				res.Server.SetForwards(res.Attempts())
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
				op, clients, res.Throughput, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs, res.Errors, res.ErrorSummary())
			if res.CPU.Machine > 0 {
				c.progressf("kvbench:   cpu: this process %.2f of %d CPUs, whole machine %.2f", res.CPU.Client, rep.Machine.CPUs, res.CPU.Machine)
			}
			if s := res.Server; s != nil && s.Commits > 0 {
				c.progressf("kvbench:   server: %.0f storage commits/s, %.1f updates per commit, %.2f ms per commit, propose→applied %.2f ms",
					s.CommitsPerSec, s.MeanBatch, s.MeanCommitMs, s.MeanProposeMs)
			}
			if s := res.Server; s != nil && rep.Nodes > 1 {
				c.progressf("kvbench:   server: %.2f forwarding hops per request", s.ForwardsPerOp)
			}
		}
	}
	return rep, nil
}

func load(ctx context.Context, c Config, w *KVWorkload, endpoints []string, rep *Report) error {
	conc := min(max(slices.Max(c.Clients), 16), 64)
	pool, err := core.Dial(endpoints, conc, 0)
	if err != nil {
		return err
	}
	defer pool.Close()
	c.progressf("kvbench: loading %d records of %d bytes with %d clients", w.Keys, w.ValueSize, conc)
	res, err := core.Load(ctx, core.LoadSpec{Label: "kvbench", Records: int64(w.Keys), Concurrency: conc,
		OpTimeout: c.OpTimeout, Progress: c.Progress, ProgressEvery: c.ProgressEvery}, w.Inserters(pool))
	res.ValueSize = w.ValueSize
	rep.Load = &res
	if err != nil {
		return err
	}
	c.progressf("kvbench: loaded in %.1fs", res.Seconds)
	return nil
}

// probeEndpoints waits (up to 30s) until every endpoint reports, through
// the admin API, a leader for each shard it hosts.
func probeEndpoints(ctx context.Context, endpoints []string) error {
	for _, ep := range endpoints {
		pool, err := core.Dial([]string{ep}, 1, 0)
		if err != nil {
			return err
		}
		admin := adminv1.NewAdminClient(pool.Conn(0))
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
