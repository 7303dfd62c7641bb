// Package server is the composition root of kvd: it builds every component
// of a node from a Config, starts them in dependency order (storage, shard
// groups, router, gRPC and HTTP listeners) and stops them in reverse.
//
// Data directory layout:
//
//	<data-dir>/raft.db               raft stable stores (term, vote) of every raft group
//	<data-dir>/wal/                  raft logs of every raft group (write-ahead log, docs/adr/008)
//	<data-dir>/state.db              MVCC state of every shard replica (derived, docs/adr/006)
//	<data-dir>/state.db.open         present while state.db is open: the boot id
//	<data-dir>/snapshots/<ks>/<n>/   raft snapshots of each shard group (internal/snapstore)
//	<data-dir>/snapshots/catalog/    raft snapshots of the site catalog
//
// wal/ and snapshots/ go through Config.FS (internal/vfs; the real file
// system unless a test sets a vfs.MemFS), the bbolt files never do.
//
// A data directory that holds anything else, or a database created by
// another node, is refused at start and never modified.
package server
