package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// Errors of RecoverShard.
var (
	// ErrUnknownShard: the placement map has no such shard.
	ErrUnknownShard = errors.New("catalog: unknown shard")
	// ErrNotReplica: the node holds no replica of the shard in the
	// placement map.
	ErrNotReplica = errors.New("catalog: the node holds no replica of the shard")
	// ErrNodeDown: gossip does not report the node alive, or it did not
	// answer.
	ErrNodeDown = errors.New("catalog: the node is not alive")
	// ErrNoReplicaState: the node has not opened its replica of the shard,
	// or the replica has no raft state to go on from.
	ErrNoReplicaState = errors.New("catalog: the node's replica has no state to recover from")
	// ErrNothingToRecover: the shard's group has a leader or a live quorum.
	ErrNothingToRecover = errors.New("catalog: nothing to recover")
)

// statusTimeout bounds the question to each replica's node.
const statusTimeout = 2 * time.Second

// Recovery describes a shard group that lost its quorum and what making
// one of its replicas the group's only voter gives up (docs/adr/014).
type Recovery struct {
	Shard placement.Shard
	// Node is the survivor.
	Node string
	// Replicas are the shard's replicas in the placement map, the
	// survivor's first.
	Replicas []RecoveryReplica
	// Voters are those of the survivor's raft configuration.
	Voters []string
	// Lost are the replicas and configuration members given up.
	Lost []string
	// Warnings say what to consider before forcing.
	Warnings []string
	// Recovered is true once the recovery was carried out.
	Recovered bool
	// Epoch is the placement epoch (after the recovery, if carried out).
	Epoch uint64
	// Generation is the shard's generation the recovery starts.
	Generation uint64
}

// RecoveryReplica is one replica of a shard being recovered.
type RecoveryReplica struct {
	Node  string
	Voter bool
	// Alive: gossip reports the node alive. MemberState says more:
	// alive, down (since when), unknown (gossip does not know the node).
	Alive       bool
	MemberState string
	// Reachable: the node answered; Status is its report.
	Reachable bool
	Status    ReplicaStatus
}

// Survivor returns the survivor's entry of r.Replicas.
func (r Recovery) Survivor() RecoveryReplica {
	for _, rep := range r.Replicas {
		if rep.Node == r.Node {
			return rep
		}
	}
	return RecoveryReplica{Node: r.Node}
}

