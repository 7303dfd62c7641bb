// Package vfs is the small file-system interface under the node's durable
// files: the raft write-ahead log (internal/wal) and the raft snapshot
// stores (internal/snapstore). It has two implementations:
//
//   - Default, the operating system's file system (package os), with
//     fdatasync and fallocate on Linux;
//   - MemFS, an in-memory file system that remembers what was made durable
//     and can produce the image a power loss would leave (CrashClone).
//
// Subpackage errorfs wraps either one to fail chosen operations.
//
// # The crash model of MemFS
//
// MemFS keeps, next to the current state, the durable state of every file
// and directory, and CrashClone returns a new MemFS holding only the
// durable state:
//
//   - A file's contents and size are durable as of its last Sync or
//     SyncData (through any handle of the file). Writes, truncations and
//     preallocations after that are lost; nothing of them survives, not
//     even a prefix (no torn writes).
//   - A directory's entries (the names and which file or directory each
//     one names) are durable as of the directory's last Sync (a handle
//     from OpenDir). Creating, removing or renaming a name is lost unless
//     the directory that holds the name is synced afterwards; syncing a
//     file does not make its name durable, and syncing a directory does
//     not make its own name durable in its parent.
//   - Rename is durable in each of the two directories separately: after
//     a rename whose directories were not synced, the image has the old
//     name (if it was durable), never the new one. When both names are in
//     one directory, one Sync of it makes the rename durable at once. When
//     they are in two directories and only one is synced, the image can
//     have both names or neither (a real file system would have one).
//   - A removed name whose directory was not synced comes back with its
//     durable contents.
//   - The root directory always exists.
//
// MkdirAllSync creates a directory path so that it survives a crash, by
// syncing the parent of every directory it creates. The WAL and the
// snapshot store go through it; code that uses plain MkdirAll loses the
// new directories (and everything in them) in a crash image.
//
// Every MemFS method is safe for concurrent use; one mutex serialises them,
// so CrashClone sees one instant. A File must not be used concurrently
// except through ReadAt and WriteAt (as with *os.File).
package vfs
