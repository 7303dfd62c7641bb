package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/shard"
)

// rebuiltSeen is how many times any node of fs took a site's replica for
// one that lost its data.
func (fs *fixedSites) rebuiltSeen(t *testing.T) float64 {
	t.Helper()
	var n float64
	for _, site := range fs.Order {
		for _, node := range fs.Sites[site].Live() {
			n += counterSum(t, node, "causeway_geo_rebuilt_replicas_total", "")
		}
	}
	return n
}

// TestGeoLateBatchIsNotARebuiltReplica: a batch of s2's writes that s3
// applied already arrives at s3 late (it crossed a partition while newer
// batches reached s3 another way, or came from a deposed leader of s2),
// carrying a sequence for s2 behind what s3 applied of it. That is no sign
// that s2 lost its data: s3 neither repairs s2 whole (a repair sends
// versions ahead of their dependencies) nor applies anything of the
// batch. A batch whose write reuses an applied sequence number with a
// newer HLC is that sign, and is taken for it. With the check turned off
// (guards.LateBatch), the late batch has s2 repaired and the test fails.
func TestGeoLateBatchIsNotARebuiltReplica(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n2, n3 := fs.Sites["s2"].Nodes[0], fs.Sites["s3"].Nodes[0]
	sh, _ := n3.Srv.Router().Shard("default", []byte("late/0"))
	g := n3.Srv.Router().Local(sh)
	if g == nil {
		t.Fatalf("s3 holds no replica of %s", sh)
	}
	before := g.Geo().Origins["s2"]
	var keys []string
	var first *kvv1.PutResponse
	for i := range 3 {
		k := fmt.Sprintf("late/%d", i)
		r, err := n2.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = r
		}
		keys = append(keys, k)
	}
	fs.waitKeys(t, keys, 30*time.Second)
	applied := g.Geo().Origins["s2"]
	if applied.Seq != before.Seq+3 {
		t.Fatalf("s3 applied s2's writes up to %d, want %d", applied.Seq, before.Seq+3)
	}

	conn, err := grpc.NewClient(n3.Srv.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chain := peerv1.NewChainClient(conn)
	ship := func(what string, w *peerv1.RemoteWrite, known uint64) *peerv1.ShipResponse {
		t.Helper()
		resp, err := chain.Ship(ctx, &peerv1.ShipRequest{Keyspace: "default", Shard: sh.ID, FromSite: "s2",
			Updates: &peerv1.Replicate{Origin: "s2", Writes: []*peerv1.RemoteWrite{w}},
			Known:   []*peerv1.OriginProgress{{Site: "s2", Seq: known, Hlc: w.Hlc}}})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return resp
	}

	// The first write's batch, as s2 built it before the other two.
	late := &peerv1.RemoteWrite{Key: []byte("late/0"), Value: []byte("v"), Seq: before.Seq + 1, Hlc: first.Version.GetHlc()}
	resp := ship("the late batch", late, late.Seq)
	if resp.NextSeq != applied.Seq+1 {
		t.Fatalf("answer to the late batch: next sequence %d, want %d", resp.NextSeq, applied.Seq+1)
	}
	if n := counterSum(t, n3, "causeway_geo_rebuilt_replicas_total", "s2"); n != 0 {
		t.Fatalf("s3 took a late batch of s2's writes for a replica that lost its data (%v times) and repaired it whole", n)
	}
	// s2's closes (its idle stream's closed timestamps) may raise the HLC
	// of the progress meanwhile, never its sequence.
	if got := g.Geo().Origins["s2"]; got.Seq != applied.Seq || got.HLC < applied.HLC {
		t.Fatalf("the late batch moved s3's progress of s2 from %+v to %+v", applied, got)
	}

	// A write numbered with an applied sequence but newer than anything
	// applied of s2: s2's replica lost its data and numbers again. Newer
	// than the progress as it is now (s2's closes raise its HLC every few
	// milliseconds, by more than a small margin on a loaded machine).
	now := g.Geo().Origins["s2"]
	again := &peerv1.RemoteWrite{Key: []byte("late/again"), Value: []byte("v"), Seq: applied.Seq - 1, Hlc: now.HLC + 1<<24}
	ship("a renumbered write", again, again.Seq)
	if n := counterSum(t, n3, "causeway_geo_rebuilt_replicas_total", "s2"); n != 1 {
		t.Fatalf("s3 took a write that reuses an applied sequence number %v times for a rebuilt replica, want 1", n)
	}
}