// RecoverShard describes what making node's replica the only voter of
// shard s would give up, and with force does it: node's replica goes on
// alone in a new generation of the shard, and the placement map drops
// every other replica, after which the planner grows the group back
// (docs/adr/014). Entries the lost replicas committed without node are
// lost.
//
// It refuses (see the Err* values of this file) a shard the map does not
// hold, a node the site does not know (ErrUnknownNode), a node that holds
// no replica of it, is not alive or whose replica
// has no state, and a shard whose group has a leader or a live quorum of
// voters. A dry run (no force) reads this replica's copy of the catalog
// and works without a catalog leader; a forced recovery must run on the
// catalog leader (ErrNotLeader). Repeating a forced recovery that was
// interrupted between the two halves completes it.
func (c *Catalog) RecoverShard(ctx context.Context, s placement.Shard, node string, force bool) (Recovery, error) {
	st, _ := c.State()
	rec := Recovery{Shard: s, Node: node, Epoch: st.Map.Epoch, Generation: st.Map.Generation(s) + 1}
	reps, ok := st.Map.Shards[s]
	if !ok {
		return rec, fmt.Errorf("%w %s", ErrUnknownShard, s)
	}
	if _, known := st.Nodes[node]; !known {
		return rec, fmt.Errorf("%w %q: the site catalog has no such node (kvctl cluster members lists the site's nodes; %s's replicas: %s)", ErrUnknownNode, node, s, replicaList(reps))
	}
	if !slices.ContainsFunc(reps, func(r placement.Replica) bool { return string(r.Node) == node }) {
		return rec, fmt.Errorf("%w: %s holds no replica of %s (its replicas: %s)", ErrNotReplica, node, s, replicaList(reps))
	}
	alive, downSince := c.deps.Members.Alive()
	isAlive := map[string]bool{c.cfg.NodeID: true}
	for _, n := range alive {
		isAlive[n.ID] = true
	}
	rec.Replicas = c.replicaReports(ctx, s, st, reps, isAlive, downSince)
	if i := slices.IndexFunc(rec.Replicas, func(r RecoveryReplica) bool { return r.Node == node }); i > 0 {
		sv := rec.Replicas[i] // the survivor first
		copy(rec.Replicas[1:i+1], rec.Replicas[:i])
		rec.Replicas[0] = sv
	}
	sv := rec.Replicas[0]
	switch {
	case !sv.Alive:
		return rec, fmt.Errorf("%w: %s (%s); recover on a live node's replica", ErrNodeDown, node, sv.MemberState)
	case !sv.Reachable:
		return rec, fmt.Errorf("%w: %s did not answer", ErrNodeDown, node)
	case !sv.Status.Hosted:
		return rec, fmt.Errorf("%w: %s has not opened its replica of %s", ErrNoReplicaState, node, s)
	case sv.Status.LastIndex == 0:
		return rec, fmt.Errorf("%w: %s's replica of %s has an empty log", ErrNoReplicaState, node, s)
	}
	rec.Voters = sv.Status.Voters
	// A recovery whose raft half is done (the survivor alone, in the
	// generation it started) and whose map half is not: finish it.
	pending := len(sv.Status.Voters) == 1 && sv.Status.Voters[0] == node && len(sv.Status.Learners) == 0 &&
		sv.Status.Generation > st.Map.Generation(s)
	if pending {
		rec.Generation = sv.Status.Generation
	} else if err := nothingToRecover(s, rec, isAlive); err != nil {
		return rec, err
	}
	lost := map[string]bool{}
	for _, r := range reps {
		lost[string(r.Node)] = true
	}
	for _, id := range append(slices.Clone(sv.Status.Voters), sv.Status.Learners...) {
		lost[id] = true
	}
	delete(lost, node)
	for id := range lost {
		rec.Lost = append(rec.Lost, id)
	}
	slices.Sort(rec.Lost)
	leader, _ := c.Leader()
	rec.Warnings = recoveryWarnings(rec, leader)
	if !force {
		return rec, nil
	}
	if !c.IsLeader() {
		return rec, ErrNotLeader
	}
	survivor, ok := st.Nodes[node]
	if !ok {
		return rec, fmt.Errorf("%w: %s is not registered in the site catalog", ErrNodeDown, node)
	}
	c.log.Warn("FORCED RECOVERY of a shard that lost its quorum: the survivor goes on alone; entries the lost replicas committed without it are lost",
		"shard", s.String(), "survivor", node, "lost", rec.Lost, "last_index", sv.Status.LastIndex, "last_log_term", sv.Status.LastLogTerm,
		"commit_index", sv.Status.CommitIndex, "generation", rec.Generation)
	// Raft first, then the map, as for StepRecover: the survivor refuses
	// while its group has a leader, and repeating either half is harmless.
	kind := placement.StepForceRecover.String()
	if err := c.deps.Shards.RecoverAlone(ctx, s, survivor, rec.Lost, true, rec.Generation); err != nil {
		c.m.steps.WithLabelValues(kind, "error").Inc()
		return rec, fmt.Errorf("catalog: recover %s on %s: %w", s, node, err)
	}
	if err := c.propose(ctx, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{
		Shard: &peerv1.ShardRef{Keyspace: s.Keyspace, Shard: s.ID},
		Kind:  int32(placement.StepForceRecover), NodeId: node, Generation: rec.Generation,
	}}}); err != nil {
		c.m.steps.WithLabelValues(kind, "error").Inc()
		return rec, fmt.Errorf("catalog: %s went on alone, but the placement map was not updated (run the recovery again): %w", node, err)
	}
	m, _ := c.Map()
	rec.Recovered, rec.Epoch = true, m.Epoch
	c.m.steps.WithLabelValues(kind, "ok").Inc()
	return rec, nil
}

