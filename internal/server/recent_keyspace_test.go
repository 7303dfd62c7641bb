package server

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
)

// TestRecentKeyspaceAsksTheLeader: a node of another site that has not
// heard of a keyspace asks the leader of the cluster configuration, learns
// that the keyspace exists (a request naming it is told to retry, not
// that there is no such keyspace) and adopts the leader's configuration
// at once; a keyspace the leader lacks too is not recent.
func TestRecentKeyspaceAsksTheLeader(t *testing.T) {
	a := start(t, testConfig(t.TempDir()))
	cfg := testConfig(t.TempDir())
	cfg.Site, cfg.NodeID = "s2", "b1"
	cfg.JoinCluster = []string{a.srv.PeerAddr()}
	b := start(t, cfg)
	if b.srv.cluster.IsLeader() {
		t.Skip("the joining node leads the cluster configuration")
	}
	conn, err := grpc.NewClient(a.srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := adminv1.NewGeoClient(conn).CreateKeyspace(ctx(t), &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 2, Sites: []string{a.srv.cfg.Site, "s2"}}); err != nil {
		t.Fatal(err)
	}
	if !b.srv.recentKeyspace("orders") {
		t.Fatal("the leader of the cluster configuration does not have keyspace orders")
	}
	if own, _ := b.srv.cluster.Config(); own.Keyspaces["orders"].Name != "orders" {
		t.Fatalf("b1 did not adopt the leader's configuration: %v", own.Keyspaces)
	}
	if b.srv.recentKeyspace("nope") {
		t.Fatal("keyspace nope is recent")
	}
}
