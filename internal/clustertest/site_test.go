package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// replicaCounts returns how many replicas each node holds.
func replicaCounts(m placement.Map) map[placement.NodeID]int {
	out := map[placement.NodeID]int{}
	for _, reps := range m.Shards {
		for _, r := range reps {
			out[r.Node]++
		}
	}
	return out
}

func checkBalance(t *testing.T, m placement.Map, nodes int) {
	t.Helper()
	counts := replicaCounts(m)
	if len(counts) != nodes {
		t.Fatalf("replicas on %d nodes, want %d: %v", len(counts), nodes, counts)
	}
	lo, hi := 1<<30, 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if float64(hi) > 1.5*float64(lo) {
		t.Fatalf("unbalanced: max %d > 1.5 x min %d: %v", hi, lo, counts)
	}
	t.Logf("%d nodes: replicas per node %v", nodes, counts)
}

func TestThreeNodeSiteServesThroughAnyNode(t *testing.T) {
	c := New(t, 3, nil)
	checkBalance(t, c.Map(), 3)
	ctx := ctxT(t, 60*time.Second)
	nodes := c.Live()
	// seen is one session holding every write, so that the scans below
	// see them all through any replica.
	seen := &causal.Session{}
	// Every call, through every node, on keys of every shard.
	for i, n := range nodes {
		for k := 0; k < 16; k++ {
			key := []byte(fmt.Sprintf("via-%s/%02d", n.ID, k))
			p, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte(fmt.Sprint("v", k))})
			if err != nil {
				t.Fatalf("put through %s: %v", n.ID, err)
			}
			// Read it back through another node with the writer's session
			// (read-your-writes across nodes), CAUSAL and STRONG.
			other := nodes[(i+1)%len(nodes)]
			for _, cons := range []kvv1.Consistency{kvv1.Consistency_CONSISTENCY_CAUSAL, kvv1.Consistency_CONSISTENCY_STRONG} {
				g, err := other.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: key, Consistency: cons})
				if err != nil || !g.Found || string(g.Value) != fmt.Sprint("v", k) {
					t.Fatalf("get %s through %s (%v): %v %v", key, other.ID, cons, g, err)
				}
			}
			h, err := other.KV.History(ctx, &kvv1.HistoryRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: key})
			if err != nil || len(h.Versions) != 1 {
				t.Fatalf("history through %s: %v %v", other.ID, h, err)
			}
			cas, err := other.KV.CompareAndSwap(ctx, &kvv1.CompareAndSwapRequest{Key: key, Expect: &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: p.Version}, Value: []byte("swapped")})
			if err != nil {
				t.Fatalf("cas through %s: %v", other.ID, err)
			}
			if cas.Version.Hlc <= p.Version.Hlc {
				t.Fatalf("cas version %v not after %v", cas.Version, p.Version)
			}
			sess, err := causal.DecodeSession(cas.Header.Session)
			if err != nil {
				t.Fatal(err)
			}
			seen.Merge(sess)
		}
	}
	for _, n := range nodes {
		tok := seen.Encode()
		resp, err := n.KV.Scan(ctx, &kvv1.ScanRequest{Header: &kvv1.RequestHeader{Session: tok}, Prefix: []byte("via-"), Limit: 20})
		if err != nil {
			t.Fatalf("scan through %s: %v", n.ID, err)
		}
		total := len(resp.Items)
		for len(resp.Continuation) > 0 {
			if resp, err = n.KV.Scan(ctx, &kvv1.ScanRequest{Header: &kvv1.RequestHeader{Session: tok}, Prefix: []byte("via-"), Limit: 20, Continuation: resp.Continuation}); err != nil {
				t.Fatal(err)
			}
			total += len(resp.Items)
		}
		if total != 16*len(nodes) {
			t.Fatalf("scan through %s found %d keys, want %d", n.ID, total, 16*len(nodes))
		}
		bg, err := n.KV.BatchGet(ctx, &kvv1.BatchGetRequest{Keys: [][]byte{[]byte("via-n1/03"), []byte("via-n2/05"), []byte("missing")}, Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		if err != nil || string(bg.Items[0].Value) != "swapped" || string(bg.Items[1].Value) != "swapped" || bg.Items[2].Found {
			t.Fatalf("batch get through %s: %v %v", n.ID, bg, err)
		}
	}
	for _, n := range nodes {
		d, err := n.KV.Delete(ctx, &kvv1.DeleteRequest{Key: []byte(fmt.Sprintf("via-%s/00", n.ID))})
		if err != nil || !d.Existed {
			t.Fatalf("delete through %s: %v %v", n.ID, d, err)
		}
		// With the deleter's session, every node sees the delete.
		for _, o := range nodes {
			g, err := o.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: d.Header.Session}, Key: []byte(fmt.Sprintf("via-%s/00", n.ID))})
			if err != nil || g.Found {
				t.Fatalf("deleted key through %s: %v %v", o.ID, g, err)
			}
		}
	}
}

func placementID(id string) placement.NodeID { return placement.NodeID(id) }
