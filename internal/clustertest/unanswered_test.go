package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// TestForwardToSilentNodeRoutedAgain: a node that holds no replica of a
// shard forwards its requests to the replica it lists first, and the
// link to that replica stops carrying packets (no reset: the calls
// neither fail nor get an answer). The other replicas, and the shard's
// leader, stay reachable. Every write, STRONG read and CAUSAL read
// through that node must be answered: the forwarded request is ended
// when its node answers no ping, and routed again through another
// replica. Without the probe each request waits for its deadline.
func TestForwardToSilentNodeRoutedAgain(t *testing.T) {
	c := New(t, 4, nil)
	ctx := ctxT(t, 2*time.Minute)
	x := c.Node("n4")
	r := x.Srv.Router()
	var key []byte
	var sh placement.Shard
	for i := 0; ; i++ {
		key = []byte(fmt.Sprint("silent/", i))
		sh, _ = r.Shard("default", key)
		if r.Local(sh) == nil {
			break
		}
	}
	reps, _ := r.Replicas(sh)
	first := c.Node(string(reps[0].ID))
	c.Partition([]*Node{x}, []*Node{first})
	t.Logf("%s holds no replica of %s; cut from %s, its first replica", x.ID, sh, first.ID)
	reg := x.Srv.Registry()
	for i, cons := range []kvv1.Consistency{kvv1.Consistency_CONSISTENCY_STRONG, kvv1.Consistency_CONSISTENCY_CAUSAL} {
		// Far longer than a probe takes (two seconds), far shorter than
		// the test.
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		p, err := x.KV.Put(cctx, &kvv1.PutRequest{Key: key, Value: []byte(fmt.Sprint("v", i))})
		if err != nil {
			cancel()
			t.Fatalf("write through %s: %v", x.ID, err)
		}
		g, err := x.KV.Get(cctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: key, Consistency: cons})
		cancel()
		if err != nil {
			t.Fatalf("%v read through %s: %v", cons, x.ID, err)
		}
		if string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("%v read through %s: %q, want %q", cons, x.ID, g.Value, fmt.Sprint("v", i))
		}
	}
	if n := testutil.ToFloat64(metricVec(t, reg, "causeway_rpc_forwards_unanswered_total", "")); n < 1 {
		t.Fatalf("%s ended no forwarded request as unanswered: the requests did not reach %s", x.ID, first.ID)
	}
}

