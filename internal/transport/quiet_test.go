package transport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// quietCounts are what nodes' transports did with idle messages.
type quietCounts struct{ quiet, keepalives, batched, pipelined float64 }

func quietCountsOf(t *testing.T, nodes []*testNode) quietCounts {
	t.Helper()
	return quietCounts{quiet: sentOK(t, nodes, typeQuiet), keepalives: sentOK(t, nodes, typeKeepalive),
		batched: sentOK(t, nodes, typeBatched), pipelined: sentOK(t, nodes, typePipeline)}
}

// TestIdleGroupsQuiet: four groups on three nodes, written to, then left
// idle. raft's messages to the followers of the idle groups are answered
// by the leaders' transports, which keep the followers in contact with
// keepalives instead: far fewer raft messages leave the nodes than raft
// sends, the groups keep their leaders and terms (no follower missed its
// leader, no leader lost its lease), and they replicate again at once.
func TestIdleGroupsQuiet(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	groups := []string{"g1", "g2", "g3", "g4"}
	rafts, fsms := startGroups(t, nodes, groups, nil)
	for _, g := range groups {
		applyN(t, rafts[g], 1, 5)
		waitConverged(t, 5, fsms[g])
	}
	terms := map[string]uint64{}
	for _, g := range groups {
		terms[g] = waitLeader(t, rafts[g]...).CurrentTerm()
	}

	// raft sends each follower a message every 10–20 ms; keepalives go
	// every 50 ms.
	before := quietCountsOf(t, nodes)
	waitFor(t, 30*time.Second, "idle messages answered by keepalives", func() bool {
		c := quietCountsOf(t, nodes)
		return c.quiet-before.quiet >= 400 && c.keepalives-before.keepalives >= 40
	})
	after := quietCountsOf(t, nodes)
	quiet, sent := after.quiet-before.quiet, (after.batched-before.batched)+(after.pipelined-before.pipelined)
	t.Logf("idle: %v raft messages answered aside, %v keepalives, %v messages sent", quiet, after.keepalives-before.keepalives, sent)
	if sent > quiet/2 {
		t.Errorf("idle groups sent %v raft messages and had %v answered aside", sent, quiet)
	}
	for _, g := range groups {
		if l := waitLeader(t, rafts[g]...); l.CurrentTerm() != terms[g] {
			t.Errorf("group %s: term %d after the idle period, %d before", g, l.CurrentTerm(), terms[g])
		}
		applyN(t, rafts[g], 6, 5)
		waitConverged(t, 10, fsms[g])
	}
}

// quietGroup starts group g on three nodes, writes to it and waits until
// its idle messages are answered by keepalives; it returns the nodes and
// the leader.
func quietGroup(t *testing.T) ([]*testNode, *raft.Raft) {
	t.Helper()
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	rafts, fsms := startGroups(t, nodes, []string{"g"}, nil)
	applyN(t, rafts["g"], 1, 5)
	waitConverged(t, 5, fsms["g"])
	leader := waitLeader(t, rafts["g"]...)
	before := quietCountsOf(t, nodes)
	waitFor(t, 30*time.Second, "idle messages answered by keepalives", func() bool {
		return quietCountsOf(t, nodes).quiet-before.quiet >= 100
	})
	return nodes, leader
}

// TestQuietLeaderCutOff: an idle group's leader whose followers are
// gone must lose its lease and step down: its transport stops answering
// raft's messages aside once no keepalive is answered, so raft hears
// from no follower. Guard quiet-confirmed (answer aside whatever the
// keepalives say) keeps the leader leading forever, and the test fails.
func TestQuietLeaderCutOff(t *testing.T) {
	nodes, leader := quietGroup(t)

	for _, n := range nodes {
		if n.rafts["g"] != leader {
			n.crash()
		}
	}
	waitFor(t, 10*time.Second, "the leader cut off from its followers to step down", func() bool {
		return leader.State() != raft.Leader
	})
}

// TestQuietFollowerElectsWhenLeaderDies: the followers of an idle group
// whose leader's node dies stop getting keepalives and elect a new leader,
// which replicates.
func TestQuietFollowerElectsWhenLeaderDies(t *testing.T) {
	nodes, leader := quietGroup(t)

	var rest []*raft.Raft
	live := map[string]*countFSM{}
	for _, n := range nodes {
		if n.rafts["g"] == leader {
			n.crash()
			continue
		}
		rest = append(rest, n.rafts["g"])
		live[n.id] = n.fsms["g"]
	}
	waitLeader(t, rest...)
	applyN(t, rest, 6, 5)
	waitConverged(t, 10, live)
}
