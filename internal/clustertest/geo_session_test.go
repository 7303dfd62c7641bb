package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestSessionMovesBetweenSites: a session writes at s1 and, with the same
// token, reads at s3 and s2 straight away (50 ms between sites): it reads
// its writes everywhere, the new site waiting for its causal past. While
// s1 is cut off, a read at s3 of a write made at s1 fails with the
// retryable ErrSessionMoved (UNAVAILABLE, saying why) instead of returning
// stale data, and succeeds once the link is back.
func TestSessionMovesBetweenSites(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2, Mutate: func(_ string, cfg *server.Config) {
		cfg.SessionMoveWait = 2 * time.Second
	}})
	for _, a := range fs.Order {
		for _, b := range fs.Order {
			if a != b {
				fs.Net.DelaySites(a, b, 50*time.Millisecond, 0)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var tok []byte
	for round := range 5 {
		keys := []string{fmt.Sprintf("move/%d/a", round), fmt.Sprintf("move/%d/b", round), fmt.Sprintf("move/%d/c", round)}
		for _, k := range keys {
			resp, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(k), Value: []byte(k)})
			if err != nil {
				t.Fatal(err)
			}
			tok = resp.Header.Session
		}
		for _, site := range []string{"s3", "s2", "s1"} {
			for _, k := range keys {
				resp, err := fs.kv(site).Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(k)})
				if err != nil {
					t.Fatalf("round %d: get %s at %s: %v", round, k, site, err)
				}
				if !resp.Found || string(resp.Value) != k {
					t.Fatalf("round %d: the session wrote %s at s1 and read %q (found %v) at %s", round, k, resp.Value, resp.Found, site)
				}
				tok = resp.Header.Session
			}
		}
	}

	// s1 cut off before it writes (cut after, the write may already be
	// on its way to s3): its write cannot reach s3, which must say so.
	fs.Net.PartitionSites("s1", "s2")
	fs.Net.PartitionSites("s1", "s3")
	resp, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("move/cut")})
	if err != nil {
		t.Fatal(err)
	}
	tok = resp.Header.Session
	_, err = fs.kv("s3").Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("move/cut")})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "causal past") || !strings.Contains(err.Error(), "s1") {
		t.Fatalf("read at s3 of a write s3 cannot have: %v; want UNAVAILABLE naming the session's site s1", err)
	}
	// A request whose deadline comes before the move wait ends learns why
	// before its deadline, not only that the deadline passed.
	sctx, scancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = fs.kv("s3").Get(sctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("move/cut")})
	scancel()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "causal past") {
		t.Fatalf("read at s3 with a deadline shorter than the move wait: %v; want UNAVAILABLE with the reason", err)
	}
	fs.Net.Heal()
	for _, a := range fs.Order {
		for _, b := range fs.Order {
			if a != b {
				fs.Net.DelaySites(a, b, 50*time.Millisecond, 0)
			}
		}
	}
	poll.Until(t, 60*time.Second, "the moved read succeeds after healing", func() error {
		r, err := fs.kv("s3").Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("move/cut")})
		if err != nil {
			return err
		}
		if !r.Found {
			return fmt.Errorf("the session's write is missing at s3")
		}
		return nil
	})
}

// TestGetTxnAlbumACL is the access-list pattern: a user removes a friend
// from an album's access list, then adds a private photo to the album
// (two keys on different shards). Readers at every site, with and without
// sessions, read both with GetTxn through any node of their site
// (followers lag their leaders differently) while the user repeats this,
// moving between sites; no reader anywhere may see the new photo together
// with the old list.
func TestGetTxnAlbumACL(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 4, Nodes: 3})
	for _, a := range fs.Order {
		for _, b := range fs.Order {
			if a != b {
				fs.Net.DelaySites(a, b, 20*time.Millisecond, 10*time.Millisecond)
			}
		}
	}
	// Two keys on different shards.
	acl, album := "acl", ""
	sh0, err := fs.Sites["s1"].Nodes[0].Srv.Router().Shard("default", []byte(acl))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; album == ""; i++ {
		k := fmt.Sprintf("album%d", i)
		if sh, _ := fs.Sites["s1"].Nodes[0].Srv.Router().Shard("default", []byte(k)); sh != sh0 {
			album = k
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const rounds = 30
	put := func(site string, tok []byte, key, val string) []byte {
		t.Helper()
		resp, err := fs.kv(site).Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key), Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Session
	}
	var tok []byte
	tok = put("s1", tok, acl, "0:alice,mallory")
	tok = put("s1", tok, album, "0:public")

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var violations []string
	reads := 0
	for i, site := range fs.Order {
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(r)))
				var rtok []byte
				for wctx.Err() == nil {
					if r == 0 || rng.IntN(4) == 0 {
						rtok = nil // a new session
					}
					nodes := fs.Sites[site].Nodes
					resp, err := nodes[rng.IntN(len(nodes))].KV.GetTxn(wctx, &kvv1.GetTxnRequest{Header: &kvv1.RequestHeader{Session: rtok}, Keys: [][]byte{[]byte(acl), []byte(album)}})
					if err != nil {
						continue
					}
					rtok = resp.Header.Session
					time.Sleep(time.Millisecond)
					a, b := string(resp.Items[0].Value), string(resp.Items[1].Value)
					mu.Lock()
					reads++
					// Round n's photo is private; round n's list (written
					// before it) no longer has mallory.
					if strings.Contains(b, "private") && strings.Contains(a, "mallory") {
						violations = append(violations, fmt.Sprintf("at %s: list %q with album %q", site, a, b))
					}
					mu.Unlock()
				}
			}()
		}
	}
	for n := 1; n <= rounds; n++ {
		writer := fs.Order[n%len(fs.Order)]
		tok = put(writer, tok, acl, fmt.Sprintf("%d:alice", n))
		tok = put(writer, tok, album, fmt.Sprintf("%d:public,private", n))
		// Back to the open list and a public album for the next round.
		tok = put(writer, tok, album, fmt.Sprintf("%d:public", n))
		tok = put(writer, tok, acl, fmt.Sprintf("%d:alice,mallory", n))
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	t.Logf("%d GetTxns over %d rounds at 3 sites", reads, rounds)
	if len(violations) > 0 {
		t.Fatalf("%d GetTxns saw the private photo with the old list; the first: %s", len(violations), violations[0])
	}
}

