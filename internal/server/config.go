package server

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/geo"
	"github.com/causeway-db/causeway/internal/rpc"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
)

// Config configures one node.
type Config struct {
	// DataDir holds the node's database and snapshots.
	DataDir string
	// Site is the name of the node's site (lowercase letters, digits, '-').
	Site string
	// NodeID names the node within its site.
	NodeID string
	// ClientAddr is the host:port of the client gRPC API.
	ClientAddr string
	// HTTPAddr is the host:port of /metrics, /healthz and /readyz.
	HTTPAddr string
	// Pprof serves Go's profiler under /debug/pprof/ on HTTPAddr.
	Pprof bool
	// PeerAddr is the host:port for node-to-node traffic (multi-node
	// sites).
	PeerAddr string
	// PeerAdvertise is the peer address the site's other nodes dial
	// (empty: PeerAddr's, once listening): set it when PeerAddr listens on
	// every interface (0.0.0.0:7381).
	PeerAdvertise string
	// ClusterPeerAddr is the peer address other sites dial (empty: the
	// site's): for nodes that reach the other sites on another network
	// than their own site's.
	ClusterPeerAddr string
	// GossipAddr is the host:port for membership gossip (multi-node sites).
	GossipAddr string
	// Join lists gossip addresses of existing nodes of the node's own site
	// to join.
	Join []string
	// JoinCluster lists peer addresses of nodes of any site of an existing
	// cluster: the node registers with the cluster through them. The first
	// node of a new site sets it (without Join: it creates its site's
	// catalog); a later node of a site needs only Join.
	JoinCluster []string
	// Shards is the number of shards of each keyspace created by this node.
	Shards uint32
	// ShardsGiven says the operator gave Shards (kvd --shards): a node of
	// an existing cluster whose default keyspace has another count warns
	// that the value changes nothing.
	ShardsGiven bool
	// Replicas is R, the replicas of each shard inside the site (fewer
	// while the site has fewer nodes).
	Replicas int
	// DeadGrace is how long a node may be unreachable before its shard
	// replicas are re-created on other nodes.
	DeadGrace time.Duration
	// GossipProfile is the memberlist profile: "lan", "wan" or "local".
	GossipProfile string
	// Limits bounds request sizes.
	Limits rpc.Limits
	// CausalWait is the longest a read waits for the node to catch up with
	// the caller's causal floor.
	CausalWait time.Duration
	// SessionMoveWait is how long a request of a session last served at
	// another site waits for this site to apply the session's causal past
	// before failing with a retryable error (router.Arrive).
	SessionMoveWait time.Duration
	// Shard configures raft and garbage collection of every shard group.
	Shard shard.Config
	// ShutdownGrace is how long Stop lets in-flight requests finish.
	ShutdownGrace time.Duration
	// NoSync disables fsync. Only for tests; never in production.
	NoSync bool
	// Faults, if set, injects the network faults of its rules into all
	// traffic between nodes (tests; the simulated wide-area network).
	Faults *faultnet.Net
	// SimulateWAN, if not empty, delays every message between this node
	// and nodes of other sites (kvd --simulate-wan, faultnet.ParseWAN's
	// syntax, one way: "s1-s2=50ms±5ms,*=40ms"). Test and demo only.
	SimulateWAN string
	// DebugFaults enables kvctl debug partition and heal on this node
	// (kvd --debug-faults). Test and demo only.
	DebugFaults bool
	// BootID identifies the machine's current boot; empty means read it
	// from the kernel. (Tests set it to simulate a reboot.)
	BootID string
	// RecoverCatalog, when not empty, recovers a site catalog that lost its
	// quorum for good (--recover-catalog, docs/operations.md): at start
	// this node becomes the catalog's only voter, giving up these voters,
	// which must be exactly the other voters of its catalog configuration.
	// Catalog entries they committed without this node are lost; they
	// must never return with their data.
	RecoverCatalog []string
	// FS is the file system of the write-ahead log and the raft snapshots
	// (raft.db and state.db are bbolt files, always on the real one); nil
	// means the real file system. Only tests set it (a vfs.MemFS, to take
	// crash images).
	FS vfs.FS
	// Geo tunes the chains of sites; zero fields take geo.DefaultConfig's
	// values.
	Geo geo.Config
	// ClockSkew shifts this node's physical clock (tests of sites whose
	// clocks disagree).
	ClockSkew time.Duration
	// FixedCluster, if set, gives the cluster configuration instead of
	// the cluster group (tests of the chains alone).
	FixedCluster func() (cluster.Config, <-chan struct{})
}

