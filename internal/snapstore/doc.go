// Package snapstore is a raft.SnapshotStore whose files go through a
// vfs.FS, so that tests can run raft groups on a vfs.MemFS and take crash
// images of their snapshots.
//
// The on-disk layout is hashicorp/raft's FileSnapshotStore's, so existing
// data directories keep working (and an older binary reads what this one
// writes): under the store's directory, snapshots/<term>-<index>-<unix
// ms>/ holds meta.json (the raft.SnapshotMeta and a CRC-64 (ECMA) of the
// state, JSON) and state.bin (the FSM's snapshot). The Peers field, only
// read for snapshots older than version 1, is left empty.
//
// A snapshot is written in <name>.tmp/ and made durable before it is
// listed: state.bin is fsynced, meta.json written and fsynced, the
// temporary directory fsynced (so that both names in it are durable: the
// FileSnapshotStore skips this), renamed into place, and the snapshots
// directory fsynced. Only then does Close return, and raft truncates its
// log behind the snapshot after Close, so a crash can lose a snapshot only
// while the log still holds its entries. Older snapshots beyond Retain are
// removed after that; temporary directories left by a crash are removed
// when the store is opened. Open checks the state's size and CRC before
// returning it.
//
// Config.NoSync, and the snapshot-sync guard (internal/guards, test builds
// only), skip every one of these syncs.
//
// CheckLog verifies at start that a group's raft log continues its newest
// snapshot: otherwise raft would panic when it applies the missing
// entries, so the group refuses to start instead (ErrLogGap).
//
// A Store is safe for concurrent use; each sink belongs to the goroutine
// that created it (raft's snapshot goroutine).
package snapstore
