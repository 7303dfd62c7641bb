package transport

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestCommitPush: with raft's CommitTimeout an hour away and no further
// writes, a follower learns that a write committed only from the commit
// push of the leader's transport. With the push off (guard commit-push)
// the followers never apply the writes and the test fails.
func TestCommitPush(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	peers := servers(nodes...)
	var rafts []*raft.Raft
	fsms := map[string]*countFSM{}
	for _, n := range nodes {
		r, f := n.startGroup(t, "g", raft.NewInmemSnapshotStore(), func(c *raft.Config) { c.CommitTimeout = time.Hour }, peers)
		rafts = append(rafts, r)
		fsms[n.id] = f
	}
	for i := 1; i <= 3; i++ {
		leader := waitLeader(t, rafts...)
		var lt *groupTransport
		for j, r := range rafts {
			if r == leader {
				g, err := nodes[j].net.group("g")
				if err != nil {
					t.Fatal(err)
				}
				lt = g
			}
		}
		f := leader.Apply(binary.BigEndian.AppendUint64(nil, uint64(i)), 10*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		// What the shard group does once the leader applied a proposal.
		var p CommitPusher = lt
		p.CommitApplied(f.Index())
		for name, fsm := range fsms {
			waitFor(t, 10*time.Second, fmt.Sprintf("%s to apply command %d", name, i), func() bool {
				c, _, _ := fsm.state()
				return c == uint64(i)
			})
		}
	}
	pushes := 0.0
	for _, n := range nodes {
		pushes += counterValue(t, n.net.metrics.sent.WithLabelValues(typeCommitPush, "OK"))
	}
	if pushes == 0 {
		t.Fatal("no commit push was counted")
	}
	t.Logf("%v commit pushes", pushes)
}
