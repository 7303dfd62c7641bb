package raftutil

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) interface{}         { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// leader starts a one-voter group on the in-memory transport and waits
// until it leads.
func leader(t *testing.T, id string) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(id)
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.LogOutput = io.Discard
	addr, trans := raft.NewInmemTransport(raft.ServerAddress(id))
	store := raft.NewInmemStore()
	r, err := raft.NewRaft(conf, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become leader", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// TestTransferAfterShutdownIsAnswered: a leadership transfer asked of a
// raft that is shutting down gets an answer. The copy of hashicorp/raft
// queued it into a free channel slot after shutdown about half the time,
// and nothing ever answered it: HandOff's waiter outlived the node (the
// leak server's TestMain caught).
func TestTransferAfterShutdownIsAnswered(t *testing.T) {
	for i := 0; i < 20; i++ {
		r := leader(t, fmt.Sprintf("n%d", i))
		if err := r.Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.LeadershipTransfer().Error() }()
		select {
		case err := <-done:
			if !errors.Is(err, raft.ErrRaftShutdown) {
				t.Fatalf("round %d: transfer after shutdown: %v, want %v", i, err, raft.ErrRaftShutdown)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a transfer asked after shutdown was never answered", i)
		}
	}
}

// TestHandOffWithoutOtherVoter: a lone voter has no one to hand off to,
// and a follower does not lead.
func TestHandOffWithoutOtherVoter(t *testing.T) {
	r := leader(t, "solo")
	defer r.Shutdown()
	if err := HandOff(t.Context(), r); !errors.Is(err, ErrNoOtherVoter) {
		t.Fatalf("HandOff of a lone voter: %v, want %v", err, ErrNoOtherVoter)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	if err := HandOff(t.Context(), r); !errors.Is(err, ErrNotLeading) {
		t.Fatalf("HandOff after shutdown: %v, want %v", err, ErrNotLeading)
	}
}
