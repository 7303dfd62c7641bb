package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// Restarts of a whole site, or of nodes whose --join seeds are down: a
// node that restarts on its data finds its site by itself, through the
// gossip addresses of its site's nodes that its data records (the
// cluster configuration), and starts even when no one answers.

// oneMembership reports why the live nodes of c do not form one gossip
// membership yet: each must see every live node, itself included, alive.
func oneMembership(c *Cluster) error {
	live := c.Live()
	for _, n := range live {
		alive := map[string]bool{}
		for _, m := range n.Srv.Members() {
			if m.State == membership.StateAlive {
				alive[m.NodeID] = true
			}
		}
		for _, o := range live {
			if !alive[o.ID] {
				return fmt.Errorf("%s does not see %s alive (it sees %v)", n.ID, o.ID, n.Srv.Members())
			}
		}
	}
	return nil
}

// joinEvery sets a restarted node's --join to addrs.
func joinEvery(addrs ...string) func(*server.Config) {
	return func(cfg *server.Config) { cfg.Join = append([]string(nil), addrs...) }
}

// noJoin starts a restarted node the way a site's first node is started.
func noJoin(cfg *server.Config) { cfg.Join = nil }

// TestSiteRestartedFirstNodeLast: the three nodes of a site are killed;
// n3 and n2 start again with --join naming the three gossip addresses,
// then n1 the way the docs start a site's first node, without --join.
// n1 must not stay on its own: it joins the others through the
// addresses its data records (and their reconnectors try n1, which their
// --join names although they never saw it), and the site settles with
// every node. Before, n1 stayed alone for good, ready, holding nothing.
func TestSiteRestartedFirstNodeLast(t *testing.T) {
	c := New(t, 3, nil)
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	if len(n1.Cfg.Join) != 0 {
		t.Fatalf("n1 joins %v: the test needs the site's first node", n1.Cfg.Join)
	}
	ctx := ctxT(t, 3*time.Minute)
	keys := putPerShard(ctx, t, n1, "before/", "v")
	all := []string{n1.gossipAddr, n2.gossipAddr, n3.gossipAddr}
	lose(c, n1, n2, n3)

	c.Restart(n3, joinEvery(all...))
	c.Restart(n2, joinEvery(all...))
	c.Restart(n1, noJoin)
	restarted := time.Now()
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "one gossip membership of n1, n2 and n3", func() error { return oneMembership(c) })
	t.Logf("one gossip membership %v after n1 started", time.Since(restarted).Round(10*time.Millisecond))
	c.WaitSettled(time.Minute)
	readStrong(t, n1, keys, "v")
	putAll(t, n1, keyPerShard(n1, "after/"), "w", 30*time.Second)
}

// TestRestartWithDeadSeeds: a node that restarts on its data while every
// node its --join names is down starts all the same, and finds the
// members of its site that are up. n1 and n2 are killed, n3 stays up, n2
// starts with --join naming only n1: it must start and join n3. Then the
// whole site goes down and comes back with each --join naming only a node
// that is still down: every node starts (the first one alone), and they
// find one another as they come up.
func TestRestartWithDeadSeeds(t *testing.T) {
	c := New(t, 3, nil)
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	ctx := ctxT(t, 4*time.Minute)
	keys := putPerShard(ctx, t, n3, "before/", "v")

	lose(c, n1, n2)
	c.Restart(n2, joinEvery(n1.gossipAddr))
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "n2 and n3 in one gossip membership", func() error { return oneMembership(c) })
	everyShardWritable(t, n2, time.Minute)
	c.Restart(n1, noJoin)
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "one gossip membership of n1, n2 and n3", func() error { return oneMembership(c) })
	c.WaitSettled(time.Minute)
	readStrong(t, n2, keys, "v")

	// The whole site down; each node comes back naming only a node that is
	// still down.
	lose(c, n1, n2, n3)
	c.Restart(n3, joinEvery(n2.gossipAddr))
	// Alone, n3 cannot serve, and says why.
	if err := n3.Srv.Ready(); err == nil || !strings.Contains(err.Error(), "the site catalog has no leader: gossip shows none of its other voters (n1, n2) alive") {
		t.Fatalf("n3 alone: ready: %v; want the catalog without a leader and the voters gossip does not show", err)
	}
	c.Restart(n2, joinEvery(n1.gossipAddr))
	c.Restart(n1, noJoin)
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "one gossip membership of n1, n2 and n3", func() error { return oneMembership(c) })
	c.WaitSettled(time.Minute)
	readStrong(t, n1, keys, "v")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := n3.KV.Put(wctx, &kvv1.PutRequest{Key: []byte("after"), Value: []byte("w")}); err != nil {
		t.Fatalf("write through n3: %v", err)
	}
}

