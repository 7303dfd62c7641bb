// Package storage is the only package that imports bbolt. A DB is one
// database file; a node runs two (see docs/adr/001): one holds the raft
// stable store of every hosted raft group (RaftStore; RaftLogs pairs it
// with the group's log in the write-ahead log of internal/wal, and moves
// logs that earlier versions kept in bbolt into it, docs/adr/008), the other the
// MVCC state of every hosted shard replica (ShardTx): versions of each key
// newest first, tombstones, the applied index and the request-id table that
// makes retried mutations apply once. Both carry the node identity that
// refuses foreign data directories.
//
// Writes go through a group committer: one goroutine, owned by DB, collects
// every Update call that arrives while the previous transaction is being
// fsync'ed and commits them together in one bbolt transaction. Raft log
// appends of all shards and the FSM applies of all shards therefore share
// fsyncs, which is what makes many small writes cheap. Update returns only
// after the data is on disk.
//
// Bucket names and key encodings are declared in keys.go and documented in
// docs/storage.md. Every byte slice handed out is a copy that outlives the
// transaction it came from.
package storage
