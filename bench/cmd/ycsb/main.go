// Command ycsb runs YCSB workloads against Causeway and etcd through the
// same driver interface and reports throughput and latency.
//
//	ycsb run    --modes causeway-causal,causeway-strong --causeway-endpoints H:P,... \
//	            --workloads A,B,C,F --clients 1,16,64,256 --records 10000 --duration 10s \
//	            --json out.json --out out.md [--plot out.png]
//	ycsb floors --dir DATA_DIR --json floors.json
//	ycsb report --in floors.json,etcd.json,causeway.json --out compare.md --json compare.json --plot compare.png
//
// run loads the records once per system (unless --load=false), then for
// every workload, client count and mode runs a warm-up and a measured
// window. report merges runs, computes the Causeway/etcd ratios and the
// targets, and renders markdown, JSON and a PNG plot. See bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/floors"
	"github.com/causeway-db/causeway/bench/plot"
	"github.com/causeway-db/causeway/bench/ycsb"
	"github.com/causeway-db/causeway/bench/ycsbrun"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "ycsb:", err)
		os.Exit(1)
	}
}

const usage = `usage: ycsb run|floors|report [flags]   (ycsb CMD -h for the flags)

  run     load the records, run workloads for each client count and mode
  floors  measure the data disk's fdatasync and a loopback gRPC round trip
  report  merge run and floors JSON files, compare, render markdown/JSON/PNG
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], stdout, stderr)
	case "floors":
		return cmdFloors(ctx, args[1:], stdout, stderr)
	case "report":
		return cmdReport(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// workloads expands names: core workloads, ChainReaction mixes, "core"
// (A-F) and "chainreaction" (every mix).
func workloads(names []string) ([]ycsb.Workload, error) {
	var out []ycsb.Workload
	for _, n := range names {
		switch strings.ToLower(n) {
		case "core":
			for _, c := range ycsb.CoreNames {
				w, _ := ycsb.Core(c)
				out = append(out, w)
			}
			continue
		case "chainreaction":
			out = append(out, ycsb.ChainReactionMixes()...)
			continue
		}
		w, err := ycsb.Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("no workloads")
	}
	return out, nil
}

func parseClients(s string) ([]int, error) {
	var out []int
	for _, f := range core.SplitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--clients: %q is not a positive number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("--clients: none given")
	}
	return out, nil
}

// outputs writes the report's JSON, markdown and plot where asked.
func outputs(rep *ycsbrun.Report, jsonPath, mdPath, plotPath string, stdout, stderr io.Writer) error {
	if jsonPath != "" {
		if err := core.WriteFile(jsonPath, stdout, rep.WriteJSON); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", jsonPath)
	}
	if mdPath != "" {
		if err := core.WriteFile(mdPath, stdout, rep.WriteMarkdown); err != nil {
			return err
		}
		if mdPath != "-" {
			fmt.Fprintf(stderr, "wrote %s\n", mdPath)
		}
	}
	if plotPath != "" {
		if err := plot.WritePNG(rep, plotPath); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %s\n", plotPath)
	}
	return nil
}

func parseVersions(vs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range vs {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--version %q: want SYSTEM=VERSION", v)
		}
		out[k] = val
	}
	return out, nil
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ycsb run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modesF := fs.String("modes", drivers.ModeCausewayCausal, "comma-separated modes: "+strings.Join(drivers.Modes, ", "))
	cwEps := fs.String("causeway-endpoints", "127.0.0.1:7379", "comma-separated Causeway client addresses (any number of nodes or sites)")
	cwKeyspace := fs.String("causeway-keyspace", "", "Causeway keyspace of every call (default: default)")
	cwUnary := fs.Bool("causeway-unary-calls", false, "Causeway: send every call as its own unary gRPC call instead of on each connection's call stream (client.Config.DisableCallStream)")
	etcdEps := fs.String("etcd-endpoints", "127.0.0.1:2379", "comma-separated etcd client addresses")
	workloadsF := fs.String("workloads", "A", "comma-separated workloads: A..F, core, hot-50-50 .. hot-0-100, txn-10-85-5, txn-5-90-5, txn-0-95-5, chainreaction")
	clientsF := fs.String("clients", "1,16,64", "comma-separated client counts")
	records := fs.Int64("records", 10000, "records loaded (record count)")
	valueSize := fs.Int("value-size", ycsb.DefaultFieldLength, "value size in bytes")
	duration := fs.Duration("duration", 10*time.Second, "measured time per point (0: until --operations)")
	warmup := fs.Duration("warmup", -1, "warm-up per point, not measured (default 10% of --duration)")
	operations := fs.Int64("operations", 0, "operations per point, warm-up included (0: until --duration)")
	target := fs.Float64("target", 0, "target rate in operations per second over all clients (0: as fast as possible)")
	seed := fs.Uint64("seed", 1, "base seed (client i uses seed+i; load values derive from it)")
	load := fs.Bool("load", true, "load the records before the runs (once per system)")
	loadClients := fs.Int("load-clients", 32, "concurrent inserts of the load phase")
	loadTimeout := fs.Duration("load-timeout", 10*time.Minute, "bound on each load phase")
	perConn := fs.Int("clients-per-conn", drivers.DefaultClientsPerConn, "client goroutines per connection (Causeway: per client instance and session)")
	opTimeout := fs.Duration("op-timeout", core.DefaultOpTimeout, "bound on each operation")
	progress := fs.Duration("progress", 5*time.Second, "progress line interval (0 disables)")
	serverPIDs := fs.String("server-pids", "", "comma-separated pids of the server processes on this machine, for their CPU use")
	idle := fs.Duration("idle-sample", 5*time.Second, "with --server-pids: measure the idle servers' CPU use this long before the load (0 disables)")
	metricsURLs := fs.String("metrics-urls", "", "comma-separated Causeway /metrics URLs: server histograms per phase and for the whole run")
	floorsDir := fs.String("floors-dir", "", "also measure the floors, fdatasync in this directory")
	title := fs.String("title", "", "report title")
	round := fs.Int("round", 0, "the round this run belongs to, when the comparison is repeated (ycsb report aggregates the rounds)")
	jsonOut := fs.String("json", "", "write the JSON report here (- for stdout)")
	mdOut := fs.String("out", "", "write the markdown report here (- for stdout; default stdout when no --json)")
	plotOut := fs.String("plot", "", "write a PNG of throughput against clients here")
	timeout := fs.Duration("timeout", time.Hour, "bound on the whole command")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this (client) process over the runs here")
	quick := fs.Bool("quick", false, "smoke test: 1000 records, clients 1,4, 1s per point after 200ms warm-up (overrides those flags)")
	var notes, versions multiFlag
	fs.Var(&notes, "note", "a line for the report's setup (repeatable)")
	fs.Var(&versions, "version", "SYSTEM=VERSION for the report (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *quick {
		*records, *clientsF, *duration, *warmup = 1000, "1,4", time.Second, 200*time.Millisecond
	}
	if *warmup < 0 {
		*warmup = *duration / 10
	}
	if *duration <= 0 && *operations <= 0 {
		return errors.New("set --duration or --operations")
	}
	modes := core.SplitList(*modesF)
	for _, m := range modes {
		if !slices.Contains(drivers.Modes, m) {
			return fmt.Errorf("--modes: %w %q", drivers.ErrUnknownMode, m)
		}
	}
	if len(modes) == 0 {
		return errors.New("--modes: none given")
	}
	wls, err := workloads(core.SplitList(*workloadsF))
	if err != nil {
		return err
	}
	clients, err := parseClients(*clientsF)
	if err != nil {
		return err
	}
	vers, err := parseVersions(versions)
	if err != nil {
		return err
	}
	var pids []int
	for _, f := range core.SplitList(*serverPIDs) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid < 1 {
			return fmt.Errorf("--server-pids: %q is not a pid", f)
		}
		pids = append(pids, pid)
	}
	if *records < 1 {
		return errors.New("--records must be at least 1")
	}
	if *mdOut == "" && *jsonOut == "" {
		*mdOut = "-"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	endpoints := map[string][]string{
		"causeway": core.SplitList(*cwEps),
		"etcd":     core.SplitList(*etcdEps),
	}
	rep := &ycsbrun.Report{
		Title:   *title,
		Date:    time.Now().UTC(),
		Machine: core.DescribeMachine(),
		Setup: ycsbrun.Setup{
			Records: *records, ValueSize: *valueSize, Warmup: warmup.String(), Duration: duration.String(),
			Operations: *operations, TargetRate: *target, Seed: *seed, ClientsPerConn: *perConn,
			Clients: clients, Modes: modes, Endpoints: map[string][]string{}, Versions: vers, Notes: notes, Round: *round,
		},
	}
	for _, w := range wls {
		rep.Setup.Workloads = append(rep.Setup.Workloads, w.Name)
	}
	for _, m := range modes {
		if sys := drivers.SystemOf(m); len(endpoints[sys]) > 0 {
			rep.Setup.Endpoints[sys] = endpoints[sys]
		}
	}
	mem := drivers.NewMemory()
	open := func(mode string, n int) (drivers.System, error) {
		return drivers.Open(ctx, drivers.Config{Mode: mode, Endpoints: endpoints[drivers.SystemOf(mode)],
			Keyspace: *cwKeyspace, UnaryCalls: *cwUnary, Clients: n, ClientsPerConn: *perConn, Memory: mem})
	}
	var murls []string
	if *metricsURLs != "" {
		murls = core.SplitList(*metricsURLs)
	}
	scrape := func() core.Snapshot {
		if len(murls) == 0 {
			return nil
		}
		s, err := core.Scrape(ctx, murls)
		if err != nil {
			fmt.Fprintf(stderr, "warning: %v\n", err)
			return nil
		}
		return s
	}

	if *floorsDir != "" {
		f, err := measureFloors(ctx, *floorsDir, 1000, 5000, stderr)
		if err != nil {
			return err
		}
		rep.Floors = &f
	}

	if len(pids) > 0 && *idle > 0 {
		a := core.TakeCPUSample(pids)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*idle):
		}
		use := core.CPUBetween(a, core.TakeCPUSample(pids))
		rep.IdleCPU = map[string]core.CPUUse{}
		for _, m := range modes {
			rep.IdleCPU[drivers.SystemOf(m)] = use
		}
		fmt.Fprintf(stderr, "idle servers: %.3f CPUs busy (machine %.3f)\n", use.Servers, use.Machine)
	}

	if *load {
		done := map[string]bool{}
		for _, m := range modes {
			sys := drivers.SystemOf(m)
			if done[sys] {
				continue
			}
			done[sys] = true
			fmt.Fprintf(stderr, "load %s: %d records of %d bytes with %d clients\n", m, *records, *valueSize, *loadClients)
			s, err := open(m, *loadClients)
			if err != nil {
				return err
			}
			lr, err := ycsbrun.Load(ctx, s, ycsbrun.LoadConfig{ValueSize: *valueSize, Seed: *seed,
				LoadSpec: core.LoadSpec{Records: *records, Concurrency: *loadClients, Timeout: *loadTimeout, OpTimeout: *opTimeout,
					Progress: stderr, ProgressEvery: *progress}})
			s.Close()
			rep.Loads = append(rep.Loads, ycsbrun.LoadPhase{LoadResult: lr, Round: *round})
			if err != nil {
				return fmt.Errorf("load %s: %w", m, err)
			}
			fmt.Fprintf(stderr, "load %s: %d records in %.1fs (%.0f/s, p50 %.2f ms, p99 %.2f ms)\n",
				m, lr.Loaded, lr.Seconds, lr.Throughput, lr.Latency.P50Ms, lr.Latency.P99Ms)
		}
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	progressW := stderr
	if *progress <= 0 {
		progressW = nil
	}
	total := len(wls) * len(clients) * len(modes)
	i := 0
	whole := scrape()
	for _, w := range wls {
		w.RecordCount, w.FieldLength = *records, *valueSize
		if *operations > 0 {
			w.OperationCount = *operations
		}
		for _, n := range clients {
			for _, m := range modes {
				i++
				label := fmt.Sprintf("[%d/%d %s %s c=%d]", i, total, w.Name, m, n)
				if *round > 0 {
					label = fmt.Sprintf("[round %d, %d/%d %s %s c=%d]", *round, i, total, w.Name, m, n)
				}
				fmt.Fprintf(stderr, "%s run: %s warm-up, %s measured\n", label, *warmup, *duration)
				s, err := open(m, n)
				if err != nil {
					return err
				}
				before := scrape()
				res, err := ycsbrun.Run(ctx, s, ycsbrun.RunConfig{Workload: w, Clients: n, Seed: *seed, Round: *round,
					PhaseSpec: core.PhaseSpec{Warmup: *warmup, Duration: *duration, Operations: *operations, TargetRate: *target,
						OpTimeout: *opTimeout, Progress: progressW, ProgressEvery: *progress, Label: label, ServerPIDs: pids}})
				if before != nil && drivers.SystemOf(m) == "causeway" {
					if after := scrape(); after != nil {
						res.ServerMetrics = core.Diff(before, after)
					}
				}
				s.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", label, err)
				}
				rep.Results = append(rep.Results, res)
				fmt.Fprintf(stderr, "%s %.0f ops/s, p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, %d errors; CPUs busy %.2f (servers %.2f, client %.2f)\n",
					label, res.Throughput, res.Latency.P50Ms, res.Latency.P99Ms, res.Latency.P999Ms, res.Errors,
					res.CPU.Machine, res.CPU.Servers, res.CPU.Client)
				if len(res.ErrorSamples) > 0 {
					fmt.Fprintf(stderr, "%s first error: %s\n", label, res.ErrorSamples[0])
				}
			}
		}
	}
	if whole != nil {
		if after := scrape(); after != nil {
			rep.ServerMetrics = map[string][]core.HistDelta{"causeway": core.Diff(whole, after)}
		}
	}
	systems := map[string]bool{}
	for _, m := range modes {
		systems[drivers.SystemOf(m)] = true
	}
	if systems["causeway"] && systems["etcd"] {
		ycsbrun.Evaluate(rep)
	} else {
		rep.Summarize()
	}
	return outputs(rep, *jsonOut, *mdOut, *plotOut, stdout, stderr)
}

func measureFloors(ctx context.Context, dir string, fsyncN, echoN int, stderr io.Writer) (floors.Floors, error) {
	var f floors.Floors
	var err error
	fmt.Fprintf(stderr, "floors: fdatasync in %s (%d samples)\n", dir, fsyncN)
	if f.Fsync, err = floors.Fsync(dir, fsyncN, 30*time.Second); err != nil {
		return f, err
	}
	fmt.Fprintf(stderr, "floors: fdatasync p50 %.3f ms, p99 %.3f ms\n", f.Fsync.P50Ms, f.Fsync.P99Ms)
	if f.GRPCEcho, err = floors.GRPCEcho(ctx, echoN, 30*time.Second); err != nil {
		return f, err
	}
	fmt.Fprintf(stderr, "floors: gRPC echo p50 %.3f ms, p99 %.3f ms\n", f.GRPCEcho.P50Ms, f.GRPCEcho.P99Ms)
	return f, nil
}

func cmdFloors(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ycsb floors", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "directory on the data disk (fdatasync probe)")
	fsyncN := fs.Int("fsync-samples", 1000, "fdatasync samples (at most 30s)")
	echoN := fs.Int("echo-samples", 5000, "gRPC round trips (at most 30s)")
	jsonOut := fs.String("json", "", "write a JSON report with the floors here (- for stdout)")
	mdOut := fs.String("out", "", "write markdown here (- for stdout; default stdout when no --json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mdOut == "" && *jsonOut == "" {
		*mdOut = "-"
	}
	f, err := measureFloors(ctx, *dir, *fsyncN, *echoN, stderr)
	if err != nil {
		return err
	}
	rep := &ycsbrun.Report{Title: "Floors", Date: time.Now().UTC(), Machine: core.DescribeMachine(), Floors: &f}
	return outputs(rep, *jsonOut, *mdOut, "", stdout, stderr)
}

func cmdReport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ycsb report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "comma-separated JSON reports of ycsb run and ycsb floors, merged in order")
	title := fs.String("title", "Causeway vs etcd: YCSB", "report title")
	jsonOut := fs.String("json", "", "write the merged JSON report here")
	mdOut := fs.String("out", "", "write the markdown here (- for stdout; default stdout when no --json)")
	plotOut := fs.String("plot", "", "write a PNG of throughput against clients here")
	var notes multiFlag
	fs.Var(&notes, "note", "a line for the report's setup (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths := core.SplitList(*in)
	if len(paths) == 0 {
		return errors.New("--in: no reports")
	}
	if *mdOut == "" && *jsonOut == "" {
		*mdOut = "-"
	}
	var reps []ycsbrun.Report
	for _, p := range paths {
		r, err := ycsbrun.ReadReport(p)
		if err != nil {
			return err
		}
		reps = append(reps, r)
	}
	// Runs first (their setup), floors reports only contribute floors.
	slices.SortStableFunc(reps, func(a, b ycsbrun.Report) int {
		return boolInt(len(a.Results) == 0) - boolInt(len(b.Results) == 0)
	})
	rep := ycsbrun.MergeReports(*title, reps...)
	rep.Setup.Notes = append(rep.Setup.Notes, notes...)
	ycsbrun.Evaluate(&rep)
	return outputs(&rep, *jsonOut, *mdOut, *plotOut, stdout, stderr)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
