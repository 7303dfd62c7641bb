package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hashicorp/raft"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/shard"
)

// Read leases (docs/adr/024-read-leases.md): a shard leader serves STRONG
// reads without a leadership confirmation round while its followers'
// promises hold. The tests below show the lease in use and each of the
// three ways it could outlive the leadership, each closed by a guard that
// a test catches through porcupine.

// leaseScenario is a key of a shard that one node leads, and the history
// of the operations on it.
type leaseScenario struct {
	t   *testing.T
	key string
	sh  placement.Shard
	h   *history
}

// ledBy waits until n leads the shard of some key that starts with
// prefix and returns it.
func ledBy(t *testing.T, n *Node, prefix string) *leaseScenario {
	t.Helper()
	s := &leaseScenario{t: t, h: &history{start: time.Now()}}
	poll.Until(t, time.Minute, "a shard led by "+n.ID, func() error {
		for i := 0; i < 200; i++ {
			k := fmt.Sprint(prefix, i)
			sh, _ := n.Srv.Router().Shard("default", []byte(k))
			if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
				s.key, s.sh = k, sh
				return nil
			}
		}
		return fmt.Errorf("%s leads no shard", n.ID)
	})
	return s
}

// put writes val through n, recording the outcome.
func (s *leaseScenario) put(ctx context.Context, n *Node, val string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := s.h.now()
	_, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(s.key), Value: []byte(val)})
	s.h.add(0, kvInput{op: "put", key: s.key, value: val}, kvOutput{ok: err == nil, unknown: err != nil}, call, s.h.now())
	return err
}

