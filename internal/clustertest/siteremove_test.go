package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestRemoveALostSite: a site lost for good is removed from the cluster
// (kvctl site remove): the configuration and its group drop it and its
// vote, every keyspace drops it (the default one too), the writes it had
// shipped stay, the others' writes become globally stable again without
// it, and when its node comes back the other sites tell it and it stops.
// A site that answers, and the asking node's own site, are refused (guard
// site-gone).
func TestRemoveALostSite(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 1})
	t.Cleanup(s.Heal) // runs before the sites close
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	n1 := s.Site("s1").Nodes[0]
	g1 := geoClient(t, n1)
	if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "ks", Shards: 1, Sites: []string{"s3", "s1", "s2"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s3", "s1", "s2"))
	kv := func(site string) kvv1.KVClient { return s.Site(site).Nodes[0].KV }
	waitRead := func(site, ks, key, want string) {
		t.Helper()
		poll.Until(t, 45*time.Second, fmt.Sprintf("%s to read %s/%s=%s", site, ks, key, want), func() error {
			g, err := kv(site).Get(ctx, &kvv1.GetRequest{Header: header(ks), Key: []byte(key)})
			if err != nil || string(g.GetValue()) != want {
				return fmt.Errorf("%s reads %s=%q (%v)", site, key, g.GetValue(), err)
			}
			return nil
		})
	}

	// Refused: the asking node's own site, an unknown one, one that
	// answers.
	if _, err := g1.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s1"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("removing the asking node's own site: %v, want FailedPrecondition", err)
	}
	if _, err := g1.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s9"}); status.Code(err) != codes.NotFound {
		t.Fatalf("removing an unknown site: %v, want NotFound", err)
	}
	poll.Until(t, 30*time.Second, "s1 to reach s2", func() error {
		resp, err := g1.Sites(ctx, &adminv1.SitesRequest{})
		if err != nil {
			return err
		}
		for _, si := range resp.Sites {
			if si.Name == "s2" && si.State != "up" {
				return fmt.Errorf("s2 is %s", si.State)
			}
		}
		return nil
	})
	if _, err := g1.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s2"}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "answers") {
		t.Fatalf("removing s2, which answers: %v, want FailedPrecondition", err)
	}

	var tok3 []byte // a session last served at s3
	for _, ks := range []string{"ks", cluster.DefaultKeyspace} {
		poll.Until(t, 60*time.Second, "a first write at s3", func() error {
			resp, err := kv("s3").Put(ctx, &kvv1.PutRequest{Header: header(ks), Key: []byte("first"), Value: []byte("v")})
			if err == nil {
				tok3 = resp.GetHeader().GetSession()
			}
			return err
		})
		waitRead("s2", ks, "first", "v")
	}

	// s3 is lost. Its last measured round trip is not shown as current.
	s.Cut("s3")
	poll.Until(t, 30*time.Second, "s1 to see s3 out of reach", func() error {
		resp, err := g1.Sites(ctx, &adminv1.SitesRequest{})
		if err != nil {
			return err
		}
		for _, si := range resp.Sites {
			if si.Name == "s3" && (si.State == "up" || si.RttSeconds != 0) {
				return fmt.Errorf("s3 is %s, round trip %.3f s", si.State, si.RttSeconds)
			}
		}
		return nil
	})
	poll.Until(t, 60*time.Second, "s3 to be removed from the cluster", func() error {
		_, err := g1.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s3"})
		return err
	})
	for _, n := range []*Node{n1, s.Site("s2").Nodes[0]} {
		poll.Until(t, 30*time.Second, "s1 and s2 to learn that s3 is removed", func() error {
			cfg, _ := n.Srv.Cluster().Config()
			if got := cfg.SiteNames(); !slices.Equal(got, []string{"s1", "s2"}) {
				return fmt.Errorf("sites %v", got)
			}
			if _, ok := cfg.Removed["s3"]; !ok {
				return errors.New("s3 is not recorded as removed")
			}
			for _, ks := range []string{"ks", cluster.DefaultKeyspace} {
				if err := hasKeyspace(ks, "s1", "s2")(cfg); err != nil {
					return err
				}
			}
			return nil
		})
	}
	poll.Until(t, 30*time.Second, "s3's voter to leave the cluster configuration group", func() error {
		servers, err := n1.Srv.Cluster().Servers()
		if err != nil {
			return err
		}
		for _, srv := range servers {
			if strings.HasPrefix(string(srv.ID), "s3/") {
				return fmt.Errorf("member %s", srv.ID)
			}
		}
		if len(servers) != 2 {
			return fmt.Errorf("%d members, want 2", len(servers))
		}
		return nil
	})
	if _, err := g1.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s3"}); status.Code(err) != codes.NotFound {
		t.Fatalf("removing s3 again: %v, want NotFound", err)
	}

	// What s3 shipped stays; s1's new writes reach s2 and become globally
	// stable (their stability no longer waits for s3).
	for _, ks := range []string{"ks", cluster.DefaultKeyspace} {
		if _, err := kv("s1").Put(ctx, &kvv1.PutRequest{Header: header(ks), Key: []byte("after"), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		waitRead("s2", ks, "after", "v")
		waitRead("s2", ks, "first", "v")
		g := n1.Srv.Host().Group(placement.Shard{Keyspace: ks, ID: 0})
		poll.Until(t, 30*time.Second, fmt.Sprintf("s1's writes to %s to be globally stable", ks), func() error {
			geo := g.Geo()
			if st := geo.Stable["s1"]; st.Seq < geo.Local.Seq {
				return fmt.Errorf("stable up to %d of %d (chain %v)", st.Seq, geo.Local.Seq, geo.Chain)
			}
			return nil
		})
	}

	// A session last served at s3 starts over.
	if _, err := kv("s1").Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok3}, Key: []byte("first")}); err == nil || !strings.Contains(err.Error(), "start a new session") {
		t.Fatalf("a session of removed site s3 at s1: %v, want a refusal that says to start a new session", err)
	}

	// s3 comes back: told by the others that it was removed, it stops.
	s.Heal()
	n3 := s.Site("s3").Nodes[0]
	poll.Until(t, time.Minute, "s3's node to stop", func() error {
		select {
		case <-n3.Srv.Fatal():
			return nil
		default:
			return fmt.Errorf("s3's node still running (ready: %v)", n3.Srv.Ready())
		}
	})
	if err := n3.Srv.Ready(); !errors.Is(err, cluster.ErrSiteRemoved) || !strings.Contains(err.Error(), "removed from the cluster for good") {
		t.Fatalf("s3's fatal error: %v", err)
	}
}
