package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/shard"
)

// TestReadOfAnUnpublishedApplyIsNotALostSession: a read sees a write in
// the state database a moment before the state machine publishes it (its
// HLC, which the leader's floor check reads). A session that read it and
// reads the shard again on its leader in that moment must wait, not be
// told that the site lost its data (router.ErrLostSession, a
// FailedPrecondition). The moment is held open with
// shard.PausePublishForTest.
func TestReadOfAnUnpublishedApplyIsNotALostSession(t *testing.T) {
	c := New(t, 1, nil)
	n := c.Node("n1")
	ctx := ctxT(t, time.Minute)
	if _, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: []byte("pub/a"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	// A STRONG read: the leader's once-per-term barrier is behind it, so
	// later leader checks only confirm the leadership.
	if _, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte("pub/a"), Consistency: kvv1.Consistency_CONSISTENCY_STRONG}); err != nil {
		t.Fatal(err)
	}
	sh, err := n.Srv.Router().Shard("default", []byte("pub/a"))
	if err != nil {
		t.Fatal(err)
	}
	g := n.Srv.Router().Local(sh)
	if g == nil {
		t.Fatalf("n1 holds no replica of %s", sh)
	}
	resume := shard.PausePublishForTest(g)
	defer resume()
	put := make(chan error, 1)
	go func() {
		_, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: []byte("pub/a"), Value: []byte("2")})
		put <- err
	}()
	// The new value is stored, not published: a read sees it.
	var tok []byte
	poll.Every(5*time.Millisecond).Until(t, 30*time.Second, "the stored write visible", func() error {
		r, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte("pub/a")})
		if err != nil {
			return err
		}
		if string(r.Value) != "2" {
			return errors.New("not yet")
		}
		tok = r.Header.Session
		return nil
	})
	// The same session reads again on the leader while the write is not
	// published: it waits (here until its deadline), and is not refused.
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = n.KV.Get(rctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("pub/a")})
	cancel()
	t.Logf("the second read: %v", err)
	if status.Code(err) == codes.FailedPrecondition {
		t.Fatalf("a session that read an applied write was told the site lost it: %v", err)
	}
	resume()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	r, err := n.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte("pub/a")})
	if err != nil || string(r.Value) != "2" {
		t.Fatalf("read after the publish: %q, %v", r.GetValue(), err)
	}
}
