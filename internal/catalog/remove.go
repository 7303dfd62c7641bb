package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// Refusals of RemoveNode, besides ErrUnknownNode, ErrNodeRemoved and
// ErrNodeHasReplicas.
var (
	// ErrNodeNotDown: gossip reports the node to remove alive or suspect.
	ErrNodeNotDown = errors.New("catalog: node is not down")
	// ErrCatalogVoter: the node to remove still votes in the site catalog.
	ErrCatalogVoter = errors.New("catalog: node is a voter of the site catalog")
)

// RemoveRefused reports whether err is RemoveNode refusing the node (as
// opposed to failing to reach a decision: no leader, raft errors).
func RemoveRefused(err error) bool {
	for _, e := range []error{ErrUnknownNode, ErrNodeRemoved, ErrNodeNotDown, ErrNodeHasReplicas, ErrCatalogVoter} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Notifier tells a node that the site removed it (docs/adr/030).
type Notifier interface {
	// NodeRemoved tells n, which gossip reports alive under the id of r,
	// that the site removed that id: it stops.
	NodeRemoved(ctx context.Context, n Node, r RemovedNode) error
}

// RemoveNode removes node from the site for good (leader only;
// docs/adr/030): the catalog forgets it, records its id as removed (never
// registered again: a process that runs under it is told to stop), and
// returns that record. by says who asked. A non-voting member of the
// catalog's raft group leaves the group first.
//
// It refuses (guard node-remove-check; the message says what to do) a
// node gossip reports alive or suspect (ErrNodeNotDown), one the placement
// map still assigns a replica (ErrNodeHasReplicas) and a voter of the
// catalog (ErrCatalogVoter): the site replaces the replicas and the seat of
// a node down for longer than DeadGrace. A node the catalog does not know
// is ErrUnknownNode, one removed already ErrNodeRemoved.
func (c *Catalog) RemoveNode(ctx context.Context, node, by string) (RemovedNode, error) {
	rn, err := c.removeNode(ctx, node, by)
	switch {
	case err == nil:
		c.m.removals.WithLabelValues("ok").Inc()
		c.log.Info("removed a node from the site for good", "node", node, "by", by, "epoch", rn.Epoch,
			"peer_addr", rn.PeerAddr, "client_addr", rn.ClientAddr)
	case RemoveRefused(err):
		c.m.removals.WithLabelValues("refused").Inc()
		c.log.Info("refused to remove a node from the site", "node", node, "by", by, "err", err)
	case !errors.Is(err, ErrNotLeader):
		c.m.removals.WithLabelValues("error").Inc()
		c.log.Warn("removing a node from the site", "node", node, "by", by, "err", err)
	}
	return rn, err
}

func (c *Catalog) removeNode(ctx context.Context, node, by string) (RemovedNode, error) {
	if !c.IsLeader() {
		return RemovedNode{}, ErrNotLeader
	}
	st, _ := c.State()
	member, voter, err := c.catalogMember(node)
	if err != nil {
		return RemovedNode{}, err
	}
	if err := removeRefusal(st, node, c.liveness(node), voter, c.cfg.DeadGrace); err != nil {
		return RemovedNode{}, err
	}
	if member && !voter {
		// A non-voter leaves the group at once rather than after the
		// dead grace (maintainVoters): it counts toward no quorum.
		if err := c.raft.RemoveServer(raft.ServerID(node), 0, 10*time.Second).Error(); err != nil {
			return RemovedNode{}, fmt.Errorf("catalog: remove %s from the catalog group: %w", node, err)
		}
	}
	if err := c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_RemoveNode{
		RemoveNode: &peerv1.RemoveNodeRequest{NodeId: node, RequestedBy: by},
	}}); err != nil {
		return RemovedNode{}, err
	}
	st, _ = c.State()
	return st.Removed[node], nil
}

// liveness is what gossip says of a node.
type liveness struct {
	alive   bool
	suspect bool
	// down is how long gossip has not reported the node alive; known is
	// false if it never reported it down (it does not know the node).
	down  time.Duration
	known bool
}

// liveness returns what gossip says of node; this node is alive.
func (c *Catalog) liveness(node string) liveness {
	if c.isAlive(node) {
		return liveness{alive: true}
	}
	_, downSince := c.deps.Members.Alive()
	lv := liveness{suspect: c.deps.Members.Suspect(node)}
	if since, ok := downSince[node]; ok {
		lv.down, lv.known = time.Since(since), true
	}
	return lv
}

