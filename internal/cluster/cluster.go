package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/deadline"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/logging"
	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/snapstore"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
)

// GroupName is the raft group name of the cluster configuration.
const GroupName = "cluster"

// Options configures a node's replica of the configuration group.
type Options struct {
	// Self is this node (Voter is decided by the group).
	Self Node
	// Incarnation returns the incarnation of this node's site, 0 while it
	// knows none (a node that joined its site learns it from the site's
	// first raft request); nil: 0.
	Incarnation func() uint64
	// DefaultShards is the default keyspace's shard count, used when this
	// node creates the cluster.
	DefaultShards uint32
	// SnapshotDir holds the group's raft snapshots (under GroupName).
	SnapshotDir string
	// FS is the file system of SnapshotDir; nil means the real one.
	FS vfs.FS
	// StatePath is the file that keeps the last configuration this node
	// knew, so that a restarted node runs on it even when it cannot reach
	// the group.
	StatePath string
	// Raft timings. The group spans sites: the defaults suit a WAN.
	// CommitTimeout and LeaderHeartbeatTimeout are as in shard.Config
	// (docs/adr/020).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	CommitTimeout, LeaderHeartbeatTimeout                 time.Duration
	// LeaderEvery is how often the leader registers itself and brings the
	// group's membership in line with the configuration.
	LeaderEvery time.Duration
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		DefaultShards:          16,
		HeartbeatTimeout:       2 * time.Second,
		ElectionTimeout:        2 * time.Second,
		LeaderLeaseTimeout:     2 * time.Second,
		CommitTimeout:          500 * time.Millisecond,
		LeaderHeartbeatTimeout: 30 * time.Second,
		LeaderEvery:            time.Second,
	}
}

// Conns dials other nodes' peer ports (peer.Pool).
type Conns interface {
	Conn(addr string) (*grpc.ClientConn, error)
}

// Deps are the group's collaborators.
type Deps struct {
	LogDB     *storage.RaftLogs
	Transport raft.Transport
	Conns     Conns
	Logger    *slog.Logger
}

