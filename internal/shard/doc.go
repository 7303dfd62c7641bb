// Package shard runs the replica of one shard on this node: a hashicorp/raft
// group whose log lives in the node's write-ahead log and whose stable store
// in raft.db (storage.RaftLogs), whose snapshots are in a snapstore.Store
// on Config.FS, and whose state machine is fsm.FSM. A replica whose log
// does not continue its newest snapshot refuses to open.
//
// A Group offers the three things the request path needs: Propose (a
// replicated command, answered after commit and apply on this node),
// ReadBarrier (for linearizable reads) and WaitHLC (for causal
// reads that must not be served before the replica has caught up with the
// client's floor). Reads themselves go straight to storage through Read.
//
// Ownership: Open starts raft's goroutines and Close stops them; the group
// also owns a garbage-collection loop that proposes Collect commands while it
// is leader, and, for replica consistency checks (digest.go), a check loop
// that proposes DigestCheck commands, a digest worker that fingerprints the
// state the FSM captures at each of them, and one short-lived comparison
// per check. Close stops them all before it stops raft. Read refuses reads
// while a check has found the replica corrupt. Close is idempotent.
package shard
