package transport

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/poll"
)

// TestReplicationTwoGroups runs two raft groups on three nodes over one
// Network each: both elect a leader, replicate 1000 pipelined applies, and
// every replica converges.
func TestReplicationTwoGroups(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "n1", nil), newTestNode(t, "n2", nil), newTestNode(t, "n3", nil)}
	peers := servers(nodes...)
	groups := []string{"g1", "g2"}
	rafts := map[string][]*raft.Raft{}
	fsms := map[string]map[string]*countFSM{}
	for _, g := range groups {
		fsms[g] = map[string]*countFSM{}
		for _, n := range nodes {
			r, f := n.startGroup(t, g, raft.NewDiscardSnapshotStore(), nil, peers)
			rafts[g] = append(rafts[g], r)
			fsms[g][n.id] = f
		}
	}
	const n = 1000
	done := make(chan error, len(groups))
	for _, g := range groups {
		go func() {
			if err := applyAll(rafts[g], 1, n); err != nil {
				done <- fmt.Errorf("group %s: %w", g, err)
				return
			}
			done <- nil
		}()
	}
	for range groups {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		waitConverged(t, n, fsms[g])
	}

	var pipelined, heartbeats float64
	for _, node := range nodes {
		pipelined += counterValue(t, node.net.metrics.sent.WithLabelValues(typePipeline, "OK"))
		heartbeats += counterValue(t, node.net.metrics.sent.WithLabelValues(typeHeartbeat, "OK")) // most travel in batches
	}
	if pipelined == 0 {
		t.Error("no AppendEntries went through a pipeline")
	}
	if heartbeats == 0 {
		t.Error("no heartbeat was answered")
	}
	t.Logf("pipelined AppendEntries: %v, heartbeats: %v", pipelined, heartbeats)
}

// TestInstallSnapshot adds a voter to a group whose log was compacted: it
// must catch up through InstallSnapshot, streamed in several chunks.
func TestInstallSnapshot(t *testing.T) {
	small := func(c *Config) { c.SnapshotChunkBytes = 64 << 10 }
	a, b, c := newTestNode(t, "a", small), newTestNode(t, "b", small), newTestNode(t, "c", small)
	tweak := func(rc *raft.Config) {
		rc.TrailingLogs = 10
		rc.SnapshotThreshold = 50
	}
	const padding = 300 << 10
	ra, fa := a.startGroup(t, "snap", raft.NewInmemSnapshotStore(), tweak, servers(a, b))
	rb, fb := b.startGroup(t, "snap", raft.NewInmemSnapshotStore(), tweak, servers(a, b))
	fa.padding, fb.padding = padding, padding
	applyN(t, []*raft.Raft{ra, rb}, 1, 200)
	leader := waitLeader(t, ra, rb)
	if err := leader.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if idx, err := snapshotIndex(leader); err != nil || idx < 200 {
		t.Fatalf("leader snapshot at index %d (%v), want >= 200", idx, err)
	}

	rc, fc := c.startGroup(t, "snap", raft.NewInmemSnapshotStore(), tweak, nil)
	fc.padding = padding
	if err := leader.AddVoter("c", raft.ServerAddress(c.addr), 0, 10*time.Second).Error(); err != nil {
		t.Fatalf("add voter: %v", err)
	}
	applyN(t, []*raft.Raft{ra, rb, rc}, 201, 20)
	waitConverged(t, 220, map[string]*countFSM{"a": fa, "b": fb, "c": fc})
	if _, _, restores := fc.state(); restores == 0 {
		t.Fatal("the new voter did not restore a snapshot")
	}
	if got := counterValue(t, c.net.metrics.snapshotBytes.WithLabelValues("received")); got < padding {
		t.Errorf("received %v snapshot bytes, want at least %d", got, padding)
	}
	if got := counterValue(t, c.net.metrics.received.WithLabelValues(typeSnapshot, "OK")); got == 0 {
		t.Error("no InstallSnapshot was received")
	}
}

