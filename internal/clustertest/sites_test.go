package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/poll"
)

// geoClient returns a Geo admin client of n.
func geoClient(t *testing.T, n *Node) adminv1.GeoClient {
	t.Helper()
	conn, err := grpc.NewClient(n.Srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return adminv1.NewGeoClient(conn)
}

func hasKeyspace(name string, sites ...string) func(cluster.Config) error {
	return func(cfg cluster.Config) error {
		ks, ok := cfg.Keyspace(name)
		if !ok {
			return fmt.Errorf("no keyspace %q", name)
		}
		if !slices.Equal(ks.Sites, sites) {
			return fmt.Errorf("keyspace %q on %v, want %v", name, ks.Sites, sites)
		}
		return nil
	}
}

func header(ks string) *kvv1.RequestHeader { return &kvv1.RequestHeader{Keyspace: ks} }

// TestSitesConfigReachesEveryNode: nodes of a second site join the
// cluster (the first through another site, the second through its own
// site) and every node of every site learns both sites; the default
// keyspace lives on both, in join order.
func TestSitesConfigReachesEveryNode(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 2, Shards: 2})
	s.WaitConfig(30*time.Second, hasKeyspace(cluster.DefaultKeyspace, "s1", "s2"))
	s.WaitConfig(30*time.Second, func(cfg cluster.Config) error {
		for _, site := range []string{"s1", "s2"} {
			voters := 0
			for _, n := range cfg.Nodes(site) {
				if n.Voter {
					voters++
				}
			}
			if voters != 1 {
				return fmt.Errorf("site %s has %d voters, want 1", site, voters)
			}
		}
		return nil
	})
	resp, err := geoClient(t, s.Site("s2").Nodes[1]).Sites(context.Background(), &adminv1.SitesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.LocalSite != "s2" || len(resp.Sites) != 2 || resp.Sites[0].Name != "s1" || resp.Sites[1].State != "local" || len(resp.Sites[0].Nodes) != 2 {
		t.Fatalf("sites: %v", resp)
	}
}

// TestKeyspaceOnSomeSites: a keyspace created (through a site that does
// not hold it) on two of three sites is refused at the third, naming the
// holders, and replicates between the two.
func TestKeyspaceOnSomeSites(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g3 := geoClient(t, s.Site("s3").Nodes[0])
	resp, err := g3.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 4, Sites: []string{"s1", "s2"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Keyspace.Shards != 4 || !slices.Equal(resp.Keyspace.Sites, []string{"s1", "s2"}) {
		t.Fatalf("created %v", resp.Keyspace)
	}
	if _, err := g3.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 4, Sites: []string{"s1"}}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	if _, err := g3.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "bad", Shards: 4, Sites: []string{"s9"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("create on an unknown site: %v, want InvalidArgument", err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("orders", "s1", "s2"))

	poll.Until(t, 30*time.Second, "s3 to refuse the keyspace", func() error {
		_, err := s.Site("s3").Nodes[0].KV.Put(ctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte("k"), Value: []byte("v")})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "s1, s2") {
			return fmt.Errorf("put at s3: %v", err)
		}
		return nil
	})
	poll.Until(t, 60*time.Second, "a write to the new keyspace at s1", func() error {
		_, err := s.Site("s1").Nodes[0].KV.Put(ctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte("order-1"), Value: []byte("paid")})
		return err
	})
	poll.Until(t, 60*time.Second, "the write to reach s2", func() error {
		g, err := s.Site("s2").Nodes[0].KV.Get(ctx, &kvv1.GetRequest{Header: header("orders"), Key: []byte("order-1")})
		if err != nil {
			return err
		}
		if string(g.Value) != "paid" {
			return fmt.Errorf("s2 reads %q", g.Value)
		}
		return nil
	})
	got, err := g3.GetKeyspace(ctx, &adminv1.GetKeyspaceRequest{Name: "orders"})
	if err != nil || got.Keyspace.Shards != 4 {
		t.Fatalf("get keyspace: %v %v", got, err)
	}
	if _, err := g3.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "orders", Sites: []string{"s2", "s1", "s3"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("orders", "s2", "s1", "s3"))
	poll.Until(t, 60*time.Second, "the write to reach s3 once it holds the keyspace", func() error {
		g, err := s.Site("s3").Nodes[0].KV.Get(ctx, &kvv1.GetRequest{Header: header("orders"), Key: []byte("order-1")})
		if err != nil {
			return err
		}
		if string(g.Value) != "paid" {
			return fmt.Errorf("s3 reads %q", g.Value)
		}
		return nil
	})
}

