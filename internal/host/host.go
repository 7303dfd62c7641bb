// Package host owns the shard replicas of this node. It reconciles the set
// of open shard groups with the site's placement map: a replica that the
// map assigns to this node is opened (created empty, to be filled by the
// group's leader, or bootstrapped when this node is the shard's only
// replica and it has no state), and a replica the map no longer assigns is
// closed and its data deleted, once the catalog leader's map confirms that
// it is not assigned (docs/adr/028). So is a replica of an older
// generation of its shard than the map's (one a recovery gave up,
// docs/adr/014), before a replica of the current generation is created in
// its place.
//
// Goroutines: Run owns the reconcile loop until its context ends; Close
// then closes every group. Group and Groups may be called from any
// goroutine.
package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/snapstore"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/wal"
)

// Transports hands out one raft transport per group.
type Transports interface {
	Transport(group string) (raft.Transport, error)
}

// Deps are the host's collaborators.
type Deps struct {
	NodeID     string
	Shard      shard.Config
	DB         *storage.DB
	LogDB      *storage.RaftLogs
	Transports Transports
	// Base is copied into every group's shard.Deps (clock, metrics, logger).
	Base shard.Deps
	// Current returns the catalog leader's placement map (this node's own
	// when it leads the catalog). A replica that the map Reconcile is given
	// no longer assigns is deleted only if Current's map, as new, does not
	// assign it either (confirmDrops, docs/adr/028). Nil: on the given map
	// alone.
	Current func(ctx context.Context) (placement.Map, error)
	Logger  *slog.Logger
}

// Host is this node's set of shard replicas.
type Host struct {
	deps Deps
	log  *slog.Logger

	// changing serializes Reconcile and RecoverAlone, which open and
	// close replicas.
	changing sync.Mutex

	mu     sync.RWMutex
	groups map[placement.Shard]*shard.Group // REQUIRES: mu
}

// ErrNotHosted is returned for a shard this node has no replica of.
var ErrNotHosted = errors.New("host: shard not hosted here")

// ErrDropUnconfirmed is returned by Reconcile when it kept replicas its
// map no longer assigns because the catalog leader's map did not confirm
// it; Run reconciles again a second later.
var ErrDropUnconfirmed = errors.New("host: keeping replicas the catalog leader's map does not confirm are gone")

// ErrBootstrapUnconfirmed is returned by Reconcile when its map makes this
// node the only voter of a shard it has no replica of, and the catalog
// leader's map does not: the group is not created; Run reconciles again,
// with the newer map, a second later.
var ErrBootstrapUnconfirmed = errors.New("host: not creating a shard group of this node alone that the catalog leader's map does not confirm")

// confirmTimeout bounds the wait for the catalog leader's map.
const confirmTimeout = 2 * time.Second

// New returns an empty host.
func New(deps Deps) *Host {
	return &Host{deps: deps, log: deps.Logger, groups: map[placement.Shard]*shard.Group{}}
}

// Group returns this node's replica of s, or nil.
func (h *Host) Group(s placement.Shard) *shard.Group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.groups[s]
}

// Groups returns every open replica, in shard order.
func (h *Host) Groups() []*shard.Group {
	h.mu.RLock()
	out := make([]*shard.Group, 0, len(h.groups))
	for _, g := range h.groups {
		out = append(out, g)
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].ID(), out[j].ID()
		if a.Keyspace != b.Keyspace {
			return a.Keyspace < b.Keyspace
		}
		return a.Shard < b.Shard
	})
	return out
}

func storageID(s placement.Shard) storage.ShardID {
	return storage.ShardID{Keyspace: s.Keyspace, Shard: s.ID}
}

