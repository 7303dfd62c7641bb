package clustertest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/server"
)

// TestGeoBatchBehindAShortBatchIsRefusedAtOnce: a shipper keeps several
// batches of a stream in flight; when the first ends short at the
// receiver (an update's dependency did not arrive within DepWait), the
// batches after it cannot be applied until the sender sends the missing
// updates again, which it does once every batch in flight is answered. So
// the receiver refuses them as soon as no call of the stream is left to
// fill the gap, instead of holding each until its own DepWait ran out:
// under a steady load of sessions whose writes alternate between shards,
// that hold kept every stream's window idle for up to a DepWait per
// round, and a site fell minutes behind another while the workload ran
// (docs/adr/018, "Batches in flight"). Batches waiting behind the short
// one do not keep each other waiting. A batch after a gap with no call of
// its stream under way (the earlier one was lost) is refused after a
// short grace for it to arrive.
func TestGeoBatchBehindAShortBatchIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	const depWait = 3 * time.Second
	fs := startFixedSites(t, []string{"s1", "s2"}, fixedOptions{Shards: 2, Mutate: func(_ string, cfg *server.Config) {
		cfg.Geo.DepWait = depWait
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n2 := fs.Sites["s2"].Nodes[0]
	sh, other := fs.shards()[0], fs.shards()[1]
	g := n2.Srv.Router().Local(sh)
	if g == nil {
		t.Fatalf("s2 holds no replica of %s", sh)
	}
	p := g.Geo().Origins["s1"]
	// Above every closed timestamp s1 sends meanwhile.
	base := causal.MakeHLC(uint64(time.Now().Add(time.Minute).UnixMilli()), 0)
	conn, err := grpc.NewClient(n2.Srv.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chain := peerv1.NewChainClient(conn)
	type answer struct {
		resp *peerv1.ShipResponse
		err  error
		at   time.Time
	}
	// ship sends s1's updates from seq on (one write each, with deps),
	// as s1's shipper would, and answers on the returned channel.
	ship := func(seq uint64, deps []*peerv1.Dependency) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
			defer ccancel()
			resp, err := chain.Ship(cctx, &peerv1.ShipRequest{Keyspace: "default", Shard: sh.ID, FromSite: "s1",
				Updates: &peerv1.Replicate{Origin: "s1", Writes: []*peerv1.RemoteWrite{{
					Key: []byte("short"), Value: []byte("v"), Seq: seq, Hlc: base + seq - p.Seq, Deps: deps,
				}}}})
			ch <- answer{resp, err, time.Now()}
		}()
		return ch
	}
	// The first batch's update depends on a write of s1 to the other shard
	// that never comes: it applies nothing and ends after DepWait.
	never := []*peerv1.Dependency{{Keyspace: "default", Shard: other.ID, Origin: "s1", Hlc: base + 1<<30}}
	start := time.Now()
	first := ship(p.Seq+1, never)
	time.Sleep(depWait / 2)
	// Two more batches of the window behind it: each waits for the
	// batches before it, but not for the other once the short one ended.
	second, third := ship(p.Seq+2, nil), ship(p.Seq+3, nil)
	a1, a2, a3 := <-first, <-second, <-third
	for i, a := range []answer{a1, a2, a3} {
		if a.err != nil {
			t.Fatalf("batch %d: %v", i+1, a.err)
		}
		if a.resp.Error == "" || a.resp.NextSeq != p.Seq+1 {
			t.Fatalf("batch %d: answer %v, want an error and next sequence %d", i+1, a.resp, p.Seq+1)
		}
	}
	t.Logf("the short batch ended after %v (%s); the batches behind it %v and %v after that (%s)",
		a1.at.Sub(start).Round(time.Millisecond), a1.resp.Error, a2.at.Sub(a1.at).Round(time.Millisecond), a3.at.Sub(a1.at).Round(time.Millisecond), a2.resp.Error)
	for i, a := range []answer{a2, a3} {
		if late := a.at.Sub(a1.at); late > depWait/4 {
			t.Errorf("batch %d, behind the short one, was answered %v after it, not at once: it waited for updates only its sender can send again", i+2, late.Round(time.Millisecond))
		}
	}

	// A batch after a gap, with no call of its stream under way.
	start = time.Now()
	a4 := <-ship(p.Seq+4, nil)
	if a4.err != nil {
		t.Fatal(a4.err)
	}
	if a4.resp.Error == "" || a4.resp.NextSeq != p.Seq+1 {
		t.Fatalf("a batch after a gap: answer %v, want an error and next sequence %d", a4.resp, p.Seq+1)
	}
	t.Logf("a batch after a gap alone was refused after %v", a4.at.Sub(start).Round(time.Millisecond))
	if took := a4.at.Sub(start); took > depWait/4 {
		t.Errorf("a batch after a gap, with no earlier batch under way, was refused after %v, not at once", took.Round(time.Millisecond))
	}
	if got := g.Geo().Origins["s1"]; got.Seq != p.Seq {
		t.Fatalf("s2's progress of s1 moved from %d to %d", p.Seq, got.Seq)
	}
}
