package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestNewSiteGetsTheWritesOfALostSite: a site lost for good (cut off, then
// removed from a keyspace with --force) leaves behind writes it had
// shipped before it went: its chain's other sites hold them, but their
// stability, which travels back through the lost site, never comes. A site
// added to the keyspace in its place still gets them by the join's
// anti-entropy. Before, the repair held them back as "not yet stable" for
// good, and the new site never held them.
func TestNewSiteGetsTheWritesOfALostSite(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3", "s4"}, NodesPerSite: 1, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	g1 := geoClient(t, s.Site("s1").Nodes[0])
	if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "ks", Shards: 1, Sites: []string{"s1", "s2", "s3"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s1", "s2", "s3"))
	kv := func(site string) kvv1.KVClient { return s.Site(site).Nodes[0].KV }
	read := func(site, key string) (string, error) {
		g, err := kv(site).Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte(key)})
		if err != nil {
			return "", err
		}
		if !g.Found {
			return "", nil
		}
		return string(g.Value), nil
	}
	waitRead := func(site, key, want string) {
		t.Helper()
		poll.Until(t, 45*time.Second, fmt.Sprintf("%s to read %s=%s", site, key, want), func() error {
			if v, err := read(site, key); err != nil || v != want {
				return fmt.Errorf("%s reads %s=%q (%v)", site, key, v, err)
			}
			return nil
		})
	}
	poll.Until(t, 60*time.Second, "a first write at s3", func() error {
		_, err := kv("s3").Put(ctx, &kvv1.PutRequest{Header: header("ks"), Key: []byte("first"), Value: []byte("v")})
		return err
	})
	waitRead("s2", "first", "v")

	// s3's chain is s3, s1, s2. With s2 cut off, s3's next write reaches
	// s1 only and cannot be stable; then s3 is lost for good.
	s.Cut("s2")
	if _, err := kv("s3").Put(ctx, &kvv1.PutRequest{Header: header("ks"), Key: []byte("shipped"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	waitRead("s1", "shipped", "v")
	s.Heal()
	s.Cut("s3")
	// s1 passes it on to s2.
	waitRead("s2", "shipped", "v")

	poll.Until(t, 60*time.Second, "s3 to be removed from ks with force", func() error {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "ks", Sites: []string{"s1", "s2"}, Force: true})
		return err
	})
	// Every site but the lost one learns the change.
	poll.Until(t, 30*time.Second, "s1, s2 and s4 to learn that ks is on s1, s2", func() error {
		for _, site := range []string{"s1", "s2", "s4"} {
			cfg, _ := s.Site(site).Nodes[0].Srv.Cluster().Config()
			if err := hasKeyspace("ks", "s1", "s2")(cfg); err != nil {
				return fmt.Errorf("%s: %w", site, err)
			}
		}
		return nil
	})
	if _, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "ks", Sites: []string{"s1", "s2", "s4"}}); err != nil {
		t.Fatal(err)
	}
	waitRead("s4", "first", "v")
	waitRead("s4", "shipped", "v")
}

// TestNodeStopsWhileAJoinRepairRetries: a node stops (SIGTERM) while the
// anti-entropy of a site that joined a keyspace keeps retrying (the site
// is out of reach, or lost for good). Before, Stop never returned: the
// geo service waited for the repair, which ended only once the service
// had stopped.
func TestNodeStopsWhileAJoinRepairRetries(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 1})
	t.Cleanup(s.Heal) // runs before the sites close
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n1 := s.Site("s1").Nodes[0]
	g1 := geoClient(t, n1)
	if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "ks", Shards: 1, Sites: []string{"s1", "s2"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s1", "s2"))
	s.Cut("s3")
	poll.Until(t, 60*time.Second, "s3 to be added to ks", func() error {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "ks", Sites: []string{"s1", "s2", "s3"}})
		return err
	})
	poll.Until(t, 60*time.Second, "s1's repair towards s3 to fail", func() error {
		if n := counterSum(t, n1, "causeway_geo_anti_entropy_runs_total", "error"); n == 0 {
			return fmt.Errorf("no failed anti-entropy run yet")
		}
		return nil
	})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.Site("s1").Stop(n1)
	}()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("s1's node did not stop within 30s while its repair towards the cut-off s3 retried")
	}
}