// TestClientFailsOverToAnotherSite: a Go client given nodes of two sites
// (its own first) writes at s1; once s2 holds those writes, s1's node is
// killed. The client fails over to s2 with its session: it reads its
// writes there, writes, and reads a snapshot, although s1 can no longer
// tell s2 anything (s2 checks the versions the session observed, which
// the client sends whole after a failover).
func TestClientFailsOverToAnotherSite(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 4, Mutate: func(_ string, cfg *server.Config) {
		cfg.SessionMoveWait = 5 * time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{fs.Sites["s1"].Nodes[0].Srv.ClientAddr(), fs.Sites["s2"].Nodes[0].Srv.ClientAddr()}
	cfg.RequestTimeout = 3 * time.Second
	cfg.FailbackAfter = -1
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys [][]byte
	for i := range 10 {
		k := fmt.Appendf(nil, "fo/%d", i)
		keys = append(keys, k)
		if _, err := c.Put(ctx, k, k); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		poll.Until(t, 30*time.Second, "s2 holds "+string(k), func() error {
			r, err := fs.kv("s2").Get(ctx, &kvv1.GetRequest{Key: k})
			if err != nil {
				return err
			}
			if !r.Found {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	fs.Sites["s1"].Kill(fs.Sites["s1"].Nodes[0])
	for _, k := range keys {
		it, err := c.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s after s1 died: %v", k, err)
		}
		if !it.Found || string(it.Value) != string(k) {
			t.Fatalf("get %s at s2: %q found=%v", k, it.Value, it.Found)
		}
	}
	if _, err := c.Put(ctx, []byte("fo/after"), []byte("x")); err != nil {
		t.Fatalf("put at s2: %v", err)
	}
	items, err := c.GetTxn(ctx, append(keys, []byte("fo/after")))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if !it.Found {
			t.Fatalf("GetTxn at s2 misses %s", it.Key)
		}
	}
}

// TestLeaderWaitsForAnotherSitesFloor: a session that observed s1's write
// of k, and whose token names s2 as its last site (a token merged from
// two clients' sessions keeps one site, causal.Session.Merge), reads k at
// s2 while s1 is cut off. Its PastHLC lies above the newest HLC of s2's
// replica, so the read has a fallback floor of s2's own writes too: the
// shard leader meets that one with a read barrier, but the barrier brings
// nothing of s1's, so the read must wait for s1's write (and fail once
// its wait ends) rather than answer that k does not exist.
func TestLeaderWaitsForAnotherSitesFloor(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fs.Net.PartitionSites("s1", "s2")
	fs.Net.PartitionSites("s1", "s3")
	resp, err := fs.kv("s1").Put(ctx, &kvv1.PutRequest{Key: []byte("k"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := causal.DecodeSession(resp.Header.Session)
	if err != nil {
		t.Fatal(err)
	}
	sess.Site = "s2"
	sess.ObserveHLC(resp.Version.Hlc + uint64(time.Second.Milliseconds())<<causal.LogicalBits)
	tok := sess.Encode()
	gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
	got, err := fs.kv("s2").Get(gctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("k")})
	gcancel()
	if err == nil {
		t.Fatalf("read at s2, cut off from s1, of s1's write the session observed: found %v, value %q, no error; want a causal wait error", got.Found, got.Value)
	}
	if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
		t.Fatalf("read at s2 of s1's write s2 cannot have: %v; want DEADLINE_EXCEEDED or UNAVAILABLE", err)
	}
	fs.Net.Heal()
	poll.Until(t, 60*time.Second, "the read at s2 sees s1's write after healing", func() error {
		r, err := fs.kv("s2").Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("k")})
		if err != nil {
			return err
		}
		if !r.Found || string(r.Value) != "v" {
			return fmt.Errorf("found %v, value %q", r.Found, r.Value)
		}
		return nil
	})
}

// TestClientRetriesAWriteAtItsSite: a SITES(2) write at s3, cut off from
// the other sites, commits at s3 but is not confirmed in time. The client,
// whose endpoints span s3 and s1, retried it at s1, which applied it a
// second time under a version of its own: one Put, two versions, and the
// second one overwrote whatever was written in between. A mutation that
// may have been applied is retried only at the site that may hold it, so
// the Put fails (saying the write is committed and not lost) and every
// site ends with s3's version alone.
func TestClientRetriesAWriteAtItsSite(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 1})
	fs.Net.PartitionSites("s3", "s1")
	fs.Net.PartitionSites("s3", "s2")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{fs.Sites["s3"].Nodes[0].Srv.ClientAddr(), fs.Sites["s1"].Nodes[0].Srv.ClientAddr()}
	cfg.RequestTimeout = 2 * time.Second
	cfg.MaxRetries = 2
	cfg.FailbackAfter = -1
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := []byte("retried/once")
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	v, err := c.Put(pctx, key, []byte("v"), client.WithMinSites(2))
	pcancel()
	if err == nil {
		t.Fatalf("SITES(2) write through s3, cut off from s1 and s2: acknowledged as %v; want it retried at s3 only, and failing", v)
	}
	if !strings.Contains(err.Error(), "not lost") {
		t.Fatalf("SITES(2) write through s3, cut off: %v; want the error to say the write committed at s3 and is not lost", err)
	}
	fs.Net.Heal()
	for _, site := range fs.Order {
		poll.Until(t, 30*time.Second, site+" holds s3's write", func() error {
			r, err := fs.kv(site).History(ctx, &kvv1.HistoryRequest{Key: key})
			if err != nil {
				return err
			}
			if len(r.Versions) == 0 {
				return fmt.Errorf("no version yet")
			}
			var vs []string
			for _, hv := range r.Versions {
				vs = append(vs, fmt.Sprintf("%d@%s", hv.GetVersion().GetHlc(), hv.GetVersion().GetSite()))
			}
			if len(r.Versions) != 1 || r.Versions[0].GetVersion().GetSite() != "s3" {
				t.Fatalf("%s holds versions %v of the one Put; want one, written at s3", site, vs)
			}
			return nil
		})
	}
}

