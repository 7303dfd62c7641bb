package clustertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/server"
)

// TestStrongReadThroughAFollowerWaitsOutTheLeadersDeath: the leader of
// shards dies (kill -9) and STRONG reads of their keys reach a node that
// holds follower replicas, whose raft still names the dead leader until
// the survivors elect another (2 to 6 s). A Get, a History and a Scan wait
// for the new leaders, as a write does, instead of failing at once with
// the dead leader's connection error (which a client's retries, about
// 1.5 s of backoff, did not outlast).
func TestStrongReadThroughAFollowerWaitsOutTheLeadersDeath(t *testing.T) {
	c := New(t, 3, nil)
	c.WaitSettled(60 * time.Second)
	ctx := ctxT(t, 2*time.Minute)
	n1 := c.Node("n1")

	// The node (not n1) that leads the most shards, and a key in each of
	// two of them.
	led := map[string][]placement.Shard{}
	var victim *Node
	for _, n := range c.Live() {
		if n == n1 {
			continue
		}
		for _, g := range n.Srv.Groups() {
			if g.IsLeader() && g.ID().Keyspace == "default" {
				led[n.ID] = append(led[n.ID], placement.Shard{Keyspace: g.ID().Keyspace, ID: g.ID().Shard})
			}
		}
		if victim == nil || len(led[n.ID]) > len(led[victim.ID]) {
			victim = n
		}
	}
	if len(led[victim.ID]) < 2 {
		t.Fatalf("%s leads %d shards, want 2", victim.ID, len(led[victim.ID]))
	}
	keys := make([][]byte, 2)
	for i := range keys {
		for j := 0; keys[i] == nil; j++ {
			k := []byte(fmt.Sprintf("k%d-%d", i, j))
			if sh, _ := n1.Srv.Router().Shard("default", k); sh == led[victim.ID][i] {
				keys[i] = k
			}
		}
		if _, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: keys[i], Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	c.Kill(victim)
	t.Logf("killed %s, the leader of %v", victim.ID, led[victim.ID])

	// Each call is one attempt at n1, without a client's retries: n1
	// waits for the elections itself.
	strong := kvv1.Consistency_CONSISTENCY_STRONG
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() {
		defer wg.Done()
		got, err := n1.KV.Get(ctx, &kvv1.GetRequest{Key: keys[0], Consistency: strong})
		if err == nil && string(got.Value) != "v" {
			err = fmt.Errorf("value %q, want v", got.Value)
		}
		errs[0] = err
	}()
	go func() {
		defer wg.Done()
		got, err := n1.KV.History(ctx, &kvv1.HistoryRequest{Key: keys[1], Consistency: strong})
		if err == nil && (len(got.Versions) != 1 || string(got.Versions[0].Value) != "v") {
			err = fmt.Errorf("versions %v, want one of value v", got.Versions)
		}
		errs[1] = err
	}()
	go func() {
		defer wg.Done()
		got, err := n1.KV.Scan(ctx, &kvv1.ScanRequest{Prefix: []byte("k"), Consistency: strong})
		if err == nil && len(got.Items) != 2 {
			err = fmt.Errorf("%d items, want 2", len(got.Items))
		}
		errs[2] = err
	}()
	wg.Wait()
	for i, what := range []string{"Get", "History", "Scan"} {
		if errs[i] != nil {
			t.Errorf("STRONG %s at n1 right after the leader's death: %v", what, errs[i])
		}
	}
}

// TestGetTxnThroughAFollowerWaitsOutTheLeadersDeath: the leader of a
// shard dies (kill -9), and a GetTxn of one of its keys, with a session
// that wrote after the death (its snapshot is above what the shard's
// followers applied, so a follower hands the part to the leader it knows),
// reaches a node that holds a follower replica. The node waits for the
// new leader, as a Get does, instead of failing at once with the dead
// leader's connection error (a peer address the client never dialed).
func TestGetTxnThroughAFollowerWaitsOutTheLeadersDeath(t *testing.T) {
	// The part read on n1's follower replica waits for it to reach the
	// snapshot, which it does once a new leader closes past it: longer
	// than the default CausalWait (2 s) on a loaded machine. What is shown
	// is that the read waits out the election rather than failing with
	// the dead leader's connection error.
	c := New(t, 3, func(cfg *server.Config) { cfg.CausalWait = 20 * time.Second })
	c.WaitSettled(60 * time.Second)
	ctx := ctxT(t, 2*time.Minute)
	n1 := c.Node("n1")

	// A node other than n1 that leads a shard, a key of that shard, and a
	// key of a shard n1 leads.
	var victim *Node
	var victimShard placement.Shard
	var ownShard *placement.Shard
	for _, n := range c.Live() {
		for _, g := range n.Srv.Groups() {
			if !g.IsLeader() || g.ID().Keyspace != "default" {
				continue
			}
			sh := placement.Shard{Keyspace: g.ID().Keyspace, ID: g.ID().Shard}
			switch {
			case n == n1 && ownShard == nil:
				ownShard = &sh
			case n != n1 && victim == nil:
				victim, victimShard = n, sh
			}
		}
	}
	if victim == nil || ownShard == nil {
		t.Fatalf("want a shard led by n1 and one led by another node")
	}
	keyIn := func(sh placement.Shard, prefix string) []byte {
		for j := 0; ; j++ {
			k := []byte(fmt.Sprintf("%s-%d", prefix, j))
			if got, _ := n1.Srv.Router().Shard("default", k); got == sh {
				return k
			}
		}
	}
	key, other := keyIn(victimShard, "txn"), keyIn(*ownShard, "own")
	if _, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	c.Kill(victim)
	t.Logf("killed %s, the leader of %v", victim.ID, victimShard)

	put, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: other, Value: []byte("w")})
	if err != nil {
		t.Fatal(err)
	}
	// At n1, without a client's failover: n1 waits for the election
	// itself rather than fail with the dead leader's connection error
	// (UNAVAILABLE). A replica that had not reached the snapshot in time
	// (DEADLINE_EXCEEDED, retryable: leadership may still be moving after
	// the site settled) is asked again, as a client would.
	var got *kvv1.GetTxnResponse
	for {
		got, err = n1.KV.GetTxn(ctx, &kvv1.GetTxnRequest{
			Header: &kvv1.RequestHeader{Session: put.GetHeader().GetSession()},
			Keys:   [][]byte{key, other},
		})
		if status.Code(err) != codes.DeadlineExceeded || ctx.Err() != nil {
			break
		}
		t.Logf("GetTxn at n1: %v; again", err)
	}
	if err != nil {
		t.Fatalf("GetTxn at n1 right after the leader's death: %v", err)
	}
	if len(got.Items) != 2 || string(got.Items[0].Value) != "v" || string(got.Items[1].Value) != "w" {
		t.Fatalf("GetTxn returned %v, want %s=v and %s=w", got.Items, key, other)
	}
}
