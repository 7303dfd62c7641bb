package router

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/shard"
)

// noReplicas is a node that has opened no replica yet, as one that has
// just restarted: its peer service answers before its groups are open.
type noReplicas struct{}

func (noReplicas) Group(placement.Shard) *shard.Group { return nil }
func (noReplicas) RecoverAlone(placement.Shard, recovery.Options, uint64) error {
	return nil
}

// TestForwardedReadOfANodeWithoutTheReplicaIsRoutedAgain: a read forwarded
// to a node that answers that it does not host the shard (a node that
// restarted and has not opened that replica yet, while gossip and the
// placement map already count it) failed the client's call with
// FAILED_PRECONDITION "peer: shard is not hosted here", which no client
// retries: scans failed for seconds after a node of the site restarted.
// The read is routed again, away from that node for a while.
func TestForwardedReadOfANodeWithoutTheReplicaIsRoutedAgain(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	peerv1.RegisterNodeServer(srv, peer.NewService(noReplicas{}, nil, nil))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = peerv1.NewNodeClient(conn).ScanShard(ctx, &peerv1.ScanShardRequest{
		Shard: &peerv1.ShardRef{Keyspace: "default", Shard: 2}, Limit: 10,
	})
	err = RemoteErr(err)
	if err == nil {
		t.Fatal("a node without the replica served the scan")
	}
	addr := lis.Addr().String()
	r := &Router{}
	if !r.retryForward(ctx, addr, err, time.Now().Add(5*time.Second)) {
		t.Fatalf("a read refused with %v is not routed again", err)
	}
	other := "127.0.0.1:1"
	reps := []catalog.Node{{PeerAddr: addr}, {PeerAddr: other}}
	if got := r.pickReplica(reps, 0); got != other {
		t.Fatalf("the next choice is %s, want the other replica %s", got, other)
	}
}

// TestRemoteErrOfAnUnreachablePeerIsNotTheClients: a forward to a node
// that is down (a shard leader killed) failed with gRPC's own connection
// error, which the node passed on as is: the client took it for its own
// failure to connect (a request that reached no node) and its user saw a
// peer address they never configured. The error keeps its code and says
// that the node's forward failed.
func TestRemoteErrOfAnUnreachablePeerIsNotTheClients(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = peerv1.NewNodeClient(conn).ScanShard(ctx, &peerv1.ScanShardRequest{
		Shard: &peerv1.ShardRef{Keyspace: "default", Shard: 2}, Limit: 10,
	})
	if !strings.HasPrefix(status.Convert(err).Message(), "connection error:") {
		t.Fatalf("a call to a closed port failed with %v, not gRPC's connection error", err)
	}
	err = RemoteErr(err)
	if !unavailable(err) {
		t.Fatalf("RemoteErr = %v: not a peer's unavailability", err)
	}
	if msg := status.Convert(err).Message(); strings.HasPrefix(msg, "connection error:") || !strings.Contains(msg, addr) {
		t.Fatalf("RemoteErr = %q: it reads as the caller's own connection failure, or lost the address", msg)
	}
}