// Reconcile opens and closes replicas so that this node hosts exactly the
// shards m assigns to it. A replica m does not assign is deleted only once
// the catalog leader's map confirms it (confirmDrops); one kept makes
// Reconcile fail with ErrDropUnconfirmed. Errors of single shards are
// collected; the rest proceed.
func (h *Host) Reconcile(m placement.Map) error {
	h.changing.Lock()
	defer h.changing.Unlock()
	self := placement.NodeID(h.deps.NodeID)
	want := map[placement.Shard][]placement.Replica{}
	for s, reps := range m.Shards {
		for _, r := range reps {
			if r.Node == self {
				want[s] = reps
			}
		}
	}
	var errs []error
	for s, reps := range want {
		gen := m.Generation(s)
		if g := h.Group(s); g != nil {
			if g.Generation() >= gen {
				continue
			}
			if soleVoter(reps, self) {
				// The map has no other copy of the shard: never delete
				// it (a recovery by a node of an older build does not
				// tell the survivor the generation).
				h.log.Warn("replica of an older generation is its shard's only voter; keeping it and taking the shard's generation",
					"shard", s.String(), "generation", g.Generation(), "current", gen)
				if err := h.takeGeneration(s, g, gen); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			// A recovery gave this replica up: it goes, and a new one of
			// the current generation takes its place.
			h.log.Warn("replica belongs to an older generation of its shard; deleting it", "shard", s.String(),
				"generation", g.Generation(), "current", gen)
			if err := h.drop(s); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := h.open(s, reps, gen, nil); err != nil {
			errs = append(errs, err)
		}
	}
	h.mu.RLock()
	var drop []placement.Shard
	for s := range h.groups {
		if _, ok := want[s]; !ok {
			drop = append(drop, s)
		}
	}
	h.mu.RUnlock()
	drop, err := h.confirmDrops(m, drop)
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range drop {
		if err := h.drop(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// confirmDrops returns the replicas of drop, which local (the map
// Reconcile was given) does not assign to this node, that may be deleted:
// those the catalog leader's map, of local's epoch or newer, does not
// assign either. This node's copy of the map can lag: a node that comes
// back after it was declared dead reconciles with a map that gave its
// replicas up, while the shards' leaders may have added it back since,
// replicated to the replica it still holds and even made it a voter.
// Deleting such a replica on the local map alone loses a copy its group
// counts on, entries a voter acknowledged among them. Replicas not
// confirmed (the leader's map assigns them, is older, or cannot be had)
// are kept, and the error says why.
// REQUIRES: h.changing.
func (h *Host) confirmDrops(local placement.Map, drop []placement.Shard) ([]placement.Shard, error) {
	if len(drop) == 0 || h.deps.Current == nil || guards.Off(guards.DropConfirm) {
		return drop, nil
	}
	lm, err := h.leaderMap()
	if err != nil {
		return nil, fmt.Errorf("%w: %d replicas: the catalog leader's map: %w", ErrDropUnconfirmed, len(drop), err)
	}
	if lm.Epoch < local.Epoch {
		return nil, fmt.Errorf("%w: %d replicas: the catalog leader's map (epoch %d) is older than this node's (epoch %d)",
			ErrDropUnconfirmed, len(drop), lm.Epoch, local.Epoch)
	}
	self := placement.NodeID(h.deps.NodeID)
	var confirmed []placement.Shard
	var kept []string
	for _, s := range drop {
		if assigns(lm.Shards[s], self) {
			kept = append(kept, s.String())
			continue
		}
		confirmed = append(confirmed, s)
	}
	if len(kept) > 0 {
		sort.Strings(kept)
		return confirmed, fmt.Errorf("%w: the catalog leader's map (epoch %d) still assigns %v to this node, whose map (epoch %d) does not",
			ErrDropUnconfirmed, lm.Epoch, kept, local.Epoch)
	}
	return confirmed, nil
}

// leaderMap asks for the catalog leader's map (Deps.Current) within
// confirmTimeout, and no longer once the node stops: it then deletes and
// creates nothing more.
func (h *Host) leaderMap() (placement.Map, error) {
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	if done := h.deps.Base.Done; done != nil {
		go func() {
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return h.deps.Current(ctx)
}

// confirmBootstrap returns nil if the catalog leader's map makes this
// node the only voter of s, so that its replica, which has no state, may
// create the group. This node's copy of the map can lag: a node that
// restarts replays its site catalog's log and passes through the maps of
// long ago, in which it was the only replica of every shard (the site's
// first node) or of a shard it has given up since. Bootstrapping there
// would create a second group of the shard, of this node alone, that
// elects it at once and acknowledges the writes routed to it, which the
// next map then deletes with the replica.
func (h *Host) confirmBootstrap(s placement.Shard) error {
	if h.deps.Current == nil || guards.Off(guards.BootstrapConfirm) {
		return nil
	}
	lm, err := h.leaderMap()
	if err != nil {
		return fmt.Errorf("%w: shard %s: the catalog leader's map: %w", ErrBootstrapUnconfirmed, s, err)
	}
	if !soleVoter(lm.Shards[s], placement.NodeID(h.deps.NodeID)) {
		return fmt.Errorf("%w: shard %s: the catalog leader's map (epoch %d) gives it to %s, this node's map lags",
			ErrBootstrapUnconfirmed, s, lm.Epoch, replicaNodes(lm.Shards[s]))
	}
	return nil
}

// replicaNodes lists the nodes of reps, or "no node".
func replicaNodes(reps []placement.Replica) string {
	if len(reps) == 0 {
		return "no node"
	}
	names := make([]string, len(reps))
	for i, r := range reps {
		names[i] = string(r.Node)
	}
	return strings.Join(names, ", ")
}

// assigns reports whether reps holds a replica on node.
func assigns(reps []placement.Replica, node placement.NodeID) bool {
	for _, r := range reps {
		if r.Node == node {
			return true
		}
	}
	return false
}

// soleVoter reports whether self is the only voter of reps.
func soleVoter(reps []placement.Replica, self placement.NodeID) bool {
	n := 0
	for _, r := range reps {
		if r.Voter {
			if r.Node != self {
				return false
			}
			n++
		}
	}
	return n == 1
}

// takeGeneration reopens g, the only voter of s, in generation gen.
// REQUIRES: h.changing.
func (h *Host) takeGeneration(s placement.Shard, g *shard.Group, gen uint64) error {
	h.mu.Lock()
	delete(h.groups, s)
	h.mu.Unlock()
	if err := g.Close(); err != nil {
		h.log.Warn("closing replica to reopen it", "shard", s.String(), "err", err)
	}
	return h.openTaking(s, nil, gen)
}

// open opens this node's replica of s at generation gen; rec, if set,
// makes it go on as its group's only voter (RecoverAlone). A replica on
// disk of an older generation is deleted first, unless the map makes it
// the shard's only voter.
func (h *Host) open(s placement.Shard, reps []placement.Replica, gen uint64, rec *recovery.Options) error {
	err := h.openOnce(s, reps, gen, rec)
	if errors.Is(err, shard.ErrStaleGeneration) && rec == nil && soleVoter(reps, placement.NodeID(h.deps.NodeID)) {
		h.log.Warn("replica on disk of an older generation is its shard's only voter; keeping it and taking the shard's generation",
			"shard", s.String(), "err", err)
		return h.openTaking(s, reps, gen)
	}
	if errors.Is(err, shard.ErrStaleGeneration) && rec == nil {
		h.log.Warn("replica on disk belongs to an older generation of its shard; deleting it", "shard", s.String(), "err", err)
		if err := h.wipe(storageID(s)); err != nil {
			return err
		}
		err = h.openOnce(s, reps, gen, nil)
	}
	return err
}

func (h *Host) openOnce(s placement.Shard, reps []placement.Replica, gen uint64, rec *recovery.Options) error {
	return h.openWith(s, reps, gen, rec, false)
}

// openTaking opens the replica of s, whatever its generation, in
// generation gen (shard.Deps.TakeGeneration).
func (h *Host) openTaking(s placement.Shard, reps []placement.Replica, gen uint64) error {
	return h.openWith(s, reps, gen, nil, true)
}

func (h *Host) openWith(s placement.Shard, reps []placement.Replica, gen uint64, rec *recovery.Options, take bool) error {
	id := storageID(s)
	trans, err := h.deps.Transports.Transport(id.String())
	if err != nil {
		return fmt.Errorf("host: open %s: %w", id, err)
	}
	d := h.deps.Base
	d.DB, d.LogDB, d.NodeID, d.Transport = h.deps.DB, h.deps.LogDB, h.deps.NodeID, trans
	// A shard whose only voter is this node is created here (if this
	// node holds no state of it: shard.Open); any other new replica is
	// empty until the shard's leader adds it. Learners beside the only
	// voter do not count: the catalog places them on a new shard once it
	// created the shard's replica on one node, whether or not that node
	// bootstrapped it, and a node that stopped first (a full disk) still
	// has to when it starts again, or the shard never gets a leader
	// (TestShardsOfANodeStoppedBeforeTheirBootstrapGetLeaders,
	// internal/clustertest).
	d.Bootstrap = soleVoter(reps, placement.NodeID(h.deps.NodeID))
	if d.Bootstrap {
		d.ConfirmBootstrap = func() error { return h.confirmBootstrap(s) }
	}
	d.Recover, d.Generation, d.TakeGeneration = rec, gen, take
	g, err := shard.Open(id, h.deps.Shard, d)
	if err != nil {
		if c, ok := trans.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		return fmt.Errorf("host: open %s: %w", id, err)
	}
	h.mu.Lock()
	h.groups[s] = g
	h.mu.Unlock()
	h.log.Info("opened shard replica", "shard", id.String(), "bootstrap", d.Bootstrap, "generation", g.Generation())
	return nil
}

// RecoverAlone reopens this node's replica of s as the only voter of its
// group, giving up opts.Lost, and starts generation gen of the shard
// (placement.StepRecover, docs/adr/013; placement.StepForceRecover,
// docs/adr/014). Without opts.Force the replica refuses
// (shard.ErrUnsafeRecovery) unless its configuration is two voters,
// itself and a lost one, and otherwise non-voters of opts.Lost; with it, unless its configuration holds
// itself and otherwise only servers of opts.Lost. A refused replica is
// reopened as it was.
func (h *Host) RecoverAlone(s placement.Shard, opts recovery.Options, gen uint64) error {
	h.changing.Lock()
	defer h.changing.Unlock()
	h.mu.Lock()
	g := h.groups[s]
	delete(h.groups, s)
	h.mu.Unlock()
	if g == nil {
		return fmt.Errorf("%w: %s", ErrNotHosted, s)
	}
	if err := g.Close(); err != nil {
		h.log.Warn("closing replica to recover it", "shard", s.String(), "err", err)
	}
	if err := h.open(s, nil, gen, &opts); err != nil {
		// Refused: serve the replica as it was, and report why.
		return errors.Join(err, h.open(s, nil, g.Generation(), nil))
	}
	return nil
}

// drop closes this node's replica of s and deletes its data.
func (h *Host) drop(s placement.Shard) error {
	h.mu.Lock()
	g := h.groups[s]
	delete(h.groups, s)
	h.mu.Unlock()
	if g == nil {
		return nil
	}
	id := storageID(s)
	if err := g.Close(); err != nil {
		h.log.Warn("closing dropped replica", "shard", id.String(), "err", err)
	}
	if err := h.wipe(id); err != nil {
		return err
	}
	h.log.Info("removed shard replica", "shard", id.String())
	return nil
}

// wipe deletes the data of a replica that is not open: its raft log and
// stable store, its state and its snapshots.
func (h *Host) wipe(id storage.ShardID) error {
	err := errors.Join(
		h.deps.LogDB.Drop(id.String()),
		h.deps.DB.Update(func(tx *storage.Tx) error { return tx.DropShard(id) }),
		vfs.OrDefault(h.deps.Shard.FS).RemoveAll(shard.SnapshotDir(h.deps.Shard, id)),
	)
	if err != nil {
		return fmt.Errorf("host: drop %s: %w", id, err)
	}
	return nil
}

// Run reconciles every time the map changes, until ctx ends. next returns
// the current map and a channel closed when it changes.
func (h *Host) Run(ctx context.Context, next func() (placement.Map, <-chan struct{})) {
	for {
		m, changed := next()
		var retry <-chan time.Time
		if len(m.Shards) > 0 {
			if err := h.Reconcile(m); err != nil {
				if damaged(err) && h.deps.Base.OnFatal != nil {
					// A replica's files are damaged: retrying cannot help,
					// and a node that serves without the replica hides it.
					if !strings.Contains(err.Error(), "docs/operations.md") {
						err = fmt.Errorf(`%w; refusing to start (see "A damaged data directory" in docs/operations.md)`, err)
					}
					h.deps.Base.OnFatal(err)
					return
				}
				h.log.Warn("reconciling shard replicas", "err", err)
				retry = time.After(time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// damaged reports whether err says a replica's files are damaged, or
// that kvd may not use them: a snapshot directory replaced by a file (or
// the other way round), or one it may not read.
func damaged(err error) bool {
	return errors.Is(err, shard.ErrLogLost) || errors.Is(err, snapstore.ErrLogGap) || errors.Is(err, snapstore.ErrCorrupt) || errors.Is(err, wal.ErrCorrupt) ||
		errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// HandOff transfers the leadership of every group this node leads, and
// that has another voter, all at once, and waits for the transfers until
// ctx ends. It returns how many completed, and the error of each shard
// whose transfer did not (by shard id). A node that stops calls it first:
// the shards it led then have a leader again within a round trip instead
// of an election timeout, during which they took no write.
func (h *Host) HandOff(ctx context.Context) (handed int, failed map[string]error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed = map[string]error{}
	for _, g := range h.Groups() {
		if !g.IsLeader() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := raftutil.HandOff(ctx, g.Raft())
			if errors.Is(err, raftutil.ErrNoOtherVoter) || errors.Is(err, raftutil.ErrNotLeading) {
				return // nothing to hand off, or it was handed off meanwhile
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[g.ID().String()] = err
				return
			}
			handed++
		}()
	}
	wg.Wait()
	return handed, failed
}

// Close closes every replica (their data stays).
func (h *Host) Close() {
	h.mu.Lock()
	groups := h.groups
	h.groups = map[placement.Shard]*shard.Group{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func(g *shard.Group) {
			defer wg.Done()
			if err := g.Close(); err != nil {
				h.log.Warn("closing shard", "shard", g.ID().String(), "err", err)
			}
		}(g)
	}
	wg.Wait()
}
