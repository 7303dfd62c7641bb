package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/poll"
)

// TestLeaderHeartbeatTimeout: a replica runs raft with
// LeaderHeartbeatTimeout while it leads (rare heartbeats) and goes back to
// HeartbeatTimeout when it stops leading, so that as a follower it detects
// a failed leader as fast as before.
func TestLeaderHeartbeatTimeout(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.LeaderHeartbeatTimeout = time.Second
	g := openAlone(t, dir, cfg)
	defer g.Close()
	poll.Until(t, 10*time.Second, "the leader runs with LeaderHeartbeatTimeout", func() error {
		if !g.IsLeader() {
			return fmt.Errorf("not leader yet")
		}
		if rc := g.Raft().ReloadableConfig(); rc.HeartbeatTimeout != time.Second || rc.ElectionTimeout != time.Second {
			return fmt.Errorf("heartbeat timeout %v, election timeout %v", rc.HeartbeatTimeout, rc.ElectionTimeout)
		}
		return nil
	})
}
