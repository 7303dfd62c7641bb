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
// leadership of the shards and of the site catalog it leads to other
// nodes before it closes them (guard leader-hand-off). The site's
// heartbeat timeout is 8 s, so without the hand-off the other nodes elect
// no leader for those groups for at least 8 s after it closed them, and
// the shards take no write meanwhile; with it each has a leader on a live
// node about as soon as Stop returns (the test allows 4 s, Stop itself
// waits up to 3 s for the transfers).
func TestStoppedLeaderHandsOff(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 8*time.Second, 8*time.Second, 4*time.Second
	})
	c.WaitSettled(2 * time.Minute)
	c.WaitLeadersPreferred(time.Minute)
	// The node that leads the site catalog: its leadership is handed off
	// too (while the catalog has no leader, no node is ready).
	lead, _ := c.Node("n1").Srv.Catalog().Leader()
	cl := c.Node(lead)
	if cl == nil {
		t.Fatalf("catalog leader %q is not a node of the site", lead)
	}
	var led []placement.Shard
	for _, sh := range c.Map().SortedShards() {
		if g := cl.Srv.Router().Local(sh); g != nil && g.IsLeader() {
			led = append(led, sh)
		}
	}
	if len(led) == 0 {
		t.Fatalf("%s leads no shard", cl.ID)
	}
	c.Stop(cl)
	stopped := time.Now()
	poll.Every(10*time.Millisecond).Until(t, 4*time.Second, "a leader on a live node for the catalog and every shard it led", func() error {
		if id, _ := c.Live()[0].Srv.Catalog().Leader(); id == "" || id == cl.ID {
			return fmt.Errorf("the catalog has no leader on a live node (%q)", id)
		}
		for _, sh := range led {
			if l, _ := leaderAndFollowerOrNil(c, sh); l == nil {
				return fmt.Errorf("%s has no leader", sh)
			}
		}
		return nil
	})
	t.Logf("%d shards %s led, and the catalog, have a leader %v after its Stop returned", len(led), cl.ID, time.Since(stopped).Round(time.Millisecond))
}
