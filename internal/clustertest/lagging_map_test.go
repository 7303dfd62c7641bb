package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/host"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/shard"
)

// TestLaggingMapKeepsReplicas: n3's host reconciles with a copy of the
// placement map that lags the catalog leader's, one from before the
// leader gave n3 back its replica of a shard (the map a node holds when
// it comes back after it was declared dead, while the shard's leader
// already added it again and made it a voter). The replica, a voter that
// holds the shard's writes, is kept with its log: the catalog leader's map
// still assigns it. The bite of guard drop-confirm: with it off, n3
// deletes the replica on its own map alone (docs/adr/028).
func TestLaggingMapKeepsReplicas(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 2*time.Minute)
	n1, n3 := c.Node("n1"), c.Node("n3")
	keys := putPerShard(ctx, t, n1, "lag/", "v")

	// A shard n3 holds as a follower voter, with the key written to it.
	current, _ := n3.Srv.Catalog().Map()
	var sh placement.Shard
	for _, s := range current.SortedShards() {
		if g := n3.Srv.Host().Group(s); g != nil && !g.IsLeader() {
			sh = s
			break
		}
	}
	if sh.Keyspace == "" {
		t.Fatal("n3 leads every shard")
	}
	key := keys[sh.ID]
	g := n3.Srv.Host().Group(sh)
	waitFound(t, g, key)
	last := g.Raft().LastIndex()

	// The lagging map: the epoch before the current one, without n3 in
	// the shard. The catalog leader's map is current and assigns it.
	lag := current.Clone()
	lag.Epoch = current.Epoch - 1
	lag.Shards[sh] = slices.DeleteFunc(slices.Clone(current.Shards[sh]), func(r placement.Replica) bool { return r.Node == "n3" })
	err := n3.Srv.Host().Reconcile(lag)
	t.Logf("reconcile with the lagging map (epoch %d, the leader's %d): %v", lag.Epoch, c.Map().Epoch, err)
	if got := n3.Srv.Host().Group(sh); got != g {
		t.Fatalf("n3 deleted its replica of %s on a lagging map the catalog leader's contradicts (replica now %v)", sh, got)
	}
	if !errors.Is(err, host.ErrDropUnconfirmed) {
		t.Fatalf("reconcile: %v, want ErrDropUnconfirmed", err)
	}
	if now := g.Raft().LastIndex(); now < last {
		t.Fatalf("the replica's log went back from %d to %d", last, now)
	}
	if _, found, err := newestVersion(g, key); err != nil || !found {
		t.Fatalf("the kept replica lost %s: found %v, %v", key, found, err)
	}

	// The site goes on whole: n3's replica still takes the shard's writes.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = n1.KV.Put(wctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte("after")})
	cancel()
	if err != nil {
		t.Fatalf("put after: %v", err)
	}
	c.WaitSettled(time.Minute)
}

// waitFound waits until replica g holds key.
func waitFound(t *testing.T, g *shard.Group, key string) {
	t.Helper()
	poll.Until(t, 30*time.Second, fmt.Sprintf("%s on n3's replica of %s", key, g.ID()), func() error {
		_, found, err := newestVersion(g, key)
		if err == nil && !found {
			err = errors.New("not there yet")
		}
		return err
	})
}

// TestLaggingMapCreatesNoGroupAlone: n4's host reconciles with a copy of
// the placement map that lags, one in which n4 is the only replica of a
// shard it holds no replica of (the maps a node replays from its site
// catalog's log after a restart: the site's first node was the only
// replica of every shard, and a drained node holds none of them any
// more). The host creates no group of n4 alone: the catalog leader's map
// gives the shard to other nodes. The bite of guard bootstrap-confirm:
// with it off, n4 bootstraps a second group of the shard, of itself
// alone, which elects it at once; on real processes a drained node
// restarted under writes acknowledged writes in such groups and then
// deleted them with the replica.
func TestLaggingMapCreatesNoGroupAlone(t *testing.T) {
	c := New(t, 4, nil)
	ctx := ctxT(t, 2*time.Minute)
	c.WaitSettled(time.Minute)
	n1, n4 := c.Node("n1"), c.Node("n4")

	current, _ := n4.Srv.Catalog().Map()
	var sh placement.Shard
	for _, s := range current.SortedShards() {
		if n4.Srv.Host().Group(s) == nil {
			sh = s
			break
		}
	}
	if sh.Keyspace == "" {
		t.Fatal("n4 holds a replica of every shard")
	}
	lag := current.Clone()
	lag.Epoch = 1
	lag.Shards[sh] = []placement.Replica{{Node: "n4", Voter: true}}
	err := n4.Srv.Host().Reconcile(lag)
	t.Logf("reconcile with a lagging map that makes n4 the only replica of %s: %v", sh, err)
	if g := n4.Srv.Host().Group(sh); g != nil {
		t.Fatalf("n4 created a group of %s of itself alone (leader %v) on a lagging map the catalog leader's contradicts", sh, g.IsLeader())
	}
	if !errors.Is(err, host.ErrBootstrapUnconfirmed) {
		t.Fatalf("reconcile: %v, want ErrBootstrapUnconfirmed", err)
	}

	// The site goes on whole: a write of the shard through n4 reaches its
	// real group.
	key := keyPerShard(n4, "alone/")[sh.ID]
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = n4.KV.Put(wctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte("v")})
	cancel()
	if err != nil {
		t.Fatalf("put through n4: %v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n1.KV.Get(rctx, &kvv1.GetRequest{Key: []byte(key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil || !r.Found || string(r.Value) != "v" {
		t.Fatalf("STRONG read of %s through n1: %v, %v", key, r, err)
	}
}
