package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/logging"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/snapstore"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
)

// GroupName is the raft group name of the catalog.
const GroupName = "catalog"

// ErrNotLeader: the operation needs the catalog leader.
var ErrNotLeader = errors.New("catalog: not the leader")

// Config configures a node's catalog replica.
type Config struct {
	// NodeID, PeerAddr and ClientAddr describe this node.
	NodeID, PeerAddr, ClientAddr string
	// SnapshotDir holds the catalog's raft snapshots.
	SnapshotDir string
	// FS is the file system of SnapshotDir; nil means the real one.
	FS vfs.FS
	// Keyspaces to place, with their shard counts, at Open; SetKeyspaces
	// changes them later.
	Keyspaces map[string]uint32
	// Replicas is R, the replicas per shard (fewer while the site is smaller).
	Replicas int
	// MaxVoters is how many catalog replicas vote; the others follow.
	MaxVoters int
	// RebalanceInterval is how often the leader re-plans.
	RebalanceInterval time.Duration
	// LeaderBalanceInterval is how often the leader checks where shard
	// leadership is while nothing changed: neither the placement map nor
	// the live nodes, and the last check moved nothing. The check asks a
	// replica of every shard, so it costs a round of RPCs per shard; after
	// a change it runs every RebalanceInterval until leadership is even.
	LeaderBalanceInterval time.Duration
	// DeadGrace is how long a node may be unreachable before its replicas
	// are re-created elsewhere.
	DeadGrace time.Duration
	// MaxConcurrentSteps bounds placement changes in flight.
	MaxConcurrentSteps int
	// StepTimeout bounds one placement step.
	StepTimeout time.Duration
	// Raft timings (LAN). CommitTimeout and LeaderHeartbeatTimeout are
	// as in shard.Config: followers learn commits from the leader's
	// commit push, and an idle leader heartbeats rarely (docs/adr/020).
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	CommitTimeout, LeaderHeartbeatTimeout                 time.Duration
	// RecoverLost, when not empty, recovers a catalog that lost its quorum
	// for good (kvd --recover-catalog, docs/adr/014): at Open this replica
	// becomes the catalog's only voter, giving up these voters (they must
	// be exactly the other voters of its configuration) and every
	// non-voter, and starts a new generation of the catalog. Open fails
	// when the voters differ, and does nothing when this replica already is
	// the only member.
	RecoverLost []string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Keyspaces:              map[string]uint32{"default": placement.DefaultShards},
		Replicas:               3,
		MaxVoters:              3,
		RebalanceInterval:      time.Second,
		LeaderBalanceInterval:  10 * time.Second,
		DeadGrace:              30 * time.Second,
		MaxConcurrentSteps:     4,
		StepTimeout:            30 * time.Second,
		HeartbeatTimeout:       2 * time.Second,
		ElectionTimeout:        2 * time.Second,
		LeaderLeaseTimeout:     2 * time.Second,
		CommitTimeout:          500 * time.Millisecond,
		LeaderHeartbeatTimeout: 30 * time.Second,
	}
}

// Members reports which nodes of the site gossip says are alive.
type Members interface {
	// Alive returns the alive nodes of this site, and for every node that
	// is not alive, since when it has not been.
	Alive() (alive []Node, downSince map[string]time.Time)
	// Suspect reports whether gossip suspects node: a probe of it failed
	// and it has neither refuted the suspicion nor been declared dead.
	Suspect(node string) bool
}

// Shards executes the raft half of placement steps on shard groups.
type Shards interface {
	// Hosted reports whether node has opened its replica of s, of
	// generation gen or newer.
	Hosted(ctx context.Context, s placement.Shard, node Node, gen uint64) (bool, error)
	// Status reports node's replica of s.
	Status(ctx context.Context, s placement.Shard, node Node) (ReplicaStatus, error)
	// AddLearner, Promote and Remove change s's raft configuration
	// through its leader; replicas lists the shard's current replicas.
	AddLearner(ctx context.Context, s placement.Shard, replicas []Node, node Node) error
	Promote(ctx context.Context, s placement.Shard, replicas []Node, node Node) error
	Remove(ctx context.Context, s placement.Shard, replicas []Node, node Node) error
	// CaughtUp reports whether node's replica has applied everything its
	// leader had committed when asked.
	CaughtUp(ctx context.Context, s placement.Shard, replicas []Node, node Node) (bool, error)
	// Leader returns the id of s's current leader.
	Leader(ctx context.Context, s placement.Shard, replicas []Node) (string, error)
	// TransferLeader hands s's leadership to node.
	TransferLeader(ctx context.Context, s placement.Shard, replicas []Node, node Node) error
	// RecoverAlone makes survivor's replica the only voter of s, giving
	// up lost, and starts generation gen of s: without force only if its
	// group is two voters, survivor and a lost one (placement.StepRecover),
	// with force whatever it is (placement.StepForceRecover).
	RecoverAlone(ctx context.Context, s placement.Shard, survivor Node, lost []string, force bool, gen uint64) error
}

// ReplicaStatus is a node's report on its replica of a shard.
type ReplicaStatus struct {
	// Hosted is false when the node has no replica of the shard open; the
	// other fields are then zero.
	Hosted bool
	// State is raft's: Leader, Follower, Candidate, Shutdown.
	State string
	// Leader is the leader the replica knows, if any.
	Leader string
	Term   uint64
	// LastIndex and LastLogTerm are those of the last entry of its log.
	LastIndex, LastLogTerm uint64
	CommitIndex            uint64
	AppliedIndex           uint64
	Generation             uint64
	// Voters and Learners are its latest raft configuration.
	Voters, Learners []string
}

// Deps are a catalog's collaborators.
type Deps struct {
	LogDB     *storage.RaftLogs
	Transport raft.Transport
	Members   Members
	Shards    Shards
	Logger    *slog.Logger
	// Registry receives the catalog's metrics (nil: none).
	Registry prometheus.Registerer
	// Notifier, if set, tells a node that runs under a removed id that
	// the site removed it (RemoveNode, docs/adr/030).
	Notifier Notifier
	// OnStale, if set, is called once when a replica of a newer
	// generation of the catalog shows this one was given up by a recovery
	// elsewhere (docs/adr/014). The replica stops taking part in the group
	// and is rebuilt from the site at the next Open; the node should stop.
	OnStale func(error)
}

