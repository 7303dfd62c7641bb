package transport

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

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

// startHeld starts group g on nodes over heldStores, the leader's log
// written through WithEarlyAppend as the shard groups do, and converges
// on 20 writes in flight at once (which opens raft's pipelines).
func startHeld(t *testing.T, nodes []*testNode) ([]*raft.Raft, map[*raft.Raft]*heldStore, map[string]*countFSM) {
	t.Helper()
	peers := servers(nodes...)
	stores := map[*raft.Raft]*heldStore{}
	fsms := map[string]*countFSM{}
	var rafts []*raft.Raft
	for _, n := range nodes {
		trans, err := n.net.Transport("g")
		if err != nil {
			t.Fatal(err)
		}
		conf := raftConfig(n.id, n.log)
		store := &heldStore{InmemStore: raft.NewInmemStore()}
		snaps := raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: peers}); err != nil {
			t.Fatal(err)
		}
		fsm := &countFSM{}
		r, err := raft.NewRaft(conf, fsm, WithEarlyAppend(store, trans), store, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		n.mu.Lock()
		n.rafts["g"], n.fsms["g"] = r, fsm
		n.mu.Unlock()
		rafts = append(rafts, r)
		stores[r] = store
		fsms[n.id] = fsm
	}
	applyN(t, rafts, 1, 20)
	waitConverged(t, 20, fsms)
	return rafts, stores, fsms
}

// TestEarlyAppend: while the leader's own log write does not return, its
// followers already hold the new entry, sent by the leader's transport as
// the leader started storing it; once the leader's write returns, the
// entry commits and every replica applies it. With Config.EarlyAppend
// off the followers receive the entry only after the leader's write, and
// the test fails waiting for them.
func TestEarlyAppend(t *testing.T) {
	on := func(c *Config) { c.EarlyAppend = true }
	nodes := []*testNode{newTestNode(t, "a", on), newTestNode(t, "b", on), newTestNode(t, "c", on)}
	rafts, stores, fsms := startHeld(t, nodes)
	leader := waitLeader(t, rafts...)
	held := stores[leader]
	held.hold()
	defer held.release()
	last := leader.LastIndex()
	f := leader.Apply(binary.BigEndian.AppendUint64(nil, 21), 10*time.Second)
	for _, r := range rafts {
		if r == leader {
			continue
		}
		s := stores[r]
		waitFor(t, 10*time.Second, "a follower to hold the entry the leader is still storing", func() bool {
			idx, err := s.LastIndex()
			return err == nil && idx > last
		})
	}
	held.release()
	if err := f.Error(); err != nil {
		t.Fatalf("apply: %v", err)
	}
	waitConverged(t, 21, fsms)
	early := sentOK(t, nodes, typeEarlyAppend)
	if early == 0 {
		t.Fatal("no early append was counted")
	}
	t.Logf("%v early appends", early)
}

// TestEarlyAnswerWaitsForFollowers: a raft request whose entries went
// ahead in early appends is answered only with the follower's answer to
// them. Both followers' log writes are held: the early appends reach
// them but are not answered, raft's own requests for the entry are left
// to those answers, and the write must not be acknowledged, for only
// the leader stored it. With guard early-answer off such a request is
// answered as a success at once and the write is acknowledged (make
// bites).
func TestEarlyAnswerWaitsForFollowers(t *testing.T) {
	on := func(c *Config) { c.EarlyAppend = true }
	nodes := []*testNode{newTestNode(t, "a", on), newTestNode(t, "b", on), newTestNode(t, "c", on)}
	rafts, stores, _ := startHeld(t, nodes)
	leader := waitLeader(t, rafts...)
	var followers []*heldStore
	for _, r := range rafts {
		if r != leader {
			followers = append(followers, stores[r])
		}
	}
	covered := func() int64 {
		var n int64
		for _, nd := range nodes {
			n += nd.net.coveredQueued.Load()
		}
		return n
	}
	for _, s := range followers {
		s.hold()
		defer s.release()
	}
	before := covered()
	last := leader.LastIndex()
	f := leader.Apply(binary.BigEndian.AppendUint64(nil, 21), 10*time.Second)
	waitFor(t, 10*time.Second, "raft's requests for the entry to be left to the early appends", func() bool {
		return covered() >= before+2
	})
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		stored := 0
		for _, s := range followers {
			if idx, _ := s.LastIndex(); idx > last {
				stored++
			}
		}
		t.Fatalf("the write was acknowledged (err %v) while %d of 2 followers had stored it", err, stored)
	case <-time.After(2 * time.Second):
	}
	for _, s := range followers {
		s.release()
	}
	if err := <-done; err != nil {
		t.Fatalf("apply after the followers stored it: %v", err)
	}
}