// Cluster is this node's replica of the cluster configuration group: one
// voter per site (the first node of each site), every other node a
// non-voter, so that every node holds the configuration.
//
// Config returns the newest configuration the node has seen, from the
// group or from a change it made; it is kept in Options.StatePath, so a
// node that restarts cut off from the group still has it. Changes go
// through the group's leader (forwarded over the peer Cluster service).
type Cluster struct {
	opts Options
	deps Deps
	log  *slog.Logger
	fsm  *fsm
	raft *raft.Raft

	mu      sync.Mutex
	view    Config        // REQUIRES: mu
	changed chan struct{} // closed when view changes; REQUIRES: mu

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// ServerID is the raft id of a node in the group (node ids are unique
// within their site only).
func ServerID(site, node string) raft.ServerID { return raft.ServerID(site + "/" + node) }

// Open starts this node's replica. With bootstrap and no state, the node
// creates the cluster (the first node of the first site); otherwise it
// waits to be added by the leader once it joined (Join).
func Open(opts Options, deps Deps, bootstrap bool) (*Cluster, error) {
	d := DefaultOptions()
	if opts.LeaderEvery <= 0 {
		opts.LeaderEvery = d.LeaderEvery
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout, opts.ElectionTimeout, opts.LeaderLeaseTimeout = d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = d.CommitTimeout
	}
	c := &Cluster{opts: opts, deps: deps, log: deps.Logger.With("group", GroupName), changed: make(chan struct{}), stop: make(chan struct{})}
	view, err := loadState(opts.StatePath)
	if errors.Is(err, errDamagedState) {
		// The file is a copy of what the group's log and snapshots hold:
		// start as without it and learn the configuration again from the
		// group, keeping the damaged file for the operator.
		// A file of its own for every damage found: none replaces another.
		moved := opts.StatePath + ".damaged"
		if _, serr := os.Stat(moved); serr == nil {
			moved += "-" + time.Now().UTC().Format("20060102T150405.000000000Z")
		}
		if rerr := os.Rename(opts.StatePath, moved); rerr != nil {
			return nil, fmt.Errorf("%w (and moving it aside failed: %v)", err, rerr)
		}
		c.log.Error("the kept cluster configuration is damaged (a disk or file-system fault: check the disk); moving it aside and learning the configuration again from the cluster configuration group", "reason", err, "moved_to", moved)
		view, err = loadState("")
	}
	if err != nil {
		return nil, err
	}
	c.view = view
	c.fsm = &fsm{onChange: c.observe}

	rc := raft.DefaultConfig()
	// A group whose only voter is this node elects at once
	// (third_party/raft/FORK.md).
	rc.SoleVoterElectsAtOnce = true
	// A term that cannot be saved in raft.db (a full or failing disk) is
	// no panic (third_party/raft/FORK.md): raft.db's failed commit stops
	// the node (storage.DB.WriteFailed).
	rc.TermSaveFailed = func(error) {}
	rc.LocalID = ServerID(opts.Self.Site, opts.Self.ID)
	rc.Logger = logging.HCLog(c.log, "raft", hclog.Warn)
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = opts.HeartbeatTimeout, opts.ElectionTimeout, opts.LeaderLeaseTimeout
	rc.CommitTimeout = opts.CommitTimeout
	rc.MaxReplicationBackoff = raftutil.MaxReplicationBackoff(rc.HeartbeatTimeout)
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 1024
	rc.NoLegacyTelemetry = true
	store := deps.LogDB.RaftStore(GroupName)
	snaps, err := snapstore.New(snapstore.Config{Dir: filepath.Join(opts.SnapshotDir, GroupName), Retain: 2, FS: opts.FS}, c.log)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := snapstore.CheckLog(snaps, store); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if !has && bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: deps.Transport.LocalAddr()}}}
		if err := raft.BootstrapCluster(rc, store, store, snaps, deps.Transport, conf); err != nil {
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	if c.raft, err = raft.NewRaft(rc, c.fsm, store, store, snaps, deps.Transport); err != nil {
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	snaps.ReplaceWith(c.raft)
	c.wg.Add(1)
	go c.leaderLoop()
	if ht := (raftutil.Timings{HeartbeatTimeout: opts.HeartbeatTimeout, ElectionTimeout: opts.ElectionTimeout, LeaderHeartbeatTimeout: opts.LeaderHeartbeatTimeout}); ht.Slow() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			raftutil.LeaderHeartbeats(c.raft, ht, c.stop, c.log)
		}()
	}
	return c, nil
}

// Config returns the node's copy of the configuration (Version 0 until
// the node has one) and a channel closed when it changes. The copy is
// shared and never modified (a change replaces it): read it, or Clone it
// to change it. The write path reads it on every write.
func (c *Cluster) Config() (Config, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view, c.changed
}

