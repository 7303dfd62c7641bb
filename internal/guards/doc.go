// Package guards holds the test-only switches that turn off one safety
// mechanism at a time, so that a test can show the mechanism is needed:
// with the guard off, the production code path must produce a violation
// that a checker reports (docs/testing.md lists each guard with the test
// that catches it).
//
// In a normal build every guard is on and Off is a constant false, so the
// checks compile away. Only a build with the causeway_guards tag can turn
// a guard off, through the CAUSEWAY_GUARDS_OFF environment variable (a
// comma-separated list of guard names, read once at start):
//
//	CAUSEWAY_GUARDS_OFF=read-barrier go test -tags causeway_guards -run TestX ./internal/clustertest
//
// scripts/bites.sh runs each guard's catching tests that way and fails if
// any of them passes.
package guards

// Guard names one safety mechanism.
type Guard int

// The guards.
const (
	// ReadBarrier is the leader's leadership confirmation before a STRONG
	// read (shard.Group.ReadBarrier).
	ReadBarrier Guard = iota + 1
	// FloorWait is a replica's wait until it has applied the session's
	// floor before it serves a CAUSAL read (shard.Group.WaitHLC).
	FloorWait
	// WALSync is the fdatasync of the raft write-ahead log.
	WALSync
	// SnapshotSync is the fsync of raft snapshot files and their
	// directories.
	SnapshotSync
	// CausalFloor raises every CAUSAL read's floor to the session's
	// PastHLC, which carries causality across sessions
	// (router.readFloors).
	CausalFloor
	// GCFrontier bounds garbage collection by the frontier its command
	// carries, below which no other site can still deliver a write.
	GCFrontier
	// DependencyWait holds a remote update at a site until the updates
	// it depends on are applied there (geo.Service.Ship).
	DependencyWait
	// SessionArrival holds a session that comes from another site until
	// that site applied its causal past (router.Arrive).
	SessionArrival
	// RequestDedupe answers a retried compare-and-swap whose request id
	// was applied with its first outcome, not with a version mismatch
	// (router.CASFailFast).
	RequestDedupe
	// SnapshotCut cuts a GetTxn's reads at one stamp on every shard
	// (router.GetTxn); off, each key is read at its newest version.
	SnapshotCut
	// CommitPush is the leader transport's push of the commit index to a
	// follower that holds an applied entry (transport.CommitPusher); off,
	// a follower learns commits only from raft's next message.
	CommitPush
	// LeaderToAlive moves shard leadership, when the catalog balances it,
	// only to nodes gossip reports alive (catalog.leaderTargets); off, a
	// node within its DeadGrace may be picked, and each transfer to it
	// blocks the shard's writes.
	LeaderToAlive
	// LateBatch takes a batch from a write's origin for the sign of a
	// replica that lost its data only if its writes reuse sequence
	// numbers this site applied with newer HLCs (geo.Service.Ship); off,
	// any batch whose sequence is behind this site's progress (a late
	// one, which crossed a partition) has the origin repaired whole.
	LateBatch
	// LeaderCaughtUp lets a shard leader ship, set chains and run
	// anti-entropy only once it applied what its log committed
	// (geo.Service.reconcile); off, a new leader that lags compares a
	// stale progress of its own site's writes with the next site's.
	LeaderCaughtUp
	// QuietConfirmed answers a quiet group's raft message to a follower
	// in the leader's transport only while that follower's node answered
	// a keepalive for the group lately (transport, quiet.go); off, it is
	// answered even when the follower is gone, and the leader never loses
	// its lease.
	QuietConfirmed
	// QuietCommit wakes a leader's raft replication that waits quietly
	// (transport, quiet.go; third_party/raft/FORK.md) when the commit
	// index advances, so the follower learns that its last entries
	// committed; off, a follower of an idle group may not apply them
	// until the next write.
	QuietCommit
	// QuietLogCheck counts a keepalive's answer as contact with a quiet
	// group's follower only if the follower's log still reaches the last
	// entry it acknowledged in the term (transport, quiet.go); off, a
	// follower whose replica was opened again empty answers keepalives
	// with success, the leader's replication waits quietly on it and it
	// never gets the log back while the group stays idle.
	QuietLogCheck
	// LeaderAppend has a shard leader that stores new entries in parallel
	// with their replication (raft.Config.ParallelLeaderAppend,
	// third_party/raft/FORK.md) count its own copy toward their commit
	// only once its log write returned; off, it counts it at once, and a
	// write can be acknowledged with fewer durable copies than a quorum.
	LeaderAppend
	// StateOpenReads reads a shard that has applies in the state
	// database's open transaction (deferred commits) through that
	// transaction (storage.DB.ViewShard); off, such a read sees the last
	// commit, without writes that were already acknowledged.
	StateOpenReads
	// StateFlush commits the state database's open transaction before a
	// read-only transaction that must hold every apply (storage.DB.View,
	// BeginRead: raft snapshots, consistency digests); off, a snapshot
	// misses the applies since the last commit.
	StateFlush
	// StateFailStop fails the state database for good when an apply or a
	// commit of its open transaction fails (storage.ErrFailed); off, the
	// rolled-back applies go unnoticed and reads serve the state before
	// them.
	StateFailStop
	// RequestIndexRollback drops the in-memory request-id indexes when a
	// read-write transaction of the state database fails, so they are
	// rebuilt from what was committed (storage, docs/adr/022); off, an
	// index keeps what the failed transaction did to it and a retry whose
	// record is still stored is applied again.
	RequestIndexRollback
	// RecoveryConfigCheck refuses to recover a group that lost a voter of
	// two while another replica holds a raft configuration with a voter
	// the survivor's lacks (catalog.recoveryLost, docs/adr/023); off, the
	// survivor goes on alone and entries the lost voter committed with a
	// learner it promoted are lost.
	RecoveryConfigCheck
	// LeaseExpiry serves a STRONG read on a shard leader's read lease only
	// while a quorum's promises have not run out (shard.Group.ReadBarrier,
	// docs/adr/024); off, any answer of the term holds the lease, and a
	// leader cut off from its followers serves reads while another leads.
	LeaseExpiry
	// LeaseTransfer voids a leader's read lease for the term in which it
	// sent a leadership transfer (transport, lease.go); off, the lease
	// holds while the transfer's target, whose votes bypass the voters'
	// known leader, is elected.
	LeaseTransfer
	// StaleTransfer refuses a leadership transfer of an older term than
	// the receiving replica's (transport, lease.go); off, a transfer a
	// deposed leader started elects its target at once, under the current
	// leader's lease.
	StaleTransfer
	// VoteHold refuses a restarted replica's votes, but a transfer's, for
	// its lease promise (transport, lease.go); off, a restarted follower
	// votes at once for another candidate although its leader counts on
	// its promise.
	VoteHold
	// FreshIdentity refuses to start a node on a new data directory under
	// a node id its site knows as a voter of the catalog or of a shard
	// (server.checkFreshIdentity, docs/adr/027); off, a node that lost
	// its data rejoins its groups as a voter without their votes and logs.
	FreshIdentity
	// DropConfirm deletes a replica that this node's copy of the
	// placement map no longer assigns to it only once the catalog
	// leader's map, as new, does not either (host.confirmDrops,
	// docs/adr/028); off, a node whose map lags deletes a replica its
	// group counts on.
	DropConfirm
	// BootstrapConfirm creates a shard group of this node alone, which its
	// copy of the placement map makes the shard's only voter, only once
	// the catalog leader's map does too (host.confirmBootstrap); off, a
	// node that restarts replaying old maps creates groups of itself
	// alone for shards its site gave to other nodes, and acknowledges
	// writes there that it deletes with the replica.
	BootstrapConfirm
	// SiteIncarnation refuses raft traffic of the site's groups between
	// nodes of different incarnations of the site (transport,
	// incarnation.go; docs/adr/029); off, a node that lost its data and
	// bootstrapped a new site at an old member's address takes the old
	// site's raft messages into its new groups.
	SiteIncarnation
	// NodeRemoveCheck refuses to remove a node from its site for good
	// (catalog.RemoveNode, docs/adr/030) while gossip reports it alive or
	// suspect, the placement map assigns it a replica, or it votes in the
	// site catalog; off, a node the site still counts on is removed, and
	// a live one is stopped.
	NodeRemoveCheck
	// CASTurn makes the compare-and-swaps of one key that expect the same
	// version take turns on the leader (router.CASTurn): at most one of
	// them can succeed, and the others, checked again once it applied,
	// are answered without a log entry; off, every one of them spends a
	// log entry on its mismatch.
	CASTurn
	// StateChecksum verifies the checksum of every version the state
	// database reads, and of all of them when it opens (storage.checkValue,
	// docs/adr/021); off, a byte of a stored value that the disk changed is
	// served as if it had been written.
	StateChecksum
	// RemoveSiteCheck refuses to remove a site that the answering node
	// cannot reach from a keyspace without force (rpc.Geo.SetKeyspaceSites):
	// writes it acknowledged and has not shipped would stay on it; off,
	// the removal goes through.
	RemoveSiteCheck
	// ClusterSession refuses a session token that another cluster
	// answered (router.Arrive, docs/adr/009); off, a session of another
	// cluster whose site names match is served here, its floors taken for
	// this cluster's versions.
	ClusterSession
	// LeaderReach moves shard leadership away from a node that reaches
	// fewer other sites than another voter of the shard (catalog
	// leaderTargets, docs/adr/031); off, a node cut off from the other
	// sites keeps leading its shards, whose writes then stay at its site.
	LeaderReach
	// LogKept refuses to open a replica whose raft log lost entries: a gap
	// after the newest snapshot, or, for its group's only voter, entries
	// the state database applied beyond the log's end (shard.checkLogKept);
	// off, the node starts, and new writes are numbered over the lost ones
	// and skipped as applied.
	LogKept
	// RestartGrace gives a registered node that gossip has not reported
	// since this node started its dead grace from the first placement
	// round that missed it (catalog.unseenSince); off, after a whole site
	// restarts, a node not back yet counts as dead at once and loses
	// every replica within seconds.
	RestartGrace
	// ClockAhead refuses a timestamp a client sends (session token, GetTxn
	// snapshot) further ahead of the node's clock than MaxClockAhead
	// (router.checkAhead); off, a forged token moves the node's clock, and
	// near 2^64 it wraps and numbers new writes below old ones.
	ClockAhead
	// WALLength refuses a write-ahead log segment that holds records and
	// is shorter than it was preallocated to: it was truncated, and the
	// records cut off its end were acknowledged (internal/wal).
	WALLength
	// LeaderHandOff makes a stopping node transfer the leadership of the
	// shards, the site catalog and the cluster group it leads before it
	// closes them (server.Stop); off, they have no leader until an
	// election timeout has passed.
	LeaderHandOff
	// StopRefusesLeader makes a stopping node refuse leadership
	// (transport.Network.RefuseLeadership): a leadership transfer to it
	// fails, and its replicas start no election; off, the site catalog's
	// leader balancing hands shards back to it while it finishes its
	// requests in flight, and they have no leader after it exits until an
	// election timeout has passed.
	StopRefusesLeader
	// ReplicationBackoffCap caps a leader's wait between attempts to
	// replicate to a follower it failed to reach at a quarter of the
	// heartbeat timeout (raftutil.MaxReplicationBackoff); off, the wait
	// doubles up to 10.24 s, and a follower back from an outage gets no
	// entries for that long.
	ReplicationBackoffCap
	// RemoveReachable removes a live voter of a shard (draining, or moved
	// away) only when the voters left that gossip reports alive are a
	// majority: a node dead for less than its DeadGrace still counts as
	// live for placement, and a drain then gave its shards a quorum that
	// included the dead node (placement.PlanReachable).
	RemoveReachable
	// SiteGone refuses to remove from the cluster a site that answers the
	// serving node (rpc.Geo.RemoveSite, docs/adr/035); off, a running
	// site is removed and its nodes stop.
	SiteGone
	// LogHold holds the votes and campaigns of a replica whose log lost
	// entries its state database applied (a write-ahead log tail zeroed
	// or cut) until its log holds them again (transport loghold.go); off,
	// it votes at once and a leader without committed entries may be
	// elected.
	LogHold
	// PeerAddressInUse refuses to start a node on a new data directory
	// whose advertised peer address is that of another node gossip
	// reports alive and that answers there (server.checkPeerAddress); off,
	// the node starts, and its site takes it for the live node's
	// replacement and drops the live node from the cluster configuration.
	PeerAddressInUse
	// WALLastWrite refuses a write-ahead log whose zeroed sectors valid
	// records follow further than one write makes durable (internal/wal,
	// checkTail); off, they are taken for lost sectors of the interrupted
	// last write, and every acknowledged record after them is cut off.
	WALLastWrite
	// WALWriteMarks refuses a write-ahead log whose damage a later write
	// follows: a mark record that begins a write after it, or a valid
	// record past the end of the write that holds it, or, in a segment
	// before the last, the records of its last write ending early
	// (internal/wal, checkTail and checkClean); off, zeroed sectors of an
	// earlier, synced write within 1 MiB of the log's end are taken for
	// lost sectors of the interrupted last write, and the acknowledged
	// records after them are cut off.
	WALWriteMarks
	// TxnFresh takes a GetTxn's snapshot at the present, at least every
	// HLC this site can have stamped when the call arrived
	// (router.freshSnapshot); off, the snapshot is the smallest newest
	// HLC of the node's replicas of the shards read, which an idle shard
	// holds back.
	TxnFresh
	// RaftDBFailStop stops the node when a commit of raft.db, where raft
	// saves its terms and votes, fails to write or sync the file
	// (storage.DB.WriteFailed); off, the failure goes unnoticed, and a
	// shard replica that cannot save a newer term stays in its group
	// unable to follow that term's leader.
	RaftDBFailStop
	// JoinGate refuses reads of a keyspace at a site that joined it after
	// its creation until every shard has the join repair of every other
	// site it needs (router.CheckJoined); off, the site serves what each
	// shard's repair brought so far, a version before its dependency on
	// another shard.
	JoinGate
)

