package clustertest

import (
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// TestGetTxnWithoutSessionSeesAcknowledgedWrites: a GetTxn without a
// session, called after a write was acknowledged, returns that write,
// at every node, although another shard it reads stays idle. k1 is
// written once and left alone; then k2 and k3 (other shards) are written
// one after the other, and after each acknowledgement a session-less
// GetTxn of the keys at every node must return them. With the snapshot
// taken from the idle shard's newest write (guard txn-fresh off) every
// node answers that k2 is not found.
func TestGetTxnWithoutSessionSeesAcknowledgedWrites(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	nodes := c.Live()
	r := nodes[0].Srv.Router()
	k1 := []byte("fresh/k1")
	sh1, _ := r.Shard("default", k1)
	k2, sh2 := keyOfOtherShard(t, r, "fresh/k2-", sh1, func(placement.Shard) bool { return true })
	k3, _ := keyOfOtherShard(t, r, "fresh/k3-", sh1, func(sh placement.Shard) bool { return sh.ID != sh2.ID })
	put := func(n *Node, key []byte, val string) {
		t.Helper()
		if _, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte(val)}); err != nil {
			t.Fatal(err)
		}
	}
	put(nodes[0], k1, "one")
	keys := [][]byte{k1}
	for i, k := range [][]byte{k2, k3} {
		val := fmt.Sprint("v", i)
		put(nodes[i%len(nodes)], k, val)
		keys = append(keys, k)
		for _, n := range nodes {
			start := time.Now()
			resp, err := n.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Keys: keys})
			if err != nil {
				t.Fatalf("GetTxn at %s: %v", n.ID, err)
			}
			got := resp.Items[len(keys)-1]
			t.Logf("GetTxn %q at %s: found %v %q, %v", keys, n.ID, got.Found, got.Value, time.Since(start))
			if !got.Found || string(got.Value) != val {
				t.Fatalf("GetTxn without a session at %s after %s=%s was acknowledged: found %v, %q (snapshot %d)", n.ID, k, val, got.Found, got.Value, resp.SnapshotHlc)
			}
			if v := resp.Items[0]; !v.Found || string(v.Value) != "one" {
				t.Fatalf("GetTxn at %s: %s found %v %q, want one", n.ID, k1, v.Found, v.Value)
			}
		}
	}
}