// Leader returns the leader's raft id (site/node) and peer address, if
// known.
func (c *Cluster) Leader() (id, addr string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// Servers returns the group's raft membership as this replica knows it.
func (c *Cluster) Servers() ([]raft.Server, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// IsLeader reports whether this replica leads the group.
func (c *Cluster) IsLeader() bool { return c.raft.State() == raft.Leader }

// Joined reports whether the node's configuration lists it.
func (c *Cluster) Joined() bool {
	cfg, _ := c.Config()
	_, ok := cfg.Sites[c.opts.Self.Site].Nodes[c.opts.Self.ID]
	return ok
}

// Current reports whether the node's configuration lists it at the
// addresses it runs on. A node restarted on its data with other ports is
// listed at its old ones until it registers again (Join): the other sites
// would route to them, and its site's nodes would look for its gossip
// there after a restart.
func (c *Cluster) Current() bool {
	cfg, _ := c.Config()
	n, ok := cfg.Sites[c.opts.Self.Site].Nodes[c.opts.Self.ID]
	return ok && sameAddrs(n, c.opts.Self)
}

// sameAddrs reports whether a and b are at the same addresses.
func sameAddrs(a, b Node) bool {
	return a.PeerAddr == b.PeerAddr && a.ClientAddr == b.ClientAddr && a.GossipAddr == b.GossipAddr
}

// HandOff transfers the cluster group's leadership to another voter if
// this replica leads (raftutil.HandOff), waiting until ctx ends; a node
// that stops cleanly calls it.
func (c *Cluster) HandOff(ctx context.Context) error { return raftutil.HandOff(ctx, c.raft) }

// Close stops the replica.
func (c *Cluster) Close() error {
	c.stopOnce.Do(func() { close(c.stop) })
	c.wg.Wait()
	return c.raft.Shutdown().Error()
}

// observe adopts cfg if it is newer than the node's copy, and keeps it.
func (c *Cluster) observe(cfg Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg.Version <= c.view.Version {
		return
	}
	c.view = cfg.Clone()
	close(c.changed)
	c.changed = make(chan struct{})
	if err := saveState(c.opts.StatePath, c.view); err != nil {
		c.log.Warn("keeping the cluster configuration", "err", err)
	}
}

// Join registers this node with the cluster through any of addrs (peer
// addresses of nodes of any site), retrying until ctx ends, and adopts
// the configuration it answers with.
func (c *Cluster) Join(ctx context.Context, addrs []string) (Config, error) {
	self := c.opts.Self
	req := &peerv1.ClusterJoinRequest{NodeId: self.ID, Site: self.Site, PeerAddr: self.PeerAddr, ClientAddr: self.ClientAddr, GossipAddr: self.GossipAddr, SiteIncarnation: c.incarnation()}
	var last error = ErrNoLeader
	for {
		for _, addr := range addrs {
			resp, err := c.callJoin(ctx, addr, req)
			if code := status.Code(err); code == codes.AlreadyExists || code == codes.InvalidArgument {
				// A refusal: no retry can change it.
				return Config{}, &refusal{kind: ErrJoinRefused, msg: fmt.Sprintf("join via %s: %s", addr, status.Convert(err).Message())}
			}
			if err == nil {
				cfg, derr := decodeConfig(resp.Config)
				if derr != nil {
					return Config{}, derr
				}
				c.observe(cfg)
				c.log.Info("joined the cluster", "via", addr, "sites", cfg.SiteNames(), "version", cfg.Version)
				return cfg, nil
			}
			last = fmt.Errorf("join via %s: %w", addr, err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return Config{}, fmt.Errorf("cluster: %w (%w)", last, err)
		}
	}
}

func (c *Cluster) callJoin(ctx context.Context, addr string, req *peerv1.ClusterJoinRequest) (*peerv1.ClusterJoinResponse, error) {
	conn, err := c.deps.Conns.Conn(addr)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return peerv1.NewClusterClient(conn).Join(cctx, req)
}

// incarnation returns Options.Incarnation's answer, or 0.
func (c *Cluster) incarnation() uint64 {
	if c.opts.Incarnation == nil {
		return 0
	}
	return c.opts.Incarnation()
}

// HandleJoin registers n, whose site incarnation is inc (0: unknown), as
// the leader, or forwards the join to the leader, and returns the
// configuration after it.
func (c *Cluster) HandleJoin(ctx context.Context, n Node, inc uint64) (Config, error) {
	if err := checkAddrs(n); err != nil {
		return Config{}, err
	}
	if !c.IsLeader() {
		_, addr := c.Leader()
		if addr == "" {
			return Config{}, ErrNoLeader
		}
		resp, err := c.callJoin(ctx, addr, &peerv1.ClusterJoinRequest{NodeId: n.ID, Site: n.Site, PeerAddr: n.PeerAddr, ClientAddr: n.ClientAddr, GossipAddr: n.GossipAddr, SiteIncarnation: inc})
		if err != nil {
			return Config{}, err
		}
		return decodeConfig(resp.Config)
	}
	// The cluster's first node registers before any other, so that its
	// site comes first in the join order.
	if err := c.registerSelf(ctx); err != nil {
		return Config{}, err
	}
	replaces := c.replaced(n)
	if err := c.checkReplaced(ctx, n, replaces); err != nil {
		return Config{}, err
	}
	// The leader's loop adds the node to the group's membership: a new
	// voter counts towards commits at once, and the joining node may not
	// serve its raft traffic before this call returns.
	return c.propose(ctx, Command{Op: OpAddNode, Node: &n, DefaultShards: c.opts.DefaultShards, ClusterID: newClusterID(), Incarnation: inc, Replaces: replaces})
}

// checkReplaced refuses (ErrExists) the registration of n when a node it
// would replace (one the configuration lists at n's peer address) still
// answers there: n was given a live node's address (a copy of its
// --peer-advertise-addr), and the replacement would drop the live node
// from the configuration and from the group. A node that lost its data
// and was started again on its host and ports under a new id takes the
// address of one that never answers again (docs/adr/027): no one answers
// there, or n itself, and it replaces the old one.
func (c *Cluster) checkReplaced(ctx context.Context, n Node, replaces []string) error {
	if len(replaces) == 0 || c.deps.Conns == nil || guards.Off(guards.PeerAddressInUse) {
		return nil
	}
	conn, err := c.deps.Conns.Conn(n.PeerAddr)
	if err != nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := peerv1.NewChainClient(conn).Ping(pctx, &peerv1.PingRequest{})
	if err != nil || resp.GetSite() != n.Site || !slices.Contains(replaces, resp.GetNodeId()) {
		return nil
	}
	c.log.Warn("refusing a node that registers at a live node's peer address", "node", n.ID, "site", n.Site, "peer_addr", n.PeerAddr, "answering", resp.GetNodeId())
	return fmt.Errorf("%w: node %s of site %s registers at peer address %s, where node %s of site %s answers: "+
		"a new node takes the address of a node that is gone for good, never of a live one; give %s a peer address of its own",
		ErrExists, n.ID, n.Site, n.PeerAddr, resp.GetNodeId(), n.Site, n.ID)
}

// replaced returns the nodes n replaces when it registers (Replaced),
// never this node: it runs at its address.
func (c *Cluster) replaced(n Node) []string {
	var out []string
	for _, id := range Replaced(c.fsm.config(), n) {
		if n.Site != c.opts.Self.Site || id != c.opts.Self.ID {
			out = append(out, id)
		}
	}
	return out
}

// CreateKeyspace creates a keyspace through the leader and returns the
// configuration after the change.
func (c *Cluster) CreateKeyspace(ctx context.Context, ks Keyspace) (Config, error) {
	return c.change(ctx, Command{Op: OpCreateKeyspace, Keyspace: &ks})
}

// SetKeyspaceSites changes the sites (and chain order) of a keyspace
// through the leader and returns the configuration after the change.
func (c *Cluster) SetKeyspaceSites(ctx context.Context, name string, sites []string) (Config, error) {
	return c.change(ctx, Command{Op: OpSetKeyspaceSites, Keyspace: &Keyspace{Name: name, Sites: sites}})
}

// RemoveSite removes a site from the cluster for good through the leader
// and returns the configuration after the change. The leader refuses to
// remove its own site.
func (c *Cluster) RemoveSite(ctx context.Context, site string) (Config, error) {
	cfg, err := c.change(ctx, Command{Op: OpRemoveSite, Site: site})
	if err == nil {
		c.log.Warn("site removed from the cluster for good", "site", site, "version", cfg.Version, "sites", cfg.SiteNames())
	}
	return cfg, err
}

// change applies cmd through the leader, waiting for one while the group
// has none, until ctx ends.
func (c *Cluster) change(ctx context.Context, cmd Command) (Config, error) {
	data, err := encodeCommand(cmd)
	if err != nil {
		return Config{}, err
	}
	// The wait for a leader ends before the caller's deadline, so that a
	// node cut off from a majority of sites says so.
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, deadline.Budget(ctx, 10*time.Second))
	defer cancel()
	retried := false
	for {
		cfg, err := c.Apply(wctx, data)
		if err == nil {
			c.observe(cfg)
			return cfg, nil
		}
		if retried {
			// An attempt that failed without an answer (a leader lost,
			// a timeout) may have committed: a retry then finds its own
			// change made.
			if cfg, ok := c.madeAlready(wctx, cmd, err); ok {
				return cfg, nil
			}
		}
		if !errors.Is(err, ErrNoLeader) && wctx.Err() == nil {
			return Config{}, err
		}
		retried = true
		if serr := sleep(wctx, 100*time.Millisecond); serr != nil {
			if ctx.Err() != nil {
				return Config{}, ctx.Err()
			}
			return Config{}, fmt.Errorf("%w: no leader of the cluster configuration took the change within %v (a majority of sites must be reachable from this node; last: %v)", ErrNoLeader, time.Since(start).Round(time.Millisecond), err)
		}
	}
}

// madeAlready reports whether err, the refusal of a retried cmd, is that
// of a change an earlier attempt made: a keyspace created as cmd creates
// it, a site removed. It returns the configuration that shows it.
func (c *Cluster) madeAlready(ctx context.Context, cmd Command, err error) (Config, bool) {
	var ok func(Config) bool
	switch {
	case cmd.Op == OpCreateKeyspace && cmd.Keyspace != nil && errors.Is(err, ErrExists):
		want := *cmd.Keyspace
		ok = func(cfg Config) bool {
			ks, found := cfg.Keyspaces[want.Name]
			return found && ks.Shards == want.Shards && slices.Equal(ks.Sites, want.Sites)
		}
	case cmd.Op == OpRemoveSite && errors.Is(err, ErrNotFound):
		ok = func(cfg Config) bool { _, removed := cfg.Removed[cmd.Site]; return removed }
	default:
		return Config{}, false
	}
	cfg, err := c.leaderConfig(ctx)
	if err != nil || !ok(cfg) {
		return Config{}, false
	}
	c.observe(cfg)
	return cfg, true
}

// leaderConfig returns the leader's configuration: this node's when it
// leads, else the leader's through Cluster.Config.
func (c *Cluster) leaderConfig(ctx context.Context) (Config, error) {
	if c.IsLeader() {
		return c.fsm.config(), nil
	}
	_, addr := c.Leader()
	if addr == "" {
		return Config{}, ErrNoLeader
	}
	conn, err := c.deps.Conns.Conn(addr)
	if err != nil {
		return Config{}, err
	}
	resp, err := peerv1.NewClusterClient(conn).Config(ctx, &peerv1.ClusterConfigRequest{})
	if err != nil {
		return Config{}, err
	}
	return decodeConfig(resp.Config)
}

// Refresh asks the leader for its configuration, adopts it if it is newer
// than the node's copy (which the leader's replication would bring a
// moment later), and returns it.
func (c *Cluster) Refresh(ctx context.Context) (Config, error) {
	cfg, err := c.leaderConfig(ctx)
	if err != nil {
		return Config{}, err
	}
	c.observe(cfg)
	return cfg, nil
}

// Apply applies an encoded command (leader), or forwards it to the leader.
func (c *Cluster) Apply(ctx context.Context, data []byte) (Config, error) {
	if c.IsLeader() {
		cmd, err := decodeCommand(data)
		if err != nil {
			return Config{}, err
		}
		if cmd.Op == OpRemoveSite && cmd.Site == c.opts.Self.Site {
			// The site that leads the configuration answers: it is not
			// lost, and its leader would remove itself from the group.
			return Config{}, fmt.Errorf("%w: site %s leads the cluster configuration (node %s answers for it): a site that answers is not removed; stop its nodes first, or ask a node of another site once they are gone", ErrInvalid, cmd.Site, c.opts.Self.ID)
		}
		return c.propose(ctx, cmd)
	}
	_, addr := c.Leader()
	if addr == "" {
		return Config{}, ErrNoLeader
	}
	conn, err := c.deps.Conns.Conn(addr)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	resp, err := peerv1.NewClusterClient(conn).Apply(ctx, &peerv1.ClusterApplyRequest{Command: data})
	if err != nil {
		if ctx.Err() != nil {
			return Config{}, err
		}
		return Config{}, fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	if resp.Error != "" {
		return Config{}, refusalFrom(resp.ErrorKind, resp.Error)
	}
	return decodeConfig(resp.Config)
}

// propose replicates cmd (leader only) and returns the configuration
// after it.
func (c *Cluster) propose(ctx context.Context, cmd Command) (Config, error) {
	data, err := encodeCommand(cmd)
	if err != nil {
		return Config{}, err
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	f := c.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return Config{}, fmt.Errorf("%w: %v", ErrNoLeader, err)
		}
		return Config{}, err
	}
	if p, ok := c.deps.Transport.(interface{ CommitApplied(uint64) }); ok {
		p.CommitApplied(f.Index())
	}
	switch r := f.Response().(type) {
	case error:
		return Config{}, r
	case Config:
		return r, nil
	}
	return Config{}, fmt.Errorf("cluster: unexpected apply response %T", f.Response())
}

// leaderLoop runs the leader's duties: register this node (the cluster's
// first node registers itself so) and keep the group's membership in line
// with the configuration.
func (c *Cluster) leaderLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.LeaderEvery)
	defer t.Stop()
	// The term in which this replica, as leader, last applied every entry
	// before its rounds: a new leader's configuration may trail the
	// group's membership until then, and reconcile would take a node it
	// does not know yet for one whose address another node took.
	var caughtUp uint64
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		if !c.IsLeader() {
			continue
		}
		if term := c.raft.CurrentTerm(); term != caughtUp {
			if err := c.raft.Barrier(10 * time.Second).Error(); err != nil {
				continue
			}
			caughtUp = term
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.registerSelf(ctx)
		if err == nil {
			err = c.reconcile(ctx, c.fsm.config())
		}
		if err != nil && !errors.Is(err, ErrNoLeader) {
			c.log.Warn("cluster configuration leader round", "err", err)
		}
		cancel()
	}
}

