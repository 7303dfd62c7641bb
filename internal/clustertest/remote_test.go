package clustertest

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/storage"
)

// keysOfShard returns n keys of shard sh.
func keysOfShard(c *Cluster, sh placement.Shard, n int) []string {
	r := c.Live()[0].Srv.Router()
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("rw/%d", i)
		if s, _ := r.Shard(sh.Keyspace, []byte(k)); s == sh {
			out = append(out, k)
		}
	}
	return out
}

// propose proposes cmd on the shard's leader, waiting out elections. An
// attempt that failed (a leader that lost its leadership meanwhile) may
// still have committed: a Replicate whose retry finds every write applied
// already is reported as applied.
func propose(t *testing.T, c *Cluster, sh placement.Shard, cmd *peerv1.Command) fsm.Result {
	t.Helper()
	var res fsm.Result
	failed := false
	poll.Until(t, 10*time.Second, "a leader accepts the command", func() error {
		for _, n := range c.Live() {
			if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
				var err error
				res, err = g.Propose(context.Background(), cmd)
				if err != nil {
					t.Logf("propose on %s: %v (retrying)", n.ID, err)
					failed = true
				}
				return err
			}
		}
		return errors.New("no leader")
	})
	if r := cmd.GetReplicate(); failed && r != nil && res.Err == nil && res.Applied == 0 && res.Duplicates == len(r.Writes) {
		res.Applied, res.Duplicates = res.Duplicates, 0
	}
	return res
}