// Catalog is this node's replica of the site catalog.
type Catalog struct {
	cfg  Config
	deps Deps
	fsm  *fsm
	raft *raft.Raft
	log  *slog.Logger
	m    *metrics
	// barrierTerm is the term in which LeaderMap last saw this replica,
	// as leader, apply every entry committed before it.
	barrierTerm atomic.Uint64

	stop      chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
	stopOnce  sync.Once
	store     storage.GroupStore
	gen       atomic.Uint64 // generation of this replica
	staleOnce sync.Once

	ksMu      sync.Mutex
	keyspaces map[string]uint32 // REQUIRES: ksMu

	// Leader balancing while nothing changes (leaderLoop's goroutine only):
	// the map epoch and live nodes of the last check that moved nothing,
	// and when the next check is due.
	balancedKey string
	balanceDue  time.Time
	// replicasWarned names the --replicas values of the last warning
	// about the site's nodes disagreeing ("" while they agree).
	replicasWarned string
	// told is when each removed node that gossip reports alive was last
	// told it was removed (leaderLoop's goroutine only, tellRemoved).
	told map[string]time.Time
	// unseen is when this node's rounds first found each registered node
	// that gossip has not reported at all since this process started
	// (leaderLoop's goroutine only): after a whole site restarts, a node
	// not back yet is in neither the alive list nor downSince, and its
	// dead grace starts here instead of being over at once.
	unseen map[string]time.Time
}

// Open starts this node's catalog replica. With bootstrap, a catalog with
// no state is created with this node as its only voter (the first node of a
// new site); otherwise a new replica waits to be added by the leader.
func Open(cfg Config, deps Deps, bootstrap bool) (*Catalog, error) {
	c := &Catalog{cfg: cfg, deps: deps, fsm: newFSM(), log: deps.Logger.With("group", GroupName), stop: make(chan struct{}), keyspaces: maps.Clone(cfg.Keyspaces),
		told: map[string]time.Time{}}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = logging.HCLog(c.log, "raft", hclog.Warn)
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	rc.MaxReplicationBackoff = raftutil.MaxReplicationBackoff(rc.HeartbeatTimeout)
	rc.SnapshotThreshold = 1024
	rc.TrailingLogs = 1024
	rc.NoLegacyTelemetry = true
	// A group whose only voter is this node elects at once
	// (third_party/raft/FORK.md).
	rc.SoleVoterElectsAtOnce = true
	// A term that cannot be saved in raft.db (a full or failing disk) is
	// no panic (third_party/raft/FORK.md): raft.db's failed commit stops
	// the node (storage.DB.WriteFailed).
	rc.TermSaveFailed = func(error) {}
	snapDir := filepath.Join(cfg.SnapshotDir, GroupName)
	store := deps.LogDB.RaftStore(GroupName)
	c.store = store
	stale, err := recovery.Stale(store)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if stale > 0 {
		// Given up by a recovery elsewhere: start over empty, to be added
		// back by the leader of the current generation.
		c.log.Warn("this node's catalog replica was given up by a quorum recovery of the site catalog; rebuilding it from the site",
			"generation", stale)
		if err := errors.Join(deps.LogDB.Drop(GroupName), vfs.OrDefault(cfg.FS).RemoveAll(snapDir)); err != nil {
			return nil, fmt.Errorf("catalog: delete the stale replica: %w", err)
		}
		bootstrap = false
	}
	snaps, err := snapstore.New(snapstore.Config{Dir: snapDir, Retain: 2, FS: cfg.FS}, c.log)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := snapstore.CheckLog(snaps, store); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return nil, err
	}
	gen, err := recovery.Generation(store)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if !has && bootstrap {
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: deps.Transport.LocalAddr()}}}
		if err := raft.BootstrapCluster(rc, store, store, snaps, deps.Transport, conf); err != nil {
			return nil, fmt.Errorf("catalog: bootstrap: %w", err)
		}
	}
	if len(cfg.RecoverLost) > 0 {
		if gen, err = c.recoverAlone(store, snaps, rc.LocalID, deps.Transport.LocalAddr(), has, gen); err != nil {
			return nil, err
		}
	}
	c.gen.Store(gen)
	gt, fenced := deps.Transport.(generationTransport)
	if fenced {
		gt.SetGeneration(gen)
	}
	if c.raft, err = raft.NewRaft(rc, c.fsm, store, store, snaps, deps.Transport); err != nil {
		return nil, fmt.Errorf("catalog: start raft: %w", err)
	}
	snaps.ReplaceWith(c.raft)
	if fenced {
		gt.OnNewerGeneration(c.newerGeneration)
	}
	c.m = newMetrics(deps.Registry, c)
	c.wg.Add(1)
	go c.leaderLoop()
	if ht := (raftutil.Timings{HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderHeartbeatTimeout: cfg.LeaderHeartbeatTimeout}); ht.Slow() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			raftutil.LeaderHeartbeats(c.raft, ht, c.stop, c.log)
		}()
	}
	return c, nil
}

// State returns the catalog state and a channel closed when it changes.
func (c *Catalog) State() (State, <-chan struct{}) { return c.fsm.snapshot() }

// Map returns the placement map and a channel closed when it changes.
func (c *Catalog) Map() (placement.Map, <-chan struct{}) {
	st, ch := c.fsm.snapshot()
	return st.Map, ch
}

// LeaderMap returns the placement map of this replica as the catalog's
// leader, once it has applied every entry committed before the call: a
// replica elected while it still replays the log (a node that restarted)
// holds an old map until then. It fails if this replica does not lead.
func (c *Catalog) LeaderMap(ctx context.Context) (placement.Map, error) {
	// Once per term: what this leader commits later, it applies in order.
	if term := c.raft.CurrentTerm(); c.barrierTerm.Load() != term {
		timeout := 5 * time.Second
		if d, ok := ctx.Deadline(); ok {
			timeout = time.Until(d)
		}
		if err := c.raft.Barrier(timeout).Error(); err != nil {
			return placement.Map{}, fmt.Errorf("catalog: the leader's map: %w", err)
		}
		c.barrierTerm.Store(term)
	}
	m, _ := c.Map()
	return m, nil
}

// IsLeader reports whether this replica leads the catalog.
func (c *Catalog) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the catalog leader's id and peer address, if known.
func (c *Catalog) Leader() (id, addr string) {
	a, i := c.raft.LeaderWithID()
	return string(i), string(a)
}

// Voters lists the catalog group's voting members.
func (c *Catalog) Voters() ([]string, error) {
	cf := c.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, err
	}
	var out []string
	for _, srv := range cf.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			out = append(out, string(srv.ID))
		}
	}
	sort.Strings(out)
	return out, nil
}

// StopLeading ends the leader's loop (a round in flight is cancelled)
// and waits for it; the replica goes on serving reads until Close. The
// node calls it as it begins to stop.
func (c *Catalog) StopLeading() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.wg.Wait()
}

// HandOff transfers the catalog group's leadership to another voter if
// this replica leads (raftutil.HandOff), waiting until ctx ends; a node
// that stops cleanly calls it, so that the site's catalog, and with it
// every node's readiness, does not wait out an election timeout.
func (c *Catalog) HandOff(ctx context.Context) error { return raftutil.HandOff(ctx, c.raft) }

