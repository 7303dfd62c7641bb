package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// checkEvery gives every node of a test site a short consistency check
// interval.
func checkEvery(d time.Duration) func(*server.Config) {
	return func(cfg *server.Config) {
		cfg.Shard.DigestInterval = d
		cfg.Shard.DigestTimeout = 10 * time.Second
	}
}

// gaugeValue returns the value of the gauge name with label value lv ("":
// a gauge without labels) in n's registry (zero when absent).
func gaugeValue(t *testing.T, n *Node, name, lv string) float64 {
	t.Helper()
	fams, err := n.Srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, lv) || (lv == "" && len(m.GetLabel()) == 0) {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// counterSum sums the counter name over every series of n that has the
// label value lv ("" for all).
func counterSum(t *testing.T, n *Node, name, lv string) float64 {
	t.Helper()
	fams, err := n.Srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if lv == "" || hasLabel(m, lv) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// mismatchChecks sums causeway_shard_digest_checks_total{result="mismatch"}
// over every shard of n.
func mismatchChecks(t *testing.T, n *Node) float64 {
	t.Helper()
	return counterSum(t, n, "causeway_shard_digest_checks_total", "mismatch")
}

// everyReplicaChecked waits until every replica of the site concluded at
// least n checks, and reports a replica that is not healthy.
func everyReplicaChecked(c *Cluster, n int) error {
	for _, node := range c.Live() {
		for _, g := range node.Srv.Groups() {
			st := g.CheckStatus()
			if st.Checks < n {
				return fmt.Errorf("%s/%s: %d checks concluded, want %d", node.ID, g.ID(), st.Checks, n)
			}
			if st.Verdict != shard.VerdictHealthy {
				return fmt.Errorf("%s/%s: verdict %v after %d checks", node.ID, g.ID(), st.Verdict, st.Checks)
			}
		}
	}
	return nil
}

// TestHealthySiteRaisesNoDigestMismatch: a 3-node site under writes,
// overwrites and deletes, with garbage collection removing versions
// (replicated: every replica removes the same ones), runs consistency
// checks at start and every interval. Every check on every replica
// agrees: no mismatch is counted, no replica refuses reads.
func TestHealthySiteRaisesNoDigestMismatch(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		checkEvery(500 * time.Millisecond)(cfg)
		cfg.Shard.GCInterval = 200 * time.Millisecond
		cfg.Shard.VersionRetention = 100 * time.Millisecond
	})
	ctx := ctxT(t, 2*time.Minute)
	// Every replica took part in the check at start.
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "every replica's check at start", func() error { return everyReplicaChecked(c, 1) })

	nodes := c.Live()
	for i := 0; i < 300; i++ {
		n := nodes[i%len(nodes)]
		key := []byte(fmt.Sprintf("healthy/%d", i%60))
		var err error
		if i%7 == 6 {
			_, err = n.KV.Delete(ctx, &kvv1.DeleteRequest{Key: key})
		} else {
			_, err = n.KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte(fmt.Sprint("v", i))})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	poll.Until(t, 30*time.Second, "garbage collection to remove versions", func() error {
		removed := 0.0
		for _, n := range nodes {
			removed += counterSum(t, n, "causeway_shard_gc_removed_versions_total", "")
		}
		if removed == 0 {
			return errors.New("nothing removed yet")
		}
		return nil
	})
	base := map[string]int{}
	for _, n := range nodes {
		for _, g := range n.Srv.Groups() {
			base[n.ID+"/"+g.ID().String()] = g.CheckStatus().Checks
		}
	}
	// Two more checks everywhere, after the writes and the collections.
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "two more checks on every replica", func() error {
		for _, n := range nodes {
			for _, g := range n.Srv.Groups() {
				if st := g.CheckStatus(); st.Checks < base[n.ID+"/"+g.ID().String()]+2 {
					return fmt.Errorf("%s/%s: %d checks", n.ID, g.ID(), st.Checks)
				}
			}
		}
		return nil
	})
	if err := everyReplicaChecked(c, 3); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if m := mismatchChecks(t, n); m != 0 {
			t.Errorf("%s counted %v mismatching checks", n.ID, m)
		}
		for _, g := range n.Srv.Groups() {
			if v := gaugeValue(t, n, "causeway_shard_digest_mismatch", g.ID().String()); v != 0 || g.Corrupt() {
				t.Errorf("%s/%s refuses reads (gauge %v)", n.ID, g.ID(), v)
			}
		}
	}
}

