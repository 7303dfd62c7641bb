package router

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

var (
	// ErrUnknownKeyspace is returned for a keyspace no site holds.
	ErrUnknownKeyspace = errors.New("router: unknown keyspace")
	// ErrKeyspaceElsewhere is returned for a keyspace that other sites
	// hold and this one does not; the message names those sites.
	ErrKeyspaceElsewhere = errors.New("router: keyspace not held by this site")
	// ErrKeyspaceNotYetHere is returned, with ErrUnknownKeyspace, for a
	// keyspace that exists but that this node's router has not learned
	// yet (created moments ago, Config.Recent): a retry a moment later is
	// served, so it is retryable (UNAVAILABLE), unlike a keyspace no site
	// holds (NOT_FOUND).
	ErrKeyspaceNotYetHere = errors.New("router: keyspace not known here yet")
)

// keyspaceSet is what the router knows of the keyspaces: the shard
// counts of those this site holds, and the holders of the others.
type keyspaceSet struct {
	held      map[string]uint32
	elsewhere map[string][]string
}

// Local gives access to this node's replicas.
type Local interface {
	Group(s placement.Shard) *shard.Group
	Groups() []*shard.Group
}

// Catalog gives the site's placement and nodes.
type Catalog interface {
	State() (catalog.State, <-chan struct{})
}

// Config configures the router.
type Config struct {
	// Site and NodeID identify this node; writes proposed here carry Site.
	Site   string
	NodeID string
	// CausalWait is the longest a read waits for a replica to catch up
	// with the session's floor before failing with ErrCausalWait.
	CausalWait time.Duration
	// FollowerWait is how long a follower waits for a floor before it
	// forwards the read to the shard leader instead.
	FollowerWait time.Duration
	// LeaderWait is how long a request waits for a shard to elect a leader.
	LeaderWait time.Duration
	// MoveWait is how long a request of a session that arrives from
	// another site waits for this site to apply the session's causal past
	// (Arrive) before failing with ErrSessionMoved.
	MoveWait time.Duration
	// MaxClockAhead is how far ahead of this node's physical clock a
	// timestamp a client sends (its session token's, a GetTxn snapshot)
	// may be. A later one is refused with ErrClockAhead: the node's clock
	// observes what clients send, and a forged token must not move it
	// (its readings would run ahead of real time for good, and past 2^64
	// wrap, numbering new writes below old ones).
	MaxClockAhead time.Duration
	// VersionRetention is how long shadowed versions stay readable
	// (shard.Config.VersionRetention): a GetTxn snapshot older than it is
	// refused with ErrSnapshotTooOld. Zero does not check.
	VersionRetention time.Duration
	// Unheard, if set, says why this node may not know every keyspace of
	// the cluster (the other sites it cannot reach, a cluster
	// configuration it cannot follow), or returns "" when it has no such
	// reason. A request naming a keyspace the node does not know then
	// fails saying that the keyspace may have been created elsewhere.
	Unheard func() string
	// Recent, if set, reports whether keyspace, unknown to this node,
	// exists in the cluster configuration's leader's copy: created
	// moments ago, it has not reached this node's copy yet. A request
	// naming it then fails saying to retry, not that no such keyspace
	// exists.
	Recent func(keyspace string) bool
}

// DefaultMaxClockAhead is Config.MaxClockAhead's default.
const DefaultMaxClockAhead = 5 * time.Minute

// DefaultConfig returns the waits kvd uses.
func DefaultConfig() Config {
	return Config{CausalWait: 2 * time.Second, FollowerWait: 100 * time.Millisecond, LeaderWait: 5 * time.Second, MoveWait: 10 * time.Second, MaxClockAhead: DefaultMaxClockAhead}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.CausalWait <= 0 {
		c.CausalWait = d.CausalWait
	}
	if c.FollowerWait <= 0 {
		c.FollowerWait = d.FollowerWait
	}
	if c.MoveWait <= 0 {
		c.MoveWait = d.MoveWait
	}
	if c.LeaderWait <= 0 {
		c.LeaderWait = d.LeaderWait
	}
	if c.MaxClockAhead <= 0 {
		c.MaxClockAhead = d.MaxClockAhead
	}
}

// Router is safe for concurrent use.
type Router struct {
	cfg       Config
	keyspaces atomic.Pointer[keyspaceSet]
	local     Local
	catalog   Catalog
	pool      *peer.Pool
	clock     *causal.Clock
	log       *slog.Logger
	metrics   *Metrics
	// durability waits for SITES(n) and ALL writes (SetDurability).
	durability Durability
	// unanswered maps the peer address of a node that failed a forwarded
	// request to when it may be asked first again (route.go).
	unanswered sync.Map
	// casTurns holds the version-conditioned swaps being proposed, by
	// group, key and expected version (CASTurn).
	casMu    sync.Mutex
	casTurns map[casTurnKey]chan struct{}
}