// newClusterID draws a cluster id (see Config.ID): random, non-zero.
func newClusterID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// registerSelf registers this node (leader only) unless it is registered
// at the addresses it runs on.
func (c *Cluster) registerSelf(ctx context.Context) error {
	cfg := c.fsm.config()
	if n, ok := cfg.Sites[c.opts.Self.Site].Nodes[c.opts.Self.ID]; ok && sameAddrs(n, c.opts.Self) {
		return nil
	}
	self := c.opts.Self
	_, err := c.propose(ctx, Command{Op: OpAddNode, Node: &self, DefaultShards: c.opts.DefaultShards, ClusterID: newClusterID(), Incarnation: c.incarnation(), Replaces: Replaced(cfg, self)})
	return err
}

// reconcile adds the nodes of cfg that are not members of the group yet:
// each site's voter node as a voter, the others as non-voters.
func (c *Cluster) reconcile(ctx context.Context, cfg Config) error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	members := map[raft.ServerID]raft.Server{}
	for _, s := range f.Configuration().Servers {
		members[s.ID] = s
	}
	if err := c.removeSites(cfg, members); err != nil {
		return err
	}
	for _, site := range cfg.SiteNames() {
		for _, n := range cfg.Nodes(site) {
			id, addr := ServerID(site, n.ID), raft.ServerAddress(n.PeerAddr)
			cur, ok := members[id]
			if ok && cur.Address == addr && (cur.Suffrage == raft.Voter) == n.Voter {
				continue
			}
			if !ok {
				// A configuration written before registrations named the
				// nodes they replace lists a node n took the address of
				// too: the member at that address is the older one (n
				// could not be added while it was there).
				var older []string
				for _, o := range Replaced(cfg, n) {
					if m, in := members[ServerID(site, o)]; in && m.Address == addr && m.ID != ServerID(c.opts.Self.Site, c.opts.Self.ID) {
						older = append(older, o)
					}
				}
				if len(older) > 0 {
					_, err := c.propose(ctx, Command{Op: OpAddNode, Node: &n, DefaultShards: c.opts.DefaultShards, ClusterID: newClusterID(), Replaces: older})
					if err != nil {
						return fmt.Errorf("register %s in place of %v, whose address it took: %w", id, older, err)
					}
					return nil // the next round works on the new configuration
				}
			}
			if err := c.freeAddress(cfg, members, id, addr); err != nil {
				return err
			}
			switch {
			case n.Voter:
				if err := c.raft.AddVoter(id, addr, 0, 10*time.Second).Error(); err != nil {
					return fmt.Errorf("add voter %s: %w", id, err)
				}
				c.log.Info("site voter added to the cluster configuration group", "node", id)
			default:
				if err := c.raft.AddNonvoter(id, addr, 0, 10*time.Second).Error(); err != nil {
					return fmt.Errorf("add non-voter %s: %w", id, err)
				}
				c.log.Info("node added to the cluster configuration group", "node", id)
			}
		}
	}
	return nil
}