// TestInjectedRemoteWrites: writes from two fictitious other sites are
// injected as Replicate commands into a shard of a 3-node site, with HLCs
// far older than the shard's own writes, duplicates and a gap. Reads
// through a follower whose messages from the leader are delayed keep
// monotonic reads for those versions: the follower's floor check is
// against its progress for each origin (its own newest HLC is newer than
// every injected write and proves nothing). The gap is refused, the
// replicas end with equal digests, and causalcheck finds no violation.
// With the floor wait turned off (guards.FloorWait), the follower returns
// an older version than the session read.
func TestInjectedRemoteWrites(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 90*time.Second)
	sh, _ := c.Live()[0].Srv.Router().Shard("default", []byte("rw/anchor"))
	shardKeys := keysOfShard(c, sh, 7)
	keys, remote := shardKeys[:4], shardKeys[4:]
	leader, follower := leaderAndFollower(t, c, sh)
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })

	// Local writes make the shard's own newest HLC current.
	for i, k := range keys {
		val := fmt.Sprintf("local/%d", i)
		h := rec.Begin("local", "s1", causalcheck.Put, k, val)
		p, err := leader.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		rec.End(h, "", causal.Version{HLC: p.Version.Hlc, Site: p.Version.Site}, causalcheck.OK)
	}
	c.Delay(leader, follower, 30*time.Millisecond, 10*time.Millisecond)
	defer c.Heal()

	// Remote HLCs an hour behind the local ones, on keys only the other
	// sites write.
	base := causal.MakeHLC(uint64(time.Now().Add(-time.Hour).UnixMilli()), 0)
	remoteKey := func(i int) string { return remote[i%len(remote)] }
	var seq2, seq3 uint64
	const rounds = 40
	for i := 1; i <= rounds; i++ {
		seq2++
		k := remoteKey(i)
		val := fmt.Sprintf("s2/%d", i)
		hlc := base + uint64(i)*1000
		h := rec.Begin("origin-s2", "s2", causalcheck.Put, k, val)
		cmd := &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2", Writes: []*peerv1.RemoteWrite{{Key: []byte(k), Value: []byte(val), Hlc: hlc, Seq: seq2}}}}}
		if res := propose(t, c, sh, cmd); res.Err != nil || res.Applied != 1 {
			t.Fatalf("round %d: %+v", i, res)
		}
		rec.End(h, "", causal.Version{HLC: hlc, Site: "s2"}, causalcheck.OK)
		if i%4 == 0 { // s3 writes older versions of the same key: they lose
			seq3++
			val3 := fmt.Sprintf("s3/%d", i)
			h3 := rec.Begin("origin-s3", "s3", causalcheck.Put, k, val3)
			res := propose(t, c, sh, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s3",
				Writes: []*peerv1.RemoteWrite{{Key: []byte(k), Value: []byte(val3), Hlc: hlc - 500, Seq: seq3}}}}})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			rec.End(h3, "", causal.Version{HLC: hlc - 500, Site: "s3"}, causalcheck.OK)
		}
		// A fresh session reads k on the leader, then through the
		// lagging follower with the token it got.
		sess := fmt.Sprintf("reader-%d", i)
		h = rec.Begin(sess, "s1", causalcheck.Get, k, "")
		r1, err := leader.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		v1 := causal.Version{HLC: r1.Version.GetHlc(), Site: r1.Version.GetSite()}
		rec.End(h, string(r1.Value), v1, causalcheck.OK)
		h = rec.Begin(sess, "s1", causalcheck.Get, k, "")
		r2, err := follower.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: r1.Header.Session}, Key: []byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		v2 := causal.Version{HLC: r2.Version.GetHlc(), Site: r2.Version.GetSite()}
		rec.End(h, string(r2.Value), v2, causalcheck.OK)
		if v2.Less(v1) {
			t.Fatalf("round %d: read %s = %s (%q) on the leader, then %s (%q) through follower %s: monotonic reads broken for origin s2",
				i, k, v1, r1.Value, v2, r2.Value, follower.ID)
		}
	}

	// A duplicate is skipped; a gap is refused and changes nothing.
	dup := propose(t, c, sh, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2",
		Writes: []*peerv1.RemoteWrite{{Key: []byte(remoteKey(rounds)), Value: []byte(fmt.Sprintf("s2/%d", rounds)), Hlc: base + rounds*1000, Seq: seq2}}}}})
	if dup.Err != nil || dup.Duplicates != 1 || dup.Applied != 0 {
		t.Fatalf("duplicate: %+v", dup)
	}
	gap := propose(t, c, sh, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2",
		Writes: []*peerv1.RemoteWrite{{Key: []byte("rw/gap"), Value: []byte("gap"), Hlc: base + 10_000_000, Seq: seq2 + 2}}}}})
	if !errors.Is(gap.Err, fsm.ErrSeqGap) || gap.NextSeq != seq2+1 {
		t.Fatalf("gap: %+v", gap)
	}
	c.Heal()

	// Every replica converges byte for byte.
	poll.Until(t, 30*time.Second, "equal digests on every replica", func() error {
		var first storage.Digest
		for i, n := range c.Live() {
			var d storage.Digest
			if err := n.Srv.Router().Local(sh).Read(func(st *storage.ShardTx) (err error) {
				d, err = st.Digest()
				return err
			}); err != nil {
				return err
			}
			if i == 0 {
				first = d
			} else if d != first {
				return fmt.Errorf("%s digest %s at index %d, %s at %d", n.ID, d, d.Index, c.Live()[0].ID, first.Index)
			}
		}
		if first.Origins == 0 {
			return errors.New("digest without origins")
		}
		return nil
	})
	for _, n := range c.Live() {
		o := n.Srv.Router().Local(sh).Origins()
		if o["s2"] != (storage.Progress{HLC: base + rounds*1000, Seq: seq2}) || o["s3"].Seq != seq3 {
			t.Fatalf("%s progress %+v", n.ID, o)
		}
	}
	res, err := causalcheck.Check(rec.History(), finalVersions(t, c, append(shardKeys, "rw/gap")))
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("causal+ violated:\n%s", res)
	}
	t.Logf("%d operations checked: %s", res.Ops, summary(res))
}

