package clustertest

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
)

// TestForgedTimestampsCannotMoveTheClock: a node's clock observes the
// timestamps clients send, so a session token or GetTxn snapshot far
// ahead of its clock is refused (guard clock-ahead). With the guard off, a
// forged token near 2^64 makes the clock wrap: later writes are numbered
// below earlier ones and an acknowledged delete is lost.
func TestForgedTimestampsCannotMoveTheClock(t *testing.T) {
	c := New(t, 1, nil)
	n := c.Node("n1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := uint64(time.Now().UnixMilli())

	for _, forged := range []uint64{math.MaxUint64 - 3, causal.MakeHLC(now+uint64(time.Hour.Milliseconds()), 0)} {
		tok := (&causal.Session{MaxHLC: forged}).Encode()
		_, err := n.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("poison"), Value: []byte("x")})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ahead of this node's clock") {
			t.Errorf("put with a session token at HLC %d: %v, want InvalidArgument: ahead of this node's clock", forged, err)
		}
	}
	for _, snap := range []uint64{math.MaxUint64, causal.MakeHLC(now+uint64(time.Hour.Milliseconds()), 0)} {
		_, err := n.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Keys: [][]byte{[]byte("a")}, SnapshotHlc: snap})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetTxn at snapshot HLC %d: %v, want InvalidArgument", snap, err)
		}
	}
	old := causal.MakeHLC(now-uint64((2*time.Hour).Milliseconds()), 0) // the retention is 1 h
	if _, err := n.KV.GetTxn(ctx, &kvv1.GetTxnRequest{Keys: [][]byte{[]byte("a")}, SnapshotHlc: old}); status.Code(err) != codes.OutOfRange {
		t.Errorf("GetTxn at a snapshot older than the version retention: %v, want OutOfRange", err)
	}

	// What the clock issues next stays near real time, and later writes
	// win over earlier ones.
	k := []byte("k")
	var last uint64
	for i, v := range []string{"new", "newer"} {
		r, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: k, Value: []byte(v)})
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		last = r.Version.Hlc
	}
	if wall, _ := causal.SplitHLC(last); wall > now+uint64(time.Hour.Milliseconds()) {
		t.Fatalf("a put after the forged requests has HLC %d (wall %d ms), an hour or more ahead of real time (%d ms)", last, wall, now)
	}
	d, err := n.KV.Delete(ctx, &kvv1.DeleteRequest{Key: k})
	if err != nil {
		t.Fatal(err)
	}
	if d.Version.Hlc <= last {
		t.Errorf("the delete's HLC %d is not above the put's %d", d.Version.Hlc, last)
	}
	g, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: k, Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
	if err != nil {
		t.Fatal(err)
	}
	if g.Found {
		t.Fatalf("the acknowledged delete is lost: get returns %q", g.Value)
	}
}
