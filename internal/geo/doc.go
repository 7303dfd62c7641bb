// Package geo replicates every shard across the sites that hold its
// keyspace, down chains of sites (docs/adr/018-chains-of-sites.md, after
// ChainReaction).
//
// A write commits in its site's raft group, which appends it to the
// shard's outbound log in the same transaction. The shard leader of every
// site runs one shipper per origin it passes on: it reads the outbound log
// and ships batches, in order, to the next site of the origin's chain (the
// keyspace's site list rotated to start at the origin), which applies them
// through its own raft group as a Replicate command (and, unless it is the
// last site, appends them to its own outbound log). Replies carry what
// every site downstream applied; the origin computes from them the point
// every site applied (global stability) and sends it down the chain; each
// site trims its outbound log and bounds garbage collection by it.
//
// A successor that stays unreachable for SkipAfter is skipped: the
// shipper sends to the site after it, keeps the skipped site's entries
// (they are not stable), and sends them when a ping reaches it again.
// When the entries a site needs are gone (the log's cap), anti-entropy
// compares per-slot digests of the newest versions and sends the newest
// versions of the differing slots, with the progress they cover.
//
// The pure parts (target choice, stability) are in chain.go; ship.go,
// serve.go and repair.go are the drivers.
package geo
