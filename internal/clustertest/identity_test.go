package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestWipedNodeRefusesItsOldID: n3 of a 3-node site loses its data
// directory (a wiped disk) and is started again on an empty one under its
// old id, joining the site. It is a voter of the site catalog and of every
// shard, with no votes and no log: Start refuses with ErrLostIdentity
// before it opens a raft group, the data directory stays empty, and the
// site goes on taking writes. Started on that directory under a new id, on
// the same host and ports, the same machine joins as a new node and gets
// replicas again: the site removes n3, whose address it took, from the
// catalog's group and from each shard first (it stays listed by kvctl
// cluster members until kvctl node remove, as the refusal says). The bite of
// guard fresh-identity: with it off, the wiped node starts under its old
// id (docs/adr/027).
func TestWipedNodeRefusesItsOldID(t *testing.T) {
	// The dead grace outlasts the test: the site must still count n3 as a
	// voter when it comes back, and when n4 takes its address (the site
	// would otherwise drop n3 after the grace and let n4 in).
	const grace = 10 * time.Minute
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = grace })
	ctx := ctxT(t, 4*time.Minute)
	n1, n3 := c.Node("n1"), c.Node("n3")
	keys := putPerShard(ctx, t, n1, "before/", "v")

	c.Kill(n3)
	dir := n3.Cfg.DataDir
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if voters, _ := replicasOn(c.Map(), "n3"); voters == 0 {
		t.Fatal("n3 is no shard's voter any more before its restart: the test raced the dead grace")
	}
	cfg := n3.Cfg
	cfg.ClientAddr, cfg.PeerAddr, cfg.GossipAddr, cfg.HTTPAddr = n3.clientAddr, n3.peerAddr, n3.gossipAddr, "127.0.0.1:0"
	srv, err := server.New(cfg, c.logger().With("test_node", "n3-wiped"))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("n3 started on an empty data directory under its old id, a voter of the catalog and of every shard without their votes and logs")
	}
	if !errors.Is(err, server.ErrLostIdentity) {
		t.Fatalf("start of the wiped n3: %v, want ErrLostIdentity", err)
	}
	t.Logf("refused: %v", err)
	// The message says what the site does when a new id takes n3's
	// address, and what it leaves to the operator: n3 stays listed by
	// kvctl cluster members until kvctl node remove.
	if msg := err.Error(); !strings.Contains(msg, "kvctl node remove n3") || !strings.Contains(msg, "kvctl cluster members shows it unknown, with 0 replicas") {
		t.Errorf("the refusal does not say that n3 stays a member until kvctl node remove n3: %s", msg)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		t.Fatalf("the refused start left %d entries in its data directory (err %v): the next start would skip the check", len(entries), err)
	}

	everyShardWritable(t, n1, time.Minute)

	// The operator's way back: the same machine, on its empty directory
	// and its host and ports, under a new id. raft refuses a second server
	// at an address a configuration holds: the site first removes n3,
	// whose address n4 took, from the catalog and from each shard.
	fresh := Config(dir, "n4")
	fresh.Join, fresh.Faults, fresh.DeadGrace = []string{n1.Srv.GossipAddr()}, c.Net, grace
	fresh.ClientAddr, fresh.PeerAddr, fresh.GossipAddr = n3.clientAddr, n3.peerAddr, n3.gossipAddr
	n4 := c.start("n4", fresh)
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n4)
	c.next = 4
	c.mu.Unlock()
	poll.Until(t, 3*time.Minute, "n4 a voter of every shard, n3 replaced", func() error {
		if voters, _ := replicasOn(c.Map(), "n3"); voters > 0 {
			return fmt.Errorf("n3 still a voter of %d shards", voters)
		}
		if voters, _ := replicasOn(c.Map(), "n4"); voters != len(keys) {
			return fmt.Errorf("n4 a voter of %d shards of %d", voters, len(keys))
		}
		return c.Settled()
	})
	for _, k := range keys {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := n4.KV.Get(gctx, &kvv1.GetRequest{Key: []byte(k)})
		cancel()
		if err != nil || string(resp.GetValue()) != "v" {
			t.Fatalf("get %s through n4: %v %q", k, err, resp.GetValue())
		}
	}
}
