package transport

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"

	"github.com/causeway-db/causeway/internal/poll"
)

// quietCounts are what nodes' transports did with idle messages.
type quietCounts struct{ quiet, keepalives, batched, pipelined, heartbeats float64 }

func quietCountsOf(t *testing.T, nodes []*testNode) quietCounts {
	t.Helper()
	return quietCounts{quiet: sentOK(t, nodes, typeQuiet), keepalives: sentOK(t, nodes, typeKeepalive),
		batched: sentOK(t, nodes, typeBatched), pipelined: sentOK(t, nodes, typePipeline),
		heartbeats: sentOK(t, nodes, typeHeartbeat)}
}

// quietWaiting sums the followers whose leader's raft replication waits
// without a timer on the nodes.
func quietWaiting(t *testing.T, nodes []*testNode) float64 {
	t.Helper()
	n := 0.0
	for _, nd := range nodes {
		var m dto.Metric
		if err := nd.net.metrics.quietWaiting.Write(&m); err != nil {
			t.Fatal(err)
		}
		n += m.GetGauge().GetValue()
	}
	return n
}

// TestIdleGroupsQuiet: four groups on three nodes, written to, then left
// idle. The leaders' raft replication and heartbeats to every follower
// come to wait without a timer (raft.WithQuiet) while the transports keep
// the followers in contact with keepalives: raft sends the followers next
// to nothing while idle (it would send each one a message every 10–20 ms
// and a heartbeat every 50–100 ms),
// the groups keep their leaders and terms (no follower missed its
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

	waitFor(t, 30*time.Second, "every follower's replication to wait quietly", func() bool {
		return quietWaiting(t, nodes) == float64(2*len(groups))
	})
	// Keepalives go every 50 ms: 40 of them are at least five intervals.
	before := quietCountsOf(t, nodes)
	waitFor(t, 30*time.Second, "keepalives", func() bool {
		return quietCountsOf(t, nodes).keepalives-before.keepalives >= 40
	})
	after := quietCountsOf(t, nodes)
	raftMsgs := (after.quiet - before.quiet) + (after.batched - before.batched) + (after.pipelined - before.pipelined) +
		(after.heartbeats - before.heartbeats)
	keepalives := after.keepalives - before.keepalives
	t.Logf("idle: %v keepalives, %v raft messages", keepalives, raftMsgs)
	// Each follower would get a message every 10–20 ms and a heartbeat
	// every 50–100 ms: about four times the keepalives.
	if raftMsgs > keepalives/2 {
		t.Errorf("idle groups: raft sent %v messages beside %v keepalives", raftMsgs, keepalives)
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
// its leader's replication to both followers waits quietly; it returns
// the nodes and the leader.
func quietGroup(t *testing.T) ([]*testNode, *raft.Raft) {
	t.Helper()
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	rafts, fsms := startGroups(t, nodes, []string{"g"}, nil)
	applyN(t, rafts["g"], 1, 5)
	waitConverged(t, 5, fsms["g"])
	leader := waitLeader(t, rafts["g"]...)
	waitFor(t, 30*time.Second, "the replication to both followers to wait quietly", func() bool {
		return quietWaiting(t, nodes) == 2
	})
	return nodes, leader
}

// TestQuietLeaderCutOff: an idle group's leader whose followers are
// gone must lose its lease and step down: once no keepalive is answered
// its transport ends raft's quiet waits, answers nothing aside and
// confirms no contact, so raft hears from no follower. Guard
// quiet-confirmed (wait quietly and count contact whatever the
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

// TestQuietFollowersLearnCommits: a write to an idle group whose leader's
// replication waits quietly commits only after raft's last message of it
// went out to the followers, and nothing else tells them it committed
// (the test FSM pushes no commits; raft's heartbeats and the keepalives
// carry no commit index): the waiting replication must send the new
// commit index. The leader appends in parallel (ParallelLeaderAppend) and
// its log write is held, as is follower b's: follower a stores the entry
// and answers, its replication waits quietly, and only then does the
// leader's write return and the entry commit (on the leader's and a's
// copies). Guard quiet-commit (no wake on a new commit index, no commit
// check before waiting) leaves the followers without the commit, and they
// never apply the write.
func TestQuietFollowersLearnCommits(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	rafts, stores, fsms := startHeld(t, nodes, parallelAppend)
	leader := waitLeader(t, rafts...)
	freeRaft, free, held := followersOf(leader, rafts, stores)
	applied := 20 // startHeld's
	for round := 0; round < 3; round++ {
		waitFor(t, 30*time.Second, "the replication to both followers to wait quietly", func() bool {
			return quietWaiting(t, nodes) == 2
		})
		stores[leader].hold()
		held.hold()
		last := leader.LastIndex()
		applied++
		f := leader.Apply(binary.BigEndian.AppendUint64(nil, uint64(applied)), 10*time.Second)
		waitFor(t, 10*time.Second, "the free follower to store the entry", func() bool {
			idx, err := free.LastIndex()
			return err == nil && idx > last
		})
		waitFor(t, 10*time.Second, "the replication to the free follower to wait quietly again", func() bool {
			return quietWaiting(t, nodes) >= 1
		})
		if freeRaft.CommitIndex() > last {
			t.Fatalf("round %d: the follower learned a commit before the leader stored the entry", round)
		}
		stores[leader].release()
		held.release()
		if err := f.Error(); err != nil {
			t.Fatalf("round %d: apply: %v", round, err)
		}
		for name, fsm := range fsms {
			waitFor(t, 5*time.Second, fmt.Sprintf("round %d: %s to apply command %d", round, name, applied), func() bool {
				c, _, _ := fsm.state()
				return c == uint64(applied)
			})
		}
	}
}

// keepOpen is a group's transport that outlives the raft over it: a
// replica shut down over it leaves it open, so the next replica of the
// node opened over it takes the peers' messages, pipelines included,
// without a failure the leader could notice.
type keepOpen struct{ *groupTransport }

func (keepOpen) Close() error { return nil }

// TestQuietFollowerThatLostItsLogCatchesUp: a follower of an idle group
// whose replica is opened again with an empty log, in the same
// configuration (a node that dropped its replica and opened it anew while
// the leader still had it as a member), answers the leader's keepalives
// with success: a heartbeat is taken by any replica of the term. The
// leader's transport must not count those answers as contact, because the
// follower's log no longer reaches what it acknowledged: raft's
// replication then sends it a message, which it refuses, and raft sends
// it the log again. Guard quiet-log-check (count any successful answer)
// keeps the replication waiting quietly on the empty follower, which
// never gets the group's writes while the group stays idle.
//
// The swap must look seamless to the leader: a keepalive that failed or
// went unanswered while the replicas changed also ends the quiet wait and
// sends the log again, whatever the check does. Such a run decides
// nothing (the leader's quiet_wakes_total tells why its waits ended) and
// the scenario starts over.
func TestQuietFollowerThatLostItsLogCatchesUp(t *testing.T) {
	for attempt := 1; attempt <= 5; attempt++ {
		caughtUp, undecided := lostLogScenario(t)
		switch {
		case undecided > 0:
			t.Logf("attempt %d: %v quiet waits ended by failed or late keepalives, or a leader change, during the swap; starting over", attempt, undecided)
		case !caughtUp:
			t.Fatal("the emptied follower never got the group's log again: the leader's replication waits quietly on it")
		default:
			return
		}
	}
	t.Fatal("five attempts undecided: keepalives kept failing while the replica was swapped")
}

// lostLogScenario runs TestQuietFollowerThatLostItsLogCatchesUp's
// scenario once on three new nodes: whether the emptied follower got the
// log again within 30 s, and how many quiet waits failed or late
// keepalives ended meanwhile.
func lostLogScenario(t *testing.T) (caughtUp bool, undecided float64) {
	t.Helper()
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	trans := map[*testNode]keepOpen{}
	var rafts []*raft.Raft
	fsms := map[string]*countFSM{}
	for _, n := range nodes {
		tr, err := n.net.Transport("g")
		if err != nil {
			t.Fatal(err)
		}
		trans[n] = keepOpen{tr.(*groupTransport)}
		store := raft.NewInmemStore()
		snaps := raft.NewInmemSnapshotStore()
		conf := raftConfig(n.id, n.log)
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans[n], raft.Configuration{Servers: servers(nodes...)}); err != nil {
			t.Fatal(err)
		}
		r, fsm := n.openOver(t, "g", conf, store, snaps, trans[n])
		rafts, fsms[n.id] = append(rafts, r), fsm
	}
	applyN(t, rafts, 1, 5)
	waitConverged(t, 5, fsms)
	leader := waitLeader(t, rafts...)
	waitFor(t, 30*time.Second, "the replication to both followers to wait quietly", func() bool {
		return quietWaiting(t, nodes) == 2
	})

	var f *testNode
	for _, n := range nodes {
		if n.rafts["g"] != leader {
			f = n
			break
		}
	}
	before := quietWakes(t, nodes, quietWakeNoContact) + quietWakes(t, nodes, quietWakeRefused)
	term := leader.Stats()["term"]
	// Heartbeats and keepalives take raft's loop from here on, not the
	// fast path of the replica being shut down (which drops them): they
	// wait for the next replica, which answers them.
	trans[f].SetHeartbeatHandler(nil)
	if err := f.rafts["g"].Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	// An empty replica over the same transport: no log, no configuration;
	// it takes the leader's messages and never campaigns.
	store := raft.NewInmemStore()
	_, fsm := f.openOver(t, "g", raftConfig(f.id, f.log), store, raft.NewInmemSnapshotStore(), trans[f])
	caughtUp = poll.Wait(30*time.Second, func() error {
		if c, _, _ := fsm.state(); c != 5 {
			return fmt.Errorf("applied %d of 5 commands", c)
		}
		return nil
	}) == nil
	undecided = quietWakes(t, nodes, quietWakeNoContact) + quietWakes(t, nodes, quietWakeRefused) - before
	if leader.State() != raft.Leader || leader.Stats()["term"] != term {
		// A new leader's replication starts by sending the log to every
		// follower, quiet or not: the run decides nothing either.
		t.Logf("the leader changed during the swap (term %s, now %s)", term, leader.Stats()["term"])
		undecided++
	}
	return caughtUp, undecided
}

// quietWakes sums the quiet waits the nodes' keepalives ended for reason.
func quietWakes(t *testing.T, nodes []*testNode, reason string) float64 {
	t.Helper()
	n := 0.0
	for _, nd := range nodes {
		n += counterValue(t, nd.net.metrics.quietWakes.WithLabelValues(reason))
	}
	return n
}

// openOver opens this node's replica of group over trans.
func (n *testNode) openOver(t *testing.T, group string, conf *raft.Config, store logAndStable, snaps raft.SnapshotStore, trans raft.Transport) (*raft.Raft, *countFSM) {
	t.Helper()
	fsm := &countFSM{}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.rafts[group], n.fsms[group] = r, fsm
	n.mu.Unlock()
	return r, fsm
}
