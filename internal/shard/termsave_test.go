package shard

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/poll"
)

// failingStable is an in-memory raft log and stable store whose stable
// writes (term, vote) fail while fail is set: raft.db on a full or
// failing disk.
type failingStable struct {
	*raft.InmemStore
	fail atomic.Bool
}

var errStableFailed = errors.New("injected: no space left on device")

func (s *failingStable) Set(key, val []byte) error {
	if s.fail.Load() {
		return errStableFailed
	}
	return s.InmemStore.Set(key, val)
}

func (s *failingStable) SetUint64(key []byte, val uint64) error {
	if s.fail.Load() {
		return errStableFailed
	}
	return s.InmemStore.SetUint64(key, val)
}

// TestUnsavableTermIsNoPanic: a follower whose stable store cannot save a
// newer term (raft.db on a full disk) is asked to vote in one (a
// leadership transfer between the two other voters). With
// raft.Config.TermSaveFailed set (third_party/raft/FORK.md) it does not
// panic: it keeps its term, refuses the vote and the new leader's
// entries, and reports the failure, while the other two elect the new
// leader and commit. Released hashicorp/raft panicked ("failed to save
// current term"), which ended a kvd process whose disk filled up with a
// stack trace (a keyspace created while one node's disk was full).
func TestUnsavableTermIsNoPanic(t *testing.T) {
	ids := []raft.ServerID{"n1", "n2", "n3"}
	trans := map[raft.ServerID]*raft.InmemTransport{}
	var servers []raft.Server
	for _, id := range ids {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		trans[id] = tr
		servers = append(servers, raft.Server{ID: id, Address: tr.LocalAddr()})
	}
	for _, a := range trans {
		for _, b := range trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	failed := make(chan error, 1000)
	stores := map[raft.ServerID]*failingStable{}
	rafts := map[raft.ServerID]*raft.Raft{}
	for _, id := range ids {
		conf := raft.DefaultConfig()
		conf.LocalID = id
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		conf.CommitTimeout = 10 * time.Millisecond
		conf.Logger = hclog.New(&hclog.LoggerOptions{Name: string(id), Level: hclog.Error, Output: io.Discard})
		conf.TermSaveFailed = func(err error) {
			select {
			case failed <- fmt.Errorf("%s: %w", id, err):
			default:
			}
		}
		store := &failingStable{InmemStore: raft.NewInmemStore()}
		snaps := raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans[id], raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(conf, nopFSM{}, store, store, snaps, trans[id])
		if err != nil {
			t.Fatal(err)
		}
		stores[id], rafts[id] = store, r
	}
	defer func() {
		for _, r := range rafts {
			_ = r.Shutdown().Error()
		}
	}()
	leader := func() raft.ServerID {
		for id, r := range rafts {
			if r.State() == raft.Leader {
				return id
			}
		}
		return ""
	}
	poll.Until(t, 30*time.Second, "a leader", poll.True(func() bool { return leader() != "" }))
	if leader() == "n2" {
		if err := rafts["n2"].LeadershipTransferToServer("n1", "n1").Error(); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, "a leader other than n2", poll.True(func() bool { l := leader(); return l != "" && l != "n2" }))
	}
	from := leader()
	to := raft.ServerID("n1")
	if from == "n1" {
		to = "n3"
	}
	if err := rafts[from].Apply([]byte("before"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	term := rafts["n2"].CurrentTerm()

	stores["n2"].fail.Store(true)
	if err := rafts[from].LeadershipTransferToServer(to, raft.ServerAddress(to)).Error(); err != nil {
		t.Fatalf("transfer from %s to %s: %v", from, to, err)
	}
	poll.Until(t, 30*time.Second, fmt.Sprintf("%s to lead", to), poll.True(func() bool { return rafts[to].State() == raft.Leader }))
	if err := rafts[to].Apply([]byte("after"), 10*time.Second).Error(); err != nil {
		t.Fatalf("a write to the new leader, with two voters of three that save their terms: %v", err)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, errStableFailed) {
			t.Fatalf("TermSaveFailed(%v); want the stable store's error", err)
		}
		t.Logf("TermSaveFailed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("TermSaveFailed was not called")
	}
	if got, newer := rafts["n2"].CurrentTerm(), rafts[to].CurrentTerm(); got != term || newer <= term {
		t.Fatalf("n2's term is %d (it was %d, the new leader's is %d); want it kept: the newer one was never saved", got, term, newer)
	}
	if s := rafts["n2"].State(); s == raft.Leader || s == raft.Candidate {
		t.Fatalf("n2, which cannot save a term, is %v", s)
	}
}
