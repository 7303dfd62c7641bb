// Package fsm is the deterministic state machine of one shard replica: the
// hashicorp/raft FSM that turns committed log entries into MVCC versions in
// storage.
//
// Commands are peer.v1.Command protobuf messages dispatched through one
// table (apply.go). Given the same log, every replica writes the same bytes:
// versions are derived only from the log (the proposer's HLC raised above the
// shard's newest version), and conditions (compare-and-swap) and request-id
// deduplication are decided here, not by the proposer. A replica that meets a
// command it does not understand stops instead of diverging.
//
// A DigestCheck command changes nothing; the batch that holds it is split
// so that it ends a storage transaction, and the Digest hook receives a
// read transaction on the state as of its index, the same state on every
// replica (docs/adr/012-replica-digests.md).
//
// Goroutines: hashicorp/raft calls Apply, ApplyBatch, Snapshot and Restore
// from its FSM goroutine, one at a time; FSMSnapshot.Persist runs on another
// goroutine while applies continue, reading a storage snapshot. Applied and
// the Watch channel may be used from any goroutine.
//
// Crash recovery: the applied index is written in the same transaction as
// the data it describes, so after a restart the FSM skips log entries it has
// already applied; raft is configured not to restore snapshots on start.
package fsm
