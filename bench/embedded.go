package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/internal/clustertest"
	"github.com/causeway-db/causeway/internal/server"
)

// Embedded is a site of one or more kvd nodes running inside the
// benchmark process, each on its own data directory under one temporary
// directory that Close removes.
type Embedded struct {
	// Nodes are the site's nodes in start order (n1 first).
	Nodes []*EmbeddedNode
	// Srv and Config are the first node's, for single-node callers.
	Srv    *server.Server
	Config server.Config
	// DataDir holds every node's data directory.
	DataDir string
}

// EmbeddedNode is one node of an embedded site.
type EmbeddedNode struct {
	ID     string
	Srv    *server.Server
	Config server.Config
}

// EmbeddedOptions configures StartEmbedded.
type EmbeddedOptions struct {
	// Parent is the directory under which the temporary data directory is
	// created; it decides which disk is measured. Empty means os.TempDir().
	Parent string
	// Nodes is the number of nodes of the site (default 1). The first
	// bootstraps the site, the others join it one after another.
	Nodes int
	// Shards overrides the number of shards when positive.
	Shards uint32
	// NoSync disables fsync (never for published numbers).
	NoSync bool
	// Logger receives the servers' logs (with a "bench_node" attribute);
	// nil discards them.
	Logger *slog.Logger
	// Tweak, when set, adjusts each node's configuration last (tests use
	// it for fast raft timings).
	Tweak func(*server.Config)
	// ReadyTimeout bounds the wait for the site to settle. Zero means 30s
	// for one node and 60s for more.
	ReadyTimeout time.Duration
	// Progress, when set, receives a line about every 2s while the site
	// settles.
	Progress io.Writer
}

// EmbeddedNodeConfig is the configuration of node id of an embedded site:
// kvd's production defaults (fsync on, default raft timings) with every
// listener on a loopback port chosen by the kernel and the "local" gossip
// profile (all nodes share one machine).
func EmbeddedNodeConfig(dataDir, id string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.NodeID = id
	cfg.Site = "bench"
	cfg.ClientAddr, cfg.HTTPAddr, cfg.PeerAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.GossipProfile = "local"
	cfg.Replicas = 3
	return cfg
}

// StartEmbedded starts a site of o.Nodes servers (production defaults,
// fsync on, loopback ports chosen by the kernel) and waits until it has
// settled (Settled: the check of internal/clustertest).
// It then waits, within the same timeout, for the site to move every
// shard's leadership to the node placement.PreferredLeaders picks, so that
// no leadership moves during the measurement; should that not happen in
// time it goes on (with a progress line) rather than fail.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	n := o.Nodes
	if n <= 0 {
		n = 1
	}
	parent := o.Parent
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "kvbench-data-*")
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Embedded{DataDir: dir}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		cfg := EmbeddedNodeConfig(filepath.Join(dir, id), id)
		cfg.NoSync = o.NoSync
		if o.Shards > 0 {
			cfg.Shards = o.Shards
		}
		if i > 0 {
			cfg.Join = []string{e.Nodes[0].Srv.GossipAddr()}
		}
		if o.Tweak != nil {
			o.Tweak(&cfg)
		}
		srv, err := server.New(cfg, logger.With("bench_node", id))
		if err == nil {
			err = srv.Start() // Start stops what it started on error
		}
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("embedded node %s: %w", id, err)
		}
		e.Nodes = append(e.Nodes, &EmbeddedNode{ID: id, Srv: srv, Config: cfg})
		if i == 0 {
			e.Srv, e.Config = srv, cfg
		}
	}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
		if n > 1 {
			timeout = 60 * time.Second
		}
	}
	if err := e.waitSettled(timeout, o.Progress); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Settled reports why the site has not settled yet, or nil: the check of
// internal/clustertest (clustertest.SiteSettled). Every node must be
// ready and registered, the placement planner must have nothing left to
// do, and every shard must have exactly min(Replicas, nodes) voting
// replicas, each open on the node the placement assigns it to.
func (e *Embedded) Settled() error {
	return clustertest.SiteSettled(e.siteNodes(), e.Config.Replicas)
}

