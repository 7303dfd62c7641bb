// Package clustertest runs multi-node Causeway sites inside one test
// process: real servers with real storage in temp dirs, real gRPC and
// gossip on loopback, fast raft timings. Nodes can be added, drained,
// stopped gracefully or killed abruptly, and restarted on their data.
package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// Node is one running node of a test site.
type Node struct {
	ID    string
	Cfg   server.Config
	Srv   *server.Server
	KV    kvv1.KVClient
	Admin adminv1.AdminClient
	Peer  peerv1.NodeClient
	conns []*grpc.ClientConn
	down  bool
	// The addresses the node listened on, kept by Restart.
	clientAddr, peerAddr, gossipAddr string
}

// Cluster is a test site.
type Cluster struct {
	t      testing.TB
	mu     sync.Mutex
	Nodes  []*Node
	Mutate func(*server.Config) // applied to every node's config
	// Net carries every node's traffic to the other nodes: its rules
	// partition, delay and drop it (see Partition, Isolate, Cut, Delay,
	// Heal).
	Net      *faultnet.Net
	next     int
	logs     *logRing // the nodes' recent log lines, shown when the test fails
	logsOnce sync.Once
}

// Config returns the fast test configuration of node id.
func Config(dir, id string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = dir
	cfg.NodeID = id
	cfg.Site = "s1"
	cfg.ClientAddr, cfg.HTTPAddr, cfg.PeerAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.GossipProfile = "local"
	cfg.Shards = 8
	// Tolerant of a loaded 2-core machine running the race detector.
	cfg.Shard.HeartbeatTimeout = 500 * time.Millisecond
	cfg.Shard.ElectionTimeout = 500 * time.Millisecond
	cfg.Shard.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Shard.CommitTimeout = 5 * time.Millisecond
	cfg.Shard.GCInterval = 0
	cfg.DeadGrace = 2 * time.Second
	cfg.ShutdownGrace = 2 * time.Second
	return cfg
}

