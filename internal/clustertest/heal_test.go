package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestPartitionedNodeRejoins: one node of a 3-node site is cut off from
// the others for longer than the dead grace and than gossip remembers a
// dead member, then the network heals. Without a restart, the site must
// come back whole: every node sees every other alive, the catalog has a
// leader, writes through every node succeed, and every shard is back to
// three voters.
func TestPartitionedNodeRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, nil)
	ctx := ctxT(t, 6*time.Minute)
	cut := c.Node("n3")
	c.Isolate(cut)
	// Past the dead grace (2 s: the others move n3's replicas away) and
	// past the local gossip profile's 15 s memory of dead members.
	// About 40 s on a quiet 2-core machine under -race; generous for a loaded one.
	poll.Until(t, 3*time.Minute, "n3 declared dead and its replicas moved", func() error {
		m := c.Node("n1").Srv.Catalog()
		mp, _ := m.Map()
		for sh, reps := range mp.Shards {
			for _, r := range reps {
				if string(r.Node) == "n3" {
					return fmt.Errorf("shard %s still has a replica on n3", sh)
				}
			}
		}
		return nil
	})
	time.Sleep(20 * time.Second) // hold the partition past gossip's memory
	c.Heal()
	healed := time.Now()
	poll.Until(t, 2*time.Minute, "the site back to full replication", func() error {
		for _, n := range c.Live() {
			for _, m := range n.Srv.Members() {
				if m.State != membership.StateAlive {
					return fmt.Errorf("%s sees %s as %s", n.ID, m.Name(), m.State)
				}
			}
			if len(n.Srv.Members()) != 3 {
				return fmt.Errorf("%s sees %d members", n.ID, len(n.Srv.Members()))
			}
		}
		return c.Settled()
	})
	for _, n := range c.Live() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.KV.Put(wctx, &kvv1.PutRequest{Key: []byte("heal/" + n.ID), Value: []byte("v")})
		cancel()
		if err != nil {
			t.Fatalf("write through %s after healing: %v", n.ID, err)
		}
	}
	t.Logf("site whole again %v after healing", time.Since(healed).Round(time.Second))
}