// removeSites removes from the group's membership (members, updated) the
// nodes of the sites cfg removed from the cluster: their site's vote no
// longer counts towards the group's majority. This replica is never
// removed (its leader refuses to remove its own site).
func (c *Cluster) removeSites(cfg Config, members map[raft.ServerID]raft.Server) error {
	self := ServerID(c.opts.Self.Site, c.opts.Self.ID)
	for _, id := range slices.Sorted(maps.Keys(members)) {
		site, _, _ := strings.Cut(string(id), "/")
		if _, removed := cfg.Removed[site]; !removed || id == self {
			continue
		}
		if err := c.raft.RemoveServer(id, 0, 10*time.Second).Error(); err != nil {
			return fmt.Errorf("remove %s, of removed site %s: %w", id, site, err)
		}
		delete(members, id)
		c.log.Info("removed a node of a removed site from the cluster configuration group", "node", id, "site", site)
	}
	return nil
}

// freeAddress removes from the group's membership (members, updated) the
// servers at addr other than id that cfg no longer lists at addr: a node
// that took a dead node's host and ports under a new id replaced it in the
// configuration (addNode), and raft refuses a second server at an address
// its configuration holds, so the old one leaves before the new one is
// added. It never answers at addr again, so the group's quorum is what it
// was without it. This replica is never removed.
func (c *Cluster) freeAddress(cfg Config, members map[raft.ServerID]raft.Server, id raft.ServerID, addr raft.ServerAddress) error {
	self := ServerID(c.opts.Self.Site, c.opts.Self.ID)
	for _, m := range members {
		if m.ID == id || m.ID == self || m.Address != addr || listedAt(cfg, m.ID, addr) {
			continue
		}
		if err := c.raft.RemoveServer(m.ID, 0, 10*time.Second).Error(); err != nil {
			return fmt.Errorf("remove %s, whose address %s %s took: %w", m.ID, addr, id, err)
		}
		delete(members, m.ID)
		c.log.Info("removed a node whose address another node took from the cluster configuration group", "node", m.ID, "peer_addr", addr, "by", id)
	}
	return nil
}