var names = map[Guard]string{
	ReadBarrier:           "read-barrier",
	FloorWait:             "floor-wait",
	WALSync:               "wal-sync",
	SnapshotSync:          "snapshot-sync",
	CausalFloor:           "causal-floor",
	GCFrontier:            "gc-frontier",
	DependencyWait:        "dependency-wait",
	SessionArrival:        "session-arrival",
	SnapshotCut:           "snapshot-cut",
	CommitPush:            "commit-push",
	LeaderToAlive:         "leader-to-alive",
	RequestDedupe:         "request-dedupe",
	LateBatch:             "late-batch",
	LeaderCaughtUp:        "leader-caught-up",
	QuietConfirmed:        "quiet-confirmed",
	QuietCommit:           "quiet-commit",
	QuietLogCheck:         "quiet-log-check",
	LeaderAppend:          "leader-append",
	StateOpenReads:        "state-open-reads",
	StateFlush:            "state-flush",
	StateFailStop:         "state-fail-stop",
	RequestIndexRollback:  "request-index-rollback",
	RecoveryConfigCheck:   "recovery-config-check",
	LeaseExpiry:           "lease-expiry",
	LeaseTransfer:         "lease-transfer",
	StaleTransfer:         "stale-transfer",
	VoteHold:              "vote-hold",
	FreshIdentity:         "fresh-identity",
	DropConfirm:           "drop-confirm",
	BootstrapConfirm:      "bootstrap-confirm",
	SiteIncarnation:       "site-incarnation",
	NodeRemoveCheck:       "node-remove-check",
	CASTurn:               "cas-turn",
	StateChecksum:         "state-checksum",
	RemoveSiteCheck:       "remove-site-check",
	ClusterSession:        "cluster-session",
	LeaderReach:           "leader-reach",
	LogKept:               "log-kept",
	RestartGrace:          "restart-grace",
	ClockAhead:            "clock-ahead",
	WALLength:             "wal-length",
	WALLastWrite:          "wal-last-write",
	WALWriteMarks:         "wal-write-marks",
	LeaderHandOff:         "leader-hand-off",
	StopRefusesLeader:     "stop-refuses-leader",
	ReplicationBackoffCap: "replication-backoff-cap",
	RemoveReachable:       "remove-reachable",
	SiteGone:              "site-gone",
	LogHold:               "log-hold",
	PeerAddressInUse:      "peer-address-in-use",
	TxnFresh:              "txn-fresh",
	RaftDBFailStop:        "raft-db-fail-stop",
	JoinGate:              "join-gate",
}

