package shard

import (
	"errors"
	"time"

	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/vfs"
)

// Config configures every shard group of a node.
type Config struct {
	// SnapshotDir is the directory under which each group keeps its raft
	// snapshots (one subdirectory per group).
	SnapshotDir string
	// FS is the file system of SnapshotDir; nil means the real one. Tests
	// set a vfs.MemFS to take crash images.
	FS vfs.FS
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger a new one.
	SnapshotThreshold uint64
	// SnapshotThresholdBytes also triggers a snapshot once the entries
	// logged since the last one hold this many bytes, or as many as the
	// last snapshot if it is larger (zero: entries are counted only).
	// With large values, SnapshotThreshold entries are gigabytes.
	SnapshotThresholdBytes uint64
	// SnapshotInterval is how often raft checks SnapshotThresholdBytes;
	// SnapshotCountInterval how often it checks SnapshotThreshold (a
	// snapshot writes the whole shard: counted entries of a large shard
	// snapshot it at most this often; zero: at every SnapshotInterval).
	SnapshotInterval      time.Duration
	SnapshotCountInterval time.Duration
	// TrailingLogs is how many log entries are kept after a snapshot so
	// that slow followers can catch up without one; TrailingBytes bounds
	// their bytes (zero: no bound).
	TrailingLogs  uint64
	TrailingBytes uint64
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are raft's
	// timing knobs (see hashicorp/raft Config).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long raft waits before it sends a follower
	// the leader's commit index when no new entries flow (raft waits
	// between one and two CommitTimeouts). Followers learn that an entry
	// they hold committed from the transport's commit push as soon as the
	// leader applied it (transport.CommitPusher), so this only keeps them
	// in contact: it must stay well within HeartbeatTimeout and
	// LeaderLeaseTimeout. The node's transport may delay an idle group's
	// message by half a CommitTimeout to send it with other groups' (the
	// longest gap is then two and a half CommitTimeouts, 1.25 s by
	// default, against a 2 s HeartbeatTimeout and lease). Once a group is
	// quiet, its leader's node keeps the followers in contact with
	// keepalives and these messages are answered without being sent
	// (transport, quiet.go); they are sent again when keepalives fail.
	CommitTimeout time.Duration
	// LeaderHeartbeatTimeout is the HeartbeatTimeout a replica runs with
	// while it leads: raft's leader heartbeats every tenth to fifth of it.
	// Its followers keep HeartbeatTimeout to detect a failed leader, and
	// the CommitTimeout messages keep them in contact between heartbeats,
	// so an idle group exchanges a few messages a second instead of
	// twenty (docs/adr/020-idle-shards-and-the-write-path.md). Zero, or
	// not above HeartbeatTimeout, keeps HeartbeatTimeout for leaders too.
	LeaderHeartbeatTimeout time.Duration
	// ReadLeases lets the leader serve a STRONG read without a leadership
	// confirmation round while its followers' promises prove that no
	// other replica can lead (docs/adr/024-read-leases.md). Every replica
	// makes the promise whatever this says; a leader uses it only with
	// ReadLeases on.
	ReadLeases bool
	// LogCacheBytes bounds the bytes of log entries (data and
	// extensions) each replica keeps in memory, besides the write-ahead
	// log, for raft's replication and applies (at most 1,024 entries).
	// Zero means DefaultLogCacheBytes.
	LogCacheBytes int
	// MaxAppendEntries is the largest batch of log entries raft writes and
	// sends at once; it is also the FSM's largest apply batch.
	MaxAppendEntries int
	// VersionRetention is how long a version stays readable (History)
	// after a newer version shadowed it, and how long tombstones are kept.
	VersionRetention time.Duration
	// RequestRetention is how long request ids are remembered for
	// deduplicating retried mutations.
	RequestRetention time.Duration
	// GCInterval is how often the leader starts a garbage-collection pass.
	// Zero disables garbage collection.
	GCInterval time.Duration
	// GCBatchKeys is the most keys one Collect command visits.
	GCBatchKeys uint32
	// DigestInterval is how often the leader starts a replica consistency
	// check (every replica also takes part in one when it opens). Zero
	// turns checks off on this node: its replicas neither start checks nor
	// answer them.
	DigestInterval time.Duration
	// DigestTimeout is how long a replica waits for the other replicas'
	// digests at a check, and how long a leader lets a check it started
	// run before it starts another on request.
	DigestTimeout time.Duration
	// CloseInterval is how often a leader closes a timestamp on its shard
	// (a Close command) while reads need newer floors than its followers
	// applied (docs/adr/015-cross-session-causality.md); CloseDemand is
	// how long such a need keeps the cadence going. Idle shards propose
	// nothing. Zero CloseInterval closes only on demand, one at a time.
	CloseInterval time.Duration
	CloseDemand   time.Duration
}

// heartbeats returns the heartbeat timings of a group.
func (c Config) heartbeats() raftutil.Timings {
	return raftutil.Timings{HeartbeatTimeout: c.HeartbeatTimeout, ElectionTimeout: c.ElectionTimeout, LeaderHeartbeatTimeout: c.LeaderHeartbeatTimeout}
}

// DefaultConfig returns the production defaults (LAN timings).
func DefaultConfig() Config {
	return Config{
		SnapshotThreshold:      8192,
		SnapshotThresholdBytes: 32 << 20,
		SnapshotInterval:       10 * time.Second,
		SnapshotCountInterval:  2 * time.Minute,
		TrailingLogs:           10240,
		TrailingBytes:          8 << 20,
		HeartbeatTimeout:       2 * time.Second,
		ElectionTimeout:        2 * time.Second,
		LeaderLeaseTimeout:     2 * time.Second,
		CommitTimeout:          500 * time.Millisecond,
		LeaderHeartbeatTimeout: 30 * time.Second,
		ReadLeases:             true,
		MaxAppendEntries:       256,
		VersionRetention:       time.Hour,
		RequestRetention:       10 * time.Minute,
		GCInterval:             time.Minute,
		GCBatchKeys:            10000,
		DigestInterval:         5 * time.Minute,
		DigestTimeout:          30 * time.Second,
		CloseInterval:          25 * time.Millisecond,
		CloseDemand:            time.Second,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.SnapshotDir == "":
		return errors.New("shard: SnapshotDir is required")
	case c.SnapshotThreshold == 0:
		return errors.New("shard: SnapshotThreshold must be positive")
	case c.MaxAppendEntries < 1:
		return errors.New("shard: MaxAppendEntries must be positive")
	case c.LogCacheBytes < 0:
		return errors.New("shard: LogCacheBytes must not be negative")
	case c.VersionRetention < 0 || c.RequestRetention < 0 || c.GCInterval < 0:
		return errors.New("shard: retention and intervals must not be negative")
	case c.GCBatchKeys == 0:
		return errors.New("shard: GCBatchKeys must be positive")
	case c.LeaderHeartbeatTimeout < 0:
		return errors.New("shard: LeaderHeartbeatTimeout must not be negative")
	case c.CloseInterval < 0 || c.CloseDemand < 0:
		return errors.New("shard: CloseInterval and CloseDemand must not be negative")
	case c.DigestInterval < 0:
		return errors.New("shard: DigestInterval must not be negative")
	case c.DigestInterval > 0 && c.DigestTimeout <= 0:
		return errors.New("shard: DigestTimeout must be positive")
	}
	return nil
}