// TestReplicaCutFromItsLeaderAsksAnother: the link between a shard's
// leader and one follower is cut; the third replica reaches both, so the
// leader keeps its quorum and no election replaces it, and the cut
// follower knows no leader for as long as the cut lasts. Writes and
// STRONG reads sent to the cut follower's node must be served through the
// third replica, not fail for want of a leader, and once the follower has
// been without a leader for a second, without waiting that second again.
func TestReplicaCutFromItsLeaderAsksAnother(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 2*time.Minute)
	key := []byte("cut/k")
	sh, _ := c.Live()[0].Srv.Router().Shard("default", key)
	leader, follower := leaderAndFollower(t, c, sh)
	c.Partition([]*Node{leader}, []*Node{follower})
	t.Logf("%s leads %s; cut from %s", leader.ID, sh, follower.ID)
	for i := 0; i < 3; i++ {
		val := fmt.Sprint("v", i)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		_, err := follower.KV.Put(cctx, &kvv1.PutRequest{Key: key, Value: []byte(val)})
		if err != nil {
			cancel()
			t.Fatalf("write %d through %s, cut from the leader: %v", i, follower.ID, err)
		}
		put := time.Since(start)
		g, err := follower.KV.Get(cctx, &kvv1.GetRequest{Key: key, Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		cancel()
		t.Logf("write %d: %v, STRONG read: %v", i, put.Round(time.Millisecond), (time.Since(start) - put).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("STRONG read %d through %s, cut from the leader: %v", i, follower.ID, err)
		}
		if string(g.Value) != val {
			t.Fatalf("STRONG read %d through %s: %q, want %q", i, follower.ID, g.Value, val)
		}
	}
	if g := leader.Srv.Router().Local(sh); g == nil || !g.IsLeader() {
		t.Logf("note: %s no longer leads %s", leader.ID, sh)
	}
	// The cut replica has heard from no leader for seconds now: each
	// request through it asks the third replica at once. Each waited a
	// second first (leaderlessAsk), so that these 20 requests took 20 s.
	sctx, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	start := time.Now()
	for i := 0; i < 10; i++ {
		val := fmt.Sprint("w", i)
		if _, err := follower.KV.Put(sctx, &kvv1.PutRequest{Key: key, Value: []byte(val)}); err != nil {
			t.Fatalf("write %d of 10 through %s, cut from the leader, after %v: %v", i, follower.ID, time.Since(start).Round(time.Millisecond), err)
		}
		if _, err := follower.KV.Get(sctx, &kvv1.GetRequest{Key: key, Consistency: kvv1.Consistency_CONSISTENCY_STRONG}); err != nil {
			t.Fatalf("STRONG read %d of 10 through %s, cut from the leader, after %v: %v", i, follower.ID, time.Since(start).Round(time.Millisecond), err)
		}
	}
	t.Logf("10 writes and 10 STRONG reads through %s: %v", follower.ID, time.Since(start).Round(time.Millisecond))

	// A CAUSAL read in the session of a write the cut replica does not
	// hold: the replica cannot reach the floor while the cut lasts, so it
	// hands the read to another replica. It waited for LeaderWait and
	// failed (ErrCausalWait).
	cctx, ccancel := context.WithTimeout(ctx, 12*time.Second)
	defer ccancel()
	start = time.Now()
	var tok []byte
	for i := 0; i < 5; i++ {
		val := fmt.Sprint("c", i)
		pr, err := follower.KV.Put(cctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: key, Value: []byte(val)})
		if err != nil {
			t.Fatalf("write %d of 5 in a session through %s: %v", i, follower.ID, err)
		}
		gr, err := follower.KV.Get(cctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: pr.Header.Session}, Key: key})
		if err != nil {
			t.Fatalf("CAUSAL read %d of 5 of the session's write through %s, cut from the leader, after %v: %v", i, follower.ID, time.Since(start).Round(time.Millisecond), err)
		}
		if string(gr.Value) != val {
			t.Fatalf("CAUSAL read %d through %s: %q, want the session's write %q", i, follower.ID, gr.Value, val)
		}
		tok = gr.Header.Session
	}
	t.Logf("5 writes and 5 CAUSAL reads of them in one session through %s: %v", follower.ID, time.Since(start).Round(time.Millisecond))
}

// TestSilentReplicaIsNotAskedAgainWhileSilent: as in
// TestForwardToSilentNodeRoutedAgain, a node that holds no replica of a
// shard is cut off from the replica it lists first (the link drops
// everything, as with a node stopped with SIGSTOP). The first request
// forwarded there waits out the probe and is routed again; the node was
// then asked again as soon as its two-second mark ran out, so that every
// few seconds, for as long as it stayed silent, another request waited
// out a probe (2 s). It is pinged instead, and asked again only once it
// answers: over ten seconds of writes, one request waits.
func TestSilentReplicaIsNotAskedAgainWhileSilent(t *testing.T) {
	c := New(t, 4, nil)
	ctx := ctxT(t, 2*time.Minute)
	x := c.Node("n4")
	r := x.Srv.Router()
	var sh placement.Shard
	for i := 0; ; i++ {
		sh, _ = r.Shard("default", []byte(fmt.Sprint("silent/", i)))
		if r.Local(sh) == nil {
			break
		}
	}
	reps, _ := r.Replicas(sh)
	first := c.Node(string(reps[0].ID))
	c.Partition([]*Node{x}, []*Node{first})
	t.Logf("%s holds no replica of %s; cut from %s, its first replica", x.ID, sh, first.ID)
	unanswered := func() float64 {
		return testutil.ToFloat64(metricVec(t, x.Srv.Registry(), "causeway_rpc_forwards_unanswered_total", ""))
	}
	start := time.Now()
	n := 0
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		key := []byte(fmt.Sprint("silent/", i))
		if s, _ := r.Shard("default", key); s != sh {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := x.KV.Put(cctx, &kvv1.PutRequest{Key: key, Value: []byte("v")})
		cancel()
		if err != nil {
			t.Fatalf("write through %s: %v", x.ID, err)
		}
		n++
	}
	if got := unanswered(); got != 1 {
		t.Fatalf("%v of %d writes through %s waited out an unanswered forward to %s, want the first one only", got, n, x.ID, first.ID)
	}
}
