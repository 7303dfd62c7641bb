package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestCallStreamAnswersAsUnaryCalls: a client whose Put, Get and Delete
// travel on the call stream (the default) and one that sends every call
// unary get the same answers and the same errors from a 3-node site, and
// the stream client's calls did travel on streams (the nodes count them
// open while it is connected).
func TestCallStreamAnswersAsUnaryCalls(t *testing.T) {
	c := New(t, 3, nil)
	ctx := ctxT(t, time.Minute)
	nodes := c.Live()
	streamed := newClient(t, nil, nodes...)
	unary := newClient(t, func(cfg *client.Config) { cfg.DisableCallStream = true }, nodes...)

	for _, tc := range []struct {
		name string
		cl   *client.Client
	}{{"stream", streamed}, {"unary", unary}} {
		key := []byte("callstream/" + tc.name)
		v, err := tc.cl.Put(ctx, key, []byte("v1"))
		if err != nil {
			t.Fatalf("%s: put: %v", tc.name, err)
		}
		for _, cons := range []client.Consistency{client.Causal, client.Strong} {
			it, err := tc.cl.Get(ctx, key, client.WithConsistency(cons))
			if err != nil || !it.Found || string(it.Value) != "v1" || it.Version != v {
				t.Fatalf("%s: get (%v) = %+v, %v; want v1 at %v", tc.name, cons, it, err, v)
			}
		}
		dv, existed, err := tc.cl.Delete(ctx, key)
		if err != nil || !existed || !v.Less(dv) {
			t.Fatalf("%s: delete = %v, %v, %v; want a newer tombstone of a live key", tc.name, dv, existed, err)
		}
		if it, err := tc.cl.Get(ctx, key); err != nil || it.Found {
			t.Fatalf("%s: get after delete = %+v, %v", tc.name, it, err)
		}
	}

	// Errors: the same code and message either way.
	calls := []struct {
		name string
		call func(cl *client.Client) error
	}{
		{"unknown keyspace", func(cl *client.Client) error {
			_, err := cl.Get(ctx, []byte("k"), client.WithKeyspace("no-such-keyspace"))
			return err
		}},
		{"key too large", func(cl *client.Client) error {
			_, err := cl.Put(ctx, bytes.Repeat([]byte("k"), 8<<10), []byte("v"))
			return err
		}},
		{"delete in an unknown keyspace", func(cl *client.Client) error {
			_, _, err := cl.Delete(ctx, []byte("k"), client.WithKeyspace("no-such-keyspace"))
			return err
		}},
	}
	for _, tc := range calls {
		es, eu := tc.call(streamed), tc.call(unary)
		if es == nil || eu == nil {
			t.Fatalf("%s: errors %v (stream) and %v (unary), want both to fail", tc.name, es, eu)
		}
		if es.Error() != eu.Error() || status.Code(es) != status.Code(eu) {
			t.Fatalf("%s: the stream failed with %q (%v), the unary call with %q (%v)", tc.name, es, status.Code(es), eu, status.Code(eu))
		}
	}

	open := 0.0
	for _, n := range nodes {
		open += gaugeValue(t, n, "causeway_rpc_call_streams", "")
	}
	if open < 1 {
		t.Fatalf("%v call streams open on the site while the stream client is connected, want at least 1", open)
	}
}