// String returns the guard's name, as CAUSEWAY_GUARDS_OFF spells it.
func (g Guard) String() string {
	if n, ok := names[g]; ok {
		return n
	}
	return "unknown"
}

// All returns every guard.
func All() []Guard {
	return []Guard{ReadBarrier, FloorWait, WALSync, SnapshotSync, CausalFloor, GCFrontier, DependencyWait, SessionArrival, SnapshotCut, RequestDedupe, CommitPush, LeaderToAlive, LateBatch, LeaderCaughtUp, QuietConfirmed, QuietCommit, QuietLogCheck, LeaderAppend, StateOpenReads, StateFlush, StateFailStop, RequestIndexRollback, RecoveryConfigCheck, LeaseExpiry, LeaseTransfer, StaleTransfer, VoteHold, FreshIdentity, DropConfirm, BootstrapConfirm, SiteIncarnation, NodeRemoveCheck, CASTurn, StateChecksum, RemoveSiteCheck, ClusterSession, LeaderReach, LogKept, RestartGrace, ClockAhead, WALLength, LeaderHandOff, RemoveReachable, SiteGone, LogHold, PeerAddressInUse, WALLastWrite, TxnFresh, RaftDBFailStop, JoinGate, WALWriteMarks, StopRefusesLeader, ReplicationBackoffCap}
}

// EnvVar is the environment variable that lists the guards to turn off in
// a causeway_guards build.
const EnvVar = "CAUSEWAY_GUARDS_OFF"