// Close stops the replica.
func (c *Catalog) Close() error {
	var err error
	c.once.Do(func() {
		c.StopLeading()
		err = c.raft.Shutdown().Error()
	})
	return err
}

// propose replicates cmd (leader only).
func (c *Catalog) propose(ctx context.Context, cmd *peerv1.CatalogCommand) error {
	if !c.IsLeader() {
		return ErrNotLeader
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return err
	}
	timeout := 10 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	f := c.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return ErrNotLeader
		}
		return err
	}
	if p, ok := c.deps.Transport.(interface{ CommitApplied(uint64) }); ok {
		p.CommitApplied(f.Index())
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return err
	}
	return nil
}

// SetDraining marks a node draining (leader only). Draining is refused
// (ErrNoDrainTarget) while no other live node that is not draining could
// take the node's replicas.
func (c *Catalog) SetDraining(ctx context.Context, nodeID string, draining bool) (uint64, error) {
	if st, _ := c.State(); draining && !st.Nodes[nodeID].Draining {
		target := false
		for id, n := range st.Nodes {
			if _, removed := st.Removed[id]; id != nodeID && !n.Draining && !removed && c.isAlive(id) {
				target = true
				break
			}
		}
		if !target {
			m, _ := c.Map()
			return m.Epoch, fmt.Errorf("%w: %s is the only live node of the site that is not draining; add a node first", ErrNoDrainTarget, nodeID)
		}
	}
	err := c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Drain{Drain: &peerv1.DrainRequest{NodeId: nodeID, Draining: draining}}})
	m, _ := c.Map()
	return m.Epoch, err
}

// AddNode registers a node and adds it to the catalog group as a
// non-voter (leader only); maintainVoters promotes it. A node removed from
// the site (RemoveNode) is ErrNodeRemoved: it is never added again.
func (c *Catalog) AddNode(ctx context.Context, n Node) error {
	st, _ := c.State()
	if r, ok := st.Removed[n.ID]; ok {
		return fmt.Errorf("%w: %s was removed at placement epoch %d", ErrNodeRemoved, n.ID, r.Epoch)
	}
	if cur, ok := st.Nodes[n.ID]; !ok || cur.PeerAddr != n.PeerAddr || cur.ClientAddr != n.ClientAddr {
		if err := c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Node{Node: &peerv1.CatalogNode{NodeId: n.ID, PeerAddr: n.PeerAddr, ClientAddr: n.ClientAddr}}}); err != nil {
			return err
		}
	}
	cf := c.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(n.ID) && s.Address == raft.ServerAddress(n.PeerAddr) {
			return nil
		}
	}
	// raft refuses a second server at an address its configuration holds:
	// a member at n's address that gossip does not report alive is one n
	// took the address of (a node started again on the same host and
	// ports under a new id), and it leaves first.
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(n.ID) || s.Address != raft.ServerAddress(n.PeerAddr) || c.isAlive(string(s.ID)) {
			continue
		}
		if err := c.raft.RemoveServer(s.ID, 0, 10*time.Second).Error(); err != nil {
			return fmt.Errorf("catalog: remove %s, whose address %s %s took: %w", s.ID, n.PeerAddr, n.ID, err)
		}
		c.log.Info("removed a node whose address another node took from the site catalog", "node", s.ID, "peer_addr", n.PeerAddr, "by", n.ID)
	}
	// A new member starts as a non-voter; maintainVoters promotes
	// non-voters so that the voters stay an odd number.
	f := c.raft.AddNonvoter(raft.ServerID(n.ID), raft.ServerAddress(n.PeerAddr), 0, 10*time.Second)
	if err := f.Error(); err != nil {
		return fmt.Errorf("catalog: add %s: %w", n.ID, err)
	}
	c.log.Info("node added to the site catalog", "node", n.ID, "peer_addr", n.PeerAddr)
	return nil
}

// maintainVoters removes catalog members that have been down longer than
// the grace period (a node that returns is added again by AddNode) and
// promotes alive non-voters while the group has fewer than MaxVoters
// voters, so that the catalog keeps tolerating failures.
func (c *Catalog) maintainVoters(alive []Node, downSince map[string]time.Time) error {
	cf := c.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	isAlive := map[raft.ServerID]bool{raft.ServerID(c.cfg.NodeID): true}
	for _, n := range alive {
		isAlive[raft.ServerID(n.ID)] = true
	}
	voters := 0
	var promote []raft.Server
	for _, srv := range cf.Configuration().Servers {
		if since, down := downSince[string(srv.ID)]; down && !isAlive[srv.ID] && time.Since(since) > c.cfg.DeadGrace {
			if err := c.raft.RemoveServer(srv.ID, 0, 10*time.Second).Error(); err != nil {
				return fmt.Errorf("remove %s: %w", srv.ID, err)
			}
			c.log.Info("removed unreachable node from the site catalog", "node", srv.ID, "down_since", since)
			continue
		}
		switch {
		case srv.Suffrage == raft.Voter:
			voters++
		case !isAlive[srv.ID]:
		case !c.caughtUp(srv):
			// A voter that lags holds every commit until it caught up:
			// with one other voter the catalog could not commit at all.
			c.log.Debug("catalog non-voter not promoted yet: it lags the leader's log", "node", srv.ID)
		default:
			promote = append(promote, srv)
		}
	}
	for _, srv := range promote[:votersToPromote(voters, len(promote), c.cfg.MaxVoters)] {
		if err := c.raft.AddVoter(srv.ID, srv.Address, 0, 10*time.Second).Error(); err != nil {
			return fmt.Errorf("promote %s: %w", srv.ID, err)
		}
		c.log.Info("promoted node to catalog voter", "node", srv.ID)
	}
	return nil
}

// promoteSlack is how many committed entries a non-voter may lack and
// still be promoted: about what the catalog commits while a promotion is
// appended.
const promoteSlack = 64

// caughtUp reports whether the leader's transport saw srv acknowledge, in
// the current term, every entry committed but the last promoteSlack. A
// transport that does not tell (acknowledgedTransport) counts every
// non-voter as caught up.
func (c *Catalog) caughtUp(srv raft.Server) bool {
	at, ok := c.deps.Transport.(acknowledgedTransport)
	if !ok {
		return true
	}
	idx, ok := at.Acknowledged(srv.Address, c.raft.CurrentTerm())
	return ok && idx+promoteSlack >= c.raft.CommitIndex()
}

// acknowledgedTransport is a raft transport that tracks, on the leader,
// the last entry each follower acknowledged (transport.Acknowledged).
type acknowledgedTransport interface {
	Acknowledged(target raft.ServerAddress, term uint64) (uint64, bool)
}