// TestWriteCarriesDependencies: a session reads another site's write (of
// shard X) and then writes a key of shard Y through a node whose replica of
// X lags. The write waits until that replica applied the dependency, and
// its raft entry carries the dependency, for the chain of sites.
func TestWriteCarriesDependencies(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	r := c.Live()[0].Srv.Router()
	sx, _ := r.Shard("default", []byte("dep/x"))
	xLeader, xFollower := leaderAndFollower(t, c, sx)
	// A key of another shard that xFollower leads.
	var y []byte
	var sy placement.Shard
	for i := 0; y == nil && i < 10_000; i++ {
		k := fmt.Appendf(nil, "dep/y%d", i)
		s, _ := r.Shard("default", k)
		if g := xFollower.Srv.Router().Local(s); s != sx && g != nil && g.IsLeader() {
			y, sy = k, s
		}
	}
	if y == nil {
		t.Skipf("%s leads no shard", xFollower.ID)
	}
	c.Delay(xLeader, xFollower, 50*time.Millisecond, 0)
	defer c.Heal()
	hlc := causal.MakeHLC(uint64(time.Now().Add(-time.Minute).UnixMilli()), 0)
	res := propose(t, c, sx, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2",
		Writes: []*peerv1.RemoteWrite{{Key: []byte("dep/x"), Value: []byte("from s2"), Hlc: hlc, Seq: 1}}}}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	rx, err := xLeader.KV.Get(ctx, &kvv1.GetRequest{Key: []byte("dep/x")})
	if err != nil || string(rx.Value) != "from s2" {
		t.Fatalf("read of the remote write: %q, %v", rx.GetValue(), err)
	}
	before := testutil.ToFloat64(histogramCount(t, xFollower.Srv.Registry(), "causeway_router_dependency_wait_seconds"))
	p, err := xFollower.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: rx.Header.Session}, Key: y, Value: []byte("after x")})
	if err != nil {
		t.Fatal(err)
	}
	if waited := testutil.ToFloat64(histogramCount(t, xFollower.Srv.Registry(), "causeway_router_dependency_wait_seconds")) - before; waited < 1 {
		t.Fatalf("the write did not wait for its dependency on the lagging replica")
	}
	// The replica of x on the writing node had applied the dependency
	// before the write was proposed.
	if o := xFollower.Srv.Router().Local(sx).Origins(); o["s2"].HLC < hlc {
		t.Fatalf("%s progress for s2 is %d, below the dependency %d", xFollower.ID, o["s2"].HLC, hlc)
	}
	g := xFollower.Srv.Router().Local(sy)
	st := g.Status()
	cmds, err := g.Commands(st.FirstLogIndex, st.AppliedIndex+10)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range cmds {
		w := cmd.GetWrite()
		if w == nil || string(w.Key) != string(y) || w.Hlc > p.Version.Hlc {
			continue
		}
		for _, d := range w.Deps {
			if d.Origin == "s2" && d.Shard == sx.ID && d.Keyspace == "default" && d.Hlc == hlc {
				return
			}
		}
		t.Fatalf("the write's entry carries %v, not the dependency on s2's write", w.Deps)
	}
	t.Fatal("the write's log entry was not found")
}

// TestLateRemoteWriteAfterGC: a key is deleted at a site whose shard has
// received writes from another site, s2, whose progress is an hour old.
// Garbage collection runs many passes with a retention of a millisecond,
// bounded by s2's progress (the frontier the shard leader puts in each
// Collect), so it keeps the tombstone; s2's late write of the key, older
// than the delete, then leaves the key deleted on every replica. With the
// bound off (guards.GCFrontier), the tombstone is collected and the late
// write brings the key back.
func TestLateRemoteWriteAfterGC(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shard.GCInterval = 20 * time.Millisecond
		cfg.Shard.VersionRetention = time.Millisecond
	})
	ctx := ctxT(t, 60*time.Second)
	key := []byte("gc/k")
	sh, _ := c.Live()[0].Srv.Router().Shard("default", key)
	base := causal.MakeHLC(uint64(time.Now().Add(-time.Hour).UnixMilli()), 0)
	if res := propose(t, c, sh, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2",
		Writes: []*peerv1.RemoteWrite{{Key: []byte("gc/other"), Value: []byte("x"), Hlc: base, Seq: 1}}}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	p, err := c.Live()[0].KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Live()[0].KV.Delete(ctx, &kvv1.DeleteRequest{Header: &kvv1.RequestHeader{Session: p.Header.Session}, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	// Let garbage collection run several passes past the delete: each is
	// a Collect entry, or skipped when the leader's state holds nothing to
	// collect.
	leader, _ := leaderAndFollower(t, c, sh)
	g := leader.Srv.Router().Local(sh)
	passes := func() uint64 {
		return g.Status().AppliedIndex + uint64(counterSum(t, leader, "causeway_shard_gc_passes_skipped_total", g.ID().String()))
	}
	from := passes()
	poll.Until(t, 30*time.Second, "five garbage-collection passes", func() error {
		if now := passes(); now < from+5 {
			return fmt.Errorf("%d passes", now-from)
		}
		return nil
	})
	late := causal.MakeHLC(uint64(time.Now().Add(-time.Minute).UnixMilli()), 0) // above s2's progress, below the delete
	if late >= d.Version.Hlc {
		t.Fatalf("late write %d not below the delete %d", late, d.Version.Hlc)
	}
	if res := propose(t, c, sh, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: &peerv1.Replicate{Origin: "s2",
		Writes: []*peerv1.RemoteWrite{{Key: key, Value: []byte("late"), Hlc: late, Seq: 2}}}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, n := range c.Live() {
		g, err := n.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: d.Header.Session}, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if g.Found {
			t.Fatalf("%s reads %s = %q at %v: a late write older than the delete brought the key back", n.ID, key, g.Value, g.Version)
		}
	}
}
