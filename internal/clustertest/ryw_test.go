package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// TestReadYourWritesThroughFollowers: every message from the leader to
// one follower is delayed, so that follower applies each write a little
// after the leader acknowledged it. A CAUSAL read through that follower
// right after a write must use the session's floor: wait until it has
// applied the write (served locally), or hand the read to the leader;
// never return the older value. With the floor wait turned off
// (guards.FloorWait), the follower serves the older value and the test
// fails.
func TestReadYourWritesThroughFollowers(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	key := []byte("ryw/k")
	sh, _ := c.Live()[0].Srv.Router().Shard("default", key)
	leader, follower := leaderAndFollower(t, c, sh)
	// Well below the follower's 100 ms floor wait, well above the time
	// between a write's acknowledgement and the next read.
	c.Delay(leader, follower, 30*time.Millisecond, 0)
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
	// The follower served reads itself after waiting for its floor, or
	// handed them to the leader; both are counted, and the follower path
	// must have been taken.
	reg := follower.Srv.Registry()
	served := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_local_reads_total", "follower"))
	forwarded := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_floor_forwards_total", ""))
	t.Logf("follower %s: %v reads served locally after the floor, %v forwarded to the leader", follower.ID, served, forwarded)
	if served < 1 || served+forwarded < 30 {
		t.Fatalf("follower metrics: served %v, forwarded %v: the follower path was not exercised", served, forwarded)
	}
}

// TestRereadOwnWriteKeepsFollowerReads: a session that reads back its own
// write through a follower keeps reading other shards on that follower.
// Reading a version the session already holds as the key's floor does not
// raise its PastHLC (causal.Session.HoldsKeyVersion), so the next read, of
// a shard whose replica holds nothing as new as that write, needs no floor
// there and is served by the follower instead of going to the leader.
func TestRereadOwnWriteKeepsFollowerReads(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	r := c.Live()[0].Srv.Router()
	k1 := []byte("reread/a")
	s1, _ := r.Shard("default", k1)
	leader, follower := leaderAndFollower(t, c, s1)
	k2, _ := keyOfOtherShard(t, r, "reread/b", s1, func(sh placement.Shard) bool {
		g := follower.Srv.Router().Local(sh)
		return g != nil && !g.IsLeader()
	})
	p, err := leader.KV.Put(ctx, &kvv1.PutRequest{Key: k1, Value: []byte("mine")})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := follower.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: k1})
	if err != nil || string(g1.Value) != "mine" {
		t.Fatalf("re-read of own write through follower %s: %q, %v", follower.ID, g1.GetValue(), err)
	}
	reg := follower.Srv.Registry()
	before := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_floor_forwards_total", ""))
	if _, err := follower.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: g1.Header.Session}, Key: k2}); err != nil {
		t.Fatal(err)
	}
	if after := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_floor_forwards_total", "")); after != before {
		t.Fatalf("follower %s handed the read of %q (another shard) to its leader after the session re-read its own write: the re-read raised the session's floor on every shard", follower.ID, k2)
	}
}
