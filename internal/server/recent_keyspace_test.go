package server

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/poll"
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
	// Each question is bounded to a second, which a loaded machine may
	// not meet: ask again until the leader answers.
	poll.Until(t, 30*time.Second, "b1 to learn from the leader that keyspace orders exists", func() error {
		if !b.srv.recentKeyspace("orders") {
			return errors.New("the leader of the cluster configuration does not have keyspace orders, or did not answer")
		}
		return nil
	})
	if own, _ := b.srv.cluster.Config(); own.Keyspaces["orders"].Name != "orders" {
		t.Fatalf("b1 did not adopt the leader's configuration: %v", own.Keyspaces)
	}
	if b.srv.recentKeyspace("nope") {
		t.Fatal("keyspace nope is recent")
	}
}

// TestRecentKeyspaceOnTheConfigurationLeader: on the leader of the cluster
// configuration, a keyspace its copy of the configuration has is recent
// for the router (which follows the copy a moment later): a request that
// comes right after the creation is told to retry, not that the keyspace
// does not exist. Before, the leader never counted a keyspace as recent.
func TestRecentKeyspaceOnTheConfigurationLeader(t *testing.T) {
	a := start(t, testConfig(t.TempDir()))
	if !a.srv.cluster.IsLeader() {
		t.Fatal("a single node does not lead the cluster configuration")
	}
	if _, err := a.srv.cluster.CreateKeyspace(ctx(t), cluster.Keyspace{Name: "orders", Shards: 2, Sites: []string{a.srv.cfg.Site}}); err != nil {
		t.Fatal(err)
	}
	if !a.srv.recentKeyspace("orders") {
		t.Fatal("the configuration leader does not count keyspace orders, in its copy of the configuration, as recent")
	}
	if a.srv.recentKeyspace("nope") {
		t.Fatal("keyspace nope is recent")
	}
}
