package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestWipedFirstNodeBootstrapsApart: n1, the node that bootstrapped a
// 3-node site, loses its data directory and is started again the way a
// site's first node is, without --join: it bootstraps a new site at its
// old address, where the old site's leaders still send their groups' raft
// messages (its old replicas are voters of the catalog and of every
// shard). The two are different incarnations of the site: n1 refuses the
// old site's raft traffic, so its new groups never take the old groups'
// logs with the votes it lost, and the old site keeps every acknowledged
// write and takes new ones on n2 and n3. The bite of guard
// site-incarnation (docs/adr/029): with it off, n1 refuses nothing and
// its new replicas take the old site's messages.
func TestWipedFirstNodeBootstrapsApart(t *testing.T) {
	// n1 stays a voter of the old site's groups for the whole test.
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = 10 * time.Minute })
	ctx := ctxT(t, 3*time.Minute)
	n1, n2 := c.Node("n1"), c.Node("n2")
	if len(n1.Cfg.Join) != 0 {
		t.Fatalf("n1 joins %v: the test needs the site's first node", n1.Cfg.Join)
	}
	keys := putPerShard(ctx, t, n2, "before/", "v")

	c.Kill(n1)
	if err := os.RemoveAll(n1.Cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	c.Restart(n1, nil) // a new site: no data, no --join
	// The old site: every shard writable on n2 and n3, nothing lost.
	everyShardWritable(t, n2, time.Minute)
	// A read may fail while n2 still takes n1 for a leader; one that
	// answers must answer the old site's value, never n1's new site's.
	for _, k := range keys {
		poll.Until(t, time.Minute, "a STRONG read of "+k+" through n2", func() error {
			gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := n2.KV.Get(gctx, &kvv1.GetRequest{Key: []byte(k), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
			if err != nil {
				return err
			}
			if string(resp.GetValue()) != "v" {
				t.Fatalf("get %s through n2 answered %q, not the acknowledged %q", k, resp.GetValue(), "v")
			}
			return nil
		})
	}
	// n1 refuses the old site's raft traffic (its leaders still send to
	// n1's address), or, without the guard, its new replicas take the old
	// groups' logs.
	var mixed string
	poll.Until(t, time.Minute, "n1 to refuse the old site's raft traffic", func() error {
		if mixed = oldKeyOn(n1, keys); mixed != "" || counterSum(t, n1, "causeway_transport_incarnation_refusals_total", "") > 0 {
			return nil
		}
		return errors.New("no refusal yet")
	})
	if mixed == "" {
		mixed = oldKeyOn(n1, keys)
	}
	if mixed != "" {
		t.Fatalf("%s: the new site's raft groups took the old site's log", mixed)
	}
}

// oldKeyOn returns a description of a replica of n that holds one of
// keys, or "".
func oldKeyOn(n *Node, keys map[uint32]string) string {
	for _, g := range n.Srv.Groups() {
		for _, k := range keys {
			if _, found, err := newestVersion(g, k); err == nil && found {
				return fmt.Sprintf("%s's replica of %s holds %s, written to the old site", n.ID, g.ID(), k)
			}
		}
	}
	return ""
}
