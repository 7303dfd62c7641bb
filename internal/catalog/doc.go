// Package catalog is a site's authoritative configuration: the placement
// map (shard → replicas, epoch), the registry of the site's nodes and their
// addresses, which nodes are draining, and which node ids were removed
// from the site for good (RemoveNode, remove.go; never registered again). It is replicated by a small raft
// group, "catalog", that every node of the site joins (the first three as
// voters, the others as non-voters), so every node has a local, consistent
// copy to route with. Gossip (package membership) only says who is alive.
//
// The FSM (fsm.go) is deterministic and in memory; raft snapshots carry it
// (a snapstore.Store on Config.FS).
// The catalog leader runs the rebalancer (rebalance.go): it compares the map
// with the live, non-draining nodes, asks package placement for the next
// make-before-break steps and executes them through the shard leaders.
//
// An operator recovers what the rebalancer cannot: a shard group that lost
// its quorum (RecoverShard, recover.go; a dry run on any replica, a forced
// recovery on the leader) and the catalog itself (Config.RecoverLost, at
// Open). Each starts a new generation of the group (docs/adr/014); a
// replica of the catalog that meets a newer generation than its own was
// given up: it calls Deps.OnStale and is rebuilt at the next Open.
//
// Goroutines: Catalog owns its raft group and, while it leads, one
// rebalancer goroutine; Close stops both. Watch channels are closed on every
// map change and may be used from any goroutine.
package catalog
