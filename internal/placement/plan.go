package placement

import (
	"cmp"
	"slices"

	"github.com/causeway-db/causeway/internal/guards"
)

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Priorities of the steps Plan proposes, most urgent first. When
// maxConcurrent cuts the list, work that finishes a move in flight or
// restores redundancy goes before work that only improves balance.
const (
	prioRecover       = iota + 1 // a two-voter group lost a voter: the survivor goes on alone
	prioDropLearner              // remove a learner that is not wanted
	prioPromote                  // promote a wanted learner
	prioRemoveDead               // remove a voter on a dead node, replacement done
	prioAddUnder                 // add a learner to a group short of live voters
	prioRemoveSurplus            // remove a live voter that is not wanted, replacement done
	prioAddMove                  // add a learner to move a replica for balance or draining
)

// Plan returns the next membership changes that move current towards the
// target Assign(shards, live minus draining, r): at most one step per shard
// and at most maxConcurrent steps (values below 1 mean 1), most urgent
// first. It returns nothing when current already is the target.
//
// A node in draining or in current but not in live receives no new replica;
// a node not in live is dead. Shards listed but absent from current, and
// shards of current that are not listed, are left alone, and so is a shard
// for which no node is eligible. A shard whose live voters are not a
// majority of its voters (see LostQuorum) is left alone too, except:
//
//  0. A group of exactly two voters, one of them on a dead node, whose
//     learners are all live, is recovered: the live voter goes on alone
//     (StepRecover), the learners given up with the lost voter. Both
//     voters acknowledged every entry committed since the second one was
//     promoted, and it had the log before that, so the survivor holds every
//     committed entry, provided no learner was promoted by a configuration
//     the survivor lacks: the driver asks the live learners before it
//     recovers (docs/adr/013, 023). Rules 1-4 then bring the group back to
//     the target.
//
// For every other shard the rules, in order:
//
//  1. A learner on a dead node or on a node outside the target is removed.
//  2. A learner on a target node is promoted. (The driver promotes it once
//     it has caught up.) But when promoting it would leave an even number
//     of voters and the target has room for more, a learner is first added
//     on the next target node holding no replica, so that a group grows
//     from one voter to three with both learners caught up and promoted
//     back to back rather than living with two voters (which lose their
//     quorum with either one). A site of two nodes still gets two-voter
//     groups. Nothing else happens to a group with a learner.
//  3. If a target node holds no replica, a learner is added on the first
//     such node in preference order. Voters that are not wanted stay.
//  4. Otherwise every target node holds a voter, and one unwanted voter is
//     removed: one on a dead node first, then one on a live node (draining
//     or moved away), provided the remaining live voters are a majority.
//
// So a voter on a dead node is treated as a voter that does not help: it
// still counts in the group's quorum size, it is replaced first (rule 3)
// and removed only when every target node holds a voter (rule 4). No step
// ever leaves a shard with fewer voters than min(its voters, the target
// size), removes the last voter, or takes a group's live voters below a
// majority. Apply every step to current, then call Plan again; repeating
// this converges on the target in at most learners + 2*target + voters
// steps per shard while the node sets stay the same.
func Plan(current Map, shards []Shard, live []NodeID, draining []NodeID, r int, maxConcurrent int) []Step {
	return PlanReachable(current, shards, live, live, draining, r, maxConcurrent)
}

