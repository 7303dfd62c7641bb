package transport

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func parallelAppend(c *raft.Config) { c.ParallelLeaderAppend = true }

// heldStore is an in-memory raft log whose StoreLogs waits while held:
// a leader's fsync that does not end.
type heldStore struct {
	*raft.InmemStore
	mu   sync.Mutex
	gate chan struct{} // nil: not held
}

func (s *heldStore) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *heldStore) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

func (s *heldStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *heldStore) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.InmemStore.StoreLogs(logs)
}

// startHeld starts group g on nodes over heldStores, with tweak applied
// to raft's configuration, and converges on 20 writes in flight at once
// (which opens raft's pipelines).
func startHeld(t *testing.T, nodes []*testNode, tweak func(*raft.Config)) ([]*raft.Raft, map[*raft.Raft]*heldStore, map[string]*countFSM) {
	t.Helper()
	peers := servers(nodes...)
	stores := map[*raft.Raft]*heldStore{}
	fsms := map[string]*countFSM{}
	var rafts []*raft.Raft
	for _, n := range nodes {
		store := &heldStore{InmemStore: raft.NewInmemStore()}
		r, fsm := n.startGroupOn(t, "g", store, raft.NewInmemSnapshotStore(), tweak, peers)
		rafts = append(rafts, r)
		stores[r] = store
		fsms[n.id] = fsm
	}
	applyN(t, rafts, 1, 20)
	waitConverged(t, 20, fsms)
	return rafts, stores, fsms
}

// followersOf returns the two followers' stores of a three-replica group
// started by startHeld, and the first one's raft.
func followersOf(leader *raft.Raft, rafts []*raft.Raft, stores map[*raft.Raft]*heldStore) (firstRaft *raft.Raft, first, second *heldStore) {
	for _, r := range rafts {
		switch {
		case r == leader:
		case first == nil:
			firstRaft, first = r, stores[r]
		default:
			second = stores[r]
		}
	}
	return firstRaft, first, second
}

// TestParallelLeaderAppend: with raft.Config.ParallelLeaderAppend, a
// leader replicates new entries while it stores them. Its own log write
// does not return, yet both followers store the entry, and it commits on
// their two durable copies: the write is acknowledged and applied by
// every replica, the leader included, before the leader's write returns.
// Once it returns, the leader's log holds the entry. Without the option
// the leader stores before it replicates, nothing reaches the followers
// and the test fails waiting for the acknowledgement.
func TestParallelLeaderAppend(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	rafts, stores, fsms := startHeld(t, nodes, parallelAppend)
	leader := waitLeader(t, rafts...)
	held := stores[leader]
	held.hold()
	defer held.release()
	last := leader.LastIndex()
	f := leader.Apply(binary.BigEndian.AppendUint64(nil, 21), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply while the leader's log write is held: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write was not acknowledged within 30 s while the leader's log write was held")
	}
	for _, r := range rafts {
		if r == leader {
			continue
		}
		if idx, _ := stores[r].LastIndex(); idx <= last {
			t.Fatalf("the write was acknowledged but a follower's log ends at %d, before the entry %d", idx, last+1)
		}
	}
	waitConverged(t, 21, fsms)
	if idx, _ := held.InmemStore.LastIndex(); idx > last {
		t.Fatalf("the leader's held write stored the entry (last index %d)", idx)
	}
	held.release()
	waitFor(t, 10*time.Second, "the leader to store the entry", func() bool {
		idx, err := held.LastIndex()
		return err == nil && idx > last
	})
	applyN(t, rafts, 22, 5)
	waitConverged(t, 26, fsms)
}

// TestParallelLeaderAppendCountsOnlyStored: a leader that appends in
// parallel counts its own copy toward a commit only once its log write
// returned. The leader's write and one follower's are held: only one
// replica (the other follower) stores the entry durably, and the write
// must not be acknowledged. Once the writes return it commits. With
// guard leader-append off (raft.LeaderMatchBeforeStore) the leader counts
// itself at once, the write is acknowledged on one durable copy, and the
// test fails (make bites).
func TestParallelLeaderAppendCountsOnlyStored(t *testing.T) {
	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)}
	rafts, stores, fsms := startHeld(t, nodes, parallelAppend)
	leader := waitLeader(t, rafts...)
	_, free, other := followersOf(leader, rafts, stores)
	held := []*heldStore{stores[leader], other}
	for _, s := range held {
		s.hold()
		defer s.release()
	}
	last := leader.LastIndex()
	f := leader.Apply(binary.BigEndian.AppendUint64(nil, 21), 10*time.Second)
	waitFor(t, 10*time.Second, "the free follower to store the entry", func() bool {
		idx, err := free.LastIndex()
		return err == nil && idx > last
	})
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		t.Fatalf("the write was acknowledged (err %v) while one replica of three had stored it", err)
	case <-time.After(2 * time.Second):
	}
	for _, s := range held {
		s.release()
	}
	if err := <-done; err != nil {
		t.Fatalf("apply once the writes returned: %v", err)
	}
	waitConverged(t, 21, fsms)
}