// votersToPromote returns how many of candidates alive non-voters to
// promote in a group of voters voters, to at most limit voters: up to limit, but never
// leaving an even number of voters behind when it can be avoided (two
// voters lose their quorum with either one, where one voter and a
// non-voter survive the non-voter's loss). So one voter and one
// candidate stay as they are until a second candidate arrives; then both
// are promoted back to back. Only non-voters that caught up with the
// leader's log are candidates (caughtUp), so each promotion commits as
// soon as it is appended and the catalog has two voters for one commit.
func votersToPromote(voters, candidates, limit int) int {
	n := min(candidates, max(0, limit-voters))
	if (voters+n)%2 == 0 && n > 0 {
		n--
	}
	return n
}

// SetKeyspaces changes the keyspaces the site places (name → shard
// count): the leader adds the shards of a new keyspace to the map, each on
// one live node first, then grows them like any other shard. Shards of a
// keyspace no longer listed keep their replicas (the site stops serving
// them; their data stays).
func (c *Catalog) SetKeyspaces(ks map[string]uint32) {
	c.ksMu.Lock()
	defer c.ksMu.Unlock()
	c.keyspaces = maps.Clone(ks)
}

// Keyspaces returns the keyspaces the site places.
func (c *Catalog) Keyspaces() map[string]uint32 {
	c.ksMu.Lock()
	defer c.ksMu.Unlock()
	return maps.Clone(c.keyspaces)
}

// shards lists every shard of the configured keyspaces.
func (c *Catalog) shards() []placement.Shard {
	var out []placement.Shard
	keyspaces := c.Keyspaces()
	names := make([]string, 0, len(keyspaces))
	for ks := range keyspaces {
		names = append(names, ks)
	}
	sort.Strings(names)
	for _, ks := range names {
		for i := uint32(0); i < keyspaces[ks]; i++ {
			out = append(out, placement.Shard{Keyspace: ks, ID: i})
		}
	}
	return out
}

// placementPause separates a round that executed placement steps or
// leadership moves from the next.
const placementPause = 20 * time.Millisecond

// leaderLoop runs the leader's duties: register alive nodes, initialize the
// placement map, rebalance.
func (c *Catalog) leaderLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.RebalanceInterval)
	defer t.Stop()
	// A round in flight ends when the catalog closes, so that Close (and
	// the node's shutdown) does not wait out StepTimeout.
	life, cancelLife := context.WithCancel(context.Background())
	defer cancelLife()
	go func() {
		select {
		case <-c.stop:
			cancelLife()
		case <-life.Done():
		}
	}()
	more := false
	for {
		// After a round whose placement steps (or leadership moves) all
		// succeeded the plan may hold more: go on after a short pause,
		// not a tick, or placing the replicas of many new shards takes a
		// tick per step. The pause bounds the rounds of a plan that kept
		// proposing steps that change nothing.
		next := t.C
		if more {
			next = time.After(placementPause)
		}
		select {
		case <-c.stop:
			return
		case <-next:
		}
		more = false
		if !c.IsLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(life, c.cfg.StepTimeout)
		var err error
		more, err = c.lead(ctx)
		if err != nil && !errors.Is(err, ErrNotLeader) && ctx.Err() != context.Canceled {
			c.log.Warn("catalog leader round", "err", err)
		}
		cancel()
	}
}

// lead runs one round of the leader's duties. more reports that the round
// executed placement steps or leadership moves and every one succeeded.
func (c *Catalog) lead(ctx context.Context) (more bool, err error) {
	self := Node{ID: c.cfg.NodeID, PeerAddr: c.cfg.PeerAddr, ClientAddr: c.cfg.ClientAddr}
	if err := c.AddNode(ctx, self); err != nil {
		return false, err
	}
	alive, downSince := c.deps.Members.Alive()
	reg, _ := c.State()
	// A node that runs under a removed id is not registered again: it is
	// told to stop.
	for _, n := range c.tellRemoved(ctx, reg, alive) {
		if err := c.AddNode(ctx, n); err != nil {
			c.log.Warn("adding node to catalog", "node", n.ID, "err", err)
		}
	}
	if err := c.maintainVoters(alive, downSince); err != nil {
		c.log.Warn("maintaining catalog voters", "err", err)
	}
	st, _ := c.State()
	if len(st.Map.Shards) == 0 {
		m := placement.NewMap(placement.Assign(c.shards(), []placement.NodeID{placement.NodeID(c.cfg.NodeID)}, c.cfg.Replicas))
		b, err := m.Marshal()
		if err != nil {
			return false, err
		}
		return false, c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_InitMap{InitMap: b}})
	}
	// Live: registered nodes gossip reports alive, plus nodes down for
	// less than the grace period.
	aliveSet := map[string]bool{c.cfg.NodeID: true}
	var unreachable map[string]int // nil while every node reaches every site
	for _, n := range alive {
		aliveSet[n.ID] = true
		if n.Unreachable > 0 {
			if unreachable == nil {
				unreachable = map[string]int{}
			}
			unreachable[n.ID] = n.Unreachable
		}
	}
	// A node whose address another node took is dead at once: it never
	// answers again.
	taken := addressTaken(st.Nodes, aliveSet)
	var live []placement.NodeID
	for id := range st.Nodes {
		since, down := downSince[id]
		if _, gone := taken[id]; gone {
			continue
		}
		// Nodes this start's catalog recovery names as lost
		// (Config.RecoverLost) are not waited for: the operator said so.
		if !down && !aliveSet[id] && !slices.Contains(c.cfg.RecoverLost, id) && !guards.Off(guards.RestartGrace) {
			since, down = c.unseenSince(id), true
		}
		if aliveSet[id] || (down && time.Since(since) < c.cfg.DeadGrace) {
			live = append(live, placement.NodeID(id))
		}
	}
	var up []placement.NodeID // alive and not draining: where new shards start
	for id, n := range st.Nodes {
		if aliveSet[id] && !n.Draining {
			up = append(up, placement.NodeID(id))
		}
	}
	if err := c.addShards(ctx, st.Map, up); err != nil {
		return false, err
	}
	var reachable []placement.NodeID
	for _, id := range live {
		if aliveSet[string(id)] {
			reachable = append(reachable, id)
		}
	}
	steps := placement.PlanReachable(st.Map, c.shards(), live, reachable, st.Draining(), c.siteReplicas(alive), c.cfg.MaxConcurrentSteps)
	if len(steps) == 0 {
		key := balanceKey(st.Map.Epoch, live, unreachable)
		now := time.Now()
		if key == c.balancedKey && now.Before(c.balanceDue) {
			return false, nil
		}
		moves, err := c.balanceLeaders(ctx, st, aliveSet, unreachable)
		c.balancedKey, c.balanceDue = "", time.Time{}
		if moves == 0 && err == nil {
			c.balancedKey, c.balanceDue = key, now.Add(c.cfg.LeaderBalanceInterval)
		}
		return moves > 0 && err == nil, err
	}
	c.balancedKey = ""
	var wg sync.WaitGroup
	errs := make([]error, len(steps))
	for i, s := range steps {
		wg.Add(1)
		go func(i int, s placement.Step) {
			defer wg.Done()
			c.m.inFlight.Inc()
			defer c.m.inFlight.Dec()
			errs[i] = c.execute(ctx, st, s)
			result := "ok"
			if errs[i] != nil {
				result = "error"
			}
			c.m.steps.WithLabelValues(s.Kind.String(), result).Inc()
		}(i, s)
	}
	wg.Wait()
	err = errors.Join(errs...)
	return err == nil, err
}

