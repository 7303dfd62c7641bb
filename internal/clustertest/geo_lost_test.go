package clustertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// putRecorded writes key=value at node in session tok, recording it.
func putRecorded(t *testing.T, rec *causalcheck.Recorder, n *Node, site, sess string, tok []byte, key, value string, req *kvv1.PutRequest) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if req == nil {
		req = &kvv1.PutRequest{}
	}
	req.Header, req.Key, req.Value = &kvv1.RequestHeader{Session: tok}, []byte(key), []byte(value)
	h := rec.Begin(sess, site, causalcheck.Put, key, value)
	resp, err := n.KV.Put(ctx, req)
	if err != nil {
		rec.End(h, "", causal.Version{}, causalcheck.Unknown)
		t.Fatalf("put %s at %s: %v", key, site, err)
	}
	rec.End(h, "", causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}, causalcheck.OK)
	return resp.Header.Session
}

// TestGeoOriginLeaderKilledAfterAck: three sites of three nodes. A session
// writes keys at s1; right after the last acknowledgement, the s1 leader
// of that key's shard is killed. The new leader ships what the old one
// had not (the outbound log is replicated state), so every acknowledged
// write reaches every site, and the history passes the checker.
func TestGeoOriginLeaderKilledAfterAck(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2, Nodes: 3})
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	// Slow the way out of s1, so that the acknowledged writes are still
	// in flight when the leader dies.
	fs.Net.DelaySites("s1", "s2", 150*time.Millisecond, 0)
	var keys []string
	var tok []byte
	leader := fs.Sites["s1"].Nodes[0]
	for i := range 30 {
		k := fmt.Sprintf("lost/k%02d", i)
		keys = append(keys, k)
		tok = putRecorded(t, rec, leader, "s1", "writer", tok, k, fmt.Sprint(i), nil)
	}
	sh, _ := leader.Srv.Router().Shard("default", []byte(keys[len(keys)-1]))
	var victim *Node
	for _, n := range fs.Sites["s1"].Live() {
		if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("no s1 leader of %s", sh)
	}
	fs.Sites["s1"].Kill(victim)
	t.Logf("killed %s, the s1 leader of %s, right after the last acknowledgement", victim.ID, sh)
	fs.Net.Heal()
	fs.waitKeys(t, keys, 30*time.Second)
	fs.waitConverged(t, 30*time.Second)
	checkHistory(t, rec, fs.finalVersions(t, keys))
}

// TestGeoSiteCutOffDuringWrites: s3 is cut off from both other sites for
// the whole write phase while sessions write at every site (s3 included:
// it stays writable). After healing, every site holds every acknowledged
// write, the sites converge, and the history passes the checker.
func TestGeoSiteCutOffDuringWrites(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2})
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	fs.Net.PartitionSites("s1", "s3")
	fs.Net.PartitionSites("s2", "s3")
	var keys []string
	for _, site := range fs.Order {
		var tok []byte
		for i := range 20 {
			k := fmt.Sprintf("cut/%s/k%02d", site, i)
			keys = append(keys, k)
			tok = putRecorded(t, rec, fs.Sites[site].Nodes[0], site, "w-"+site, tok, k, fmt.Sprint(i), nil)
		}
	}
	// Long enough for the chains to skip s3.
	time.Sleep(2 * geoTestConfig().SkipAfter)
	fs.Net.Heal()
	fs.waitKeys(t, keys, 30*time.Second)
	fs.waitConverged(t, 30*time.Second)
	checkHistory(t, rec, fs.finalVersions(t, keys))
}

// TestGeoSitesDurabilitySurvivesOriginLoss: SITES(2) writes at s1 are
// acknowledged once s2 applied them; s1 is then lost for good (its node
// killed, its data directory deleted) and every write is at s2 and s3.
func TestGeoSitesDurabilitySurvivesOriginLoss(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2})
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	origin := fs.Sites["s1"].Nodes[0]
	var keys []string
	var tok []byte
	for i := range 20 {
		k := fmt.Sprintf("dur/k%02d", i)
		keys = append(keys, k)
		tok = putRecorded(t, rec, origin, "s1", "writer", tok, k, fmt.Sprint(i),
			&kvv1.PutRequest{Options: &kvv1.WriteOptions{Durability: kvv1.Durability_DURABILITY_SITES, MinSites: 2}})
	}
	fs.Sites["s1"].Kill(origin)
	if err := os.RemoveAll(origin.Cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	fs.Order = []string{"s2", "s3"}
	fs.waitKeys(t, keys, 30*time.Second)
	fs.waitConverged(t, 30*time.Second)
}

