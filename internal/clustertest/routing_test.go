package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/poll"
)

// forwarded sums causeway_rpc_forwarded_total over the live nodes.
func forwarded(t *testing.T, c *Cluster) float64 {
	t.Helper()
	var sum float64
	for _, n := range c.Live() {
		sum += testutil.ToFloat64(metricVec(t, n.Srv.Registry(), "causeway_rpc_forwarded_total", ""))
	}
	return sum
}

// putBatch writes n keys (one per shard and more) and returns how many
// requests the site forwarded meanwhile.
func putBatch(t *testing.T, ctx context.Context, c *Cluster, cl *client.Client, prefix string, n int) float64 {
	t.Helper()
	before := forwarded(t, c)
	for i := 0; i < n; i++ {
		if _, err := cl.Put(ctx, []byte(fmt.Sprint(prefix, i)), []byte("v")); err != nil {
			t.Fatalf("put %s%d: %v", prefix, i, err)
		}
	}
	return forwarded(t, c) - before
}

// waitDirect polls until a batch of writes through cl reaches the leaders
// without forwarding.
func waitDirect(t *testing.T, ctx context.Context, c *Cluster, cl *client.Client, what string) {
	t.Helper()
	waitDirectWithin(t, ctx, c, cl, what, 30*time.Second)
}

// waitDirectWithin is waitDirect with its own bound.
func waitDirectWithin(t *testing.T, ctx context.Context, c *Cluster, cl *client.Client, what string, within time.Duration) {
	t.Helper()
	i := 0
	poll.Every(100*time.Millisecond).Until(t, within, what+": writes to go straight to the leaders", func() error {
		f := putBatch(t, ctx, c, cl, fmt.Sprint("route/", what, "/", i, "/"), 24)
		i++
		if f != 0 {
			var views []string
			for _, n := range c.Live() {
				for _, g := range n.Srv.Groups() {
					views = append(views, fmt.Sprintf("%s:%v leader=%v at %s id %s", n.ID, g.ID(), g.IsLeader(), g.LeaderAddr(), g.Leader()))
				}
			}
			start := time.Now()
			sr, err := cl.Shards(ctx, "")
			var table []string
			for _, si := range sr.GetShards() {
				table = append(table, fmt.Sprintf("%s/%d:%s", si.GetKeyspace(), si.GetShard(), si.GetLeader()))
			}
			return fmt.Errorf("writes still forwarded (%v in the last batch of 24); replicas: %v; Shards took %v (err %v): %v", f, views, time.Since(start), err, table)
		}
		return nil
	})
}

// leaderMap renders which live node leads each shard.
func leaderMap(c *Cluster) string {
	leaders := map[string]string{}
	for _, n := range c.Live() {
		for _, g := range n.Srv.Groups() {
			if g.IsLeader() {
				leaders[fmt.Sprint(g.ID())] = n.ID
			}
		}
	}
	return fmt.Sprint(leaders)
}

// waitLeadersSettled polls until every live node leads some shard and no
// leadership moved for 2 s (the site balances leadership after start).
func waitLeadersSettled(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	var last string
	stable := 0
	poll.Every(200*time.Millisecond).UntilContext(ctx, t, "shard leadership to settle over the nodes", func() error {
		leaders := map[string]string{}
		spread := true
		for _, n := range c.Live() {
			leads := 0
			for _, g := range n.Srv.Groups() {
				if g.IsLeader() {
					leads++
					leaders[fmt.Sprint(g.ID())] = n.ID
				}
			}
			spread = spread && leads > 0
		}
		cur := fmt.Sprint(leaders)
		if spread && cur == last {
			stable++
		} else {
			stable, last = 0, cur
		}
		if stable < 10 {
			return fmt.Errorf("leaders %s (spread over every node: %v), unchanged for %d polls", cur, spread, stable)
		}
		return nil
	})
}