// replicaReports asks every replica's node about its replica, at once, and
// returns the reports, the survivor's first.
func (c *Catalog) replicaReports(ctx context.Context, s placement.Shard, st State, reps []placement.Replica, isAlive map[string]bool, downSince map[string]time.Time) []RecoveryReplica {
	out := make([]RecoveryReplica, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		id := string(r.Node)
		rep := RecoveryReplica{Node: id, Voter: r.Voter, Alive: isAlive[id], MemberState: "alive"}
		if !rep.Alive {
			rep.MemberState = "unknown"
			if since, ok := downSince[id]; ok {
				rep.MemberState = "down since " + since.UTC().Format(time.RFC3339)
			}
		}
		out[i] = rep
		n, ok := st.Nodes[id]
		if !ok || n.PeerAddr == "" {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			if rs, err := c.deps.Shards.Status(cctx, s, n); err == nil {
				out[i].Reachable, out[i].Status = true, rs
			}
		})
	}
	wg.Wait()
	return out
}

// nothingToRecover fails when the group has a leader or a live quorum of
// voters: it is not lost, and elects or keeps a leader by itself.
func nothingToRecover(s placement.Shard, rec Recovery, isAlive map[string]bool) error {
	for _, r := range rec.Replicas {
		if r.Reachable && r.Status.State == "Leader" {
			return fmt.Errorf("%w: %s has a leader, %s", ErrNothingToRecover, s, r.Node)
		}
	}
	if l := rec.Survivor().Status.Leader; l != "" {
		return fmt.Errorf("%w: %s has a leader, %s, as %s sees it", ErrNothingToRecover, s, l, rec.Node)
	}
	voters := rec.Voters
	if len(voters) == 0 {
		for _, r := range rec.Replicas {
			if r.Voter {
				voters = append(voters, r.Node)
			}
		}
	}
	var up []string
	for _, v := range voters {
		if isAlive[v] {
			up = append(up, v)
		}
	}
	if len(up) >= len(voters)/2+1 {
		return fmt.Errorf("%w: %s has a live quorum (%s of voters %s are alive); it elects a leader by itself, and if it does not, look for a partition between them",
			ErrNothingToRecover, s, strings.Join(up, ", "), strings.Join(voters, ", "))
	}
	return nil
}

// recoveryWarnings lists what the operator should consider before forcing;
// catalogLeader is the catalog leader's id, if there is one.
func recoveryWarnings(rec Recovery, catalogLeader string) []string {
	var out []string
	sv := rec.Survivor()
	if !sv.Voter || !slices.Contains(sv.Status.Voters, rec.Node) {
		out = append(out, fmt.Sprintf("%s is a learner, not a voter: it may lack entries the voters committed", rec.Node))
	}
	for _, r := range rec.Replicas {
		if r.Node == rec.Node || !r.Reachable || !r.Status.Hosted {
			continue
		}
		if cmp.Or(cmp.Compare(r.Status.LastLogTerm, sv.Status.LastLogTerm), cmp.Compare(r.Status.LastIndex, sv.Status.LastIndex)) > 0 {
			out = append(out, fmt.Sprintf("%s holds a longer log (last index %d, term %d, against %d, term %d): recovering on %s gives up less",
				r.Node, r.Status.LastIndex, r.Status.LastLogTerm, sv.Status.LastIndex, sv.Status.LastLogTerm, r.Node))
		}
		if r.Alive {
			out = append(out, fmt.Sprintf("%s is alive: its replica is given up too and deleted, and the site adds a new one", r.Node))
		}
	}
	if catalogLeader == "" {
		out = append(out, "the site catalog has no leader: a forced recovery needs one; recover the catalog first (kvd --recover-catalog, docs/operations.md)")
	}
	return out
}

// replicaList renders replicas as "n1, n2 (learner)".
func replicaList(reps []placement.Replica) string {
	var parts []string
	for _, r := range reps {
		p := string(r.Node)
		if !r.Voter {
			p += " (learner)"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
