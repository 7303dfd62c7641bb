package clustertest

import (
	"fmt"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/router"
)

// TestGetTxnCutsAtOneSnapshot: a follower that holds a shard's newest
// writes but lags on another shard must not return a GetTxn mixing the
// two. One session writes acl (one shard) and then album (another, led by
// another node); the third node receives nothing from acl's leader, so it
// holds the new album and the old acl. A GetTxn of both through it at the
// first acl's snapshot must return that acl and no album; one at the snapshot the node picks (no session) must return
// the new ones, which the site acknowledged before the call (the node
// hands acl's part to a replica that reaches its leader). With the
// snapshot cut turned off (guards.SnapshotCut, each shard's newest
// version), the first returns the new album with the old acl and the
// test fails.
func TestGetTxnCutsAtOneSnapshot(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	r := c.Live()[0].Srv.Router()
	acl := []byte("txn/acl")
	shACL, _ := r.Shard("default", acl)
	la, _ := leaderAndFollower(t, c, shACL)
	var lb *Node
	album, shAlbum := keyOfOtherShard(t, r, "txn/album", shACL, func(sh placement.Shard) bool {
		lb, _ = leaderAndFollowerOrNil(c, sh)
		return lb != nil && lb != la
	})
	var third *Node
	for _, n := range c.Live() {
		if n != la && n != lb {
			third = n
		}
	}
	put := func(tok []byte, key []byte, val string) *kvv1.PutResponse {
		t.Helper()
		p, err := la.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: key, Value: []byte(val)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pa := put(nil, acl, "alice,mallory")
	before := pa.Version.GetHlc() // the old acl, no album yet
	p := put(pa.Header.Session, album, "public")
	waitApplied(t, third, shACL, pa.Version.GetHlc())
	waitApplied(t, third, shAlbum, p.Version.GetHlc())

	c.Cut(la, third)
	p = put(p.Header.Session, acl, "alice")
	p = put(p.Header.Session, album, "public,private")
	waitApplied(t, third, shAlbum, p.Version.GetHlc())

	for _, at := range []uint64{before, 0} {
		resp, err := third.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Keys: [][]byte{acl, album}, SnapshotHlc: at})
		if err != nil {
			t.Fatal(err)
		}
		a, b := string(resp.Items[0].Value), string(resp.Items[1].Value)
		t.Logf("GetTxn through %s (cut from acl's leader %s) at snapshot %d: acl %q, album %q, snapshot %d", third.ID, la.ID, at, a, b, resp.SnapshotHlc)
		if b == "public,private" && a == "alice,mallory" {
			t.Fatalf("GetTxn through %s returned the new album %q with the old acl %q: not one snapshot", third.ID, b, a)
		}
		if at != 0 && (a != "alice,mallory" || resp.Items[1].Found) {
			t.Fatalf("GetTxn at snapshot %d (the first acl's) returned acl %q, album %q (found %v): want the first acl and no album", at, a, b, resp.Items[1].Found)
		}
		if at == 0 && (a != "alice" || b != "public,private") {
			t.Fatalf("GetTxn without a session after the writes were acknowledged returned acl %q, album %q: want the new ones", a, b)
		}
	}
}

// waitApplied waits until n's replica of sh applied this site's writes up
// to hlc.
func waitApplied(t *testing.T, n *Node, sh placement.Shard, hlc uint64) {
	t.Helper()
	if err := poll.Wait(30*time.Second, func() error {
		if g := n.Srv.Router().Local(sh); g == nil || !g.HasApplied("", hlc) {
			return fmt.Errorf("%s has not applied %d on %s", n.ID, hlc, sh)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// keyOfOtherShard returns the first key prefix+i (i < 1000) of the
// default keyspace whose shard differs from not and satisfies ok, with its
// shard; the test fails if there is none.
func keyOfOtherShard(t *testing.T, r *router.Router, prefix string, not placement.Shard, ok func(placement.Shard) bool) ([]byte, placement.Shard) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		k := []byte(fmt.Sprint(prefix, i))
		if sh, err := r.Shard("default", k); err == nil && sh.ID != not.ID && ok(sh) {
			return k, sh
		}
	}
	t.Fatalf("no key %s* of a shard other than %s that fits", prefix, not)
	return nil, placement.Shard{}
}