// New returns a router for this node over the given keyspaces (name →
// shard count). pool reaches the other nodes of the site; clock stamps the
// writes this node proposes. A nil pool or metrics is allowed for a
// router that only maps keys (tests, tools).
func New(cfg Config, keyspaces map[string]uint32, local Local, cat Catalog, pool *peer.Pool, clock *causal.Clock, logger *slog.Logger, m *Metrics) *Router {
	cfg.fill()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = newMetrics()
	}
	if clock == nil {
		clock = causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) })
	}
	rt := &Router{cfg: cfg, local: local, catalog: cat, pool: pool, clock: clock, log: logger, metrics: m, casTurns: make(map[casTurnKey]chan struct{})}
	rt.SetKeyspaces(keyspaces, nil)
	return rt
}

// SetKeyspaces replaces the keyspaces the router serves (name → shard
// count); elsewhere names, for keyspaces this site does not hold, the
// sites that hold them, so that requests for them fail naming those
// sites.
func (r *Router) SetKeyspaces(held map[string]uint32, elsewhere map[string][]string) {
	ks := &keyspaceSet{held: make(map[string]uint32, len(held)), elsewhere: make(map[string][]string, len(elsewhere))}
	for k, v := range held {
		ks.held[k] = v
	}
	for k, v := range elsewhere {
		ks.elsewhere[k] = append([]string(nil), v...)
	}
	r.keyspaces.Store(ks)
}

// shardCount returns the shard count of a keyspace this site holds.
func (r *Router) shardCount(keyspace string) (uint32, error) {
	ks := r.keyspaces.Load()
	if n, ok := ks.held[keyspace]; ok {
		return n, nil
	}
	if sites, ok := ks.elsewhere[keyspace]; ok {
		return 0, fmt.Errorf("%w: keyspace %q is held by sites %s, not by site %s", ErrKeyspaceElsewhere, keyspace, strings.Join(sites, ", "), r.cfg.Site)
	}
	name := placement.QuoteKeyspace(keyspace)
	if r.cfg.Unheard != nil {
		if why := r.cfg.Unheard(); why != "" {
			// A keyspace created at another site since the node last heard
			// from the cluster is unknown here until it does.
			return 0, fmt.Errorf("%w %s: site %s may not know every keyspace (%s); if it was created at another site, retry once this site reaches the others, or use a node of another site", ErrUnknownKeyspace, name, r.cfg.Site, why)
		}
	}
	if r.cfg.Recent != nil && r.cfg.Recent(keyspace) {
		return 0, notYetHere{fmt.Errorf("%w %s: created moments ago, it has not reached node %s yet; retry in a moment", ErrUnknownKeyspace, name, r.cfg.NodeID)}
	}
	return 0, fmt.Errorf("%w %s", ErrUnknownKeyspace, name)
}

// notYetHere is an ErrUnknownKeyspace that is also ErrKeyspaceNotYetHere,
// with the message of the first alone.
type notYetHere struct{ error }

func (e notYetHere) Unwrap() error        { return e.error }
func (e notYetHere) Is(target error) bool { return target == ErrKeyspaceNotYetHere }

// Shard returns the shard of key.
func (r *Router) Shard(keyspace string, key []byte) (placement.Shard, error) {
	n, err := r.shardCount(keyspace)
	if err != nil {
		return placement.Shard{}, err
	}
	return placement.Shard{Keyspace: keyspace, ID: placement.ShardOf(key, n)}, nil
}

// Shards returns every shard of keyspace, in order.
func (r *Router) Shards(keyspace string) ([]placement.Shard, error) {
	n, err := r.shardCount(keyspace)
	if err != nil {
		return nil, err
	}
	out := make([]placement.Shard, n)
	for i := range out {
		out[i] = placement.Shard{Keyspace: keyspace, ID: uint32(i)}
	}
	return out, nil
}

// Local returns this node's replica of s, or nil.
func (r *Router) Local(s placement.Shard) *shard.Group { return r.local.Group(s) }

// Groups returns every local replica.
func (r *Router) Groups() []*shard.Group { return r.local.Groups() }

// Replicas returns the other nodes holding s, voters first, and the
// placement epoch they were read at.
func (r *Router) Replicas(s placement.Shard) ([]catalog.Node, uint64) {
	st, _ := r.catalog.State()
	reps := append([]placement.Replica(nil), st.Map.Shards[s]...)
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].Voter && !reps[j].Voter })
	var out []catalog.Node
	for _, rep := range reps {
		if string(rep.Node) == r.cfg.NodeID {
			continue
		}
		if n, ok := st.Nodes[string(rep.Node)]; ok && n.PeerAddr != "" {
			out = append(out, n)
		}
	}
	return out, st.Map.Epoch
}

// Keyspaces lists the keyspaces, sorted.
func (r *Router) Keyspaces() []string {
	held := r.keyspaces.Load().held
	out := make([]string, 0, len(held))
	for k := range held {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
