// Command kvbench measures Causeway's put and get throughput and latency,
// by default against an embedded single-node kvd with fsync on, or an
// embedded site of --nodes nodes in one process.
//
//	go run ./bench/cmd/kvbench --data-dir-parent . --out bench/results/single-node.md
//	go run ./bench/cmd/kvbench --nodes 3 --clients 64 --ops put,get,sget --data-dir-parent .
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"syscall"

	"github.com/causeway-db/causeway/bench"
	"github.com/causeway-db/causeway/bench/core"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(1)
	}
}

func run() error {
	c := bench.DefaultConfig()
	var (
		endpoints  = flag.String("endpoints", "", "comma-separated host:port of running servers (default: start an embedded site of --nodes kvd nodes)")
		clients    = flag.String("clients", "1,64", "comma-separated client counts")
		ops        = flag.String("ops", "put,get", "comma-separated phases per client count: put, get (CAUSAL read), sget (STRONG read)")
		jsonOut    = flag.String("json", "", "also write the results as JSON to this file")
		mdOut      = flag.String("out", "", "also write the markdown results to this file")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole process (embedded server included) to this file")
		traceOut   = flag.String("trace", "", "write a runtime execution trace to this file (for `go tool trace -pprof=syscall`; keep runs short)")
		verbose    = flag.Bool("v", false, "show the embedded server's warnings and errors")
		shards     = flag.Uint("shards", 0, "shards of the embedded server (default: kvd's default)")
	)
	flag.StringVar(&c.DataDirParent, "data-dir-parent", "", "directory for the embedded server's temporary data dir and the fsync probe (default: "+os.TempDir()+")")
	flag.DurationVar(&c.Duration, "duration", c.Duration, "measured duration of each phase")
	flag.DurationVar(&c.Warmup, "warmup", c.Warmup, "warmup before each phase, excluded from results")
	flag.IntVar(&c.Nodes, "nodes", 1, "nodes of the embedded site, all in this process (1-7; 3 replicas per shard)")
	flag.IntVar(&c.ValueSize, "value-size", c.ValueSize, "value size in bytes")
	flag.IntVar(&c.Keys, "keys", c.Keys, "record count, loaded before the first get phase")
	flag.IntVar(&c.FsyncSamples, "fsync-samples", c.FsyncSamples, "fdatasync probes of the data dir parent's disk (0 skips)")
	flag.BoolVar(&c.NoSync, "nosync", false, "turn fsync off in the embedded server (for comparison only)")
	flag.Uint64Var(&c.Seed, "seed", c.Seed, "random seed for keys and values")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	var err error
	if c.Clients, err = parseInts(*clients); err != nil {
		return fmt.Errorf("--clients: %w", err)
	}
	c.Ops = core.SplitList(*ops)
	c.Endpoints = core.SplitList(*endpoints)
	c.Shards = uint32(*shards)
	c.Progress = os.Stderr
	if *verbose {
		c.ServerLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if err := c.Validate(); err != nil {
		return err
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, runErr := bench.Run(ctx, c)
	if rep == nil || (runErr != nil && len(rep.Results) == 0) {
		return runErr
	}
	md := rep.Markdown()
	fmt.Print(md)
	if *mdOut != "" {
		if err := os.WriteFile(*mdOut, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		js, err := rep.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, js, 0o644); err != nil {
			return err
		}
	}
	return runErr
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range core.SplitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
