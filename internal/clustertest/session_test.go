package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// newClient returns a Go client for the nodes' client addresses.
func newClient(t *testing.T, edit func(*client.Config), nodes ...*Node) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	for _, n := range nodes {
		cfg.Endpoints = append(cfg.Endpoints, n.Srv.ClientAddr())
	}
	cfg.RetryBackoff = 10 * time.Millisecond
	if edit != nil {
		edit(&cfg)
	}
	cl, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// leaderAndFollower returns the node leading sh and one following it.
func leaderAndFollower(t *testing.T, c *Cluster, sh placement.Shard) (leader, follower *Node) {
	t.Helper()
	leader, follower = leaderAndFollowerOrNil(c, sh)
	if leader == nil || follower == nil {
		t.Fatalf("shard %s: leader %v follower %v", sh, leader, follower)
	}
	return leader, follower
}

// TestMonotonicReadsAfterTrim: a session that touched more keys than its
// token keeps per-key floors for must still never read an older version of
// a key it saw. The session writes a few keys of one shard, then every
// link into one follower of that shard is cut (one way: it still sends),
// so that follower stays behind; the session writes new versions of those
// keys, then enough keys of other shards that their floors are trimmed,
// and re-reads the first keys through the lagging follower while the cut
// still holds; the links heal a moment later. The follower must wait or
// hand the read to the leader.
//
// The lagging follower is n3, whose raft heartbeat timeout is longer than
// the cut, so it does not start elections while it hears nothing, and the
// site gossips with the WAN profile, so that it is not declared dead.
// With the floor wait turned off (guards.FloorWait), the follower serves
// the older version and the test fails.
func TestMonotonicReadsAfterTrim(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.GossipProfile = "wan"
		if cfg.NodeID == "n3" {
			cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout = time.Minute, time.Minute
		}
	})
	ctx := ctxT(t, 3*time.Minute)
	follower := c.Node("n3")
	router := follower.Srv.Router()
	// A target shard that n3 follows.
	var target placement.Shard
	poll.Until(t, time.Minute, "a shard n3 follows", func() error {
		shards, _ := router.Shards("default")
		for _, sh := range shards {
			if g := router.Local(sh); g != nil && !g.IsLeader() {
				target = sh
				return nil
			}
		}
		return fmt.Errorf("n3 leads every shard")
	})
	// Fillers come from shards n3 does not lead: those commit without
	// waiting for n3's late replies.
	var targets, fillers [][]byte
	for i := 0; len(targets) < 4 || len(fillers) < 80; i++ {
		k := []byte(fmt.Sprint("mr/", i))
		sh, _ := router.Shard("default", k)
		g := router.Local(sh)
		switch {
		case sh == target && len(targets) < 4:
			targets = append(targets, k)
		case sh != target && g != nil && !g.IsLeader() && len(fillers) < 80:
			fillers = append(fillers, k)
		}
	}
	// The session writes through the other nodes, then moves to the
	// lagging one (its token carried to a client of n3) to re-read.
	var others []*Node
	for _, n := range c.Live() {
		if n != follower {
			others = append(others, n)
		}
	}
	cl := newClient(t, nil, others...)
	for _, k := range targets {
		if _, err := cl.Put(ctx, k, []byte("v1")); err != nil {
			t.Fatal(err)
		}
	}
	// Let the follower apply v1 of every target (so it has something
	// older to return), then hold it behind and write v2.
	waitFollowerHas(t, ctx, follower, targets, "v1")
	// Nothing reaches the follower any more (from any node: the shard's
	// leadership may move while the site balances its leaders).
	for _, n := range c.Live() {
		if n != follower {
			c.Cut(n, follower)
		}
	}
	seen := map[string]client.Version{}
	for _, k := range targets {
		v, err := cl.Put(ctx, k, []byte("v2"))
		if err != nil {
			t.Fatal(err)
		}
		seen[string(k)] = v
	}
	// Newer versions of more than 64 keys of other shards push the
	// targets' floors out of the session's per-key floors; the session
	// reads them back through the leaders as well.
	var wg sync.WaitGroup
	errs := make(chan error, len(fillers))
	sem := make(chan struct{}, 16)
	for _, k := range fillers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := cl.Put(ctx, k, []byte("x")); err != nil {
				errs <- err
				return
			}
			if _, err := cl.Get(ctx, k, client.WithConsistency(client.Strong)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The follower is behind: a read without a session sees v1.
	for _, k := range targets {
		raw, err := follower.KV.Get(ctx, &kvv1.GetRequest{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		if string(raw.Value) != "v1" {
			t.Fatalf("%s: follower %s has %q although nothing reached it since v1", k, follower.ID, raw.Value)
		}
	}
	// The session's re-reads through the follower must not go back.
	reader := newClient(t, func(cfg *client.Config) {
		cfg.RequestTimeout, cfg.SessionToken = time.Minute, cl.SessionToken()
		cfg.RetryBackoff, cfg.MaxRetries = 100*time.Millisecond, 100
	}, follower)
	rerr := make(chan error, len(targets))
	for _, k := range targets {
		go func() {
			it, err := reader.Get(ctx, k)
			switch {
			case err != nil:
				rerr <- err
			case it.Version.Less(seen[string(k)]) || string(it.Value) != "v2":
				rerr <- fmt.Errorf("%s through follower %s: read %q at %v after the session saw %v (monotonic reads broken)", k, follower.ID, it.Value, it.Version, seen[string(k)])
			default:
				rerr <- nil
			}
		}()
	}
	// The re-reads are under way at the lagging follower (waiting, or
	// forwarded with the reply held); then the links heal.
	time.Sleep(time.Second)
	c.Heal()
	for range targets {
		if err := <-rerr; err != nil {
			t.Fatal(err)
		}
	}
}

// waitFollowerHas polls n until a floorless read of every key returns val.
func waitFollowerHas(t *testing.T, ctx context.Context, n *Node, keys [][]byte, val string) {
	t.Helper()
	for _, k := range keys {
		poll.Every(50*time.Millisecond).UntilContext(ctx, t, fmt.Sprintf("%s to apply %s=%s", n.ID, k, val), func() error {
			g, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: k})
			if err != nil {
				t.Fatal(err)
			}
			if string(g.Value) != val {
				return fmt.Errorf("it has %q", g.Value)
			}
			return nil
		})
	}
}