// TestRetriedDurableWriteWaitsForTheSites: an ALL write whose sites did
// not confirm it in time (s3 cut off) is retried with the same request id
// once s3 is back. The retry finds the write committed by the first
// attempt and waits for the sites like the first attempt did, rather than
// failing at once (the deduplication record kept no outbound sequence
// number to wait for).
func TestRetriedDurableWriteWaitsForTheSites(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1})
	req := &kvv1.PutRequest{Key: []byte("retried"), Value: []byte("v"), Options: &kvv1.WriteOptions{
		Durability: kvv1.Durability_DURABILITY_ALL,
		RequestId:  &kvv1.RequestID{ClientId: "retrying-client", Seq: 1},
	}}
	fs.Net.PartitionSites("s1", "s3")
	fs.Net.PartitionSites("s2", "s3")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := fs.kv("s1").Put(ctx, req)
	cancel()
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not lost") {
		t.Fatalf("ALL write with s3 cut off: %v, want DeadlineExceeded saying the write is not lost", err)
	}
	fs.Net.Heal()
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := fs.kv("s1").Put(ctx, req); err != nil {
		t.Fatalf("the retried ALL write after healing: %v", err)
	}
	fs.waitKeys(t, []string{"retried"}, 30*time.Second)
}

// TestGeoAntiEntropyAfterTrimmedLog: the outbound log is capped at a few
// KiB; s3 is cut off while s1 writes far more than that, so the log that
// s3 needs is gone. After healing, anti-entropy brings s3 up to date.
func TestGeoAntiEntropyAfterTrimmedLog(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2, Mutate: func(_ string, cfg *server.Config) {
		cfg.Geo.LogCapBytes = 4 << 10
	}})
	fs.Net.PartitionSites("s1", "s3")
	fs.Net.PartitionSites("s2", "s3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var keys []string
	val := strings.Repeat("v", 300)
	for i := range 100 {
		k := fmt.Sprintf("ae/k%03d", i)
		keys = append(keys, k)
		if _, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(val)}); err != nil {
			t.Fatal(err)
		}
	}
	fs.Net.Heal()
	fs.waitConverged(t, 30*time.Second)
	fs.waitKeys(t, keys, 30*time.Second)
	var runs float64
	for _, site := range fs.Order {
		runs += counterSum(t, fs.Sites[site].Nodes[0], "causeway_geo_anti_entropy_keys_repaired_total", "")
	}
	if runs == 0 {
		t.Fatal("s3 converged without anti-entropy: the log was not trimmed below what it needed")
	}
}

// TestGeoWipedReplicaIsRepaired: s3's only node loses its data directory
// and restarts empty. The other sites repair it (what they hold, s3's own
// earlier writes included), and s3's next writes are numbered after what
// the others applied of it, so they are not taken for duplicates.
func TestGeoWipedReplicaIsRepaired(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var keys []string
	put := func(site, k string) {
		t.Helper()
		if _, err := fs.kv(site).Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(site)}); err != nil {
			t.Fatalf("put %s at %s: %v", k, site, err)
		}
		keys = append(keys, k)
	}
	for _, site := range fs.Order {
		for i := range 10 {
			put(site, fmt.Sprintf("wipe/%s/k%02d", site, i))
		}
	}
	fs.waitKeys(t, keys, 30*time.Second)
	c := fs.Sites["s3"]
	n := c.Nodes[0]
	c.Kill(n)
	if err := os.RemoveAll(n.Cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	c.Restart(n, nil)
	c.WaitSettled(60 * time.Second)
	for i := range 10 {
		put("s3", fmt.Sprintf("wipe/s3/after%02d", i))
	}
	fs.waitKeys(t, keys, 30*time.Second)
	fs.waitConverged(t, 30*time.Second)
	if fs.rebuiltSeen(t) == 0 {
		t.Fatal("no node counted s3's wiped replica in causeway_geo_rebuilt_replicas_total")
	}
}

