// Package server is the composition root of kvd: it builds every component
// of a node from a Config, starts them in dependency order (storage, shard
// groups, router, gRPC and HTTP listeners) and stops them in reverse.
// Run serves until its context ends or a component fails fatally (a failed
// write or sync of the raft log, a replica whose state machine stopped),
// then stops the node and returns that error; Ready reports such a node as
// not ready from the moment of the failure. Stop first ends the background
// loops (the host's reconciler, the catalog's leader loop, garbage
// collection), then drains requests in flight and closes the components.
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
// A data directory that holds anything else, a database created by
// another node, or a raft log damaged anywhere but in its last write, is
// refused at start and never modified.
package server
