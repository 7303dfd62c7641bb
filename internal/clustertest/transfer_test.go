package clustertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestNoLeadershipTransferToASilentReplica: a shard's leader refuses to
// hand its leadership to a voter it has had no answer from lately, at
// once, and keeps taking writes. hashicorp/raft refuses every write of
// the shard while a transfer waits for its target, until the transfer
// times out: the catalog's leader balancing, which moves leadership to
// a node as soon as gossip reports it alive again, held every shard it
// moved to a node whose link had just come back for seconds, while the
// leaders' replication to it was still backing off. Once the two hear
// each other again the transfer goes through.
func TestNoLeadershipTransferToASilentReplica(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 3*time.Minute)
	leader, target := c.Node("n1"), c.Node("n2")
	s := ledBy(t, leader, "silent/")
	g := s.group(leader)
	poll.Until(t, time.Minute, target.ID+" a voter of the shard", func() error {
		for _, srv := range g.Raft().GetConfiguration().Configuration().Servers {
			if srv.ID == raft.ServerID(target.ID) && srv.Suffrage == raft.Voter {
				return nil
			}
		}
		return fmt.Errorf("%s is not a voter of %s", target.ID, s.sh)
	})
	if err := s.put(ctx, leader, "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The leader and the target hear nothing from each other; the third
	// node keeps the leader's quorum.
	c.Cut(leader, target)
	c.Cut(target, leader)
	req := &peerv1.ChangeReplicasRequest{Shard: &peerv1.ShardRef{Keyspace: s.sh.Keyspace, Shard: s.sh.ID},
		Op: peerv1.ChangeReplicasRequest_OP_TRANSFER_LEADER, NodeId: target.ID}
	poll.Until(t, time.Minute, "the transfer to the silent replica refused", func() error {
		if !g.IsLeader() {
			t.Fatalf("%s no longer leads %s, although it kept its quorum", leader.ID, s.sh)
		}
		_, err := leader.Peer.ChangeReplicas(ctx, req)
		if status.Code(err) == codes.FailedPrecondition && strings.Contains(status.Convert(err).Message(), peer.ErrTargetSilent.Error()) {
			return nil
		}
		return fmt.Errorf("the transfer answered %v", err)
	})
	if err := s.put(ctx, leader, "after", 10*time.Second); err != nil {
		t.Fatalf("a write after the refused transfer: %v", err)
	}
	if !g.IsLeader() {
		t.Fatalf("%s no longer leads %s after the refused transfer", leader.ID, s.sh)
	}
	c.Heal()
	poll.Until(t, time.Minute, target.ID+" leading after the heal", func() error {
		if s.group(target).IsLeader() {
			return nil
		}
		for _, n := range []*Node{leader, c.Node("n3")} {
			if s.group(n).IsLeader() {
				_, err := n.Peer.ChangeReplicas(ctx, req)
				return fmt.Errorf("transfer through %s: %v", n.ID, err)
			}
		}
		return fmt.Errorf("no leader of %s", s.sh)
	})
}
