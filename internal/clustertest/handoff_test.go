package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestStoppedLeaderHandsOff: a node stopped cleanly (SIGTERM) hands the
// leadership of the shards it leads to other nodes before it closes them
// (guard leader-hand-off). The site's heartbeat timeout is 8 s, so
// without the hand-off the other nodes elect no leader for those shards
// for at least 8 s after n2 closed them, and they take no write
// meanwhile; with it each has a leader on a live node about as soon as
// Stop returns (the test allows 4 s, Stop itself waits up to 3 s for the
// transfers).
func TestStoppedLeaderHandsOff(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 8*time.Second, 8*time.Second, 4*time.Second
	})
	c.WaitSettled(2 * time.Minute)
	c.WaitLeadersPreferred(time.Minute)
	n2 := c.Node("n2")
	var led []placement.Shard
	for _, sh := range c.Map().SortedShards() {
		if g := n2.Srv.Router().Local(sh); g != nil && g.IsLeader() {
			led = append(led, sh)
		}
	}
	if len(led) == 0 {
		t.Fatal("n2 leads no shard")
	}
	c.Stop(n2)
	stopped := time.Now()
	poll.Every(10*time.Millisecond).Until(t, 4*time.Second, "a leader on a live node for every shard n2 led", func() error {
		for _, sh := range led {
			if l, _ := leaderAndFollowerOrNil(c, sh); l == nil {
				return fmt.Errorf("%s has no leader", sh)
			}
		}
		return nil
	})
	t.Logf("%d shards n2 led have a leader %v after its Stop returned", len(led), time.Since(stopped).Round(time.Millisecond))
}