// listedAt reports whether cfg lists the node of raft id id at peer
// address addr.
func listedAt(cfg Config, id raft.ServerID, addr raft.ServerAddress) bool {
	for _, site := range cfg.SiteNames() {
		for _, n := range cfg.Sites[site].Nodes {
			if ServerID(site, n.ID) == id {
				return raft.ServerAddress(n.PeerAddr) == addr
			}
		}
	}
	return false
}

// ErrorKind names the kind of a refusal for the peer Apply response.
func ErrorKind(err error) string {
	switch {
	case errors.Is(err, ErrExists):
		return "already_exists"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrNoLeader):
		return "no_leader"
	}
	return ""
}

// refusal is a refusal decided at another node.
type refusal struct {
	kind error
	msg  string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

func refusalFrom(kind, msg string) error {
	var k error
	switch kind {
	case "already_exists":
		k = ErrExists
	case "not_found":
		k = ErrNotFound
	case "invalid":
		k = ErrInvalid
	case "no_leader":
		k = ErrNoLeader
	default:
		return errors.New(msg)
	}
	return &refusal{kind: k, msg: msg}
}

// EncodeConfig and decodeConfig are the configuration's wire form (JSON).
func EncodeConfig(cfg Config) ([]byte, error) { return json.Marshal(cfg) }

func decodeConfig(b []byte) (Config, error) {
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return Config{}, fmt.Errorf("cluster: decode configuration: %w", err)
	}
	return cfg.Clone(), nil
}

