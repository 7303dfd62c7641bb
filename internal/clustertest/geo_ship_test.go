package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestGeoShipPipelines: with 50 ms between neighbouring sites, writes at
// s1 are shipped with several batches in flight at once (s1 to s2, and s2
// passing them on to s3), not one round trip after another, and every
// write arrives at every site. The answers to s1's and s2's batches are
// held while a second write is made, so the second write reaches s3 only
// if both hops send a batch while another is unanswered. Then a batch of
// s2's writes that starts past what s1 applied of s2 (as if it overtook an
// earlier batch that never came) is refused whole after a bounded wait:
// nothing of it is applied and the answer names the sequence s1 expects
// next.
func TestGeoShipPipelines(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1, Mutate: func(_ string, cfg *server.Config) {
		// Answers are held below: no call may time out and no site be
		// skipped meanwhile, however slow the machine.
		cfg.Geo.CallTimeout, cfg.Geo.SkipAfter = time.Minute, time.Minute
	}})
	n1, n2, n3 := fs.Sites["s1"].Nodes[0], fs.Sites["s2"].Nodes[0], fs.Sites["s3"].Nodes[0]
	const d = 50 * time.Millisecond
	for _, pair := range [][2]*Node{{n1, n2}, {n2, n3}, {n1, n3}} {
		fs.Net.Delay(pair[0].Endpoint(), pair[1].Endpoint(), d, 0)
		fs.Net.Delay(pair[1].Endpoint(), pair[0].Endpoint(), d, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	key := func(i int) []byte { return fmt.Appendf(nil, "pipe/%02d", i) }
	put := func(i int) {
		t.Helper()
		if _, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: key(i), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	arrived := func(n *Node, what string, from, to int) {
		t.Helper()
		poll.Every(20*time.Millisecond).Until(t, 30*time.Second, what, func() error {
			for i := from; i < to; i++ {
				r, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: key(i)})
				if err != nil {
					return err
				}
				if !r.Found {
					return fmt.Errorf("pipe/%02d not found at %s", i, n.Cfg.Site)
				}
			}
			return nil
		})
	}

	hops := []struct {
		from *Node
		to   string
	}{{n1, "s2"}, {n2, "s3"}}
	// Both hops have had a batch of writes answered (a shipper sends more
	// than one batch at a time only to a site that answered it once)
	// before the answers are held.
	put(0)
	arrived(n3, "the first write at s3", 0, 1)
	for _, hop := range hops {
		reg := hop.from.Srv.Registry()
		poll.Every(20*time.Millisecond).Until(t, 30*time.Second, hop.from.Cfg.Site+" shipped writes to "+hop.to, func() error {
			if testutil.ToFloat64(metricVec(t, reg, "causeway_geo_shipped_updates_total", hop.to)) == 0 {
				return fmt.Errorf("no answered batch of writes yet")
			}
			return nil
		})
	}
	hold := func(down bool) {
		for _, pair := range [][2]*Node{{n2, n1}, {n3, n2}} {
			fs.Net.UpdateRule(pair[0].Endpoint(), pair[1].Endpoint(), func(r *faultnet.Rule) { r.Down = down })
		}
	}
	hold(true)
	put(1)
	arrived(n3, "a write at s3 while the answers of s2 and s3 are held", 1, 2)
	put(2)
	arrived(n3, "a second write at s3 while the answers to the first are held (a second batch in flight on each hop)", 2, 3)
	hold(false)

	const puts = 40
	for i := 3; i < puts; i++ {
		put(i)
		time.Sleep(10 * time.Millisecond) // several writes per round trip
	}
	for _, n := range []*Node{n2, n3} {
		arrived(n, "every write at "+n.Cfg.Site, 0, puts)
	}
	for _, hop := range hops {
		reg := hop.from.Srv.Registry()
		pipelined := testutil.ToFloat64(metricVec(t, reg, "causeway_geo_ship_pipelined_total", hop.to))
		batches := testutil.ToFloat64(metricVec(t, reg, "causeway_geo_ship_batches_total", hop.to))
		t.Logf("%s to %s: %v batches sent with another in flight, %v calls", hop.from.Cfg.Site, hop.to, pipelined, batches)
		if pipelined == 0 {
			t.Errorf("%s never had more than one batch in flight to %s", hop.from.Cfg.Site, hop.to)
		}
	}

	// A batch past the next expected sequence waits, then is refused.
	sh, _ := n1.Srv.Router().Shard("default", []byte("gap"))
	g := n1.Srv.Router().Local(sh)
	if g == nil {
		t.Fatalf("s1 holds no replica of %s", sh)
	}
	before := g.Geo().Origins["s2"]
	conn, err := grpc.NewClient(n1.Srv.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	defer ccancel()
	resp, err := peerv1.NewChainClient(conn).Ship(cctx, &peerv1.ShipRequest{Keyspace: "default", Shard: sh.ID, FromSite: "s2",
		Updates: &peerv1.Replicate{Origin: "s2", Writes: []*peerv1.RemoteWrite{{
			Key: []byte("gap"), Value: []byte("x"), Seq: before.Seq + 5, Hlc: before.HLC + 1<<20,
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("refused: %s", resp.Error)
	if resp.Error == "" || resp.NextSeq != before.Seq+1 {
		t.Fatalf("a batch after a gap: answer %v, want an error and next sequence %d", resp, before.Seq+1)
	}
	if r, err := n1.KV.Get(ctx, &kvv1.GetRequest{Key: []byte("gap")}); err != nil || r.Found {
		t.Fatalf("the batch after a gap was applied (found %v, err %v)", r.GetFound(), err)
	}
	if got := g.Geo().Origins["s2"]; got.Seq != before.Seq {
		t.Fatalf("s1's progress of s2 moved from %d to %d", before.Seq, got.Seq)
	}
}
