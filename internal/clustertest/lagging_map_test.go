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
