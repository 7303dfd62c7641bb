package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestSmallerReplicasLeaderDoesNotShrinkShards: a node restarted with a
// smaller --replicas than the rest of its site leads the site catalog;
// the placement keeps the site's larger count (the nodes announce theirs
// in gossip): a node that joins afterwards gets replicas and every shard
// settles with 3 voters, not the leader's 2.
func TestSmallerReplicasLeaderDoesNotShrinkShards(t *testing.T) {
	c := New(t, 3, nil)
	lead, _ := c.Node("n1").Srv.Catalog().Leader()
	small := c.Node("n3")
	if lead == small.ID {
		small = c.Node("n2")
	}
	c.Stop(small)
	c.Restart(small, func(cfg *server.Config) { cfg.Replicas = 2 })
	c.WaitSettled(time.Minute)
	poll.Until(t, time.Minute, small.ID+" leads the site catalog", func() error {
		id, _ := small.Srv.Catalog().Leader()
		if id == small.ID {
			return nil
		}
		if l := c.Node(id); l != nil && !l.down {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = l.Srv.Catalog().HandOff(ctx)
		}
		return fmt.Errorf("the catalog leader is %q", id)
	})
	c.Add()
	c.WaitSettled(time.Minute)
	if id, _ := small.Srv.Catalog().Leader(); id != small.ID {
		t.Logf("the catalog leadership moved to %s meanwhile", id)
	}
}
