// Package wal is a node's write-ahead log: the raft logs of all the raft
// groups the node hosts, interleaved in one append-only sequence of
// segment files, each preallocated (64 MiB by default). Log(group) returns a
// group's raft.LogStore.
//
// Every StoreLogs, DeleteRange and Drop becomes records (CRC-32C and
// length framed; see record.go) handed to one committer goroutine, owned
// by the WAL. It takes every request that arrived while the previous batch
// was being synced, writes them with one write and one fdatasync, then
// updates the in-memory index (group → index → segment, offset) and
// answers the callers: a call returns once its records are durable, and
// concurrent calls of different groups share one fdatasync. Deletions are
// records too, so replaying the segments in order rebuilds every group's
// exact entries. Entries are read back from the files (the page cache),
// never kept in memory.
//
// A segment is removed once it is the oldest and holds no live entry (only
// a prefix is ever removed, so a delete record always outlives the records
// it deleted). When there are more than MaxSegments segments, starting a
// new segment also copies the live entries of the oldest one into it, so
// that a group which stopped writing cannot pin old segments and make the
// log grow without bound.
//
// Open replays every segment. Only the last write can be incomplete
// (tail.go): damage at the end of the last segment with nothing valid
// after it, or zeroed sectors of that last write, is an interrupted write
// and is cut off with a warning. One fdatasync covers at most 1 MiB of
// records (a larger record alone), so zeroed sectors that valid records
// follow further than that are not part of the last write: ErrCorrupt.
// Each write begins with a mark record that numbers it and gives its
// length, so zeroed sectors that a later write follows (its mark, or a
// record past the end of the write that holds them) are not part of the
// last write either, however close to the end: ErrCorrupt; Open marks
// where it cut an interrupted write off. Damage that a valid record follows, in
// the same segment or a later one, fails Open with ErrCorrupt naming the
// segment and the offset. What follows the last good record of the last
// segment is overwritten with zeros, so nothing stale can follow the
// records appended next; a segment never shrinks, so one that holds
// records and is shorter than its preallocation was truncated, and Open
// refuses it (ErrCorrupt): the records cut off were acknowledged. A failed write or fdatasync makes the WAL
// refuse further writes until it is reopened; Failed reports it, and the
// errors of those writes match ErrFailed.
//
// Every file operation goes through Config.FS (package vfs; the real file
// system by default), so tests can run the WAL on a vfs.MemFS and take
// crash images, or fail chosen operations with vfs/errorfs. What makes a
// record durable is, in order: the segment's creation (the file is
// preallocated, its header written and fsynced, then the directory
// fsynced), the record's write and the batch's fdatasync; a segment's
// removal is followed by a directory fsync before the next one is
// removed. NoSync, and the wal-sync guard (internal/guards, test builds
// only), skip every one of these syncs.
package wal
