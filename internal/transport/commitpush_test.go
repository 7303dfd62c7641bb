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
	pushes := sentOK(t, nodes, typeCommitPush)
	if pushes == 0 {
		t.Fatal("no commit push was counted")
	}
	t.Logf("%v commit pushes", pushes)
}

// TestCommitPushesBatched: the pushes of several groups bound for one
// node travel together. Four groups on three nodes (one node leads at
// least two of them), raft's CommitTimeout an hour away: one write to
// each group, and the followers learn the commits, from pushes (some may
// ride on raft's own messages). There are fewer AppendEntriesBatch RPCs
// than pushes.
func TestCommitPushesBatched(t *testing.T) {
	tweak := func(c *Config) { c.CommitPushDelay = 50 * time.Millisecond }
	nodes := []*testNode{newTestNode(t, "a", tweak), newTestNode(t, "b", tweak), newTestNode(t, "c", tweak)}
	groups := []string{"g1", "g2", "g3", "g4"}
	rafts, fsms := startGroups(t, nodes, groups, func(c *raft.Config) { c.CommitTimeout = time.Hour })
	pushers := map[string]CommitPusher{}
	for _, g := range groups {
		leader := waitLeader(t, rafts[g]...)
		for j, r := range rafts[g] {
			if r == leader {
				gt, err := nodes[j].net.group(g)
				if err != nil {
					t.Fatal(err)
				}
				pushers[g] = gt
			}
		}
	}
	write := func(v uint64) {
		futures := map[string]raft.ApplyFuture{}
		for _, g := range groups {
			futures[g] = waitLeader(t, rafts[g]...).Apply(binary.BigEndian.AppendUint64(nil, v), 10*time.Second)
		}
		for _, g := range groups {
			if err := futures[g].Error(); err != nil {
				t.Fatalf("apply to %s: %v", g, err)
			}
		}
		for _, g := range groups { // what the shard groups do once their leaders applied
			pushers[g].CommitApplied(futures[g].Index())
		}
		for _, g := range groups {
			for name, fsm := range fsms[g] {
				waitFor(t, 10*time.Second, fmt.Sprintf("%s of %s to apply write %d", name, g, v), func() bool {
					c, _, _ := fsm.state()
					return c == v
				})
			}
		}
	}
	// The first write may meet raft's replication before its pipelines
	// (whose later messages carry the commit index); count the second.
	// A batch that leaves early (a keepalive tick flushes what waits for
	// its node) splits the pushes of one write: on a loaded machine a
	// write may see that, so up to five writes are tried.
	write(1)
	var pushes, batches float64
	for v := uint64(2); v <= 6; v++ {
		before := sentCounts(t, nodes)
		pushesBefore := sentOK(t, nodes, typeCommitPush)
		write(v)
		pushes = sentOK(t, nodes, typeCommitPush) - pushesBefore
		batches = sentCounts(t, nodes).batches - before.batches
		t.Logf("write %d: %v commit pushes in %v batches", v, pushes, batches)
		if pushes >= 2 && batches >= 1 && batches < pushes {
			return
		}
	}
	t.Errorf("%v commit pushes in %v batches: want several, in fewer batches", pushes, batches)
}
