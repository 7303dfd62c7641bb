package router

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

// ErrUnknownKeyspace is returned for a keyspace this site does not hold.
var ErrUnknownKeyspace = errors.New("router: unknown keyspace")

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
}

// DefaultConfig returns the waits kvd uses.
func DefaultConfig() Config {
	return Config{CausalWait: 2 * time.Second, FollowerWait: 100 * time.Millisecond, LeaderWait: 5 * time.Second}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.CausalWait <= 0 {
		c.CausalWait = d.CausalWait
	}
	if c.FollowerWait <= 0 {
		c.FollowerWait = d.FollowerWait
	}
	if c.LeaderWait <= 0 {
		c.LeaderWait = d.LeaderWait
	}
}

// Router is safe for concurrent use.
type Router struct {
	cfg       Config
	keyspaces map[string]uint32
	local     Local
	catalog   Catalog
	pool      *peer.Pool
	clock     *causal.Clock
	log       *slog.Logger
	metrics   *Metrics
	// durability waits for SITES(n) and ALL writes (SetDurability).
	durability Durability
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
		clock = causal.NewClock(nil)
	}
	return &Router{cfg: cfg, keyspaces: keyspaces, local: local, catalog: cat, pool: pool, clock: clock, log: logger, metrics: m}
}

// Shard returns the shard of key.
func (r *Router) Shard(keyspace string, key []byte) (placement.Shard, error) {
	n, ok := r.keyspaces[keyspace]
	if !ok {
		return placement.Shard{}, fmt.Errorf("%w %q", ErrUnknownKeyspace, keyspace)
	}
	return placement.Shard{Keyspace: keyspace, ID: placement.ShardOf(key, n)}, nil
}

// Shards returns every shard of keyspace, in order.
func (r *Router) Shards(keyspace string) ([]placement.Shard, error) {
	n, ok := r.keyspaces[keyspace]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKeyspace, keyspace)
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
	out := make([]string, 0, len(r.keyspaces))
	for k := range r.keyspaces {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