// TestCallStreamRawCalls drives KV.Stream directly: answers come back by
// id for concurrent calls, a request without a call is refused alone (the
// stream serves the next ones), and a call's deadline reaches the server.
func TestCallStreamRawCalls(t *testing.T) {
	c := New(t, 1, nil)
	ctx := ctxT(t, time.Minute)
	conn, err := grpc.NewClient(c.Node("n1").Srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := kvv1.NewKVClient(conn).Stream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(req *kvv1.StreamRequest) {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *kvv1.StreamResponse {
		t.Helper()
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	code := func(r *kvv1.StreamResponse) codes.Code {
		if len(r.GetStatus()) == 0 {
			return codes.OK
		}
		var st spb.Status
		if err := proto.Unmarshal(r.GetStatus(), &st); err != nil {
			t.Fatalf("answer %d: undecodable status: %v", r.GetId(), err)
		}
		return codes.Code(st.GetCode())
	}

	// The site must serve writes first.
	poll.Until(t, 30*time.Second, "a write on the stream", func() error {
		send(&kvv1.StreamRequest{Id: 1, TimeoutUs: 5e6, Call: &kvv1.StreamRequest_Put{Put: &kvv1.PutRequest{Key: []byte("raw/ready"), Value: []byte("v0")}}})
		if r := recv(); code(r) != codes.OK || r.GetPut() == nil {
			return fmt.Errorf("answer %d: %v", r.GetId(), code(r))
		}
		return nil
	})

	send(&kvv1.StreamRequest{Id: 7})
	if r := recv(); r.GetId() != 7 || code(r) != codes.InvalidArgument {
		t.Fatalf("a request without a call: answer %d with %v, want 7 with InvalidArgument", r.GetId(), code(r))
	}

	const n = 50
	for i := range n {
		key := []byte(fmt.Sprint("raw/", i))
		send(&kvv1.StreamRequest{Id: uint64(100 + i), TimeoutUs: 10e6, Call: &kvv1.StreamRequest_Put{Put: &kvv1.PutRequest{Key: key, Value: key}}})
	}
	for i := range n {
		send(&kvv1.StreamRequest{Id: uint64(200 + i), TimeoutUs: 10e6, Call: &kvv1.StreamRequest_Get{Get: &kvv1.GetRequest{Key: []byte(fmt.Sprint("raw/", i)), Consistency: kvv1.Consistency_CONSISTENCY_STRONG}}})
	}
	seen := map[uint64]bool{}
	for range 2 * n {
		r := recv()
		id := r.GetId()
		switch {
		case seen[id]:
			t.Fatalf("answer %d twice", id)
		case id >= 100 && id < 100+n:
			if code(r) != codes.OK || r.GetPut() == nil {
				t.Fatalf("put %d: %v", id, code(r))
			}
		case id >= 200 && id < 200+n:
			// A read sent after a write of the same key on the same
			// stream may be served first: the calls are concurrent. The
			// key was never written before, so a read finds its value or
			// nothing.
			if code(r) != codes.OK || r.GetGet() == nil {
				t.Fatalf("get %d: %v", id, code(r))
			}
			if g := r.GetGet(); g.GetFound() && !bytes.Equal(g.GetValue(), []byte(fmt.Sprint("raw/", id-200))) {
				t.Fatalf("get %d read %q", id, g.GetValue())
			}
		default:
			t.Fatalf("answer with unknown id %d", id)
		}
		seen[id] = true
	}

	// A deadline already past when the server takes the call: the
	// handler's context is done, so the write is refused with
	// DeadlineExceeded instead of being served (without the deadline it
	// would succeed, as the calls above did).
	send(&kvv1.StreamRequest{Id: 9, TimeoutUs: 1, Call: &kvv1.StreamRequest_Put{Put: &kvv1.PutRequest{Key: []byte("raw/late"), Value: []byte("v")}}})
	if r := recv(); r.GetId() != 9 || code(r) != codes.DeadlineExceeded {
		t.Fatalf("a call with a 1 µs deadline: answer %d with %v, want 9 with DeadlineExceeded", r.GetId(), code(r))
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("after the client closed its side: %v, want the stream to end", err)
	}
}

// TestStopEndsCallStreams: a node that stops ends its call streams once
// their calls are answered, instead of waiting for clients to close them
// (a graceful stop waits for every open stream up to ShutdownGrace, here
// two minutes, and then cuts off what is in flight). The client's next
// calls fail over to the other nodes.
func TestStopEndsCallStreams(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) { cfg.ShutdownGrace = 2 * time.Minute })
	ctx := ctxT(t, 2*time.Minute)
	n1 := c.Node("n1")
	cl := newClient(t, func(cfg *client.Config) { cfg.DisableLeaderRouting = true }, n1, c.Node("n2"), c.Node("n3"))
	poll.Until(t, 30*time.Second, "a write through n1", func() error {
		_, err := cl.Put(ctx, []byte("stop/0"), []byte("v"))
		return err
	})
	if open := gaugeValue(t, n1, "causeway_rpc_call_streams", ""); open < 1 {
		t.Fatalf("%v call streams open on n1, want the client's", open)
	}
	stopped := make(chan struct{})
	go func() {
		c.Stop(n1)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Minute):
		t.Fatal("n1 still stopping after a minute: it waits for the client's call stream")
	}
	if _, err := cl.Put(ctx, []byte("stop/1"), []byte("v")); err != nil {
		t.Fatalf("a write after n1 stopped: %v", err)
	}
}
