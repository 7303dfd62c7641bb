package client

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// cancelingKV serves only KV.Stream, and ends each stream with CANCELED
// once a call arrived: what a node that is being stopped answers while it
// cancels its handlers' contexts.
type cancelingKV struct{ kvv1.UnimplementedKVServer }

func (cancelingKV) Stream(s grpc.BidiStreamingServer[kvv1.StreamRequest, kvv1.StreamResponse]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return status.Error(codes.Canceled, "context canceled")
}

// TestCallStreamCanceledByServerFailsOver: a call stream that the server
// ends with CANCELED, while neither the caller nor the client canceled
// anything, failed the calls on it with CANCELED, which is not retried:
// a client whose node was stopped gave up instead of failing over
// (TestClientFailsOverToAnotherSite, internal/clustertest). Such an end
// is the node's going away: the calls are retried on the next endpoint.
func TestCallStreamCanceledByServerFailsOver(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kvv1.RegisterKVServer(srv, cancelingKV{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	f, addr := startFake(t)
	c := newTestClient(t, lis.Addr().String(), addr)
	if _, err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put through a node whose call stream ends with CANCELED: %v", err)
	}
	if got := f.Calls(); got != 1 {
		t.Fatalf("the next endpoint served %d calls, want 1", got)
	}
}

// holdingKV serves only KV.Stream, and answers none of its calls: the
// stream stays open until the client ends it.
type holdingKV struct{ kvv1.UnimplementedKVServer }

func (holdingKV) Stream(s grpc.BidiStreamingServer[kvv1.StreamRequest, kvv1.StreamResponse]) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

// brokenSend is a client stream whose sends fail, as they do once the
// connection under the stream broke (a node killed).
type brokenSend struct{ grpc.ClientStream }

func (brokenSend) SendMsg(any) error { return io.EOF }

// TestCallStreamSendFailureFailsOver: a send on the call stream that
// fails (the connection broke) ends the stream, and the calls waiting on
// it failed with the CANCELED of the stream's own end, which is not
// retried: under load, a client whose node was killed returned "context
// canceled" for a share of its calls although nobody canceled them. Such
// calls are retried on the next endpoint.
func TestCallStreamSendFailureFailsOver(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kvv1.RegisterKVServer(srv, holdingKV{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	broken := lis.Addr().String()
	f, addr := startFake(t)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{broken, addr}
	cfg.RetryBackoff = time.Millisecond
	cfg.DisableLeaderRouting = true
	cfg.DialOptions = []grpc.DialOption{grpc.WithStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || cc.Target() != broken {
				return cs, err
			}
			return brokenSend{cs}, nil
		})}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Put through a call stream whose send fails: %v", err)
	}
	if got := f.Calls(); got < 1 {
		t.Fatalf("the next endpoint served %d calls, want the put", got)
	}
}
