package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
)

// keyPerShard returns one key with prefix for every shard of the default
// keyspace, by shard id.
func keyPerShard(n *Node, prefix string) map[uint32]string {
	router := n.Srv.Router()
	shards, _ := router.Shards("default")
	keys := map[uint32]string{}
	for i := 0; len(keys) < len(shards); i++ {
		k := fmt.Sprint(prefix, i)
		sh, _ := router.Shard("default", []byte(k))
		if _, ok := keys[sh.ID]; !ok {
			keys[sh.ID] = k
		}
	}
	return keys
}

// putPerShard writes value to one key of every shard (keyPerShard's,
// with prefix) through n and returns the keys.
func putPerShard(ctx context.Context, t *testing.T, n *Node, prefix, value string) map[uint32]string {
	t.Helper()
	keys := keyPerShard(n, prefix)
	for _, k := range keys {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.KV.Put(wctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(value)})
		cancel()
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	return keys
}

// everyShardWritable polls until a write to every shard of the default
// keyspace succeeds through n, or fails the test after d.
func everyShardWritable(t *testing.T, n *Node, d time.Duration) {
	t.Helper()
	keys := keyPerShard(n, "probe/")
	deadline := time.Now().Add(d)
	for id, k := range keys {
		poll.Every(50*time.Millisecond).Until(t, time.Until(deadline), fmt.Sprintf("shard %d writable", id), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte("probe")})
			return err
		})
	}
}

// replicasOn counts the replicas (voters, learners) the map places on node.
func replicasOn(m placement.Map, node string) (voters, learners int) {
	for _, reps := range m.Shards {
		for _, r := range reps {
			if string(r.Node) == node {
				if r.Voter {
					voters++
				} else {
					learners++
				}
			}
		}
	}
	return voters, learners
}

// TestGrowFromOneNodeSurvivesAKill: a one-node site grows to three under
// load, and one of the new nodes is killed at several points of the
// growth: as soon as it holds a learner, and once it holds voters
// (TestLeaderKillUnderLoad kills a node of a settled site). In every case every shard is writable again within
// the dead grace plus a minute, and no acknowledged write is lost.
func TestGrowFromOneNodeSurvivesAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	for _, point := range []struct {
		name string
		when func(m placement.Map) bool
	}{
		{"learner", func(m placement.Map) bool { _, l := replicasOn(m, "n2"); return l > 0 }},
		{"voter", func(m placement.Map) bool { v, _ := replicasOn(m, "n2"); return v > 0 }},
	} {
		t.Run(point.name, func(t *testing.T) {
			c := New(t, 1, nil)
			t.Cleanup(func() {
				if t.Failed() {
					// What the catalog placed where, for a shard that
					// stayed unwritable.
					t.Logf("placement at the failure: %v", c.Map().Shards)
				}
			})
			w := startWriters(c, 4)
			defer func() { w.stop(); w.wg.Wait() }()
			w.waitProgress(t, 50, 30*time.Second)
			c.Add()
			c.Add()
			poll.Every(5*time.Millisecond).Until(t, time.Minute, "the kill point", func() error {
				if !point.when(c.Map()) {
					return fmt.Errorf("not yet: %v", c.Map().Shards)
				}
				return nil
			})
			victim := c.Node("n2")
			c.Kill(victim)
			killed := time.Now()
			everyShardWritable(t, c.Node("n1"), victim.Cfg.DeadGrace+time.Minute)
			t.Logf("every shard writable %v after killing n2 (%s)", time.Since(killed).Round(100*time.Millisecond), point.name)
			w.waitProgress(t, 50, time.Minute)
			w.stop()
			w.wg.Wait()
			c.WaitSettled(2 * time.Minute)
			w.verify(t, c)
		})
	}
}

// TestKillDuringDrain: a node is killed while another drains. Every shard
// is writable again within the dead grace plus a minute, and no
// acknowledged write is lost.
func TestKillDuringDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 4, nil)
	w := startWriters(c, 4)
	defer func() { w.stop(); w.wg.Wait() }()
	w.waitProgress(t, 50, 30*time.Second)
	v0, l0 := replicasOn(c.Map(), "n4")
	if err := c.Drain(ctxT(t, 10*time.Second), "n4"); err != nil {
		t.Fatal(err)
	}
	poll.Every(5*time.Millisecond).Until(t, time.Minute, "the drain under way", func() error {
		m := c.Map()
		if v, l := replicasOn(m, "n4"); v+l == v0+l0 {
			// Under way once some shard moved or is moving.
			for _, reps := range m.Shards {
				for _, r := range reps {
					if !r.Voter {
						return nil
					}
				}
			}
			return fmt.Errorf("n4 still holds %d voters and %d learners", v, l)
		}
		return nil
	})
	victim := c.Node("n2")
	c.Kill(victim)
	killed := time.Now()
	everyShardWritable(t, c.Node("n1"), victim.Cfg.DeadGrace+time.Minute)
	t.Logf("every shard writable %v after killing n2 during the drain", time.Since(killed).Round(100*time.Millisecond))
	w.waitProgress(t, 50, time.Minute)
	w.stop()
	w.wg.Wait()
	c.WaitSettled(2*time.Minute, "n4")
	w.verify(t, c)
}
