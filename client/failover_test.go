package client

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// peerDownKV answers every Put as a node does whose forward to a killed
// shard leader could not connect: UNAVAILABLE, with the connection error
// of the dial to the leader's peer address.
type peerDownKV struct{ kvv1.UnimplementedKVServer }

func (peerDownKV) Put(context.Context, *kvv1.PutRequest) (*kvv1.PutResponse, error) {
	return nil, status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:1: connect: connection refused"`)
}

// TestDeadlineEndingRetryableAttemptSaysDeadline: under load, with a
// shard leader killed, a put whose one attempt was answered UNAVAILABLE
// (the node it called could not reach the leader) as the caller's
// deadline ran out returned that answer as is: "connection refused"
// naming a peer address, with nothing saying that the call was not
// retried because its deadline was over, as if the client gave up on the
// first failure. The error says that the caller's context ended the call
// and how many attempts it made.
func TestDeadlineEndingRetryableAttemptSaysDeadline(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	kvv1.RegisterKVServer(srv, peerDownKV{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cfg := DefaultConfig()
	cfg.Endpoints = []string{lis.Addr().String()}
	cfg.RetryBackoff = time.Millisecond
	cfg.DisableLeaderRouting = true
	cfg.DisableCallStream = true
	// The answer arrives as the caller's deadline runs out: hold it until
	// then.
	cfg.DialOptions = []grpc.DialOption{grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if status.Code(err) == codes.Unavailable {
				<-ctx.Done()
			}
			return err
		})}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Put(ctx, []byte("k"), []byte("v"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Put = %v, want the attempt's UNAVAILABLE", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "context ended (context deadline exceeded) before it could be retried") || !strings.Contains(msg, "the call made 1 attempt in") {
		t.Fatalf("Put = %v: it does not say that the deadline ended the call", err)
	}
}

// TestReadLeavesAHungEndpointWithinItsDeadline: with a first endpoint
// that takes calls and answers none (a node stopped with SIGSTOP), every
// read given a deadline shorter than RequestTimeout ended on it with
// DEADLINE_EXCEEDED, and the client never tried the other endpoints. An
// attempt of a read gets part of the caller's time, so the read is
// served by the next endpoint, and the reads after it start there.
func TestReadLeavesAHungEndpointWithinItsDeadline(t *testing.T) {
	hung, hungAddr := startFake(t)
	hung.Block(true)
	f, addr := startFake(t)
	c := newTestClient(t, hungAddr, addr)
	c.cfg.RequestTimeout = 10 * time.Second
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, []byte("k"))
		cancel()
		if err != nil {
			t.Fatalf("Get %d with a hung first endpoint: %v", i, err)
		}
	}
	if got := hung.Calls(); got != 1 {
		t.Fatalf("the hung endpoint got %d calls, want the first read's first attempt only", got)
	}
	if got := f.Calls(); got < 3 {
		t.Fatalf("the next endpoint served %d calls, want the 3 reads", got)
	}
}

// TestWriteKeepsRequestTimeoutPerAttempt: a mutation's attempt is not
// cut to part of the caller's time (its retries depend on whether an
// attempt may have reached a node): with a hung first endpoint and a
// deadline shorter than RequestTimeout, the put ends on its deadline.
func TestWriteKeepsRequestTimeoutPerAttempt(t *testing.T) {
	hung, hungAddr := startFake(t)
	hung.Block(true)
	f, addr := startFake(t)
	c := newTestClient(t, hungAddr, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Put(ctx, []byte("k"), []byte("v")); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Put with a hung first endpoint = %v, want DEADLINE_EXCEEDED", err)
	}
	if got := f.Calls(); got != 0 {
		t.Fatalf("the next endpoint got %d calls of a put that may have reached the first", got)
	}
}