// TestLeaderRouting: a leader-aware client sends writes and STRONG reads
// straight to the shard leader, so the site forwards none of them, where a
// client without routing has about two thirds forwarded; when leadership
// moves (a transfer, a killed node) calls keep succeeding and the client
// finds the new leaders.
func TestLeaderRouting(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 3*time.Minute)
	n1 := c.Live()[0]
	waitLeadersSettled(t, ctx, c)

	naive := newClient(t, func(cfg *client.Config) { cfg.DisableLeaderRouting = true }, n1)
	if f := putBatch(t, ctx, c, naive, "naive/", 60); f < 20 {
		t.Fatalf("client without routing: %v of 60 writes forwarded, want about 40", f)
	}

	routed := newClient(t, func(cfg *client.Config) {
		cfg.RouteRefresh = 200 * time.Millisecond
		// Enough retries to span an election after the kill below.
		cfg.MaxRetries = 30
	}, n1)
	waitDirect(t, ctx, c, routed, "start")
	// A leadership move by the site's balancer during the loop costs a
	// forward or two until the client learns of it: such a loop is run
	// again (up to three times).
	for attempt := 1; ; attempt++ {
		leadersBefore := leaderMap(c)
		before := forwarded(t, c)
		for i := 0; i < 60; i++ {
			k := []byte(fmt.Sprint("routed/", attempt, "/", i))
			if _, err := routed.Put(ctx, k, []byte("v")); err != nil {
				t.Fatal(err)
			}
			if _, err := routed.Get(ctx, k, client.WithConsistency(client.Strong)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := routed.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		f := forwarded(t, c) - before
		if f <= 2 {
			break
		}
		if moved := leaderMap(c) != leadersBefore; !moved || attempt == 3 {
			t.Fatalf("leader-aware client: %v of 180 writes and STRONG reads forwarded (leadership moved meanwhile: %v)", f, moved)
		}
	}
	// A pinned call stays on its endpoint (which forwards).
	before := forwarded(t, c)
	for i := 0; i < 30; i++ {
		if _, err := routed.Put(ctx, []byte(fmt.Sprint("pinned/", i)), []byte("v"), client.WithEndpoint(n1.Srv.ClientAddr())); err != nil {
			t.Fatal(err)
		}
	}
	if f := forwarded(t, c) - before; f < 5 {
		t.Fatalf("pinned writes: %v of 30 forwarded; they bypassed the pinned endpoint", f)
	}

	// Leadership transfer: writes keep succeeding, and the client follows.
	key := []byte("moving")
	sh, _ := n1.Srv.Router().Shard("default", key)
	leader, _ := leaderAndFollower(t, c, sh)
	if err := leader.Srv.Router().Local(sh).Raft().LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	for i := 0; i < 20; i++ {
		if _, err := routed.Put(ctx, key, []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("put after leadership transfer: %v", err)
		}
	}
	waitDirect(t, ctx, c, routed, "transfer")

	// A killed node (not the client's endpoint): calls to the shards it led
	// succeed once they have a new leader, and the client routes to those.
	var victim *Node
	for _, n := range c.Live() {
		if n != n1 && len(n.Srv.Groups()) > 0 {
			victim = n
		}
	}
	c.Kill(victim)
	for i := 0; i < 48; i++ {
		k := []byte(fmt.Sprint("after-kill/", i))
		if _, err := routed.Put(ctx, k, []byte("v")); err != nil {
			t.Fatalf("put after killing %s: %v", victim.ID, err)
		}
		if _, err := routed.Get(ctx, k, client.WithConsistency(client.Strong)); err != nil {
			t.Fatalf("strong get after killing %s: %v", victim.ID, err)
		}
	}
	// Under the race detector, some runs forward a few writes until the
	// catalog removes the dead node (30 s after it noticed).
	waitDirectWithin(t, ctx, c, routed, "kill", 90*time.Second)

	// The site's shard listing (what the client's routing table comes
	// from) names live leaders and the killed node's replicas unreachable.
	poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "Shards to name live leaders", func() error {
		sr, err := routed.Shards(ctx, "")
		if err != nil {
			return err
		}
		for _, si := range sr.GetShards() {
			if si.GetLeader() == "" || si.GetLeader() == victim.ID {
				return fmt.Errorf("shard %s/%d: leader %q", si.GetKeyspace(), si.GetShard(), si.GetLeader())
			}
			for _, r := range si.GetReplicas() {
				if r.GetNodeId() == victim.ID && r.GetState() != "unreachable" {
					return fmt.Errorf("shard %s/%d: killed node's replica %s", si.GetKeyspace(), si.GetShard(), r.GetState())
				}
			}
		}
		return nil
	})
}