func snapshotIndex(r *raft.Raft) (uint64, error) {
	var idx uint64
	_, err := fmt.Sscan(r.Stats()["last_snapshot_index"], &idx)
	return idx, err
}

// TestLeaderFailure kills the leader's node: the two others elect a new
// leader and keep applying.
func TestLeaderFailure(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "n1", nil), newTestNode(t, "n2", nil), newTestNode(t, "n3", nil)}
	var rafts []*raft.Raft
	fsms := map[string]*countFSM{}
	owner := map[*raft.Raft]*testNode{}
	for _, n := range nodes {
		r, f := n.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, servers(nodes...))
		rafts = append(rafts, r)
		fsms[n.id], owner[r] = f, n
	}
	applyN(t, rafts, 1, 100)
	waitConverged(t, 100, fsms)

	leader := waitLeader(t, rafts...)
	dead := owner[leader]
	dead.crash()
	delete(fsms, dead.id)
	var rest []*raft.Raft
	for _, r := range rafts {
		if r != leader {
			rest = append(rest, r)
		}
	}
	applyN(t, rest, 101, 100)
	waitConverged(t, 200, fsms)
	next := waitLeader(t, rest...)
	waitFor(t, 10*time.Second, "a dial error to the dead node", func() bool {
		return counterValue(t, owner[next].net.metrics.dialErrors) > 0
	})
}

// TestCloseGroupAndNetwork checks that a closed group transport is
// unregistered and that closing everything leaves no goroutine behind.
func TestCloseGroupAndNetwork(t *testing.T) {
	baseline := runtime.NumGoroutine()
	func() {
		a, b := newTestNode(t, "a", nil), newTestNode(t, "b", nil)
		ra, _ := a.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, servers(a, b))
		rb, fb := b.startGroup(t, "g", raft.NewDiscardSnapshotStore(), nil, servers(a, b))
		applyN(t, []*raft.Raft{ra, rb}, 1, 50)
		waitFor(t, 10*time.Second, "b to apply", func() bool { n, _, _ := fb.state(); return n == 50 })

		if _, err := a.net.Transport("g"); !errors.Is(err, ErrDuplicateGroup) {
			t.Fatalf("second Transport(g) = %v, want ErrDuplicateGroup", err)
		}
		// A spare group: open, close, reopen.
		spare, err := a.net.Transport("spare")
		if err != nil {
			t.Fatal(err)
		}
		if err := spare.(raft.WithClose).Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.net.group("spare"); !errors.Is(err, ErrUnknownGroup) {
			t.Fatalf("closed group still registered: %v", err)
		}
		err = b.net.mustTransport(t, "spare").AppendEntries("a", raft.ServerAddress(a.addr), heartbeatReq(), new(raft.AppendEntriesResponse))
		if !errors.Is(err, ErrUnknownGroup) {
			t.Fatalf("RPC to a closed group = %v, want ErrUnknownGroup", err)
		}
		if err := spare.AppendEntries("b", raft.ServerAddress(b.addr), heartbeatReq(), new(raft.AppendEntriesResponse)); !errors.Is(err, ErrClosed) {
			t.Fatalf("RPC from a closed group = %v, want ErrClosed", err)
		}
		again, err := a.net.Transport("spare")
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		_ = again

		a.stop()
		b.stop()
		if _, err := a.net.Transport("late"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Transport after Close = %v, want ErrClosed", err)
		}
		if err := a.net.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}()
	err := poll.Wait(10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > baseline {
			return fmt.Errorf("%d goroutines remain, baseline %d", n, baseline)
		}
		return nil
	})
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("%v:\n%s", err, buf[:runtime.Stack(buf, true)])
	}
}

// mustTransport opens a group transport for sending only.
func (n *Network) mustTransport(t *testing.T, group string) raft.Transport {
	t.Helper()
	tr, err := n.Transport(group)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func heartbeatReq() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("x"), Addr: []byte("127.0.0.1:1")},
		Term:      1,
	}
}