// TestCorruptReplicaIsDetectedWithinOneCheck: one follower's state of a
// shard is damaged past the state machine (storage.CorruptForTest). The
// first consistency check after the damage finds it in the minority: the
// follower counts a mismatch, raises causeway_shard_digest_mismatch and
// refuses reads, so a CAUSAL read through it is served by another replica
// (the right value, never the damaged one) and a shard scan on it fails
// as retryable; the two healthy replicas count the mismatch and keep
// serving. Draining the follower and taking it back (the repair in
// docs/operations.md) re-creates its replica from a snapshot, which
// checks healthy and serves reads again.
func TestCorruptReplicaIsDetectedWithinOneCheck(t *testing.T) {
	const interval = time.Second
	c := New(t, 3, checkEvery(interval))
	ctx := ctxT(t, 3*time.Minute)
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "every replica's check at start", func() error { return everyReplicaChecked(c, 1) })

	key := []byte("digest/victim")
	if _, err := c.Node("n1").KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("right")}); err != nil {
		t.Fatal(err)
	}
	sh, err := c.Node("n1").Srv.Router().Shard("default", key)
	if err != nil {
		t.Fatal(err)
	}
	leader, victim := leaderAndFollower(t, c, sh)
	g := victim.Srv.Router().Local(sh)
	waitFollowerHas(t, ctx, victim, [][]byte{key}, "right")

	if err := shard.CorruptForTest(g, key, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	damagedAt := g.Status().AppliedIndex
	t.Logf("damaged %s on %s at applied index %d (leader %s)", sh, victim.ID, damagedAt, leader.ID)

	poll.Every(20*time.Millisecond).Until(t, time.Minute, "the damaged replica to be found", func() error {
		if st := g.CheckStatus(); st.Verdict != shard.VerdictCorrupt {
			return fmt.Errorf("verdict %v at index %d", st.Verdict, st.Index)
		}
		return nil
	})
	// Within one check interval: the first check after the damage found
	// it, on every replica.
	for _, n := range c.Live() {
		st := n.Srv.Router().Local(sh).CheckStatus()
		want := shard.VerdictHealthy
		if n == victim {
			want = shard.VerdictCorrupt
		}
		poll.Every(20*time.Millisecond).Until(t, 30*time.Second, n.ID+" to conclude the check after the damage", func() error {
			st = n.Srv.Router().Local(sh).CheckStatus()
			for _, r := range st.Recent {
				if r.Index > damagedAt {
					return nil
				}
			}
			return fmt.Errorf("recent checks %v", st.Recent)
		})
		for _, r := range st.Recent {
			if r.Index > damagedAt {
				if r.Verdict != want {
					t.Errorf("%s: the first check after the damage (index %d) decided %v, want %v; recent %v", n.ID, r.Index, r.Verdict, want, st.Recent)
				}
				break
			}
		}
		poll.Until(t, 10*time.Second, n.ID+" to count the mismatch", func() error {
			if m := mismatchChecks(t, n); m < 1 {
				return fmt.Errorf("%v mismatching checks", m)
			}
			return nil
		})
		want01 := 0.0
		if n == victim {
			want01 = 1
		}
		if v := gaugeValue(t, n, "causeway_shard_digest_mismatch", sh.String()); v != want01 {
			t.Errorf("%s: causeway_shard_digest_mismatch{shard=%s} = %v, want %v", n.ID, sh, v, want01)
		}
	}

	// The damaged replica serves no reads.
	if err := g.Read(func(*storage.ShardTx) error { return nil }); !errors.Is(err, shard.ErrCorrupt) {
		t.Fatalf("local read on the damaged replica: %v, want ErrCorrupt", err)
	}
	_, err = victim.Peer.ScanShard(ctx, &peerv1.ScanShardRequest{Shard: &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID}, Limit: 10})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("shard scan on the damaged replica: %v, want UNAVAILABLE", err)
	}
	for _, n := range c.Live() {
		resp, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: key})
		if err != nil || string(resp.Value) != "right" {
			t.Fatalf("CAUSAL read through %s: %q, %v; want %q", n.ID, resp.GetValue(), err, "right")
		}
	}

	// Repair: move the replica off the node and back; it is re-created
	// from the leader's snapshot.
	drain := func(draining bool) {
		poll.Every(100*time.Millisecond).Until(t, 30*time.Second, fmt.Sprintf("drain %s (%v)", victim.ID, draining), func() error {
			_, err := victim.Peer.Drain(ctx, &peerv1.DrainRequest{NodeId: victim.ID, Draining: draining})
			return err // the catalog may be electing a leader
		})
	}
	drain(true)
	poll.Every(50*time.Millisecond).Until(t, time.Minute, victim.ID+" to host no replica of "+sh.String(), func() error {
		if victim.Srv.Router().Local(sh) != nil {
			return errors.New("still hosted")
		}
		return nil
	})
	drain(false)
	c.WaitSettled(2 * time.Minute)
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "the re-created replica to check healthy", func() error {
		g := victim.Srv.Router().Local(sh)
		if g == nil {
			return errors.New("not hosted")
		}
		if st := g.CheckStatus(); st.Verdict != shard.VerdictHealthy {
			return fmt.Errorf("verdict %v", st.Verdict)
		}
		return nil
	})
	if v := gaugeValue(t, victim, "causeway_shard_digest_mismatch", sh.String()); v != 0 {
		t.Errorf("after the repair: causeway_shard_digest_mismatch = %v", v)
	}
	var got string
	if err := victim.Srv.Router().Local(sh).Read(func(st *storage.ShardTx) error {
		r, _, err := st.Latest(key, false)
		got = string(r.Value)
		return err
	}); err != nil || got != "right" {
		t.Fatalf("the repaired replica reads %q, %v", got, err)
	}
}

