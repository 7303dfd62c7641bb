package server

import (
	"fmt"
	"testing"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestMembersGivesTheSitesReplicas: n1 runs with --replicas 3 and n2 with
// --replicas 1; the site places the largest (3, docs/operations.md), and
// Admin.Members answers 3 replicas per shard at either node (kvctl cluster
// members prints it, and kvctl node drain warns against it). Before, each
// node answered its own --replicas: n2 said 1, and a drain asked there
// warned of nothing.
func TestMembersGivesTheSitesReplicas(t *testing.T) {
	a := start(t, testConfig(t.TempDir()))
	cfg := testConfig(t.TempDir())
	cfg.NodeID, cfg.Join, cfg.Replicas = "n2", []string{a.srv.GossipAddr()}, 1
	b := start(t, cfg)
	for _, n := range []*node{a, b} {
		poll.Until(t, 30*time.Second, n.srv.cfg.NodeID+" to answer 3 replicas per shard", func() error {
			resp, err := n.admin.Members(ctx(t), &adminv1.MembersRequest{})
			if err != nil {
				return err
			}
			if len(resp.Members) < 2 {
				return fmt.Errorf("members %v", resp.Members)
			}
			if got := resp.ReplicasPerShard; got != 3 {
				return fmt.Errorf("%s answers %d replicas per shard, want 3 (the site's largest --replicas)", n.srv.cfg.NodeID, got)
			}
			return nil
		})
	}
}
