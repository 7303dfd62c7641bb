// Package causalcheck checks a recorded history of key-value operations for
// causal+ consistency: the session guarantees (read-your-writes, monotonic
// reads, monotonic writes, writes-follow-reads), causality across sessions
// (including mutually consistent multi-key reads), reads of values that were
// never written or whose write failed, and convergence of the replicas under
// last-writer-wins. It is what the randomized, multi-site and end-to-end
// tests check their histories with.
//
// The checker is pure: Check takes a []Op (and optionally the final state of
// every replica) and returns a Result; it does no I/O, reads no clock and
// uses no randomness, so the same history always yields the same report. A
// Recorder collects the history from concurrent clients; it reads time only
// through the function it is given.
//
// # The model
//
// A session is a sequential client: its operations do not overlap in time,
// and its program order is the order of its operations in the history (Check
// rejects a history where that order disagrees with their start and end
// times). Start and End are int64 nanoseconds on any clock the test chooses;
// they are used for that validation and for the report only.
//
// A write (Put or Delete; a delete writes a tombstone) is identified by its
// key and Version, an (HLC, site) pair; versions are totally ordered and
// the larger one wins (last-writer-wins). Two writes of one key never
// share a version: when they do, the history has a DuplicateVersion
// violation. Writes of different keys may (Causeway numbers versions per
// shard). A read returns a version (the zero version: the key was never
// written) and reads from the write that made it. Causality is program order plus reads-from, transitively:
// the causal past of an operation holds everything before it in its session
// and the causal past of every write it, or its session before it, read.
// For every key, a read must return a version at least as new as every
// write of that key in its causal past, and a write must get a version newer
// than them (LWW must let the causally later write win).
//
// Outcomes. An OK write took effect. A Failed write did not: reading it is a
// ReadFailedWrite violation. An Unknown write (a timeout) may or may not
// have: it took effect if some read returned it; otherwise it constrains
// nothing. A write that took effect without its session learning so is in
// the causal past of the operations that read it (and of everything after
// them), and its own causal past is its session's before it; but it is not
// in the causal past of its session's later operations unless they read it,
// since the database may apply it after them. Reads whose outcome is not OK
// returned nothing and are not checked.
//
// A write whose outcome is not OK may carry the zero version (the client
// never learned its version). A read is then attributed to it by key and
// value: the checker takes the one such write of the key that wrote the
// value read; when several could have (same key and value), the read is
// accepted but adds nothing to the causal past. Tests that record unknown
// outcomes should therefore write unique values. A read's value must equal
// the value its version wrote (empty for a tombstone).
//
// # Violations
//
// A read or write that contradicts its causal past is classified by where
// the contradicting write came from: the session's own earlier write
// (ReadYourWrites for a read, MonotonicWrites for a write), the session's own
// earlier read of the key (MonotonicReads, WritesFollowReads), or anything
// else reached through other sessions (Causal, which also covers
// writes-follow-reads as other sessions observe it). A multi-key read whose
// results contradict each other's causal past is a FracturedRead. Each
// Violation lists the operations involved, from the oldest cause through the
// chain of reads that carried it to the offending operation, each rendered
// on one line.
//
// Check runs in O(n·s) time for n operations and s sessions, plus a binary
// search per session that wrote the key for every read, and keeps O(s)
// words for every write that some read returned.
package causalcheck