// siteReplicas returns the replicas per shard the placement aims for: the
// largest --replicas of this node and the alive nodes that announce one, so
// that a node started with a smaller value than the others' does not
// shrink every shard while it leads the catalog; a smaller value takes
// effect once every node runs it (a rolling restart). While the values
// differ it warns, naming each node's, once per change.
func (c *Catalog) siteReplicas(alive []Node) int {
	r := c.cfg.Replicas
	values := map[string]int{c.cfg.NodeID: c.cfg.Replicas}
	differ := false
	for _, n := range alive {
		if n.Replicas <= 0 || n.ID == c.cfg.NodeID {
			continue
		}
		values[n.ID] = n.Replicas
		if n.Replicas != c.cfg.Replicas {
			differ = true
		}
		r = max(r, n.Replicas)
	}
	key := ""
	if differ {
		ids := make([]string, 0, len(values))
		for id := range values {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "%s=%d ", id, values[id])
		}
		key = strings.TrimSpace(b.String())
	}
	if key != c.replicasWarned {
		c.replicasWarned = key
		if differ {
			c.log.Warn("the site's nodes run with different --replicas; placing the largest: give every node of the site the same --replicas (docs/operations.md, Configuration)",
				"replicas", key, "placing", r)
		} else {
			c.log.Info("the site's nodes agree on --replicas again", "replicas", r)
		}
	}
	return r
}

// addShards puts the shards of the keyspaces that are not in the map yet
// into it, each with one voter on one of the nodes up (its replica bootstraps the
// group); the planner then adds the other replicas.
func (c *Catalog) addShards(ctx context.Context, m placement.Map, up []placement.NodeID) error {
	var missing []placement.Shard
	for _, sh := range c.shards() {
		if _, ok := m.Shards[sh]; !ok {
			missing = append(missing, sh)
		}
	}
	if len(missing) == 0 || len(up) == 0 {
		return nil
	}
	b, err := placement.NewMap(placement.Assign(missing, up, 1)).Marshal()
	if err != nil {
		return err
	}
	c.log.Info("adding shards to the placement map", "shards", len(missing), "first", missing[0].String())
	return c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_AddShards{AddShards: b}})
}

// balanceLeaders moves shard leadership toward leaderTargets (at most
// MaxConcurrentSteps transfers a round), so that every node leads about as
// many shards: leaders do the log writes and serve the writes and STRONG
// reads of their shards.
func (c *Catalog) balanceLeaders(ctx context.Context, st State, alive map[string]bool, unreachable map[string]int) (int, error) {
	moves := 0
	var errs []error
	targets := leaderTargets(st.Map, alive, unreachable)
	for _, s := range st.Map.SortedShards() {
		want, ok := targets[s]
		if !ok || moves >= c.cfg.MaxConcurrentSteps {
			continue
		}
		var replicas []Node
		for _, r := range st.Map.Shards[s] {
			if n, ok := st.Nodes[string(r.Node)]; ok {
				replicas = append(replicas, n)
			}
		}
		cur, err := c.deps.Shards.Leader(ctx, s, replicas)
		if err != nil || cur == string(want) {
			continue
		}
		moves++
		if err := c.deps.Shards.TransferLeader(ctx, s, replicas, st.Nodes[string(want)]); err != nil {
			if errors.Is(err, ErrLeaderRefused) {
				// A damaged replica keeps its replica until it is
				// repaired; the shard stays with its current leader.
				moves--
				c.log.Debug("shard leadership not moved to a replica that failed its consistency check", "shard", s.String(), "to", want)
				continue
			}
			if errors.Is(err, ErrLeaderNotYet) {
				// The leader does not hear the target, or its replication
				// has not caught it up (yet): gossip may report a node
				// alive again before the shard's leader reaches it. A
				// transfer now would hold the shard's writes until it
				// caught up; the next round tries again.
				moves--
				c.log.Debug("shard leadership not moved to a replica that has not caught up with its leader", "shard", s.String(), "to", want)
				continue
			}
			c.m.steps.WithLabelValues("transfer-leader", "error").Inc()
			errs = append(errs, err)
			continue
		}
		c.m.steps.WithLabelValues("transfer-leader", "ok").Inc()
		c.log.Info("moved shard leadership", "shard", s.String(), "from", cur, "to", want)
	}
	return moves, errors.Join(errs...)
}

// leaderTargets returns the node each shard's leadership should move to:
// its preferred leader (placement.PreferredLeaders), for the shards whose
// preferred leader gossip reports alive.
//
// Not a node within its DeadGrace (which keeps its replicas in the map):
// a transfer to a dead node cannot succeed, and while hashicorp/raft
// tries one the shard's leader refuses every write and configuration
// change (ErrLeadershipTransferInProgress) for at least an election
// timeout, longer while the transfer waits on the dead node's replication.
// Repeated every balancing round, that left a shard the dead node had led
// unwritable for more than a minute (TestLeaderKillUnderLoad;
// TestLeaderTargetsAreAlive).
//
// A preferred leader that reaches fewer other sites than another alive
// voter of its shard (gossip's Unreachable counts, unreachable) gives way
// to the best connected voter that leads the fewest shards so far: a
// leader ships its shard's writes to the other sites, and one cut off from
// them holds every write of its shard back from the chain while its site's
// other nodes could ship them (docs/adr/031). When a whole site is cut
// off, its nodes count alike and nothing moves.
func leaderTargets(m placement.Map, alive map[string]bool, unreachable map[string]int) map[placement.Shard]placement.NodeID {
	targets := placement.PreferredLeaders(m)
	if len(unreachable) > 0 && !guards.Off(guards.LeaderReach) {
		load := map[placement.NodeID]int{}
		for _, n := range targets {
			load[n]++
		}
		for _, s := range m.SortedShards() {
			n, ok := targets[s]
			if !ok {
				continue
			}
			best, bestCount := n, unreachable[string(n)]
			for _, r := range m.Shards[s] {
				c := unreachable[string(r.Node)]
				if !r.Voter || !alive[string(r.Node)] || r.Node == n {
					continue
				}
				if c < bestCount || (c == bestCount && best != n && (load[r.Node] < load[best] || load[r.Node] == load[best] && r.Node < best)) {
					best, bestCount = r.Node, c
				}
			}
			if best != n {
				load[n]--
				load[best]++
				targets[s] = best
			}
		}
	}
	for s, n := range targets {
		if !alive[string(n)] && !guards.Off(guards.LeaderToAlive) {
			delete(targets, s)
		}
	}
	return targets
}