// TestCorruptLeaderHandsOver: when the damaged replica is the shard's
// leader, it refuses reads like any other and hands its leadership to a
// replica that agrees with the majority; STRONG reads then return the
// right value.
func TestCorruptLeaderHandsOver(t *testing.T) {
	c := New(t, 3, checkEvery(time.Second))
	ctx := ctxT(t, 2*time.Minute)
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "every replica's check at start", func() error { return everyReplicaChecked(c, 1) })
	key := []byte("digest/leader")
	if _, err := c.Node("n1").KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("right")}); err != nil {
		t.Fatal(err)
	}
	sh, _ := c.Node("n1").Srv.Router().Shard("default", key)
	leader := leaderNode(t, c, sh)
	g := leader.Srv.Router().Local(sh)
	if err := shard.CorruptForTest(g, key, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	poll.Every(20*time.Millisecond).Until(t, time.Minute, "the damaged leader to hand over", func() error {
		if !g.Corrupt() {
			return errors.New("not found yet")
		}
		if g.IsLeader() {
			return errors.New("still leads")
		}
		return nil
	})
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "a STRONG read of the right value", func() error {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := leader.KV.Get(rctx, &kvv1.GetRequest{Key: key, Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		if err != nil {
			return err
		}
		if string(resp.Value) != "right" {
			t.Fatalf("STRONG read returned %q", resp.Value)
		}
		return nil
	})
}

// leaderNode returns the node that leads sh.
func leaderNode(t *testing.T, c *Cluster, sh placement.Shard) *Node {
	t.Helper()
	var out *Node
	poll.Until(t, 30*time.Second, "a leader of "+sh.String(), func() error {
		for _, n := range c.Live() {
			if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
				out = n
				return nil
			}
		}
		return errors.New("no leader")
	})
	return out
}

// TestLeadershipDoesNotMoveToACorruptReplica: the shard's leader refuses
// to transfer its leadership to a replica that failed the last consistency
// check. Before, the site catalog's leader balancing moved the leadership
// of a shard to its damaged replica again and again (it is often the
// preferred leader); each time the replica refused the STRONG reads and
// CAS of the shard until its next check handed the leadership over.
func TestLeadershipDoesNotMoveToACorruptReplica(t *testing.T) {
	c := New(t, 3, checkEvery(time.Second))
	ctx := ctxT(t, 2*time.Minute)
	poll.Every(50*time.Millisecond).Until(t, time.Minute, "every replica's check at start", func() error { return everyReplicaChecked(c, 1) })
	key := []byte("digest/no-transfer")
	if _, err := c.Node("n1").KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("right")}); err != nil {
		t.Fatal(err)
	}
	sh, _ := c.Node("n1").Srv.Router().Shard("default", key)
	leader, victim := leaderAndFollower(t, c, sh)
	waitFollowerHas(t, ctx, victim, [][]byte{key}, "right")
	if err := shard.CorruptForTest(victim.Srv.Router().Local(sh), key, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	lg := leader.Srv.Router().Local(sh)
	poll.Every(20*time.Millisecond).Until(t, time.Minute, "the leader's check to find the damaged replica", func() error {
		if !lg.DiffersFromMajority(victim.ID) {
			return fmt.Errorf("%s agrees at the check of index %d", victim.ID, lg.CheckStatus().Index)
		}
		return nil
	})
	ref := &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID}
	// The damaged replica says so to the site catalog, which then leaves
	// the leadership where it is.
	poll.Every(20*time.Millisecond).Until(t, time.Minute, "the damaged replica to report its failed check", func() error {
		st, err := victim.Peer.ReplicaStatus(ctx, &peerv1.ReplicaStatusRequest{Shard: ref})
		if err != nil {
			return err
		}
		if !st.FailedCheck {
			return errors.New("FailedCheck is false")
		}
		return nil
	})
	_, err := leader.Peer.ChangeReplicas(ctx, &peerv1.ChangeReplicasRequest{Shard: ref, Op: peerv1.ChangeReplicasRequest_OP_TRANSFER_LEADER,
		NodeId: victim.ID, PeerAddr: victim.Srv.PeerAddr()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("leadership transfer to the damaged replica %s: %v; want FailedPrecondition", victim.ID, err)
	}
	if g := victim.Srv.Router().Local(sh); g.IsLeader() {
		t.Fatalf("the damaged replica %s leads %s", victim.ID, sh)
	}
}