// TestGeoLaggingLeaderWaitsToShip: s1's new shard leader has stored and
// committed writes its state machine has not applied yet (its applies are
// held), while s2 applied them all. Until it catches up, it must not ship
// s1's writes: comparing its stale progress with s2's would take its own
// replica for one that lost its data (renumbering its writes, repairing
// s2 whole). Once it caught up it ships, every write reaches every site
// and the sites converge. With the check turned off
// (guards.LeaderCaughtUp), the lagging leader ships and the test fails.
func TestGeoLaggingLeaderWaitsToShip(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1, Nodes: 3, Mutate: func(_ string, cfg *server.Config) {
		cfg.Geo.ReconcileEvery = 50 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	keys := []string{"lag/0"}
	fs.waitConverged(t, 30*time.Second)
	if _, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Key: []byte(keys[0]), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	fs.waitKeys(t, keys, 30*time.Second)

	sh, _ := fs.Sites["s1"].Nodes[0].Srv.Router().Shard("default", []byte(keys[0]))
	var lagging *Node
	var lg *shard.Group
	var resume func()
	// Hold a follower's applies and write through the leader. Should the
	// leadership move to the held follower meanwhile (an election on a
	// loaded machine), its writes cannot apply there: start over.
	for attempt := 1; ; attempt++ {
		var leader *Node
		lagging, lg = nil, nil
		for _, n := range fs.Sites["s1"].Live() {
			switch g := n.Srv.Router().Local(sh); {
			case g == nil:
			case g.IsLeader():
				leader = n
			case lagging == nil:
				lagging, lg = n, g
			}
		}
		if leader == nil || lagging == nil {
			t.Fatalf("s1 has no leader and follower of %s", sh)
		}
		resume = shard.PauseApplyForTest(lg)
		err := func() error {
			for i := 1; i <= 5; i++ {
				k := fmt.Sprintf("lag/%d", i)
				pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := leader.KV.Put(pctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte("v")})
				pcancel()
				if err != nil {
					return fmt.Errorf("put %s at %s: %w", k, leader.ID, err)
				}
			}
			return nil
		}()
		if err == nil {
			break
		}
		resume()
		if !lg.IsLeader() || attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%s, whose applies are held, took the leadership during the writes (%v): again", lagging.ID, err)
		poll.Every(20*time.Millisecond).Until(t, 30*time.Second, lagging.ID+" caught up", func() error {
			if !lg.CaughtUp() {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	defer resume()
	for i := 1; i <= 5; i++ {
		keys = append(keys, fmt.Sprintf("lag/%d", i))
	}
	s2 := fs.Sites["s2"].Live()[0]
	poll.Every(20*time.Millisecond).Until(t, 30*time.Second, "s1's writes applied at s2", func() error {
		for _, k := range keys {
			r, err := s2.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if !r.Found {
				return fmt.Errorf("%s not at s2", k)
			}
		}
		return nil
	})

	shippedBefore := counterSum(t, lagging, "causeway_geo_ship_batches_total", "s2")
	// Hand s1's leadership to the replica that lags.
	poll.Every(100*time.Millisecond).Until(t, 30*time.Second, lagging.ID+" leads "+sh.String(), func() error {
		if lg.IsLeader() {
			return nil
		}
		cur := fs.leaderGroup("s1", sh)
		if cur == nil {
			return fmt.Errorf("no leader")
		}
		for _, n := range fs.Sites["s1"].Live() {
			if n.Srv.Router().Local(sh) == cur {
				_, err := n.Peer.ChangeReplicas(ctx, &peerv1.ChangeReplicasRequest{Shard: &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID},
					Op: peerv1.ChangeReplicasRequest_OP_TRANSFER_LEADER, NodeId: lagging.ID})
				if err != nil {
					return err
				}
			}
		}
		return fmt.Errorf("leadership not moved yet")
	})
	if lg.CaughtUp() {
		t.Fatalf("%s caught up although its applies are held", lagging.ID)
	}
	// Many reconcile rounds (ReconcileEvery 50 ms) and probe round trips
	// pass while it leads without having applied its log.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && lg.IsLeader() {
		if n := counterSum(t, lagging, "causeway_geo_ship_batches_total", "s2") - shippedBefore; n > 0 {
			t.Fatalf("%s shipped to s2 (%v calls) while leading without having applied its log", lagging.ID, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resume()
	if _, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Key: []byte("lag/after"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "lag/after")
	fs.waitKeys(t, keys, 30*time.Second)
	fs.waitConverged(t, 30*time.Second)
	if n := fs.rebuiltSeen(t); n != 0 {
		t.Fatalf("a replica was taken for one that lost its data %v times", n)
	}
}