// balanceKey identifies what leader balancing depends on: the placement map
// (by epoch), the live nodes and how many sites each cannot reach.
func balanceKey(epoch uint64, live []placement.NodeID, unreachable map[string]int) string {
	ids := make([]string, len(live))
	for i, id := range live {
		ids[i] = string(id)
		if n := unreachable[string(id)]; n > 0 {
			ids[i] += "!" + strconv.Itoa(n)
		}
	}
	sort.Strings(ids)
	return strconv.FormatUint(epoch, 10) + "|" + strings.Join(ids, ",")
}

// execute carries out one step: the raft configuration change through the
// shard leader and the map change through the catalog, in the order that
// keeps routing safe (map first when adding, raft first when removing).
func (c *Catalog) execute(ctx context.Context, st State, s placement.Step) error {
	node, ok := st.Nodes[string(s.Node)]
	if !ok {
		node = Node{ID: string(s.Node)}
	}
	var replicas []Node
	for _, r := range st.Map.Shards[s.Shard] {
		if n, ok := st.Nodes[string(r.Node)]; ok {
			replicas = append(replicas, n)
		}
	}
	// Steps of one round run concurrently on different shards, so they
	// are not pinned to an epoch; the FSM validates each against its
	// shard's replicas.
	step := func() error {
		return c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{
			Shard: &peerv1.ShardRef{Keyspace: s.Shard.Keyspace, Shard: s.Shard.ID},
			Kind:  int32(s.Kind), NodeId: string(s.Node),
		}}})
	}
	c.log.Info("placement step", "shard", s.Shard.String(), "step", s.Kind.String(), "node", s.Node)
	switch s.Kind {
	case placement.StepAddLearner:
		if err := c.freeAddress(ctx, st, s.Shard, node, replicas); err != nil {
			return err
		}
		if err := step(); err != nil {
			return err
		}
		if err := c.waitHosted(ctx, s.Shard, node, st.Map.Generation(s.Shard)); err != nil {
			return err
		}
		return c.deps.Shards.AddLearner(ctx, s.Shard, replicas, node)
	case placement.StepPromote:
		// The learner may not be in the raft configuration yet if an
		// earlier round failed half way: adding it again is harmless.
		if err := c.deps.Shards.AddLearner(ctx, s.Shard, replicas, node); err != nil {
			return err
		}
		for {
			ok, err := c.deps.Shards.CaughtUp(ctx, s.Shard, replicas, node)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if err := c.nodeDown(node.ID); err != nil {
				return err
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
		if err := c.deps.Shards.Promote(ctx, s.Shard, replicas, node); err != nil {
			return err
		}
		return step()
	case placement.StepRemove:
		if survivor, ok := c.promotionCutShort(ctx, st, s); ok {
			return c.recover(ctx, st, placement.Step{Shard: s.Shard, Kind: placement.StepRecover, Node: survivor})
		}
		if err := c.deps.Shards.Remove(ctx, s.Shard, replicas, node); err != nil {
			return err
		}
		return step()
	case placement.StepRecover:
		return c.recover(ctx, st, s)
	}
	return fmt.Errorf("catalog: unknown step kind %v", s.Kind)
}

// promotionCutShort reports whether s removes a learner on a dead node
// that its group's only voter had begun to promote: the map holds the
// learner until raft finished the promotion, so a death in between leaves
// a raft configuration of two voters, one dead, behind a map of one
// (docs/adr/023). No leader can remove the learner then; the voter must go
// on alone, and survivor names it.
func (c *Catalog) promotionCutShort(ctx context.Context, st State, s placement.Step) (survivor placement.NodeID, ok bool) {
	reps := st.Map.Shards[s.Shard]
	var voters []placement.NodeID
	learner := false
	for _, r := range reps {
		if r.Voter {
			voters = append(voters, r.Node)
		} else if r.Node == s.Node {
			learner = true
		}
	}
	if !learner || len(voters) != 1 || !c.deadPastGrace(string(s.Node)) {
		return "", false
	}
	n, ok := st.Nodes[string(voters[0])]
	if !ok {
		return "", false
	}
	sv, err := c.deps.Shards.Status(ctx, s.Shard, n)
	if err != nil || len(sv.Voters) != 2 || !slices.Contains(sv.Voters, string(s.Node)) {
		return "", false // a group with a quorum removes the learner as usual
	}
	return voters[0], true
}

// unseenSince returns when this node's rounds first found registered node
// id neither alive nor known down to gossip (Catalog.unseen).
func (c *Catalog) unseenSince(id string) time.Time {
	if c.unseen == nil {
		c.unseen = map[string]time.Time{}
	}
	since, ok := c.unseen[id]
	if !ok {
		since = time.Now()
		c.unseen[id] = since
	}
	return since
}

// deadPastGrace reports whether gossip has reported node down for longer
// than the dead grace.
func (c *Catalog) deadPastGrace(node string) bool {
	_, downSince := c.deps.Members.Alive()
	since, down := downSince[node]
	return down && time.Since(since) > c.cfg.DeadGrace
}

// recover carries out a StepRecover: a group of at most two voters lost
// one, and the survivor s.Node goes on alone (docs/adr/013, 023). Raft
// first: the catalog asks every replica that is not dead what raft
// configuration it holds (recoveryLost), the survivor goes on alone in a
// new generation (it refuses unless its configuration is two voters,
// itself and a lost one, and otherwise non-voters given up), then the map
// drops the other replicas and starts that generation. Repeating it after
// a failure between the two is harmless.
func (c *Catalog) recover(ctx context.Context, st State, s placement.Step) error {
	node, ok := st.Nodes[string(s.Node)]
	if !ok {
		return fmt.Errorf("catalog: recover %s: unknown node %s", s.Shard, s.Node)
	}
	sv, err := c.deps.Shards.Status(ctx, s.Shard, node)
	if err != nil {
		return fmt.Errorf("catalog: recover %s: status of the survivor %s: %w", s.Shard, s.Node, err)
	}
	var mapped []string
	for _, r := range st.Map.Shards[s.Shard] {
		if r.Node != s.Node {
			mapped = append(mapped, string(r.Node))
		}
	}
	// Every other replica of the map, and every server of the survivor's
	// configuration the map no longer lists (a removal reaches raft
	// first), is asked unless it is dead.
	others := map[string]ReplicaStatus{}
	for _, id := range slices.Concat(mapped, sv.Voters, sv.Learners) {
		if _, asked := others[id]; asked || id == string(s.Node) || c.deadPastGrace(id) {
			continue
		}
		n, ok := st.Nodes[id]
		if !ok {
			return fmt.Errorf("catalog: recover %s: unknown node %s", s.Shard, id)
		}
		rs, err := c.deps.Shards.Status(ctx, s.Shard, n)
		if err != nil {
			return fmt.Errorf("catalog: recover %s: the configuration %s holds: %w", s.Shard, id, err)
		}
		others[id] = rs
	}
	lost, err := recoveryLost(string(s.Node), sv, mapped, others)
	if err != nil {
		return fmt.Errorf("catalog: recover %s: %w", s.Shard, err)
	}
	gen := st.Map.Generation(s.Shard) + 1
	c.log.Warn("a group lost a voter of two: the survivor goes on alone", "shard", s.Shard.String(), "survivor", s.Node, "lost", lost, "generation", gen)
	if err := c.deps.Shards.RecoverAlone(ctx, s.Shard, node, lost, false, gen); err != nil {
		return err
	}
	return c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{
		Shard: &peerv1.ShardRef{Keyspace: s.Shard.Keyspace, Shard: s.Shard.ID},
		Kind:  int32(placement.StepRecover), NodeId: string(s.Node), Generation: gen,
	}}})
}

