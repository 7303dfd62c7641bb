// Package membership tells a node which other nodes are alive, by gossip
// over hashicorp/memberlist (SWIM). It only reports: placement and every
// other decision that must agree across nodes belongs to the raft catalog,
// never to this view, which differs from node to node for a while after
// each change.
//
// Each node announces a Meta (site, node id, client and peer addresses),
// carried as memberlist node meta in a small versioned encoding, and is
// named Site + "/" + NodeID. Members returns this node's view, itself
// included: alive, suspect (a probe failed and the suspicion is not yet
// refuted or confirmed), and dead or left members until memberlist forgets
// them (GossipToTheDeadTime). Events delivers joins, meta updates and
// departures (dead or left) in the order memberlist observed them.
//
// A member whose meta does not decode (or names another node) is never
// reported: it is absent from Members and Events, a warning is logged and
// causeway_membership_malformed_meta_total counts it. A member that sends a
// malformed meta update keeps its last valid meta.
//
// Lifecycle: New starts memberlist (its listeners and timers) on BindAddr;
// Join contacts existing members, retrying until one answers or ctx ends
// (TryJoin tries each address once); Leave announces a graceful
// departure; Shutdown stops gossip and closes the Events channel. Without
// Leave, the others detect the node's absence by probing and report it
// suspect, then dead.
//
// Goroutines: this package starts one, the reconnector (reconnect.go),
// which rejoins members found dead and seeds at which no member alive
// gossips; New starts it and Shutdown stops it. memberlist owns its
// listener, handler and timer goroutines, started by New and stopped by
// Shutdown.
// memberlist runs the event callbacks on its own goroutines while holding
// its node lock; they update this package's view under a mutex and send to
// the Events channel without ever blocking (when the channel is full the
// oldest event is dropped, counted in
// causeway_membership_events_dropped_total). Join, Leave and UpdateMeta
// run on the caller's goroutine.
//
// memberlist's API does not tell which members are suspect, nor whether a
// departed member died or left (memberlist.Node.State is always
// StateAlive); internals.go reads both from memberlist's node table, and
// DESIGN.md explains why.
package membership
