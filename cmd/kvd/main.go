// Command kvd is the Causeway daemon: one per node.
//
// With no flags it runs a single-node site named "local" with data in
// ./data and the client API on 127.0.0.1:7379. Every flag can also be set
// through an environment variable: --data-dir is CAUSEWAY_DATA_DIR, and so
// on. Flags win over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/causeway-db/causeway/internal/rpc"
	"github.com/causeway-db/causeway/internal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "health" {
		return health(ctx, args[1:], os.Stdout, stderr)
	}
	cfg, logger, gc, err := parse(args, stderr)
	if err != nil {
		return err
	}
	gc.apply(logger)
	srv, err := server.New(cfg, logger)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	// Until a signal, or a fatal error (a failed write of the raft log, a
	// stopped state machine): then the process exits non-zero with it.
	if err := srv.Run(ctx); err != nil {
		return fmt.Errorf("fatal: %w", err)
	}
	logger.Info("stopped")
	return nil
}

func parse(args []string, stderr io.Writer) (server.Config, *slog.Logger, gcSetting, error) {
	cfg := server.DefaultConfig()
	var gc gcSetting
	fs := flag.NewFlagSet("kvd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the node's database and snapshots")
	fs.StringVar(&cfg.Site, "site", cfg.Site, "name of this node's site")
	fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "name of this node within its site")
	fs.StringVar(&cfg.ClientAddr, "client-addr", cfg.ClientAddr, "host:port of the client gRPC API")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "host:port of /metrics, /healthz and /readyz")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go's profiler under /debug/pprof/ on the http address")
	fs.StringVar(&cfg.PeerAddr, "peer-addr", cfg.PeerAddr, "host:port for node-to-node traffic: raft, forwarding (reachable by the site's other nodes)")
	fs.StringVar(&cfg.PeerAdvertise, "peer-advertise-addr", "", "host:port the site's other nodes dial for node-to-node traffic (default: --peer-addr; set it when --peer-addr listens on 0.0.0.0)")
	fs.StringVar(&cfg.ClusterPeerAddr, "cluster-peer-addr", "", "host:port other sites dial for node-to-node traffic (default: the site's); for nodes that reach other sites on another network")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", cfg.GossipAddr, "IP:port for membership gossip, UDP and TCP")
	join := fs.String("join", "", "comma-separated gossip addresses of nodes of the site to join; empty on a new data directory starts a new site (a node that restarts on its data also joins the site's nodes its data records, and starts even if none answers)")
	joinCluster := fs.String("join-cluster", "", "comma-separated peer addresses of nodes of any site of the cluster to join (the first node of a new site); empty with an empty --join starts a new cluster")
	recoverCatalog := fs.String("recover-catalog", "", "comma-separated ids of the site catalog's voters lost for good: this node becomes the catalog's only voter (loses what they committed without it; see docs/operations.md)")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "replicas of each shard inside the site (fewer while the site is smaller)")
	fs.DurationVar(&cfg.DeadGrace, "dead-grace", cfg.DeadGrace, "how long a node may be unreachable before its replicas are re-created elsewhere")
	fs.StringVar(&cfg.GossipProfile, "gossip-profile", cfg.GossipProfile, "memberlist timing profile: lan, wan or local")
	shards := fs.Uint("shards", uint(cfg.Shards), "shards per keyspace (fixed when the keyspace is created)")
	fs.IntVar(&cfg.Limits.MaxValueBytes, "max-value-bytes", cfg.Limits.MaxValueBytes, "largest value accepted, in bytes")
	fs.DurationVar(&cfg.Shard.VersionRetention, "version-retention", cfg.Shard.VersionRetention, "how long shadowed versions and tombstones are kept")
	fs.DurationVar(&cfg.Shard.GCInterval, "gc-interval", cfg.Shard.GCInterval, "how often old versions are garbage-collected (0 disables)")
	fs.DurationVar(&cfg.Shard.DigestInterval, "digest-interval", cfg.Shard.DigestInterval, "how often the replicas of each shard compare digests of their state (0 disables)")
	fs.BoolVar(&cfg.Shard.ReadLeases, "read-leases", cfg.Shard.ReadLeases, "serve STRONG reads on a shard leader's read lease, without a leadership confirmation round, while its followers' promises hold (docs/adr/024-read-leases.md)")
	fs.Uint64Var(&cfg.Shard.SnapshotThreshold, "snapshot-threshold", cfg.Shard.SnapshotThreshold, "log entries between raft snapshots of a shard")
	fs.DurationVar(&cfg.CausalWait, "causal-wait", cfg.CausalWait, "longest a read waits for its causal dependencies")
	fs.DurationVar(&cfg.SessionMoveWait, "session-move-wait", cfg.SessionMoveWait, "longest a request of a session that comes from another site waits for this site to apply its causal past (then it fails, retryably)")
	fs.StringVar(&cfg.SimulateWAN, "simulate-wan", cfg.SimulateWAN, `TEST AND DEMO ONLY: delay every message to and from nodes of other sites, one way, e.g. "s1-s2=50ms±5ms,s1-s3=80ms,*=40ms" (see docs/operations.md)`)
	fs.BoolVar(&cfg.DebugFaults, "debug-faults", cfg.DebugFaults, "TEST AND DEMO ONLY: let kvctl debug partition cut this node off from whole sites (and debug heal undo it)")
	fs.IntVar(&gc.percent, "gc-percent", defaultGCPercent, "heap growth, in percent of the live heap, that starts a garbage collection (Go's GOGC; more memory for less CPU; the GOGC environment variable applies instead when this flag is not set)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text or json")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, nil, gc, err
	}
	if fs.NArg() > 0 {
		return cfg, nil, gc, fmt.Errorf("unexpected arguments %q (flags only; see kvd -h)", fs.Args())
	}
	if err := applyEnv(fs); err != nil {
		return cfg, nil, gc, err
	}
	// Set from the command line or, through applyEnv, the environment.
	fs.Visit(func(f *flag.Flag) { gc.set = gc.set || f.Name == "gc-percent" })
	if gc.percent < -1 {
		return cfg, nil, gc, fmt.Errorf("--gc-percent %d: want a percentage, or -1 to turn garbage collection off", gc.percent)
	}
	if *version {
		fmt.Fprintln(stderr, "kvd", rpc.Version)
		return cfg, nil, gc, flag.ErrHelp
	}
	cfg.Shards = uint32(*shards)
	fs.Visit(func(f *flag.Flag) { cfg.ShardsGiven = cfg.ShardsGiven || f.Name == "shards" })
	if *shards > 1<<31 {
		cfg.Shards = 0 // rejected by Validate
	}
	if *join != "" {
		cfg.Join = strings.Split(*join, ",")
	}
	if *joinCluster != "" {
		cfg.JoinCluster = strings.Split(*joinCluster, ",")
	}
	if *recoverCatalog != "" {
		for _, id := range strings.Split(*recoverCatalog, ",") {
			cfg.RecoverCatalog = append(cfg.RecoverCatalog, strings.TrimSpace(id))
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return cfg, nil, gc, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, opts)
	case "json":
		h = slog.NewJSONHandler(stderr, opts)
	default:
		return cfg, nil, gc, fmt.Errorf("--log-format %q: want text or json", *logFormat)
	}
	return cfg, slog.New(h), gc, nil
}

// applyEnv sets every flag not given on the command line from its
// CAUSEWAY_* environment variable.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "CAUSEWAY_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}