// readyz returns n's /readyz status code and body.
func readyz(t *testing.T, n *Node) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.Srv.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestGossipCutOffNodeSaysSo: n1's gossip is cut off from n2's and n3's
// while raft and the peer calls still pass, as in a site whose nodes
// started apart. n1 serves (its catalog has a leader; what it does not
// hold is forwarded), so it stays ready, but it does not hide that the
// site counts it as down: /readyz says so in a warning line, and
// causeway_membership_site_cut_off is 1. Once gossip passes again, the
// reconnector brings the three together and the warning goes.
func TestGossipCutOffNodeSaysSo(t *testing.T) {
	// No replica moves while n1 is down for the others.
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = 10 * time.Minute })
	n1 := c.Node("n1")
	gossipOf := map[string]faultnet.Endpoint{}
	for _, n := range c.Live() {
		ep := faultnet.Endpoint{Site: n.Cfg.Site, Node: n.ID + "-gossip"}
		c.Net.Register(n.gossipAddr, ep)
		gossipOf[n.ID] = ep
	}
	for _, o := range []*Node{c.Node("n2"), c.Node("n3")} {
		c.Net.Partition(n1.Endpoint(), gossipOf[o.ID])
		c.Net.Partition(o.Endpoint(), gossipOf["n1"])
	}
	poll.Every(100*time.Millisecond).Until(t, time.Minute, "n1 to say that gossip cut it off from its site", func() error {
		if g := gaugeValue(t, n1, "causeway_membership_site_cut_off", ""); g != 1 {
			return fmt.Errorf("causeway_membership_site_cut_off %v (n1 sees %v)", g, n1.Srv.Members())
		}
		code, body := readyz(t, n1)
		if code != http.StatusOK || !strings.Contains(body, "warning: gossip shows no other member of site s1") {
			return fmt.Errorf("/readyz: %d %q", code, body)
		}
		return nil
	})
	_, body := readyz(t, n1)
	t.Logf("n1 cut off: /readyz: %q", body)
	c.Heal()
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "one gossip membership of n1, n2 and n3", func() error { return oneMembership(c) })
	poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "n1's warning to go", func() error {
		if code, body := readyz(t, n1); code != http.StatusOK || strings.Contains(body, "warning") {
			return fmt.Errorf("/readyz: %d %q", code, body)
		}
		if g := gaugeValue(t, n1, "causeway_membership_site_cut_off", ""); g != 0 {
			return fmt.Errorf("causeway_membership_site_cut_off %v", g)
		}
		return nil
	})
}

// otherPorts restarts a node on new ports (the same data directory).
func otherPorts(cfg *server.Config) {
	cfg.ClientAddr, cfg.PeerAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
}

// recordedAt reports why n's copy of the cluster configuration does not
// record o at the addresses o runs on.
func recordedAt(n, o *Node) error {
	cfg, _ := n.Srv.Cluster().Config()
	rec, ok := cfg.Sites[o.Cfg.Site].Nodes[o.ID]
	switch {
	case !ok:
		return fmt.Errorf("%s's cluster configuration does not list %s", n.ID, o.ID)
	case rec.PeerAddr != o.peerAddr || rec.ClientAddr != o.clientAddr || rec.GossipAddr != o.gossipAddr:
		return fmt.Errorf("%s's cluster configuration records %s at peer %s, client %s, gossip %s; it runs at %s, %s, %s",
			n.ID, o.ID, rec.PeerAddr, rec.ClientAddr, rec.GossipAddr, o.peerAddr, o.clientAddr, o.gossipAddr)
	}
	return nil
}

// TestNodeRestartedOnOtherPorts: n3 restarts on its data with other
// client, peer and gossip ports. The cluster configuration must follow
// it, so that after the whole site goes down and every node starts
// without --join (n3 first), the nodes find one another through the
// addresses their data records. Before, the configuration kept n3's old
// addresses for good: the other sites would have routed to them, and n1
// and n2 looked for n3's gossip at its old port after a restart.
func TestNodeRestartedOnOtherPorts(t *testing.T) {
	c := New(t, 3, nil)
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	ctx := ctxT(t, 4*time.Minute)
	keys := putPerShard(ctx, t, n1, "before/", "v")
	old := n3.gossipAddr

	lose(c, n3)
	c.Restart(n3, otherPorts)
	if n3.gossipAddr == old {
		t.Fatalf("n3 restarted on its old gossip address %s", old)
	}
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "the cluster configuration records n3's new addresses on every node", func() error {
		for _, n := range []*Node{n1, n2, n3} {
			if err := recordedAt(n, n3); err != nil {
				return err
			}
		}
		return nil
	})
	c.WaitSettled(time.Minute)
	readStrong(t, n3, keys, "v")

	lose(c, n1, n2, n3)
	c.Restart(n3, noJoin)
	c.Restart(n2, noJoin)
	c.Restart(n1, noJoin)
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "one gossip membership of n1, n2 and n3", func() error { return oneMembership(c) })
	c.WaitSettled(time.Minute)
	readStrong(t, n3, keys, "v")
}

// TestNodeRestartedOnOtherPortsWithinTheDeadGrace: n3 stops cleanly and
// starts again on its data with other ports long before --dead-grace, so
// no replica of it is re-created. Its shards' raft configurations still
// named its old peer address: their leaders sent to nothing, n3's
// replicas stayed candidates for good (n3 never ready), and writes made
// afterwards never reached them. Each shard leader now moves the replica
// to the address n3 registers.
func TestNodeRestartedOnOtherPortsWithinTheDeadGrace(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = time.Hour })
	n1, n3 := c.Node("n1"), c.Node("n3")
	c.WaitSettled(time.Minute)
	putAll(t, n1, keyPerShard(n1, "before/"), "v", time.Minute)

	c.Stop(n3)
	c.Restart(n3, otherPorts)
	after := keyPerShard(n1, "after/")
	putAll(t, n1, after, "w", time.Minute)
	poll.Every(100*time.Millisecond).Until(t, time.Minute, "n3's replicas hold the writes made after its restart", func() error {
		for _, k := range after {
			if v, err := localValue(n3, k); err != nil || v != "w" {
				return fmt.Errorf("%q on n3: %q, %v", k, v, err)
			}
		}
		return nil
	})
}