// catalogMember reports whether node is in the catalog's latest raft
// configuration, and whether as a voter.
func (c *Catalog) catalogMember(node string) (member, voter bool, err error) {
	cf := c.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return false, false, err
	}
	for _, s := range cf.Configuration().Servers {
		if s.ID == raft.ServerID(node) {
			return true, s.Suffrage == raft.Voter, nil
		}
	}
	return false, false, nil
}

// removeRefusal returns why node may not be removed from the site with
// state st, or nil: lv is what gossip says of it, voter whether it votes
// in the catalog, grace the DeadGrace. Unknown and removed nodes are
// refused whatever the guard; the checks that protect a node the site
// still counts on are guard node-remove-check.
func removeRefusal(st State, node string, lv liveness, voter bool, grace time.Duration) error {
	if r, ok := st.Removed[node]; ok {
		return fmt.Errorf("%w: %s was removed already (placement epoch %d)", ErrNodeRemoved, node, r.Epoch)
	}
	if _, ok := st.Nodes[node]; !ok {
		return fmt.Errorf("%w %q: the site catalog has no such node (kvctl cluster members lists the site's nodes)", ErrUnknownNode, node)
	}
	if guards.Off(guards.NodeRemoveCheck) {
		return nil
	}
	switch {
	case lv.alive:
		return fmt.Errorf("%w: gossip reports %s alive, and only a node that is gone for good is removed: "+
			"to retire a running node, drain it (kvctl node drain %s --wait), stop its kvd, then remove it", ErrNodeNotDown, node, node)
	case lv.suspect:
		return fmt.Errorf("%w: gossip suspects %s (a probe failed) but has not declared it dead: "+
			"wait until kvctl cluster members shows it dead; if it is running, drain it (kvctl node drain %s --wait) and stop its kvd first", ErrNodeNotDown, node, node)
	}
	if held := replicasOn(st.Map, node); held > 0 {
		return fmt.Errorf("%w: the placement map assigns %s %s (%s; the site re-creates the replicas of a node down for longer than --dead-grace, %v): "+
			"wait until kvctl cluster members shows 0 replicas for it, or move them off now with kvctl node drain %s --wait, then remove it",
			ErrNodeHasReplicas, node, replicaCount(held), downFor(lv), grace, node)
	}
	if voter {
		return fmt.Errorf("%w: %s still votes in the site catalog (%s; the catalog leader gives up the seat of a node down for longer than --dead-grace, %v): "+
			"wait and remove it again", ErrCatalogVoter, node, downFor(lv), grace)
	}
	return nil
}

// downFor describes how long a node that is not alive has been down.
func downFor(lv liveness) string {
	if !lv.known {
		return "gossip does not know it"
	}
	return fmt.Sprintf("down for %v", lv.down.Round(time.Second))
}

func replicaCount(n int) string {
	if n == 1 {
		return "1 shard replica"
	}
	return fmt.Sprintf("%d shard replicas", n)
}

// removedRetell is how often the leader tells a removed node that stays
// alive again, and removedTellTimeout how long it waits for its answer.
const (
	removedRetell      = 5 * time.Second
	removedTellTimeout = 2 * time.Second
)

// tellRemoved tells the nodes of alive that run under a removed id that
// the site removed them (docs/adr/030), so that they stop: a node that
// comes back with its old data directory after its removal (a restart, a
// healed partition). Each is told at once, then every removedRetell while
// gossip reports it alive. It returns the alive nodes that are not
// removed. Leader loop only.
func (c *Catalog) tellRemoved(ctx context.Context, st State, alive []Node) []Node {
	var rest []Node
	seen := map[string]bool{}
	for _, n := range alive {
		r, removed := st.Removed[n.ID]
		if !removed {
			rest = append(rest, n)
			continue
		}
		seen[n.ID] = true
		if last, ok := c.told[n.ID]; (ok && time.Since(last) < removedRetell) || c.deps.Notifier == nil {
			continue
		}
		c.told[n.ID] = time.Now()
		c.log.Warn("a node the site removed is alive again under its id; telling it to stop",
			"node", n.ID, "peer_addr", n.PeerAddr, "removed_at_epoch", r.Epoch, "removed_by", r.By)
		tctx, cancel := context.WithTimeout(ctx, removedTellTimeout)
		err := c.deps.Notifier.NodeRemoved(tctx, n, r)
		cancel()
		if err != nil {
			c.log.Warn("telling a removed node to stop", "node", n.ID, "err", err)
		}
	}
	for id := range c.told {
		if !seen[id] {
			delete(c.told, id)
		}
	}
	return rest
}