// DefaultConfig returns the configuration of `kvd` without flags: a
// single-node site named "local" with data in ./data.
func DefaultConfig() Config {
	return Config{
		DataDir:         "data",
		Site:            "local",
		NodeID:          "n1",
		ClientAddr:      "127.0.0.1:7379",
		HTTPAddr:        "127.0.0.1:7380",
		PeerAddr:        "127.0.0.1:7381",
		GossipAddr:      "127.0.0.1:7382",
		Shards:          16,
		Replicas:        3,
		DeadGrace:       30 * time.Second,
		GossipProfile:   "lan",
		Limits:          rpc.DefaultLimits(),
		CausalWait:      2 * time.Second,
		SessionMoveWait: 10 * time.Second,
		Shard:           shard.DefaultConfig(),
		ShutdownGrace:   10 * time.Second,
	}
}

// Validate checks c and returns every problem found.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if !storage.ValidSiteName(c.Site) {
		errs = append(errs, fmt.Errorf("site %q: use 1-63 lowercase letters, digits or '-'", c.Site))
	}
	if !storage.ValidSiteName(c.NodeID) {
		errs = append(errs, fmt.Errorf("node id %q: use 1-63 lowercase letters, digits or '-'", c.NodeID))
	}
	for name, addr := range map[string]string{"client": c.ClientAddr, "http": c.HTTPAddr, "peer": c.PeerAddr, "gossip": c.GossipAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s address %q: %v", name, addr, err))
		}
	}
	for name, addr := range map[string]string{"peer advertise": c.PeerAdvertise, "cluster peer": c.ClusterPeerAddr} {
		if addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s address %q: %v", name, addr, err))
		case host == "" || port == "" || port == "0" || net.ParseIP(host).IsUnspecified():
			errs = append(errs, fmt.Errorf("%s address %q: other nodes dial it: give a host and a port", name, addr))
		}
	}
	for name, addrs := range map[string][]string{"join": c.Join, "join cluster": c.JoinCluster} {
		for _, addr := range addrs {
			host, port, err := net.SplitHostPort(addr)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s address %q: %v (want host:port of a running node)", name, addr, err))
			case host == "" || port == "" || port == "0":
				errs = append(errs, fmt.Errorf("%s address %q: give a host and a port of a running node", name, addr))
			}
		}
	}
	if len(c.Join) > 0 && len(c.JoinCluster) > 0 {
		// A node given both registers its site with the cluster before it
		// joins the site's gossip: if the site does not answer, the cluster
		// keeps a site that never serves, with a vote in the configuration.
		errs = append(errs, errors.New("join and join cluster are both set: give --join-cluster to the first node of a new site, --join to a later node of a site, not both"))
	}
	if c.Replicas < 1 || c.Replicas > 7 {
		errs = append(errs, fmt.Errorf("replicas %d: must be 1 to 7", c.Replicas))
	}
	if c.DeadGrace <= 0 {
		errs = append(errs, errors.New("dead grace must be positive"))
	}
	if c.Shards < 1 || c.Shards > 4096 {
		errs = append(errs, fmt.Errorf("shards %d: must be 1 to 4096", c.Shards))
	}
	if c.Limits.MaxKeyBytes < 1 || c.Limits.MaxValueBytes < 1 {
		errs = append(errs, errors.New("key and value limits must be positive"))
	}
	if c.Limits.MaxValueBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("max value bytes %d: at most 64 MiB", c.Limits.MaxValueBytes))
	}
	if c.CausalWait <= 0 {
		errs = append(errs, errors.New("causal wait must be positive"))
	}
	if c.SessionMoveWait <= 0 {
		errs = append(errs, errors.New("session move wait must be positive"))
	}
	if c.SimulateWAN != "" {
		if _, err := faultnet.ParseWAN(c.SimulateWAN); err != nil {
			errs = append(errs, fmt.Errorf("simulate wan: %w", err))
		}
	}
	for _, id := range c.RecoverCatalog {
		if !storage.ValidSiteName(id) || id == c.NodeID {
			errs = append(errs, fmt.Errorf("recover catalog: %q is not another node's id", id))
		}
	}
	// The shard settings kvd has flags for, named as the flags name them
	// (shard.Config.Validate names its fields).
	var shardErrs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"version retention", c.Shard.VersionRetention}, {"gc interval", c.Shard.GCInterval}, {"digest interval", c.Shard.DigestInterval}} {
		if d.v < 0 {
			shardErrs = append(shardErrs, fmt.Errorf("%s %v must not be negative", d.name, d.v))
		}
	}
	if c.Shard.SnapshotThreshold == 0 {
		shardErrs = append(shardErrs, errors.New("snapshot threshold must be positive"))
	}
	errs = append(errs, shardErrs...)
	sc := c.Shard
	if sc.SnapshotDir == "" {
		sc.SnapshotDir = "-" // filled in by New
	}
	if err := sc.Validate(); err != nil && len(shardErrs) == 0 {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
