package server

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/poll"
)

// fixedConfig is a cluster configuration tests change as nodes start.
type fixedConfig struct {
	mu      sync.Mutex
	cfg     cluster.Config
	changed chan struct{}
}

func newFixedConfig(sites ...string) *fixedConfig {
	f := &fixedConfig{changed: make(chan struct{}), cfg: cluster.Config{Version: 1, Sites: map[string]cluster.Site{},
		Keyspaces: map[string]cluster.Keyspace{cluster.DefaultKeyspace: {Name: cluster.DefaultKeyspace, Shards: 8}}}}
	for i, s := range sites {
		f.cfg.Sites[s] = cluster.Site{Name: s, Order: i, Nodes: map[string]cluster.Node{}}
	}
	return f
}

func (f *fixedConfig) config() (cluster.Config, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, f.changed
}

// add records a started node and signals the change. Copies handed out
// before stay as they were.
func (f *fixedConfig) add(s *Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sites := maps.Clone(f.cfg.Sites)
	st := sites[s.cfg.Site]
	st.Nodes = maps.Clone(st.Nodes)
	st.Nodes[s.cfg.NodeID] = cluster.Node{ID: s.cfg.NodeID, Site: s.cfg.Site,
		PeerAddr: s.PeerAddr(), ClientAddr: s.ClientAddr(), GossipAddr: s.members.Local().GossipAddr}
	sites[s.cfg.Site] = st
	f.cfg.Version++
	f.cfg.Sites = sites
	close(f.changed)
	f.changed = make(chan struct{})
}

// ping calls the Chain service of to over from's peer connections and
// returns how long it took.
func ping(t *testing.T, from, to *Server, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	conn, err := from.pool.Conn(to.PeerAddr())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	_, err = peerv1.NewChainClient(conn).Ping(ctx, &peerv1.PingRequest{FromSite: from.cfg.Site})
	return time.Since(start), err
}

func geoClient(t *testing.T, s *Server) adminv1.GeoClient {
	t.Helper()
	conn, err := grpc.NewClient(s.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminv1.NewGeoClient(conn)
}

// Two sites, each node with its own process-local fault layer: the
// simulated WAN delays traffic between them, and a debug partition cuts
// one node off from the other site until it heals.
func TestSimulatedWANAndDebugPartition(t *testing.T) {
	fixed := newFixedConfig("s1", "s2")
	nodes := map[string]*node{}
	for _, site := range []string{"s1", "s2"} {
		cfg := testConfig(t.TempDir())
		cfg.Site, cfg.NodeID = site, "n1"
		cfg.SimulateWAN = "*=30ms"
		cfg.DebugFaults = true
		cfg.FixedCluster = fixed.config
		nodes[site] = start(t, cfg)
		fixed.add(nodes[site].srv)
	}
	a, b := nodes["s1"].srv, nodes["s2"].srv
	if a.cfg.Faults == b.cfg.Faults {
		t.Fatal("the nodes share a fault layer")
	}
	waitFor(t, 10*time.Second, "s1 registers the node of s2", func() bool {
		return slices.Contains(a.cfg.Faults.Endpoints(), faultnet.Endpoint{Site: "s2", Node: "n1"})
	})
	rtt, err := ping(t, a, b, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rtt < 60*time.Millisecond {
		t.Fatalf("round trip between sites %v: below the 2×30ms of the simulated WAN", rtt)
	}

	geoA := geoClient(t, a)
	for _, site := range []string{"", "s1", "s9"} {
		if _, err := geoA.DebugPartition(ctx(t), &adminv1.DebugPartitionRequest{Site: site}); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("partition from %q: %v, want InvalidArgument", site, err)
		}
	}
	resp, err := geoA.DebugPartition(ctx(t), &adminv1.DebugPartitionRequest{Site: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetPartitionedSites(); !slices.Equal(got, []string{"s2"}) {
		t.Fatalf("partitioned sites %v, want [s2]", got)
	}
	if _, err := ping(t, a, b, 300*time.Millisecond); err == nil {
		t.Fatal("a call across the debug partition succeeded")
	}
	if _, err := geoA.DebugHeal(ctx(t), &adminv1.DebugHealRequest{}); err != nil {
		t.Fatal(err)
	}
	poll.Every(50*time.Millisecond).Until(t, 20*time.Second, "calls to s2 succeed after healing", func() error {
		_, err := ping(t, a, b, time.Second)
		return err
	})
}

// Without --debug-faults the debug commands are refused; a bad
// --simulate-wan stops the node from starting.
func TestDebugFaultsOff(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.SimulateWAN = "s1-s2=fast"
	if _, err := New(cfg, quietLogger()); !errors.Is(err, faultnet.ErrBadWAN) {
		t.Fatalf("New with a bad simulated WAN: %v", err)
	}
	cfg.SimulateWAN = "*=1ms"
	n := start(t, cfg)
	g := geoClient(t, n.srv)
	if _, err := g.DebugPartition(ctx(t), &adminv1.DebugPartitionRequest{Site: "s2"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("partition without --debug-faults: %v", err)
	}
	if _, err := g.DebugHeal(ctx(t), &adminv1.DebugHealRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("heal without --debug-faults: %v", err)
	}
}