func (c *Cluster) logger() *slog.Logger {
	if os.Getenv("CLUSTERTEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	}
	c.logsOnce.Do(func() {
		c.logs = newLogRing(4096)
		// Registered after the cluster's Close, so it runs before it.
		c.t.Cleanup(func() { c.logs.dumpIfFailed(c.t, 300) })
	})
	return slog.New(slog.NewTextHandler(c.logs, nil))
}

// New starts a site of n nodes (the first bootstraps, the others join it)
// and waits until its placement has settled.
func New(t testing.TB, n int, mutate func(*server.Config)) *Cluster {
	// The nodes' directories are the test's TempDirs: create the first
	// before Close is registered, so that the nodes stop before their
	// directories are removed (cleanups run last first; testing removes
	// every TempDir in the cleanup the first call registered).
	_ = t.TempDir()
	c := &Cluster{t: t, Mutate: mutate, Net: faultnet.New(faultnet.DefaultConfig(1))}
	t.Cleanup(c.Close)
	for i := 0; i < n; i++ {
		c.Add()
	}
	c.WaitSettled(60 * time.Second)
	c.WaitLeadersPreferred(60 * time.Second)
	return c
}

// LeadersPreferred reports whether every shard is led by the node the
// leader balancer prefers (placement.PreferredLeaders), so that no
// leadership transfer is pending.
func (c *Cluster) LeadersPreferred() error {
	return SiteLeadersPreferred(c.Map(), siteNodes(c.nodes()))
}

// SiteNode is a node of a site as SiteSettled and SiteLeadersPreferred
// see it; other harnesses that run servers in one process (bench's
// embedded site) use these checks too.
type SiteNode struct {
	ID  string
	Srv *server.Server
}

func siteNodes(ns []*Node) []SiteNode {
	out := make([]SiteNode, len(ns))
	for i, n := range ns {
		out[i] = SiteNode{ID: n.ID, Srv: n.Srv}
	}
	return out
}

// SiteLeadersPreferred reports whether every shard of m is led by the node
// among nodes that placement.PreferredLeaders picks for it.
func SiteLeadersPreferred(m placement.Map, nodes []SiteNode) error {
	byID := map[string]SiteNode{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	for sh, want := range placement.PreferredLeaders(m) {
		n, ok := byID[string(want)]
		if !ok {
			return fmt.Errorf("shard %s: preferred leader %s is unknown", sh, want)
		}
		if g := n.Srv.Router().Local(sh); g == nil || !g.IsLeader() {
			return fmt.Errorf("shard %s: %s does not lead it yet", sh, want)
		}
	}
	return nil
}

// WaitLeadersPreferred polls LeadersPreferred until it holds or d passes:
// tests then start without leadership transfers under way.
func (c *Cluster) WaitLeadersPreferred(d time.Duration) {
	c.t.Helper()
	poll.Every(20*time.Millisecond).Until(c.t, d, "leaders where the balancer wants them", c.LeadersPreferred)
}

// Add starts one more node that joins the site.
func (c *Cluster) Add() *Node {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("n%d", c.next)
	var join []string
	for _, n := range c.Nodes {
		if !n.down {
			join = append(join, n.Srv.GossipAddr())
			break
		}
	}
	c.mu.Unlock()
	cfg := Config(c.t.TempDir(), id)
	cfg.Join = join
	cfg.Faults = c.Net
	if c.Mutate != nil {
		c.Mutate(&cfg)
	}
	stablePorts(&cfg.ClientAddr, &cfg.PeerAddr, &cfg.GossipAddr)
	n := c.start(id, cfg)
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	return n
}

func (c *Cluster) start(id string, cfg server.Config) *Node {
	c.t.Helper()
	srv, err := server.New(cfg, c.logger().With("test_node", id))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	n := &Node{ID: id, Cfg: cfg, Srv: srv, clientAddr: srv.ClientAddr(), peerAddr: srv.PeerAddr(), gossipAddr: srv.GossipAddr()}
	for _, addr := range []string{srv.ClientAddr(), srv.PeerAddr()} {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.t.Fatal(err)
		}
		n.conns = append(n.conns, conn)
	}
	n.KV, n.Admin, n.Peer = kvv1.NewKVClient(n.conns[0]), adminv1.NewAdminClient(n.conns[0]), peerv1.NewNodeClient(n.conns[1])
	return n
}

// Live returns the running nodes.
func (c *Cluster) Live() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.Nodes {
		if !n.down {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the node with id.
func (c *Cluster) Node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Stop stops a node gracefully.
func (c *Cluster) Stop(n *Node) {
	c.mu.Lock()
	n.down = true
	c.mu.Unlock()
	for _, conn := range n.conns {
		_ = conn.Close()
	}
	n.Srv.Stop()
}

// Kill stops a node abruptly: no goodbye to the site.
func (c *Cluster) Kill(n *Node) {
	c.mu.Lock()
	n.down = true
	c.mu.Unlock()
	for _, conn := range n.conns {
		_ = conn.Close()
	}
	n.Srv.Kill()
}

// Restart starts a stopped or killed node again on its data directory and
// its addresses (raft configurations and gossip name them); mutate, if
// set, changes its configuration for this start only. n is updated in
// place; if mutate gave it other addresses, later restarts use them.
func (c *Cluster) Restart(n *Node, mutate func(*server.Config)) {
	c.t.Helper()
	c.mu.Lock()
	if !n.down {
		c.mu.Unlock()
		c.t.Fatalf("restart %s: it is running", n.ID)
	}
	c.mu.Unlock()
	base := n.Cfg
	base.ClientAddr, base.PeerAddr, base.GossipAddr, base.HTTPAddr = n.clientAddr, n.peerAddr, n.gossipAddr, "127.0.0.1:0"
	cfg := base
	if mutate != nil {
		mutate(&cfg)
	}
	fresh := c.start(n.ID, cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	n.Cfg, n.Srv, n.KV, n.Admin, n.Peer, n.conns, n.down = base, fresh.Srv, fresh.KV, fresh.Admin, fresh.Peer, fresh.conns, false
	n.clientAddr, n.peerAddr, n.gossipAddr = fresh.clientAddr, fresh.peerAddr, fresh.gossipAddr
	n.Cfg.ClientAddr, n.Cfg.PeerAddr, n.Cfg.GossipAddr = fresh.clientAddr, fresh.peerAddr, fresh.gossipAddr
}

// Endpoint returns n's endpoint in Net.
func (n *Node) Endpoint() faultnet.Endpoint {
	return faultnet.Endpoint{Site: n.Cfg.Site, Node: n.ID}
}

// Partition cuts every link between the nodes of a and the nodes of b,
// both directions. Clients still reach every node.
func (c *Cluster) Partition(a, b []*Node) {
	for _, x := range a {
		for _, y := range b {
			c.Net.Partition(x.Endpoint(), y.Endpoint())
		}
	}
}

// Isolate cuts n off from every other node, both directions. Clients
// still reach it.
func (c *Cluster) Isolate(n *Node) {
	var others []*Node
	for _, o := range c.nodes() {
		if o != n {
			others = append(others, o)
		}
	}
	c.Partition([]*Node{n}, others)
}

// Cut cuts the direction from one node to another (a one-way partition).
func (c *Cluster) Cut(from, to *Node) { c.Net.Cut(from.Endpoint(), to.Endpoint()) }

// Delay delays every message from one node to another by d plus up to
// jitter.
func (c *Cluster) Delay(from, to *Node, d, jitter time.Duration) {
	c.Net.Delay(from.Endpoint(), to.Endpoint(), d, jitter)
}

// Heal clears every fault: all links are healthy again.
func (c *Cluster) Heal() { c.Net.Heal() }

func (c *Cluster) nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.Nodes...)
}

// Close heals the network and stops every node.
func (c *Cluster) Close() {
	c.Net.Heal()
	var wg sync.WaitGroup
	for _, n := range c.Live() {
		wg.Add(1)
		go func(n *Node) { defer wg.Done(); c.Stop(n) }(n)
	}
	wg.Wait()
}

// Map returns the placement map as the first live node sees it.
func (c *Cluster) Map() placement.Map {
	live := c.Live()
	if len(live) == 0 {
		return placement.Map{}
	}
	m, _ := live[0].Srv.Catalog().Map()
	return m
}

// Settled reports whether every shard has exactly min(R, live
// non-draining nodes) voting replicas, all on live non-draining nodes, no
// learners, and every live node is ready.
func (c *Cluster) Settled(draining ...string) error {
	live, replicas := c.Live(), 0
	if len(live) > 0 {
		replicas = live[0].Cfg.Replicas
	}
	return SiteSettled(siteNodes(live), replicas, draining...)
}

// SiteSettled reports why the site of the live nodes has not settled yet,
// or nil: every live node is ready and registered in the catalog (as the
// first node sees it), the placement planner has nothing left to do, every
// shard has exactly min(replicas, live non-draining nodes) voting
// replicas, all on live non-draining nodes, and every node hosts exactly
// the replicas the map assigns it.
func SiteSettled(live []SiteNode, replicas int, draining ...string) error {
	if len(live) == 0 {
		return fmt.Errorf("no live nodes")
	}
	drain := map[string]bool{}
	for _, d := range draining {
		drain[d] = true
	}
	up := map[string]bool{}
	for _, n := range live {
		if !drain[n.ID] {
			up[n.ID] = true
		}
		if err := n.Srv.Ready(); err != nil {
			return fmt.Errorf("%s not ready: %w", n.ID, err)
		}
	}
	want := min(replicas, len(up))
	st, _ := live[0].Srv.Catalog().State()
	m := st.Map
	if len(m.Shards) == 0 {
		return fmt.Errorf("no placement yet")
	}
	// Every live node is registered, and the planner has nothing left to do.
	var liveIDs, drainIDs []placement.NodeID
	for _, n := range live {
		if _, ok := st.Nodes[n.ID]; !ok {
			return fmt.Errorf("%s is not registered in the catalog yet", n.ID)
		}
		liveIDs = append(liveIDs, placement.NodeID(n.ID))
	}
	for _, d := range draining {
		drainIDs = append(drainIDs, placement.NodeID(d))
	}
	if steps := placement.Plan(m, m.SortedShards(), liveIDs, drainIDs, replicas, 100); len(steps) > 0 {
		return fmt.Errorf("%d placement steps pending, e.g. %v (%s)", len(steps), steps[0], replicaStates(live, steps[0].Shard))
	}
	hosted := map[string]int{}
	for s, reps := range m.Shards {
		for _, r := range reps {
			hosted[string(r.Node)]++
		}
		if len(reps) != want {
			return fmt.Errorf("shard %s has %d replicas, want %d", s, len(reps), want)
		}
		for _, r := range reps {
			if !r.Voter || !up[string(r.Node)] {
				return fmt.Errorf("shard %s replica %s voter=%v up=%v", s, r.Node, r.Voter, up[string(r.Node)])
			}
		}
	}
	// Every node hosts exactly what the map assigns it.
	for _, n := range live {
		if got := len(n.Srv.Groups()); got != hosted[n.ID] {
			return fmt.Errorf("%s hosts %d replicas, the map assigns %d", n.ID, got, hosted[n.ID])
		}
	}
	return nil
}

// replicaStates describes the raft state of shard s on every live node,
// for a test's timeout message: what a stuck placement step waits on.
func replicaStates(live []SiteNode, s placement.Shard) string {
	var b strings.Builder
	for _, n := range live {
		fmt.Fprintf(&b, "%s:", n.ID)
		found := false
		for _, g := range n.Srv.Groups() {
			if g.ID().Keyspace != s.Keyspace || g.ID().Shard != s.ID {
				continue
			}
			found = true
			r := g.Raft()
			cf := r.GetConfiguration()
			var servers []string
			if cf.Error() == nil {
				for _, srv := range cf.Configuration().Servers {
					servers = append(servers, fmt.Sprintf("%s/%s", srv.ID, srv.Suffrage))
				}
			}
			st := r.Stats()
			fmt.Fprintf(&b, " gen=%d %s term=%s last=%d commit=%s applied=%d leader=%q config=%v;",
				g.Generation(), r.State(), st["term"], r.LastIndex(), st["commit_index"], r.AppliedIndex(), g.Leader(), servers)
		}
		if !found {
			b.WriteString(" not hosted;")
		}
	}
	return b.String()
}

// WaitSettled polls Settled until it holds or d passes.
func (c *Cluster) WaitSettled(d time.Duration, draining ...string) {
	c.t.Helper()
	poll.Every(20*time.Millisecond).Until(c.t, d, "the site to settle", func() error { return c.Settled(draining...) })
}

// Drain marks a node draining through any node, retrying while the site
// catalog has no reachable leader (an election) until ctx ends.
func (c *Cluster) Drain(ctx context.Context, id string) error {
	for {
		_, err := c.Live()[0].Peer.Drain(ctx, &peerv1.DrainRequest{NodeId: id, Draining: true})
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func logLevel() slog.Level {
	if os.Getenv("CLUSTERTEST_LOG") == "debug" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