// LeadersBalanced reports why leadership is not yet where the site moves
// it, or nil: every shard of the placement map must be led by the node
// placement.PreferredLeaders picks for it (clustertest.SiteLeadersPreferred).
func (e *Embedded) LeadersBalanced() error {
	m, _ := e.Srv.Catalog().Map()
	if len(m.Shards) == 0 {
		return errors.New("no placement yet")
	}
	if err := clustertest.SiteLeadersPreferred(m, e.siteNodes()); err != nil {
		return fmt.Errorf("%w (leaders %s)", err, e.LeaderSummary())
	}
	return nil
}

func (e *Embedded) siteNodes() []clustertest.SiteNode {
	out := make([]clustertest.SiteNode, len(e.Nodes))
	for i, n := range e.Nodes {
		out[i] = clustertest.SiteNode{ID: n.ID, Srv: n.Srv}
	}
	return out
}

func (e *Embedded) waitSettled(timeout time.Duration, progress io.Writer) error {
	start := time.Now()
	deadline := start.Add(timeout)
	nextReport := start.Add(2 * time.Second)
	poll := func(check func() error, what string) error {
		for {
			err := check()
			if err == nil {
				return nil
			}
			now := time.Now()
			if now.After(deadline) {
				return err
			}
			if progress != nil && now.After(nextReport) {
				fmt.Fprintf(progress, "  waiting for %s (%.0fs): %v\n", what, now.Sub(start).Seconds(), err)
				nextReport = now.Add(2 * time.Second)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := poll(e.Settled, "the site to settle"); err != nil {
		return fmt.Errorf("embedded site of %d nodes did not settle within %s: %w", len(e.Nodes), timeout, err)
	}
	settled := time.Since(start)
	balanced := poll(e.LeadersBalanced, "leadership to balance")
	if progress != nil && balanced != nil {
		fmt.Fprintf(progress, "  warning: going on after %s with unbalanced leadership: %v\n", timeout, balanced)
	} else if progress != nil && len(e.Nodes) > 1 {
		fmt.Fprintf(progress, "  site settled in %.1fs, leadership balanced after %.1fs; shard leaders: %s\n",
			settled.Seconds(), time.Since(start).Seconds(), e.LeaderSummary())
	}
	return nil
}

// Leaders counts, per node id, the shard groups (catalog excluded) that
// node leads.
func (e *Embedded) Leaders() map[string]int {
	out := map[string]int{}
	for _, n := range e.Nodes {
		out[n.ID] = 0
		for _, g := range n.Srv.Groups() {
			if g.IsLeader() {
				out[n.ID]++
			}
		}
	}
	return out
}

// LeaderSummary renders Leaders as "n1=16 n2=0 n3=0".
func (e *Embedded) LeaderSummary() string {
	l := e.Leaders()
	ids := make([]string, 0, len(l))
	for id := range l {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return core.NodeLess(ids[i], ids[j]) })
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s=%d", id, l[id])
	}
	return strings.Join(parts, " ")
}

// Addr is the first node's client API address.
func (e *Embedded) Addr() string { return e.Srv.ClientAddr() }

// Addrs are the client API addresses of every node, in node order.
func (e *Embedded) Addrs() []string {
	out := make([]string, len(e.Nodes))
	for i, n := range e.Nodes {
		out[i] = n.Srv.ClientAddr()
	}
	return out
}

// Gatherers are the metrics registries of every node.
func (e *Embedded) Gatherers() []core.NodeGatherer {
	out := make([]core.NodeGatherer, len(e.Nodes))
	for i, n := range e.Nodes {
		out[i] = core.NodeGatherer{Node: n.ID, Gatherer: n.Srv.Registry()}
	}
	return out
}

// Close stops every node (concurrently) and removes the data directory.
func (e *Embedded) Close() error {
	var wg sync.WaitGroup
	for _, n := range e.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Srv.Stop() }()
	}
	wg.Wait()
	return os.RemoveAll(e.DataDir)
}

// absDir returns dir made absolute, or dir itself when that fails.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
