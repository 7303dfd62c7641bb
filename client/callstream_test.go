package client

import (
	"context"
	"net"
	"testing"

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