// ErrUnsafeRecovery: a replica holds a raft configuration the survivor of
// a recovery lacks, under which entries may have committed without it.
var ErrUnsafeRecovery = errors.New("catalog: recovery is not safe")

// recoveryLost returns what a survivor of a group of at most two voters
// gives up when it goes on alone: the other replicas of the map (mapped)
// and every other server of its own latest configuration. It fails unless
// that configuration has the survivor and at most one other voter, and
// every replica that answered (others, by node) has its replica open and
// holds no configuration with a voter the survivor's lacks. Such a replica was promoted by a
// configuration the survivor never received, under which the lost voter
// and it could have committed entries without the survivor; raft's
// single-server changes make every other configuration either the
// survivor's or older (docs/adr/023).
func recoveryLost(survivor string, sv ReplicaStatus, mapped []string, others map[string]ReplicaStatus) ([]string, error) {
	if !sv.Hosted {
		return nil, fmt.Errorf("%w: %s holds no replica", ErrUnsafeRecovery, survivor)
	}
	if !slices.Contains(sv.Voters, survivor) || len(sv.Voters) > 2 {
		return nil, fmt.Errorf("%w: the survivor %s's configuration has voters %v", ErrUnsafeRecovery, survivor, sv.Voters)
	}
	for _, id := range slices.Sorted(maps.Keys(others)) {
		if !others[id].Hosted && !guards.Off(guards.RecoveryConfigCheck) {
			// Its log, if it has one, may hold a newer configuration:
			// ask again once it opened its replica.
			return nil, fmt.Errorf("%w: %s has not opened its replica", ErrUnsafeRecovery, id)
		}
		for _, v := range others[id].Voters {
			if !slices.Contains(sv.Voters, v) && !guards.Off(guards.RecoveryConfigCheck) {
				return nil, fmt.Errorf("%w: %s's configuration makes %s a voter, the survivor %s's (voters %v) does not", ErrUnsafeRecovery, id, v, survivor, sv.Voters)
			}
		}
	}
	lost := slices.Clone(mapped)
	for _, id := range slices.Concat(sv.Voters, sv.Learners) {
		if id != survivor && !slices.Contains(lost, id) {
			lost = append(lost, id)
		}
	}
	slices.Sort(lost)
	return lost, nil
}

// waitHosted waits until n has opened its replica of s at generation gen
// (a replica of an older one, given up by a recovery, must be deleted
// first: its host does it once it sees the map's generation).
func (c *Catalog) waitHosted(ctx context.Context, s placement.Shard, n Node, gen uint64) error {
	for {
		ok, err := c.deps.Shards.Hosted(ctx, s, n, gen)
		if err == nil && ok {
			return nil
		}
		if err := c.nodeDown(n.ID); err != nil {
			return err
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("catalog: %s never opened its replica of %s: %w", n.ID, s, err)
		}
	}
}

// isAlive reports whether node is this one or one gossip reports alive.
func (c *Catalog) isAlive(node string) bool {
	if node == c.cfg.NodeID {
		return true
	}
	alive, _ := c.deps.Members.Alive()
	for _, n := range alive {
		if n.ID == node {
			return true
		}
	}
	return false
}

// addressTaken returns the registered nodes that are not alive and whose
// peer address a live node now has: started again on the same host and
// ports under a new id (the way back for a node that lost its data,
// docs/adr/027). Such a node never answers again, and raft refuses the
// new one at its address while a group lists it.
func addressTaken(nodes map[string]Node, alive map[string]bool) map[string]string {
	byAddr := map[string]string{}
	for id, n := range nodes {
		if alive[id] && n.PeerAddr != "" {
			byAddr[n.PeerAddr] = id
		}
	}
	taken := map[string]string{}
	for id, n := range nodes {
		if by, ok := byAddr[n.PeerAddr]; ok && !alive[id] && by != id {
			taken[id] = by
		}
	}
	return taken
}

// freeAddress removes from shard s the replicas on nodes whose address
// node took (addressTaken) before node is added as a learner: raft would
// refuse it while they are listed, and the planner, which adds before it
// removes, would wait on it for good. Such a replica never answers again,
// so the group's quorum is what it was without it. The last voter is never
// removed.
func (c *Catalog) freeAddress(ctx context.Context, st State, s placement.Shard, node Node, replicas []Node) error {
	voters := 0
	for _, r := range st.Map.Shards[s] {
		if r.Voter {
			voters++
		}
	}
	for _, r := range st.Map.Shards[s] {
		old, ok := st.Nodes[string(r.Node)]
		if !ok || old.ID == node.ID || old.PeerAddr != node.PeerAddr || c.isAlive(old.ID) {
			continue
		}
		if r.Voter && voters == 1 {
			return fmt.Errorf("catalog: %s cannot join %s: the group's only voter %s was at its address %s", node.ID, s, old.ID, node.PeerAddr)
		}
		if err := c.deps.Shards.Remove(ctx, s, replicas, old); err != nil {
			return fmt.Errorf("catalog: remove %s from %s, whose address %s took: %w", old.ID, s, node.ID, err)
		}
		if err := c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{
			Shard: &peerv1.ShardRef{Keyspace: s.Keyspace, Shard: s.ID},
			Kind:  int32(placement.StepRemove), NodeId: old.ID,
		}}}); err != nil {
			return err
		}
		c.log.Info("removed a replica whose node's address another node took", "shard", s.String(), "node", old.ID, "by", node.ID)
	}
	return nil
}