// PlanReachable is Plan where reachable lists the nodes of live that
// answer now (gossip reports them alive); the others are in live only
// because they have been down for less than the grace that keeps their
// replicas. Rule 4 removes a live voter only when the voters left that
// are reachable are a majority: draining a node while another was freshly
// dead otherwise left {survivor, dead node} as the group's voters, a group
// with no quorum until the dead node returned (guard remove-reachable).
func PlanReachable(current Map, shards []Shard, live, reachable []NodeID, draining []NodeID, r int, maxConcurrent int) []Step {
	isLive := setOf(live)
	isReachable := setOf(reachable)
	if guards.Off(guards.RemoveReachable) {
		isReachable = isLive
	}
	isDraining := setOf(draining)
	var eligible []NodeID
	for _, n := range live {
		if !isDraining[n] {
			eligible = append(eligible, n)
		}
	}
	ss := uniqueShards(shards)
	target := Assign(ss, eligible, r)

	type candidate struct {
		step Step
		prio int
	}
	var cands []candidate
	for _, s := range ss {
		reps, ok := current.Shards[s]
		if !ok {
			continue
		}
		if step, prio, ok := planShard(s, normalize(reps), target[s], isLive, isReachable); ok {
			cands = append(cands, candidate{step: step, prio: prio})
		}
	}
	// Stable: within a priority, shards stay in keyspace, id order.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.prio, b.prio) })
	limit := max(maxConcurrent, 1)
	steps := make([]Step, 0, min(len(cands), limit))
	for _, c := range cands[:min(len(cands), limit)] {
		steps = append(steps, c.step)
	}
	return steps
}

// planShard returns the next step of one shard, whose replicas reps are
// normalized, towards the target nodes want (in preference order), and its
// priority; ok is false when the shard needs nothing or must be left alone.
func planShard(s Shard, reps []Replica, want []NodeID, live, reachable map[NodeID]bool) (step Step, prio int, ok bool) {
	if len(want) == 0 {
		return Step{}, 0, false
	}
	if !hasQuorum(reps, live) {
		// Rule 0: a group of exactly two voters, one of them dead, and
		// only live learners goes on with the live voter alone. Any other
		// lost quorum is left to the operator.
		var survivor NodeID
		voters, dead := 0, 0
		for _, r := range reps {
			switch {
			case r.Voter && live[r.Node]:
				survivor = r.Node
				voters++
			case r.Voter:
				voters++
				dead++
			case !live[r.Node]:
				dead++
			}
		}
		if voters == 2 && dead == 1 && survivor != "" {
			return Step{Shard: s, Kind: StepRecover, Node: survivor}, prioRecover, true
		}
		return Step{}, 0, false
	}
	wanted := setOf(want)
	held := make(map[NodeID]bool, len(reps))
	liveVoters, reachableVoters, allVoters := 0, 0, 0
	for _, r := range reps {
		held[r.Node] = true
		if r.Voter {
			allVoters++
			if live[r.Node] {
				liveVoters++
			}
			if live[r.Node] && reachable[r.Node] {
				reachableVoters++
			}
		}
	}
	mk := func(kind StepKind, n NodeID, p int) (Step, int, bool) {
		return Step{Shard: s, Kind: kind, Node: n}, p, true
	}

	// Rules 1 and 2: learners first.
	for _, r := range reps {
		if !r.Voter && (!live[r.Node] || !wanted[r.Node]) {
			return mk(StepRemove, r.Node, prioDropLearner)
		}
	}
	learners := 0
	for _, r := range reps {
		if !r.Voter {
			learners++
		}
	}
	if learners > 0 && (allVoters+1)%2 == 0 {
		// Promoting now would leave an even voter set (two voters lose
		// their quorum with either one): catch up one more learner on a
		// target node first, then promote both back to back.
		for _, n := range want {
			if !held[n] && allVoters+learners < len(want) {
				return mk(StepAddLearner, n, prioAddUnder)
			}
		}
	}
	for _, r := range reps {
		if !r.Voter {
			return mk(StepPromote, r.Node, prioPromote)
		}
	}

	// Rule 3: make before break.
	for _, n := range want {
		if !held[n] {
			if liveVoters < len(want) {
				return mk(StepAddLearner, n, prioAddUnder)
			}
			return mk(StepAddLearner, n, prioAddMove)
		}
	}

	// Rule 4: every wanted node holds a voter; break.
	for _, r := range reps {
		if !wanted[r.Node] && !live[r.Node] {
			// Live voters unchanged, total one less: quorum kept.
			return mk(StepRemove, r.Node, prioRemoveDead)
		}
	}
	for _, r := range reps {
		if !wanted[r.Node] && liveVoters-1 >= (allVoters-1)/2+1 && reachableVoters-b2i(reachable[r.Node]) >= (allVoters-1)/2+1 {
			return mk(StepRemove, r.Node, prioRemoveSurplus)
		}
	}
	return Step{}, 0, false
}