// TestCutOffSiteKeepsItsConfiguration: a site cut off from the others
// keeps serving on the configuration it knows, also after a restart,
// while the other sites go on changing the configuration; it learns the
// change once the network heals.
func TestCutOffSiteKeepsItsConfiguration(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := geoClient(t, s.Site("s1").Nodes[0]).CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "users", Shards: 2, Sites: []string{"s1", "s3"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("users", "s1", "s3"))

	s.Cut("s3")
	n3 := s.Site("s3").Nodes[0]
	s.Site("s3").Stop(n3)
	s.Site("s3").Restart(n3, nil)
	s.Site("s3").WaitSettled(60 * time.Second)
	if cfg, _ := n3.Srv.Cluster().Config(); hasKeyspace("users", "s1", "s3")(cfg) != nil || len(cfg.Sites) != 3 {
		t.Fatalf("the restarted node lost its configuration: %+v", cfg)
	}
	poll.Until(t, 60*time.Second, "the cut-off site to serve its keyspaces", func() error {
		for _, ks := range []string{cluster.DefaultKeyspace, "users"} {
			if _, err := n3.KV.Put(ctx, &kvv1.PutRequest{Header: header(ks), Key: []byte("cut"), Value: []byte("off")}); err != nil {
				return fmt.Errorf("%s: %w", ks, err)
			}
		}
		return nil
	})

	// The majority of sites changes the configuration without s3.
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	if _, err := geoClient(t, s.Site("s2").Nodes[0]).CreateKeyspace(cctx, &adminv1.CreateKeyspaceRequest{Name: "carts", Shards: 2, Sites: []string{"s1", "s2"}}); err != nil {
		t.Fatalf("create keyspace while s3 is cut off: %v", err)
	}
	if cfg, _ := n3.Srv.Cluster().Config(); hasKeyspace("carts", "s1", "s2")(cfg) == nil {
		t.Fatal("the cut-off site learned a change it cannot have received")
	}
	s.Heal()
	s.WaitConfig(60*time.Second, hasKeyspace("carts", "s1", "s2"))
}

// TestRemovingAnUnreachableSiteNeedsForce: a site that the answering node
// cannot reach is not removed from a keyspace without force: writes it
// acknowledged and has not shipped would stay on it, reaching the
// keyspace's other sites only if it were added back. A reachable site is
// removed as before; with force, so is the unreachable one. The default
// keyspace refuses to drop a site, unreachable or not, without advising
// --force.
func TestRemovingAnUnreachableSiteNeedsForce(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	g1 := geoClient(t, s.Site("s1").Nodes[0])
	for _, ks := range []string{"eu", "na"} {
		if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: ks, Shards: 2, Sites: []string{"s1", "s2", "s3"}}); err != nil {
			t.Fatal(err)
		}
		s.WaitConfig(30*time.Second, hasKeyspace(ks, "s1", "s2", "s3"))
	}
	// Reachable: removed without force (once s1 has heard from s2).
	poll.Until(t, 60*time.Second, "s2 to be removed from na", func() error {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "na", Sites: []string{"s1", "s3"}})
		return err
	})

	s.Cut("s3")
	poll.Until(t, 60*time.Second, "s1 to find s3 unreachable", func() error {
		resp, err := g1.Sites(ctx, &adminv1.SitesRequest{})
		if err != nil {
			return err
		}
		for _, site := range resp.GetSites() {
			if site.GetName() == "s3" && site.GetState() != "unreachable" {
				return fmt.Errorf("s3 is %s", site.GetState())
			}
		}
		return nil
	})
	// The default keyspace drops no site, reachable or not: the refusal
	// says so, rather than advising --force, which would only lead to it.
	for _, force := range []bool{false, true} {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "default", Sites: []string{"s1", "s2"}, Force: force})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "default keyspace lives on every site") || strings.Contains(err.Error(), "--force") {
			t.Fatalf("set-sites default without the unreachable s3 (force %v): %v; want InvalidArgument, the default keyspace lives on every site", force, err)
		}
	}
	_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "eu", Sites: []string{"s1", "s2"}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "site s3 is unreachable") {
		t.Fatalf("set-sites without the unreachable s3: %v; want FailedPrecondition", err)
	}
	if cfg, _ := s.Site("s1").Nodes[0].Srv.Cluster().Config(); hasKeyspace("eu", "s1", "s2", "s3")(cfg) != nil {
		t.Fatalf("a refused removal changed the keyspace: %+v", cfg.Keyspaces["eu"])
	}
	if _, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "eu", Sites: []string{"s1", "s2"}, Force: true}); err != nil {
		t.Fatalf("forced removal: %v", err)
	}
	s.Heal()
	s.WaitConfig(60*time.Second, hasKeyspace("eu", "s1", "s2"))
}

