package raftutil

import (
	"time"

	"github.com/causeway-db/causeway/internal/guards"
)

// MaxReplicationBackoff is the longest a leader of a group with the given
// heartbeat timeout waits between attempts to replicate to a follower it
// failed to reach: a quarter of the timeout (raft.Config's
// MaxReplicationBackoff, third_party/raft/FORK.md). Released, the wait
// doubled up to 10.24 s: a node back from an outage of ten seconds or
// more got no entries for up to ten more, while the site counted it as
// a healthy replica, and the next node to stop in a rolling restart left
// its groups without a quorum for that long.
func MaxReplicationBackoff(heartbeat time.Duration) time.Duration {
	if guards.Off(guards.ReplicationBackoffCap) {
		// Test-only: the released backoff, up to 10.24 s.
		return 0
	}
	return heartbeat / 4
}
