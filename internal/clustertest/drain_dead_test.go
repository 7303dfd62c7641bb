package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestDrainWhileANodeIsFreshlyDead: n3 is killed, and while it is inside
// its DeadGrace (so placement still counts it live) n2 is drained. Before
// guard remove-reachable, placement removed n2's voters at once, leaving
// every shard with {n1, n3}: a group whose quorum needs the dead n3, with
// no leader until n3 came back or its grace ran out, and writes failing
// meanwhile (seen on real processes for more than a minute). The drain
// now waits for n3's grace; every shard stays writable throughout.
func TestDrainWhileANodeIsFreshlyDead(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = 2 * time.Minute })
	ctx := ctxT(t, 3*time.Minute)
	n1, n3 := c.Node("n1"), c.Node("n3")
	c.Kill(n3)
	poll.Until(t, 60*time.Second, "gossip at n1 to report n3 down", func() error {
		for _, m := range n1.Srv.Members() {
			if m.NodeID == "n3" && (m.State == membership.StateDead || m.State == membership.StateLeft) {
				return nil
			}
		}
		return errors.New("n3 not reported down yet")
	})
	everyShardWritable(t, n1, 60*time.Second)
	if err := c.Drain(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	// The placement rounds that follow (one a second) must leave every
	// shard a quorum of live voters: write to every shard for a while.
	keys := keyPerShard(n1, "drain-dead/")
	end := time.Now().Add(8 * time.Second)
	for round := 0; time.Now().Before(end); round++ {
		for sh, k := range keys {
			if err := putWithin(ctx, n1, k, fmt.Sprint(round), 10*time.Second); err != nil {
				m := c.Map()
				t.Fatalf("round %d: shard %d not writable while n3 is in its grace and n2 drains: %v (its replicas: %v)", round, sh, err, replicasOf(m, sh))
			}
		}
	}
}

// putWithin writes key through n with a deadline of d.
func putWithin(ctx context.Context, n *Node, key, value string, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_, err := n.KV.Put(wctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(value)})
	return err
}

// replicasOf returns the replicas of the default keyspace's shard id in m.
func replicasOf(m placement.Map, id uint32) []placement.Replica {
	return m.Shards[placement.Shard{Keyspace: "default", ID: id}]
}
