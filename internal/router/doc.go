// Package router orchestrates a request inside a site: it maps a
// (keyspace, key) to its shard, decides which replica serves it (this
// node's, the shard leader, another replica), and does the waiting and
// forwarding that the decision needs:
//
//   - mutations run on the shard leader, here or forwarded to it, retried
//     across leadership changes until Config.LeaderWait;
//   - STRONG reads run on the leader after a read barrier;
//   - CAUSAL reads run on any replica that has applied the session's read
//     floor (causal.Session.ReadFloors, with this site's floor raised to the session's MaxHLC, see
//     docs/adr/015-cross-session-causality.md), waiting up to
//     Config.FollowerWait on a follower before handing the read to the
//     leader.
//
// The rpc package is the gRPC edge around it: it decodes and validates
// requests, calls the router with a Call (the request's session), and
// turns errors into statuses. Forwarded requests carry a hop count in
// their gRPC metadata; a request is never forwarded more than maxHops
// times.
//
// A Router holds no goroutines of its own and is safe for concurrent use.
package router