// nodeDown fails when gossip no longer reports node alive: a step waiting
// on it gives up at once rather than hold the round (and every other
// step of it) until StepTimeout; the next round plans again.
func (c *Catalog) nodeDown(node string) error {
	if node == c.cfg.NodeID {
		return nil
	}
	_, downSince := c.deps.Members.Alive()
	if since, down := downSince[node]; down {
		return fmt.Errorf("catalog: %s is down (since %s)", node, since.Format(time.RFC3339))
	}
	return nil
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

// generationTransport is a raft transport that keeps replicas of different
// generations of the group apart (package transport).
type generationTransport interface {
	SetGeneration(gen uint64)
	OnNewerGeneration(fn func(newer uint64) bool)
}

// Generation returns the generation of this catalog replica: the number of
// operator recoveries of the site catalog it descends from.
func (c *Catalog) Generation() uint64 { return c.gen.Load() }

// recoverAlone carries out Config.RecoverLost on the stopped replica
// (docs/adr/014) and returns the replica's generation.
func (c *Catalog) recoverAlone(store storage.GroupStore, snaps raft.SnapshotStore, self raft.ServerID, addr raft.ServerAddress, has bool, gen uint64) (uint64, error) {
	if !has {
		return 0, fmt.Errorf("catalog: --recover-catalog: this node has no catalog state to recover from")
	}
	cur, err := recovery.LatestConfiguration(store, snaps)
	if err != nil {
		return 0, fmt.Errorf("catalog: --recover-catalog: %w", err)
	}
	last, _ := store.LastIndex()
	if len(cur.Servers) == 1 && cur.Servers[0].ID == self && cur.Servers[0].Suffrage == raft.Voter {
		c.log.Warn("--recover-catalog: this node already is the only member of the site catalog; nothing to do (remove the flag)",
			"lost", c.cfg.RecoverLost, "generation", gen)
		return gen, nil
	}
	var voters, others []string
	for _, s := range cur.Servers {
		switch {
		case s.ID == self:
		case s.Suffrage == raft.Voter:
			voters = append(voters, string(s.ID))
		default:
			others = append(others, string(s.ID))
		}
	}
	selfVoter := slices.ContainsFunc(cur.Servers, func(s raft.Server) bool { return s.ID == self && s.Suffrage == raft.Voter })
	if selfVoter && len(voters) == 0 {
		// The catalog grew back after a recovery with non-voters only
		// (a site of two nodes): this node alone is its quorum. Giving
		// the non-voters up would gain nothing.
		c.log.Warn("--recover-catalog: this node already is the only voter of the site catalog; nothing to do (remove the flag)",
			"lost", c.cfg.RecoverLost, "non_voters", others, "generation", gen)
		return gen, nil
	}
	named := slices.Clone(c.cfg.RecoverLost)
	sort.Strings(voters)
	sort.Strings(named)
	named = slices.Compact(named)
	if !slices.Equal(voters, named) {
		return 0, recoverCatalogMismatch(named, voters, cur.Servers, last)
	}
	res, err := recovery.Alone(store, store, snaps, self, addr, recovery.Options{Lost: append(voters, others...), Force: true})
	if err != nil {
		return 0, fmt.Errorf("catalog: --recover-catalog: %w", err)
	}
	gen++
	if err := recovery.SetGeneration(store, gen); err != nil {
		return 0, fmt.Errorf("catalog: --recover-catalog: %w", err)
	}
	c.log.Error("RECOVERED THE SITE CATALOG: this node is its only voter now; catalog entries the lost voters committed without it are lost, "+
		"and the lost voters must never return with their data (they are refused and stop if they do)",
		"lost_voters", voters, "dropped_non_voters", others, "previous", res.Previous.Servers, "index", res.Index, "term", res.Term, "generation", gen)
	return gen, nil
}

// recoverCatalogMismatch is the error of a --recover-catalog whose list is
// not the catalog's other voters. It must not read as advice to name
// voters that may well run: a catalog that grew back after a recovery has
// new voters, and a start repeated with the old flag names the voters
// that recovery gave up.
func recoverCatalogMismatch(named, voters []string, servers []raft.Server, last uint64) error {
	var notVoters, unnamed []string
	for _, id := range named {
		if !slices.Contains(voters, id) {
			notVoters = append(notVoters, id)
		}
	}
	for _, id := range voters {
		if !slices.Contains(named, id) {
			unnamed = append(unnamed, id)
		}
	}
	var why string
	if len(notVoters) > 0 {
		why = fmt.Sprintf("%s %s not among the voters of this node's catalog configuration (a misspelt id, a recovery that gave them up already, or a catalog that grew back since)",
			strings.Join(notVoters, ", "), isAre(len(notVoters)))
	} else {
		why = fmt.Sprintf("the catalog's other voters include %s too, and a recovery gives up every other voter", strings.Join(unnamed, ", "))
	}
	return fmt.Errorf("catalog: --recover-catalog names %s as the lost voters, but %s; refusing to start, nothing changed. "+
		"The other voters of this node's catalog configuration are %s (the whole configuration: %v, log up to index %d). "+
		"If a majority of the voters run, the catalog has its quorum and there is nothing to recover: start kvd without --recover-catalog. "+
		"Only if every one of them is lost for good, name exactly those (see \"Recovering a shard or the catalog after losing a quorum\" in docs/operations.md)",
		strings.Join(named, ", "), why, orNone(voters), servers, last)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// orNone joins ids, or says none.
func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// newerGeneration is called by the transport when a replica of a newer
// generation of the catalog shows itself. A replica with no state yet
// (joining the site) takes that generation. Any other was given up by a
// recovery elsewhere: it must not take part in the group any more, and is
// marked to be rebuilt at the next Open.
func (c *Catalog) newerGeneration(newer uint64) bool {
	if c.raft.LastIndex() == 0 {
		if err := recovery.SetGeneration(c.store, newer); err != nil {
			c.log.Warn("recording the catalog's generation", "err", err)
			return false
		}
		c.gen.Store(newer)
		c.log.Info("joined the site catalog's current generation", "generation", newer)
		return true
	}
	c.staleOnce.Do(func() {
		err := fmt.Errorf("catalog: this node's replica of the site catalog (generation %d) was given up by a quorum recovery that started generation %d; "+
			"restart the node: its catalog replica is rebuilt from the site (docs/operations.md)", c.gen.Load(), newer)
		if merr := recovery.MarkStale(c.store, newer); merr != nil {
			err = errors.Join(err, merr)
		}
		c.log.Error("catalog replica given up by a quorum recovery elsewhere", "err", err)
		if c.deps.OnStale != nil {
			c.deps.OnStale(err)
		}
	})
	return false
}

// Replicas returns R, the replicas per shard the placement aims for
// (Config.Replicas).
func (c *Catalog) Replicas() int { return c.cfg.Replicas }
