// Package raftutil holds what the node's raft groups (shards, the site
// catalog, the cluster group) share in how they run hashicorp/raft.
package raftutil

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// Timings are the heartbeat timings of one raft group.
type Timings struct {
	// HeartbeatTimeout and ElectionTimeout are raft's, as a follower: how
	// long without a leader's message before it starts an election.
	HeartbeatTimeout, ElectionTimeout time.Duration
	// LeaderHeartbeatTimeout is the HeartbeatTimeout the replica runs with
	// while it leads: raft's leader heartbeats every tenth to fifth of it.
	// Its followers hear from it between heartbeats through the
	// CommitTimeout messages (docs/adr/020-idle-shards-and-the-write-path.md).
	LeaderHeartbeatTimeout time.Duration
}

// Slow reports whether t asks for slower leader heartbeats at all.
func (t Timings) Slow() bool { return t.LeaderHeartbeatTimeout > t.HeartbeatTimeout }

// LeaderHeartbeats switches r's HeartbeatTimeout to LeaderHeartbeatTimeout
// while r leads and back when it stops leading, until stop is closed. It
// consumes r.LeaderCh(), which nothing else may read. As a follower the
// replica detects a failed leader after HeartbeatTimeout as before: raft
// resets a follower's timer when the timeout shrinks.
func LeaderHeartbeats(r *raft.Raft, t Timings, stop <-chan struct{}, log *slog.Logger) {
	set := func(lead bool) {
		rc := r.ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = t.HeartbeatTimeout, t.ElectionTimeout
		if lead {
			rc.HeartbeatTimeout = t.LeaderHeartbeatTimeout
			rc.ElectionTimeout = max(rc.ElectionTimeout, rc.HeartbeatTimeout)
		}
		if err := r.ReloadConfig(rc); err != nil {
			log.Warn("setting the heartbeat timeout", "leader", lead, "err", err)
		}
	}
	leading := false
	for {
		select {
		case <-stop:
			return
		case lead := <-r.LeaderCh():
			if lead != leading {
				leading = lead
				set(lead)
			}
		}
	}
}
