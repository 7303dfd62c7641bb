// Package recovery takes a raft group that lost its quorum back into
// service: it rewrites the configuration of one stopped replica so that
// it goes on as the group's only voter (Alone), and keeps the generation
// of a replica, which every such recovery starts anew, in the replica's
// raft stable store (Generation, SetGeneration).
//
// A recovery appends a configuration entry holding the replica alone at
// the end of its log; raft takes the newest configuration of the log as
// its own when it starts, so the replica elects itself with its own vote
// and commits the entry, and with it everything before it. Without Force
// it is done only where it is safe, a two-voter group that lost one
// (docs/adr/013); with Force, for an operator, whatever the group was
// (docs/adr/014). The callers stop the replica first and start it again
// afterwards: shards through their host, the site catalog at start.
//
// The replicas given up by a recovery must never again exchange raft
// traffic with the group or rejoin it with their state: entries they hold
// may share an index and a term with different entries of the survivor.
// The generation is what keeps them apart: the survivor starts a new one,
// raft requests carry it (package transport refuses those of another
// generation), and a replica of an older generation is deleted before
// the node holding it may take the group back.
//
// Nothing here starts goroutines; every function works on the stores it
// is given, which the caller must not use concurrently.
package recovery
