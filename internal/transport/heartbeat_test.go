package transport

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func receivedOK(t *testing.T, nodes []*testNode, typ string) float64 {
	t.Helper()
	var n float64
	for _, nd := range nodes {
		n += counterValue(t, nd.net.metrics.received.WithLabelValues(typ, "OK"))
	}
	return n
}

// TestIdleHeartbeatsBatched: raft's heartbeats of idle groups travel in
// the nodes' batches, not as RPCs of their own, and the groups keep their
// leaders. Keepalives are off: with them, idle groups' heartbeats wait
// for the end of the quiet (TestIdleGroupsQuiet).
func TestIdleHeartbeatsBatched(t *testing.T) {
	noKeepalives := func(c *Config) { c.KeepaliveInterval = 0 }
	nodes := []*testNode{newTestNode(t, "a", noKeepalives), newTestNode(t, "b", noKeepalives), newTestNode(t, "c", noKeepalives)}
	groups := []string{"g1", "g2"}
	rafts, fsms := startGroups(t, nodes, groups, nil)
	terms := map[string]uint64{}
	for _, g := range groups {
		applyN(t, rafts[g], 1, 3)
		waitConverged(t, 3, fsms[g])
		terms[g] = waitLeader(t, rafts[g]...).CurrentTerm()
	}
	// raftConfig's leaders heartbeat every 50–100 ms.
	sent0, alone0 := sentOK(t, nodes, typeHeartbeat), receivedOK(t, nodes, typeHeartbeat)
	waitFor(t, 30*time.Second, "heartbeats to be sent", func() bool { return sentOK(t, nodes, typeHeartbeat)-sent0 >= 40 })
	sent, alone := sentOK(t, nodes, typeHeartbeat)-sent0, receivedOK(t, nodes, typeHeartbeat)-alone0
	t.Logf("%v heartbeats sent, %v of them on their own", sent, alone)
	if alone > sent/4 {
		t.Errorf("%v of %v heartbeats were sent on their own", alone, sent)
	}
	for _, g := range groups {
		if l := waitLeader(t, rafts[g]...); l.CurrentTerm() != terms[g] {
			t.Errorf("group %s: term %d after the idle period, %d before", g, l.CurrentTerm(), terms[g])
		}
	}
}

// TestVerifyingLeaderSendsHeartbeatsAtOnce: with batches held for an
// hour, a heartbeat waits in its batch until a leadership check of its
// group starts (VerifyingLeader), which sends it; during the check the
// group's heartbeats go at once, after it they wait again.
func TestVerifyingLeaderSendsHeartbeatsAtOnce(t *testing.T) {
	a := newTestNode(t, "a", func(c *Config) { c.BatchDelay, c.KeepaliveInterval = time.Hour, 0 })
	b := newTestNode(t, "b", nil)
	b.startGroup(t, "g", raft.NewInmemSnapshotStore(), nil, nil) // a follower with no leader: it takes heartbeats
	tr, err := a.net.Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	g := tr.(*groupTransport)
	target := raft.ServerAddress(b.addr)
	heartbeat := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries("b", target, &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(a.addr)}, Term: 1,
			}, &resp)
			if err == nil && !resp.Success {
				t.Errorf("heartbeat answered %+v", resp)
			}
			done <- err
		}()
		return done
	}
	queued := func() int {
		a.net.batch.mu.Lock()
		defer a.net.batch.mu.Unlock()
		if q := a.net.batch.mu.queues[target]; q != nil {
			return len(q.items)
		}
		return 0
	}

	first := heartbeat()
	waitFor(t, 10*time.Second, "the heartbeat to wait in a batch", func() bool { return queued() == 1 })
	done := g.VerifyingLeader()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-heartbeat(); err != nil { // while verifying: at once
		t.Fatal(err)
	}
	done()
	heartbeat()
	waitFor(t, 10*time.Second, "a heartbeat after the check to wait in a batch", func() bool { return queued() == 1 })
}