// loadState reads the kept configuration (empty if there is none).
func loadState(path string) (Config, error) {
	empty := Config{Sites: map[string]Site{}, Keyspaces: map[string]Keyspace{}}
	if path == "" {
		return empty, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("cluster: read %s: %w", path, err)
	}
	cfg, err := decodeState(b)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s: %w", errDamagedState, path, err)
	}
	return cfg, nil
}

// errDamagedState: the kept configuration file does not decode, or fails
// its checksum.
var errDamagedState = errors.New("cluster: the kept configuration is damaged")

// stateFile is the layout of the kept configuration (cluster.json): the
// configuration and a CRC-32C of its bytes as stored, so that a changed
// byte that leaves valid JSON (a digit of a shard count) is found. A file
// of earlier releases holds the configuration alone.
type stateFile struct {
	Format int             `json:"format"`
	CRC32C string          `json:"crc32c"`
	Config json.RawMessage `json:"config"`
}

const stateFormat = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeState(cfg Config) ([]byte, error) {
	b, err := json.MarshalIndent(cfg, "  ", "  ")
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(stateFile{Format: stateFormat, CRC32C: fmt.Sprintf("%08x", crc32.Checksum(b, castagnoli)), Config: b}, "", "  ")
}

func decodeState(b []byte) (Config, error) {
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Format == 0 {
		return decodeConfig(b) // an earlier release's file
	}
	if f.Format != stateFormat {
		return Config{}, fmt.Errorf("format %d, this build reads %d", f.Format, stateFormat)
	}
	cfg, err := decodeConfig(f.Config)
	if err != nil {
		return Config{}, err
	}
	// The sum covers the configuration's encoding by encodeState, which
	// the decoded configuration gives again unless a byte changed it.
	canon, err := json.MarshalIndent(cfg, "  ", "  ")
	if err != nil {
		return Config{}, err
	}
	if got := fmt.Sprintf("%08x", crc32.Checksum(canon, castagnoli)); got != f.CRC32C {
		return Config{}, fmt.Errorf("checksum %s, stored %s", got, f.CRC32C)
	}
	return cfg, nil
}