// strongGet reads the key through n with a STRONG read, recording a read
// that answered; it returns the value and whether it answered.
func (s *leaseScenario) strongGet(ctx context.Context, n *Node, timeout time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	call := s.h.now()
	resp, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(s.key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil {
		return "", false
	}
	s.h.add(1, kvInput{op: "get", key: s.key}, kvOutput{value: string(resp.Value)}, call, s.h.now())
	return string(resp.Value), true
}

// group returns n's replica of the scenario's shard.
func (s *leaseScenario) group(n *Node) *shard.Group {
	g := n.Srv.Router().Local(s.sh)
	if g == nil {
		s.t.Fatalf("%s hosts no replica of %s", n.ID, s.sh)
	}
	return g
}

// staleReads sends five STRONG reads to n and fails the test if the
// history is not linearizable.
func (s *leaseScenario) staleReads(ctx context.Context, n *Node, stale string) {
	s.t.Helper()
	got := 0
	for i := 0; i < 5; i++ {
		if v, ok := s.strongGet(ctx, n, 300*time.Millisecond); ok && v == stale {
			got++
		}
	}
	if res := check(s.t, s.h); res != porcupine.Ok {
		s.t.Fatalf("STRONG reads on a replica that no longer leads: %d of 5 returned the overwritten value; the history is not linearizable (%v)", got, res)
	}
}

// TestStrongReadsOnReadLease: on a healthy site a shard leader serves
// STRONG reads on its read lease (causeway_shard_lease_reads_total grows);
// with ReadLeases off every STRONG read waits for a confirmation round.
func TestStrongReadsOnReadLease(t *testing.T) {
	for _, leases := range []bool{true, false} {
		t.Run(fmt.Sprint("leases=", leases), func(t *testing.T) {
			c := New(t, 3, func(cfg *server.Config) { cfg.Shard.ReadLeases = leases })
			ctx := ctxT(t, time.Minute)
			n := c.Node("n1")
			s := ledBy(t, n, "lease/")
			if err := s.put(ctx, n, "v", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if leases {
				poll.Until(t, 30*time.Second, "a STRONG read on the lease", func() error {
					if v, ok := s.strongGet(ctx, n, 5*time.Second); !ok || v != "v" {
						return fmt.Errorf("read %q (answered: %v)", v, ok)
					}
					if counterSum(t, n, "causeway_shard_lease_reads_total", "") == 0 {
						return fmt.Errorf("no read served on the lease yet")
					}
					return nil
				})
				return
			}
			for i := 0; i < 20; i++ {
				if v, ok := s.strongGet(ctx, n, 5*time.Second); !ok || v != "v" {
					t.Fatalf("read %q (answered: %v)", v, ok)
				}
			}
			if l, checks := counterSum(t, n, "causeway_shard_lease_reads_total", ""), counterSum(t, n, "causeway_shard_leader_checks_total", ""); l != 0 || checks == 0 {
				t.Fatalf("with ReadLeases off: %v reads on the lease, %v confirmation rounds", l, checks)
			}
		})
	}
}

// TestTransferVoidsReadLease: a leader transfers leadership while its
// followers' answers no longer reach it. The target is elected at once
// (a transfer's votes bypass the voters' known leader) and a newer value
// is written through it, while the old leader's lease from the answers
// before the cut has not run out. The old leader sent the transfer, so
// its lease is void for the term: its STRONG reads need a confirmation
// round, which cannot succeed. With the guard lease-transfer off the
// lease holds and the old leader serves the overwritten value.
func TestTransferVoidsReadLease(t *testing.T) {
	// Promises of 4 s: a lease outlives the cut by up to 2 s.
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 4*time.Second, 4*time.Second, 4*time.Second
	})
	ctx := ctxT(t, 3*time.Minute)
	old, target, third := c.Node("n1"), c.Node("n2"), c.Node("n3")
	// raft transfers only once the target holds the leader's whole log:
	// an entry appended after the cut (a Close a read asked for) stalls
	// the transfer until raft gives it up. The scenario then starts over
	// on another key.
	for attempt := 1; attempt <= 3; attempt++ {
		s := ledBy(t, old, fmt.Sprintf("lease%d/", attempt))
		if err := s.put(ctx, old, "old", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if v, ok := s.strongGet(ctx, old, 10*time.Second); !ok || v != "old" {
			t.Fatalf("read %q (answered: %v)", v, ok)
		}
		r := s.group(old).Raft()
		var addr raft.ServerAddress
		for _, srv := range r.GetConfiguration().Configuration().Servers {
			if srv.ID == raft.ServerID(target.ID) {
				addr = srv.Address
			}
		}
		tr := s.group(target).Raft()
		poll.Until(t, 30*time.Second, "the target holding the leader's whole log", func() error {
			if last, tl := r.LastIndex(), tr.LastIndex(); r.CommitIndex() != last || tl != last {
				return fmt.Errorf("leader's last %d, committed %d; the target's last %d", last, r.CommitIndex(), tl)
			}
			return nil
		})
		// The old leader hears nothing more; what it sends still arrives.
		c.Cut(target, old)
		c.Cut(third, old)
		go func() { _ = r.LeadershipTransferToServer(raft.ServerID(target.ID), addr).Error() }()
		err := poll.Wait(10*time.Second, func() error { return s.put(ctx, target, "new", time.Second) })
		if err != nil {
			t.Logf("attempt %d: no write through the transfer's target (%v): leader %v term %d last %d commit %d; target %v term %d last %d; starting over",
				attempt, err, r.State(), r.CurrentTerm(), r.LastIndex(), r.CommitIndex(), tr.State(), tr.CurrentTerm(), tr.LastIndex())
			c.Heal()
			continue
		}
		if !s.group(old).IsLeader() {
			t.Fatalf("%s no longer believes it leads %s: the scenario needs a longer leader lease", old.ID, s.sh)
		}
		s.staleReads(ctx, old, "old")
		c.Heal()
		return
	}
	t.Fatal("the transfer did not complete in 3 attempts")
}

// TestRestartedReplicaHoldsItsVote: a leader keeps its lease through one
// follower's answers while the other follower, cut off from it, campaigns.
// The answering follower restarts and forgets the leader. Had it voted at
// once, the campaigner would be elected and a newer value written while
// the old leader, cut off too, still held its lease. A restarted replica
// grants no vote for its promise, so the election waits until the lease
// ran out. With the guard vote-hold off the restarted follower votes at
// once and the old leader serves the overwritten value.
//
// The scenario decides something only if the campaigner is the one
// elected: the keeper, whose log is as new, may win the election by its
// own timeout instead, once the lease ran out, and then no stale read is
// possible whatever the guard. Nor does it decide anything if the
// campaigner was elected late while the keeper held no vote. The test
// then starts over on a new site.
func TestRestartedReplicaHoldsItsVote(t *testing.T) {
	for attempt := 1; attempt <= 3; attempt++ {
		if holdVoteScenario(t, attempt) {
			return
		}
	}
	t.Fatal("the campaigner was not elected in 3 attempts: the scenario decided nothing")
}

// holdVoteScenario runs TestRestartedReplicaHoldsItsVote's scenario on a
// new site and reports whether it decided: whether the campaigner was
// elected.
func holdVoteScenario(t *testing.T, attempt int) bool {
	// n1 bootstraps the site: it keeps short timeouts, so that its
	// groups elect it at once.
	c := New(t, 3, func(cfg *server.Config) {
		// No cadence Closes: one appended between the campaigner's cut and
		// the keeper's kill leaves the campaigner's log behind the
		// keeper's, and the keeper is elected.
		cfg.Shard.CloseInterval = 0
		switch cfg.NodeID {
		case "n2": // the leader: it must not step down while cut off, past n3's vote hold
			cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 120*time.Second, 120*time.Second, 120*time.Second
		case "n3": // the follower whose promise (60 s) keeps the lease for 30 s:
			// a loaded machine may take several seconds to restart it and
			// elect the campaigner, all of which must fit in the lease.
			cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 60*time.Second, 60*time.Second, 60*time.Second
		}
	})
	defer c.Close()
	ctx := ctxT(t, 4*time.Minute)
	old, keeper, campaigner := c.Node("n2"), c.Node("n3"), c.Node("n1")
	s := ledBy(t, old, fmt.Sprintf("lease%d/", attempt))
	if err := s.put(ctx, old, "old", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v, ok := s.strongGet(ctx, old, 10*time.Second); !ok || v != "old" {
		t.Fatalf("read %q (answered: %v)", v, ok)
	}
	// The campaigner loses the leader and campaigns; the keeper still
	// knows it and refuses.
	c.Partition([]*Node{old}, []*Node{campaigner})
	killed := time.Now()
	c.Kill(keeper)
	c.Isolate(old)
	c.Restart(keeper, nil)
	t.Logf("attempt %d: %s restarted %v after it was killed", attempt, keeper.ID, time.Since(killed).Round(time.Millisecond))
	poll.Until(t, 150*time.Second, "a write after the election", func() error {
		return s.put(ctx, campaigner, "new", time.Second)
	})
	elected := time.Since(killed)
	t.Logf("attempt %d: %s wrote the new value %v after %s was killed", attempt, campaigner.ID, elected.Round(time.Millisecond), keeper.ID)
	if !s.group(campaigner).IsLeader() {
		t.Logf("attempt %d: %s, not the campaigner, was elected; starting over", attempt, keeper.ID)
		return false
	}
	// A campaigner elected late without a vote held (something else
	// delayed the election, the old leader's lease may have run out
	// before the reads below) decides nothing either.
	if held := counterSum(t, keeper, "causeway_transport_lease_refusals_total", "vote_held"); held == 0 && elected > 10*time.Second {
		t.Logf("attempt %d: %s was elected %v after the kill and %s held no vote; starting over", attempt, campaigner.ID, elected.Round(time.Millisecond), keeper.ID)
		return false
	}
	if !s.group(old).IsLeader() {
		t.Fatalf("%s no longer believes it leads %s: the scenario needs a longer leader lease", old.ID, s.sh)
	}
	s.staleReads(ctx, old, "old")
	c.Heal()
	return true
}
