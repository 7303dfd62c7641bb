// Package placement is pure placement logic: which shard a key belongs to
// (ShardOf), which nodes of a site should host each shard (Assign), the
// authoritative placement map (Map), and the steps that move a map towards
// its target without losing quorum (Plan). It does no I/O, reads no clock
// and uses no randomness: every function is deterministic in its inputs,
// and nothing here knows about raft, gossip or the catalog that stores the
// map. The caller (the catalog leader) owns the loop.
//
// # Assign: rendezvous hashing with a bounded-load repair
//
// Every (shard, node) pair has a weight: FNV-1a over the shard's keyspace
// (length-prefixed) and id and the node id, finished with the splitmix64
// mixer. First every shard takes the min(r, n) nodes of highest weight
// (rendezvous, or highest-random-weight, hashing). This needs no virtual
// nodes and moves the least possible when nodes come and go: adding a node
// moves exactly the replicas for which it outranks a current holder, about
// 1/n of them, all onto the new node; removing one moves only its replicas.
//
// Plain rendezvous hashing is balanced only on average: with 48 replicas on
// 9 nodes some node commonly holds twice as many as another. So a repair
// pass follows. With T replicas on n nodes and mean T/n it computes bounds
// lo <= floor(T/n) and hi >= ceil(T/n): lo starts at floor(0.8*T/n) (at
// least 1 when the mean is), hi at ceil(1.25*T/n), and the bound farther
// from the mean is narrowed until hi <= 1.5*lo, or until [floor, ceil] is
// reached when integer loads allow nothing better (16 replicas on 9 nodes:
// some hold 1, others 2). Then:
//
//   - shed: while a node holds more than hi, take the cheapest move of a
//     replica from any such node to a node holding fewer than hi that lacks
//     that shard;
//   - fill: while a node holds fewer than lo, take the cheapest move onto
//     any such node from a node holding more than lo.
//
// The cost of moving shard s from u to v is weight(s, u) - weight(s, v):
// the repair prefers the replicas that almost went elsewhere anyway, which
// is what keeps it stable, as the repair of a slightly different node set
// mostly picks the same moves. A move always exists while a bound is
// violated (an overloaded node holds more shards than some node below the
// mean, so it holds one that node lacks; symmetrically for fill), each move
// reduces the violation by one, and neither pass undoes the other, so the
// repair ends with every node in [lo, hi]. Ties are broken by the sorted
// order of shards and nodes, so the result depends only on the input sets.
//
// Guarantees: every shard on min(r, n) distinct nodes (r < 1 counts as 1);
// max/min load <= 1.5 whenever integer loads permit it, and loads within
// one of each other otherwise (16 replicas on 9 nodes); the same result in
// every process. Stability is measured, not proven (TestAssignGrowthMoves,
// TestAssignRemovalMoves; 200 random node sets, r=3): growing from 3 to 4
// nodes moves 12.0 of 48 placements on average and 14 at worst, where 12
// is the minimum; 5 to 6 nodes, 8.9 and 12 against a minimum of 8; with
// 64 shards, 32.3 and 38 against 32. Removing a node moves its replicas
// and at most 6 more. The fewer replicas per node, the more the repair
// adds: 8 to 9 nodes with 16 shards moves 7.1 on average against 5.3.
//
// # Map and Plan: make before break
//
// The Map is the site's authoritative placement: for every shard, its
// replica group (voters and learners) and an epoch that Apply increments on
// every change. Plan compares it with the target Assign(shards, live minus
// draining, r) and proposes at most one step per shard (a raft group makes
// one membership change at a time) and at most maxConcurrent in all (less
// than 1 counts as 1), the most urgent first: dropping learners, promoting,
// removing dead voters, adding to groups short of live voters, removing
// surplus voters, and last adding learners that only move replicas. Per
// shard the rules are, in order:
//
//  1. a learner on a dead or unwanted node is removed;
//  2. a wanted learner is promoted before anything else happens to its
//     shard;
//  3. a wanted node without a replica gets a learner (make);
//  4. only when every wanted node holds a voter is an unwanted voter
//     removed, dead nodes first (break).
//
// A replica on a dead node (one not in live) is a voter that does not help:
// it still counts in the quorum size, so it is replaced first and removed
// afterwards. That order never costs quorum: promoting a live learner adds
// one to both the voters and the live voters, and a group with a live
// majority keeps one. What Plan cannot do is repair a group that has
// already lost its live majority, since no membership change can commit
// there; it leaves such groups alone (Map.LostQuorum lists them) for an
// operator. When fewer eligible nodes remain than r, the target shrinks
// and surplus voters, dead ones first, are removed down to it.
//
// Invariants of every step Plan returns (checked by the simulation and
// fuzz tests): the step applies to the map; no shard gets two steps; no
// step removes the last voter; removing a voter leaves at least as many
// voters as the target size and a live majority; a voter count below the target
// only grows; only eligible nodes receive replicas. Repeating "plan,
// apply" with fixed node sets reaches the target (every target node a
// voter, nothing else) in at most learners + 2*target + voters steps per
// shard.
//
// The driver's loop: call Plan; for each step (they concern distinct
// shards, so they may run concurrently), change the raft group
// (AddNonvoter; for a promotion, wait until the learner has caught up and
// then AddVoter; RemoveServer), then commit the step to the map through the
// catalog group with Apply; call Plan again with the new map. Plan keeps no
// state, so a driver that restarts simply plans again. Exclude a node from
// live only once it has been unreachable long enough to be worth
// re-replicating.
//
// Maps are stored with Marshal, a versioned JSON encoding with sorted keys
// that gives the same bytes for equal maps, and read with UnmarshalMap.
package placement
