package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestCutOffNodeGivesUpLeadership: one node of s1 loses its links to s2
// (its other links stay up, as when a node's WAN interface goes down).
// The shards it led move to s1's other nodes, which reach s2, so that s1's
// writes keep travelling to s2: without that (guard leader-reach off) the
// node keeps leading them, and their writes stay at s1.
func TestCutOffNodeGivesUpLeadership(t *testing.T) {
	t.Parallel()
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 3, Shards: 3})
	s1 := s.Site("s1")
	s1.WaitLeadersPreferred(60 * time.Second)
	m := s1.Map()
	shards := m.SortedShards()
	ledBy := func(n *Node) []placement.Shard {
		var out []placement.Shard
		for _, sh := range shards {
			if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
				out = append(out, sh)
			}
		}
		return out
	}
	var cut *Node
	for _, n := range s1.Live() {
		if len(ledBy(n)) > 0 {
			cut = n
			break
		}
	}
	if cut == nil {
		t.Fatal("no node of s1 leads a shard")
	}
	t.Logf("cutting %s (leads %v) off from s2", cut.ID, ledBy(cut))
	s.Net.IsolateFromSite(faultnet.Endpoint{Site: "s1", Node: cut.ID}, "s2")
	poll.Every(100*time.Millisecond).Until(t, 45*time.Second, "the cut-off node to give up its shards", func() error {
		if led := ledBy(cut); len(led) > 0 {
			return fmt.Errorf("%s still leads %v", cut.ID, led)
		}
		return nil
	})
	// Writes at s1, on every shard, reach s2.
	var writer *Node
	for _, n := range s1.Live() {
		if n != cut {
			writer = n
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("reach/%02d", i)
		keys = append(keys, k)
		if _, err := writer.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	reader := s.Site("s2").Live()[0]
	poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "s1's writes to reach s2", func() error {
		for _, k := range keys {
			r, err := reader.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if !r.Found {
				return fmt.Errorf("%s not at s2", k)
			}
		}
		return nil
	})
}
