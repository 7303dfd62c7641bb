package clustertest

import (
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/server"
)

// TestTwoVoterGroupsRecoverFromALostVoter: with two replicas per shard,
// every group is two voters, which lose their quorum with either one. A
// node is killed: the groups it shared go on with their survivor alone
// (placement.StepRecover), then grow back to two voters on the third node.
// Within the dead grace plus a minute every shard is writable again, and
// no acknowledged write is lost.
func TestTwoVoterGroupsRecoverFromALostVoter(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, func(cfg *server.Config) { cfg.Replicas = 2 })
	ctx := ctxT(t, 3*time.Minute)
	entry := c.Node("n1")
	// One key per shard, written before the kill.
	keys := keyPerShard(entry, "two/")
	for _, k := range keys {
		if _, err := entry.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte("before")}); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.Node("n2")
	c.Kill(victim)
	killed := time.Now()
	everyShardWritable(t, entry, victim.Cfg.DeadGrace+time.Minute)
	t.Logf("every shard writable %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	for _, k := range keys {
		g, err := entry.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		if err != nil || string(g.Value) != "before" {
			t.Fatalf("%s after the recovery: %q, %v (an acknowledged write is lost)", k, g.GetValue(), err)
		}
	}
	c.WaitSettled(2 * time.Minute)
}
