package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/shard"
)

// TestJoiningSiteServesNoVersionBeforeItsDependency: a site added to a
// keyspace gets what the keyspace's other sites hold by each shard's join
// repair, each on its own. s1 holds 200 writes on shard 0, the last of
// them x, and y on shard 1, written by a session that read x. s2 joins
// the keyspace while s1's replica of shard 0 applies nothing (so its
// chain, and its join repair towards s2, wait), and shard 1's join repair
// brings y. A new session at s2 must not read y and then miss x: s2
// refuses the keyspace's reads (Get, GetTxn) and compare-and-swaps with
// UNAVAILABLE naming the shard and the site it waits for, and takes
// writes. It still refuses after its node restarted (shard 1's mark is
// kept). s1's shard 0 then sets its chain while s1 is cut off from s2, and
// s1's node is killed and started again: its join repair of shard 0 still
// runs (the chain was set before the restart, so nothing but the missing
// mark starts it), and s2 then serves y and x. With guard join-gate off,
// s2 serves y while x is absent.
func TestJoiningSiteServesNoVersionBeforeItsDependency(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	c1, c2 := s.Site("s1"), s.Site("s2")
	n1, n2 := c1.Nodes[0], c2.Nodes[0]
	g1 := geoClient(t, n1)
	if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "ks", Shards: 2, Sites: []string{"s1"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s1"))
	sh0, sh1 := placement.Shard{Keyspace: "ks", ID: 0}, placement.Shard{Keyspace: "ks", ID: 1}
	keyOn := func(sh placement.Shard, prefix string) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("%s%d", prefix, i); placement.ShardOf([]byte(k), 2) == sh.ID {
				return k
			}
		}
	}
	x, y := keyOn(sh0, "x"), keyOn(sh1, "y")
	put := func(n *Node, key, value string, session []byte) *kvv1.PutResponse {
		t.Helper()
		var resp *kvv1.PutResponse
		poll.Until(t, 30*time.Second, "a write of "+key, func() (err error) {
			resp, err = n.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: "ks", Session: session}, Key: []byte(key), Value: []byte(value)})
			return err
		})
		return resp
	}
	for i, n := 0, 0; n < 199; i++ {
		if k := fmt.Sprintf("a%d", i); placement.ShardOf([]byte(k), 2) == sh0.ID {
			put(n1, k, "v", nil)
			n++
		}
	}
	put(n1, x, "x200", nil)
	rx, err := n1.KV.Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte(x)})
	if err != nil || !rx.Found {
		t.Fatalf("read of %s at s1: %v %v", x, rx, err)
	}
	put(n1, y, "after-x", rx.Header.Session)

	// s1's replica of shard 0 applies nothing from now on: its chain with
	// s2, and so its join repair towards s2, wait.
	resume := sync.OnceFunc(shard.PauseApplyForTest(n1.Srv.Router().Local(sh0)))
	defer resume()
	poll.Until(t, 60*time.Second, "s2 to be added to ks", func() error {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "ks", Sites: []string{"s1", "s2"}})
		return err
	})
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s1", "s2"))
	poll.Until(t, 60*time.Second, "s1's join repair of shard 1 to be marked at s2", func() error {
		g := n2.Srv.Router().Local(sh1)
		if g == nil {
			return errors.New("s2 has no replica of shard 1 yet")
		}
		if g.Geo().JoinMarks["s1"] == 0 {
			return fmt.Errorf("join marks %v", g.Geo().JoinMarks)
		}
		return nil
	})

	// refused checks that s2 refuses a new session's read of y, a GetTxn
	// and a compare-and-swap while shard 0 waits for s1 (nil), and fails
	// the test if it serves y (then also reading x with that session).
	refused := func() error {
		resp, err := n2.KV.Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte(y)})
		if err == nil {
			xr, xerr := n2.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "ks", Session: resp.Header.Session}, Key: []byte(x)})
			t.Fatalf("s2 served %s (found %v, %q) to a new session while shard 0 had not received s1's join repair; then %s: found %v, %q, %v",
				y, resp.Found, resp.Value, x, xr.GetFound(), xr.GetValue(), xerr)
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shard 0 waits for site s1") {
			return fmt.Errorf("read of %s at s2: %v", y, err)
		}
		if _, err := n2.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Header: header("ks"), Keys: [][]byte{[]byte(x), []byte(y)}}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "joining") {
			t.Fatalf("GetTxn at s2 while joining: %v", err)
		}
		if _, err := n2.KV.CompareAndSwap(ctx, &kvv1.CompareAndSwapRequest{Header: header("ks"), Key: []byte(x), Value: []byte("cas"),
			Expect: &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "joining") {
			t.Fatalf("compare-and-swap at s2 while joining: %v", err)
		}
		return nil
	}
	if err := refused(); err != nil {
		t.Fatal(err)
	}
	// Operators see the join's progress: kvctl keyspace show, and the
	// shards s2's node leads that still wait.
	poll.Until(t, 10*time.Second, "s2's node to count shard 0 as joining", func() error {
		if n := gaugeValue(t, n2, "causeway_geo_joining_shards", ""); n != 1 {
			return fmt.Errorf("causeway_geo_joining_shards %v, want 1", n)
		}
		return nil
	})
	got, err := geoClient(t, n2).GetKeyspace(ctx, &adminv1.GetKeyspaceRequest{Name: "ks"})
	if err != nil {
		t.Fatal(err)
	}
	if j := got.Keyspace.GetJoins(); len(j) != 1 || j[0].Site != "s2" || !j[0].Known || j[0].Complete || j[0].ShardsComplete != 1 || j[0].Shards != 2 ||
		!strings.Contains(j[0].Waiting, "shard 0 waits for site s1") {
		t.Fatalf("keyspace ks at s2 during the join: joins %v", j)
	}
	// Writes are taken during the join.
	if _, err := n2.KV.Put(ctx, &kvv1.PutRequest{Header: header("ks"), Key: []byte("during"), Value: []byte("v")}); err != nil {
		t.Fatalf("a write at s2 during the join: %v", err)
	}

	// s2's node restarts: shard 1 keeps s1's mark, shard 0 still waits.
	c2.Stop(n2)
	c2.Restart(n2, nil)
	poll.Until(t, 60*time.Second, "s2 to refuse the read again after its restart", refused)
	if g := n2.Srv.Router().Local(sh1); g == nil || g.Geo().JoinMarks["s1"] == 0 {
		t.Fatalf("s2's replica of shard 1 lost s1's join mark in the restart")
	}

	// s1's shard 0 sets its chain while s1 is cut off from s2: its join
	// repair cannot reach s2. Then s1's node is killed and started again.
	s.Cut("s1")
	resume()
	poll.Until(t, 60*time.Second, "s1's shard 0 to set its chain", func() error {
		if g := n1.Srv.Router().Local(sh0); g == nil || !slices.Equal(g.Geo().Chain, []string{"s1", "s2"}) {
			return errors.New("chain not set")
		}
		return nil
	})
	c1.Kill(n1)
	s.Heal()
	c1.Restart(n1, nil)

	poll.Until(t, 120*time.Second, "s2 to serve y, then x, to a new session", func() error {
		resp, err := n2.KV.Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte(y)})
		if err != nil {
			return err
		}
		if !resp.Found || string(resp.Value) != "after-x" {
			t.Fatalf("s2 serves %s: found %v, %q after its join", y, resp.Found, resp.Value)
		}
		xr, err := n2.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "ks", Session: resp.Header.Session}, Key: []byte(x)})
		if err != nil {
			t.Fatalf("s2 served %s, then failed the read of %s: %v", y, x, err)
		}
		if !xr.Found || string(xr.Value) != "x200" {
			t.Fatalf("s2 served %s, then %s: found %v, %q (a version before its dependency)", y, x, xr.Found, xr.Value)
		}
		return nil
	})
	txn, err := n2.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Header: header("ks"), Keys: [][]byte{[]byte(x), []byte(y)}})
	if err != nil || len(txn.Items) != 2 || !txn.Items[0].Found || !txn.Items[1].Found {
		t.Fatalf("GetTxn at s2 after the join: %v %v", txn, err)
	}
	got, err = geoClient(t, n2).GetKeyspace(ctx, &adminv1.GetKeyspaceRequest{Name: "ks"})
	if err != nil {
		t.Fatal(err)
	}
	if j := got.Keyspace.GetJoins(); len(j) != 1 || !j[0].Complete || j[0].ShardsComplete != 2 {
		t.Fatalf("keyspace ks at s2 after the join: joins %v", j)
	}
}
