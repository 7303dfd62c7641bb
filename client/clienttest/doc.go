// Package clienttest provides an in-memory stand-in for a Causeway node,
// serving the KV and Admin gRPC services on a loopback port, for testing
// code built on package client without running kvd.
//
// The fake keeps every version of every key in memory, returns session
// tokens the way a node does, applies a retried mutation (same request id)
// once, attaches kvv1.CasConflict details to failed compare-and-swaps, and
// lets a test inject failures (FailNext, LoseReplies, Block). It does not
// model replication, shards or causal waiting; scan continuations are
// simply the last key returned.
//
// The site-wide admin calls (Members, Shards, Drain) report a site the
// test describes with SetMembers and SetShards (by default the fake alone).
// Drain sets a member's draining flag, and each later Members call moves
// SetDrainStep replicas off every draining member, so that code waiting
// for a drain to finish can be tested. RecoverShard reports on and
// recovers the shards of SetShards that have no leader.
//
// DeadAddr and SilentAddr give endpoints of a node that is down: one
// where nothing listens (connections are refused) and one that takes
// connections and never answers (a node stopped with SIGSTOP).
package clienttest