// TestRemoteApplyWaitsForDependencies: s3 receives an update of origin s1
// that depends on a write of s2 it has not applied (s2 and s3 are cut
// apart). s3 must hold the update back: its key stays invisible until the
// dependency arrives. With the wait turned off (guards.DependencyWait),
// s3 applies it at once and the test fails.
func TestRemoteApplyWaitsForDependencies(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2})
	fs.Net.PartitionSites("s2", "s3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x := []byte("dep/x")
	xr, err := fs.kv("s2").Put(ctx, &kvv1.PutRequest{Key: x, Value: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	s3 := fs.Sites["s3"].Nodes[0]
	sx, _ := s3.Srv.Router().Shard("default", x)
	// y: a key of the other shard, which s1 never writes in this test.
	var y []byte
	var sy placement.Shard
	for i := 0; ; i++ {
		y = fmt.Appendf(nil, "dep/y%d", i)
		if sy, _ = s3.Srv.Router().Shard("default", y); sy != sx {
			break
		}
	}
	conn, err := grpc.NewClient(s3.Srv.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chain := peerv1.NewChainClient(conn)
	req := &peerv1.ShipRequest{Keyspace: "default", Shard: sy.ID, FromSite: "s2", Updates: &peerv1.Replicate{Origin: "s1", Writes: []*peerv1.RemoteWrite{{
		Key: y, Value: []byte("y"), Seq: 1, Hlc: xr.Version.GetHlc() + 1,
		Deps: []*peerv1.Dependency{{Keyspace: "default", Shard: sx.ID, Origin: "s2", Hlc: xr.Version.GetHlc()}},
	}}}}
	resp, err := chain.Ship(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k []byte) bool {
		r, err := s3.KV.Get(ctx, &kvv1.GetRequest{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		return r.Found
	}
	if get(y) && !get(x) {
		t.Fatalf("s3 shows y, which depends on x, without x (ship reply %v)", resp)
	}
	if resp.Error == "" {
		t.Fatalf("the update was applied before its dependency: %v", resp)
	}
	t.Logf("held back: %s", resp.Error)
	fs.Net.Heal()
	poll.Every(50*time.Millisecond).Until(t, 30*time.Second, "y applied once x is", func() error {
		// s1's closed timestamps move s3's progress of s1 on; the update
		// is resent above it.
		g := s3.Srv.Router().Local(sy)
		if g == nil {
			return fmt.Errorf("s3 holds no replica of %s", sy)
		}
		w := req.Updates.Writes[0]
		w.Hlc = max(w.Hlc, g.Geo().Origins["s1"].HLC+1)
		resp, err := chain.Ship(ctx, req)
		if err != nil {
			return err
		}
		if !get(y) {
			return fmt.Errorf("y not applied yet: %s", resp.Error)
		}
		if !get(x) {
			t.Fatal("y applied before x")
		}
		return nil
	})
}

// TestGeoLateRemoteWriteAfterGC: s3, its clock two seconds behind, is cut
// off and writes a key that s1 meanwhile deletes. s1 collects garbage every
// 20 ms with a retention of a millisecond, but only below the global
// frontier (what every site of the chain applied), so it keeps the
// tombstone until s3's older write arrives after healing: the key stays
// deleted at every site. With the bound off (guards.GCFrontier) the
// tombstone is collected and the late write brings the key back at s1 and
// s2 but not at s3.
func TestGeoLateRemoteWriteAfterGC(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1, Mutate: func(site string, cfg *server.Config) {
		cfg.Shard.GCInterval = 20 * time.Millisecond
		cfg.Shard.VersionRetention = time.Millisecond
		if site == "s3" {
			cfg.ClockSkew = -2 * time.Second
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := []byte("gc/k")
	if _, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	fs.waitKeys(t, []string{string(key)}, 30*time.Second)
	fs.Net.PartitionSites("s1", "s3")
	fs.Net.PartitionSites("s2", "s3")
	late, err := fs.kv("s3").Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("late")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.kv("s1").Delete(ctx, &kvv1.DeleteRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	// Garbage collection runs many passes meanwhile.
	sleepCtx(ctx, time.Second)
	fs.Net.Heal()
	// The moment s1 applied the late write, it must still read the key
	// as deleted (later, every site may collect everything).
	s1 := fs.Sites["s1"].Nodes[0]
	sh, _ := s1.Srv.Router().Shard("default", key)
	poll.Until(t, 30*time.Second, "s1 applies s3's late write", func() error {
		g := s1.Srv.Router().Local(sh)
		if g == nil || g.Geo().Origins["s3"].HLC < late.Version.GetHlc() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if r, err := fs.kv("s1").Get(ctx, &kvv1.GetRequest{Key: key}); err != nil || r.Found {
		t.Fatalf("s1 reads %s=%q (%v) once s3's late write arrived: it outlived the collected tombstone", key, r.GetValue(), err)
	}
	fs.waitConverged(t, 30*time.Second)
	for _, site := range fs.Order {
		r, err := fs.kv(site).Get(ctx, &kvv1.GetRequest{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if r.Found {
			t.Fatalf("%s reads %s=%q after it was deleted: a late write outlived the collected tombstone", site, key, r.Value)
		}
	}
}