// TestClientMovesWithItsWholeSession: a Go client's session moves between
// sites by the calls its caller pins to an endpoint of another site
// (WithEndpoint) and back, while a third site is cut off from both. The
// site it moves to has every version the session observed, but it was
// sent only the part of the session the call needed, so it waited for
// every other site's writes up to the session's newest timestamp, the
// cut-off site's too, and refused the call (UNAVAILABLE) after the move
// wait. The client sends the whole session with a call that moves it, and
// the site checks only what the session observed.
func TestClientMovesWithItsWholeSession(t *testing.T) {
	t.Parallel()
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2, Mutate: func(_ string, cfg *server.Config) {
		cfg.SessionMoveWait = 2 * time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s1, s2 := fs.Sites["s1"].Nodes[0].Srv.ClientAddr(), fs.Sites["s2"].Nodes[0].Srv.ClientAddr()
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{s1, s2}
	cfg.MaxRetries = 1
	c, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fs.Net.PartitionSites("s3", "s1")
	fs.Net.PartitionSites("s3", "s2")
	for round := range 3 {
		a, b := fmt.Appendf(nil, "whole/%d/a", round), fmt.Appendf(nil, "whole/%d/b", round)
		if _, err := c.Put(ctx, a, a); err != nil {
			t.Fatalf("round %d: put at s1: %v", round, err)
		}
		it, err := c.Get(ctx, a, client.WithEndpoint(s2))
		if err != nil {
			t.Fatalf("round %d: the session wrote %s at s1 and moved to s2 (s3 cut off from both): %v", round, a, err)
		}
		if !it.Found || string(it.Value) != string(a) {
			t.Fatalf("round %d: the session wrote %s at s1 and read %q (found %v) at s2", round, a, it.Value, it.Found)
		}
		if _, err := c.Put(ctx, b, b, client.WithEndpoint(s2)); err != nil {
			t.Fatalf("round %d: put at s2: %v", round, err)
		}
		// Back to its first endpoint, at s1, unpinned.
		items, err := c.GetTxn(ctx, [][]byte{a, b})
		if err != nil {
			t.Fatalf("round %d: the session wrote %s at s2 and moved back to s1: %v", round, b, err)
		}
		for _, it := range items {
			if !it.Found || string(it.Value) != string(it.Key) {
				t.Fatalf("round %d: GetTxn at s1 after writing at s2: %s = %q (found %v)", round, it.Key, it.Value, it.Found)
			}
		}
	}
}
