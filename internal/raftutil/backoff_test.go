package raftutil

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// inmemGroup starts n voters on connected in-memory transports, with
// conf applied to each, and waits for a leader.
func inmemGroup(t *testing.T, n int, conf func(*raft.Config)) ([]*raft.Raft, []*raft.InmemTransport) {
	t.Helper()
	var rafts []*raft.Raft
	var transports []*raft.InmemTransport
	var servers []raft.Server
	for i := 0; i < n; i++ {
		addr, trans := raft.NewInmemTransport("")
		transports = append(transports, trans)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("r%d", i)), Address: addr})
	}
	for _, a := range transports {
		for _, b := range transports {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	for i := 0; i < n; i++ {
		c := raft.DefaultConfig()
		c.LocalID = servers[i].ID
		c.HeartbeatTimeout = 100 * time.Millisecond
		c.ElectionTimeout = 100 * time.Millisecond
		c.LeaderLeaseTimeout = 100 * time.Millisecond
		c.CommitTimeout = 5 * time.Millisecond
		c.LogOutput = io.Discard
		conf(c)
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(c, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), transports[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Shutdown().Error() })
		rafts = append(rafts, r)
	}
	if err := rafts[0].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rafts[0].State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("r0 did not become leader")
		}
		if rafts[0].State() == raft.Follower && rafts[0].Leader() != "" {
			// Someone else leads: hand it to r0 for a fixed layout.
			for _, r := range rafts[1:] {
				if r.State() == raft.Leader {
					_ = r.LeadershipTransferToServer(servers[0].ID, servers[0].Address).Error()
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return rafts, transports
}

// TestFollowerBackFromAnOutageGetsEntriesAtOnce: a follower that was cut
// off while the leader kept writing gets the leader's entries within the
// replication backoff's cap once it is back. Released, the leader's wait
// between attempts doubled up to 10.24 s, so a follower back from ten
// seconds away went without entries for up to ten more, and the next
// node to stop left its groups without a quorum for that long (seen in
// rolling restarts of real processes: 2-4.8 s write stalls).
func TestFollowerBackFromAnOutageGetsEntriesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts a follower off for 12 s")
	}
	rafts, trans := inmemGroup(t, 3, func(c *raft.Config) { c.MaxReplicationBackoff = MaxReplicationBackoff(c.HeartbeatTimeout) })
	leader, cut := rafts[0], rafts[2]
	// Cut r2 off both ways, and write for long enough that the leader's
	// failures to reach it climb to the top of the released backoff.
	trans[0].Disconnect(trans[2].LocalAddr())
	trans[1].Disconnect(trans[2].LocalAddr())
	trans[2].DisconnectAll()
	until := time.Now().Add(12 * time.Second)
	for time.Now().Before(until) {
		if err := leader.Apply([]byte("x"), time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := leader.Barrier(time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	want := leader.LastIndex()
	if got := cut.AppliedIndex(); got >= want {
		t.Fatalf("r2 applied %d while cut off, want less than %d", got, want)
	}
	trans[0].Connect(trans[2].LocalAddr(), trans[2])
	trans[1].Connect(trans[2].LocalAddr(), trans[2])
	trans[2].Connect(trans[0].LocalAddr(), trans[0])
	trans[2].Connect(trans[1].LocalAddr(), trans[1])
	back := time.Now()
	// Keep writing, as the clients of a live group do: every write
	// triggers the leader's replication to r2, which waits out its
	// backoff first.
	deadline := back.Add(3 * time.Second)
	for cut.AppliedIndex() < want {
		if time.Now().After(deadline) {
			t.Fatalf("r2 applied %d of %d entries 3 s after it was back (the leader's replication to it still backing off)", cut.AppliedIndex(), want)
		}
		_ = leader.Apply([]byte("y"), time.Second).Error()
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("r2 caught up %v after it was back", time.Since(back).Round(time.Millisecond))
}
