package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/server"
)

// TestReadYourWritesThroughFollowers: followers learn commits late here
// (long commit timeout), so a CAUSAL read through a follower right after a
// write must use the session's floor to wait or forward, never return the
// older value.
func TestReadYourWritesThroughFollowers(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) { cfg.Shard.CommitTimeout = 300 * time.Millisecond })
	ctx := ctxT(t, 60*time.Second)
	key := []byte("ryw/k")
	sh, _ := c.Live()[0].Srv.Router().Shard("default", key)
	var leader, follower *Node
	for _, n := range c.Live() {
		if g := n.Srv.Router().Local(sh); g != nil {
			if g.IsLeader() {
				leader = n
			} else {
				follower = n
			}
		}
	}
	if leader == nil || follower == nil {
		t.Fatalf("shard %s: leader %v follower %v", sh, leader, follower)
	}
	var session []byte
	for i := 0; i < 30; i++ {
		val := fmt.Sprint("v", i)
		p, err := leader.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: session}, Key: key, Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		g, err := follower.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if string(g.Value) != val {
			t.Fatalf("write %d: read through follower %s returned %q, want %q (read-your-writes broken)", i, follower.ID, g.Value, val)
		}
		session = g.Header.Session
	}
	// The follower served those reads itself after waiting for its floor,
	// or handed them to the leader; both are counted.
	reg := follower.Srv.Registry()
	served := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_local_reads_total", "follower"))
	forwarded := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_floor_forwards_total", ""))
	if served+forwarded < 30 {
		t.Fatalf("follower metrics: served %v, forwarded %v", served, forwarded)
	}
	t.Logf("follower %s: %v reads served locally after the floor, %v forwarded to the leader", follower.ID, served, forwarded)
}