// saveState keeps cfg in path, atomically.
func saveState(path string, cfg Config) error {
	if path == "" {
		return nil
	}
	b, err := encodeState(cfg)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fsm is the group's state machine: the configuration, whose version is
// the raft index of its last change.
type fsm struct {
	mu       sync.Mutex
	cfg      Config // REQUIRES: mu
	onChange func(Config)
}

func (f *fsm) config() Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.Clone()
}

func (f *fsm) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		return fmt.Errorf("%w at index %d", err, l.Index)
	}
	f.mu.Lock()
	next, err := Apply(f.cfg, cmd)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	next.Version = l.Index
	if cmd.Op == OpSetKeyspaceSites {
		next.stampJoins(cmd.Keyspace.Name, l.Index)
	}
	if cmd.Op == OpRemoveSite {
		r := next.Removed[cmd.Site]
		r.Version = l.Index
		next.Removed[cmd.Site] = r
	}
	f.cfg = next
	f.mu.Unlock()
	f.onChange(next)
	return next.Clone()
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := EncodeConfig(f.cfg)
	if err != nil {
		return nil, err
	}
	return snapstore.Bytes(b), nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	cfg, err := decodeConfig(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.cfg = cfg
	f.mu.Unlock()
	f.onChange(cfg)
	return nil
}

// checkAddrs refuses a join whose addresses are not host:port: the
// configuration would send raft traffic, clients and gossip there. It is
// checked before the join is proposed, not when entries apply, so that a
// log written by an earlier release still replays.
func checkAddrs(n Node) error {
	for _, a := range []struct{ name, addr string }{{"peer", n.PeerAddr}, {"client", n.ClientAddr}, {"gossip", n.GossipAddr}} {
		if a.addr == "" && a.name != "peer" {
			continue
		}
		host, port, err := net.SplitHostPort(a.addr)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if err == nil {
			var p uint64
			if p, err = strconv.ParseUint(port, 10, 16); err == nil && p == 0 {
				err = errors.New("port 0")
			}
		}
		if err != nil {
			return fmt.Errorf("%w: node %s/%s: %s address %q is not host:port (%v)", ErrInvalid, n.Site, n.ID, a.name, a.addr, err)
		}
	}
	return nil
}