// TestLagCountsFromThePendingWrite: the replication lag a site reports
// towards another is the age of what that site has not applied, not the
// time since the last write it applied: after a quiet spell, one write
// that cannot be shipped (its destination cut off) shows a lag no older
// than that write.
func TestLagCountsFromThePendingWrite(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2"}, NodesPerSite: 1, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n1 := s.Site("s1").Nodes[0]
	if _, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: []byte("before"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	g1 := geoClient(t, n1)
	lagOf := func() (float64, uint64) {
		resp, err := g1.Sites(ctx, &adminv1.SitesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, site := range resp.GetSites() {
			if site.GetName() == "s2" {
				return site.GetLagSeconds(), site.GetLagEntries()
			}
		}
		t.Fatal("s2 is not listed")
		return 0, 0
	}
	poll.Until(t, 60*time.Second, "s2 to apply the first write", func() error {
		if _, n := lagOf(); n != 0 {
			return fmt.Errorf("%d entries behind", n)
		}
		return nil
	})
	time.Sleep(3 * time.Second) // a quiet spell: nothing is written
	s.Cut("s2")
	written := time.Now()
	if _, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: []byte("after"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "s1 to see s2 behind", func() error {
		if _, n := lagOf(); n == 0 {
			return fmt.Errorf("no entry behind")
		}
		return nil
	})
	if sec, _ := lagOf(); sec > time.Since(written).Seconds() {
		t.Fatalf("lag %.2fs, but the only pending write is %.2fs old", sec, time.Since(written).Seconds())
	}
	s.Heal()
}

// TestCutOffSiteSaysItMayNotKnowAKeyspace: a keyspace created while a
// site is cut off is unknown at that site; the error says that the site
// has not heard from the others, so the keyspace may exist elsewhere,
// rather than that there is no such keyspace.
func TestCutOffSiteSaysItMayNotKnowAKeyspace(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	s.Cut("s3")
	if _, err := geoClient(t, s.Site("s2").Nodes[0]).CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "carts", Shards: 2, Sites: []string{"s1", "s2"}}); err != nil {
		t.Fatalf("create keyspace while s3 is cut off: %v", err)
	}
	n3 := s.Site("s3").Nodes[0]
	g3 := geoClient(t, n3)
	poll.Until(t, 30*time.Second, "the cut-off site to say it may not know the keyspace", func() error {
		_, err := n3.KV.Put(ctx, &kvv1.PutRequest{Header: header("carts"), Key: []byte("k"), Value: []byte("v")})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("put at s3: %v, want NotFound", err)
		}
		if msg := status.Convert(err).Message(); !strings.Contains(msg, "has not reached site(s) s1, s2") || !strings.Contains(msg, "created at another site") {
			return fmt.Errorf("put at s3: %q does not say that s3 may not have heard of the keyspace", msg)
		}
		_, err = g3.GetKeyspace(ctx, &adminv1.GetKeyspaceRequest{Name: "carts"})
		if msg := status.Convert(err).Message(); status.Code(err) != codes.NotFound || !strings.Contains(msg, "has not reached site(s) s1, s2") {
			return fmt.Errorf("keyspace show at s3: %v, want NotFound saying that s3 may not have heard of the keyspace", err)
		}
		return nil
	})
}
