package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// TestSiteRemovalPassesOnTheRemovedSitesWrites: s3's writes reached s1,
// the second site of their chain, but not s2, the third (partitioned
// from s1 and s3), when s3 was lost and removed from the cluster. s3's
// writes then have no chain: the comparison each shard leader makes with
// the remaining sites when its chain loses a site is what brings them to
// s2. The partition outlasts the removal, so s1's first comparison
// fails; once it heals, s2 gets the writes without the periodic
// anti-entropy (off in these tests). Before, the pass gave up after its
// first failure and s2 never got them. A session that read one of them
// at s1 and moves to s2 meanwhile is answered UNAVAILABLE there, then
// reads what it saw: before, s2 did not wait for versions of a site the
// keyspace no longer lists, and answered that a key in the causal past
// of what the session read did not exist (guard session-arrival off:
// the same).
//
// Four sites, so that s4 (which reaches every site), s1 and s2 make a
// majority of the cluster configuration while s3 is cut off and s1 and
// s2 do not reach each other.
func TestSiteRemovalPassesOnTheRemovedSitesWrites(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3", "s4"}, NodesPerSite: 1, Shards: 1})
	t.Cleanup(s.Heal) // runs before the sites close
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	g4 := geoClient(t, s.Site("s4").Nodes[0])
	poll.Until(t, 60*time.Second, "keyspace ks to be created", func() error {
		_, err := g4.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "ks", Shards: 1, Sites: []string{"s3", "s1", "s2"}})
		if status.Code(err) == codes.AlreadyExists {
			return nil // an earlier attempt committed
		}
		return err
	})
	s.WaitConfig(30*time.Second, hasKeyspace("ks", "s3", "s1", "s2"))
	kv := func(site string) kvv1.KVClient { return s.Site(site).Nodes[0].KV }
	read := func(site, key string) (string, error) {
		g, err := kv(site).Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte(key)})
		if err != nil {
			return "", err
		}
		return string(g.GetValue()), nil
	}
	waitRead := func(site, key, want string, d time.Duration) {
		t.Helper()
		poll.Until(t, d, fmt.Sprintf("%s to read %s=%s", site, key, want), func() error {
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
	waitRead("s2", "first", "v", 45*time.Second)

	// s3's chain is s3, s1, s2: with s2 partitioned from s1 and s3 (s3
	// would skip a slow s1 and ship to s2 itself), s3's next writes reach
	// s1 and stop there. Then s3 is lost. The same session writes dep,
	// then held: held depends on dep.
	s.Net.PartitionSites("s1", "s2")
	s.Net.PartitionSites("s3", "s2")
	dep, err := kv("s3").Put(ctx, &kvv1.PutRequest{Header: header("ks"), Key: []byte("dep"), Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv("s3").Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: "ks", Session: dep.GetHeader().GetSession()}, Key: []byte("held"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	waitRead("s1", "held", "v", 45*time.Second)
	if v, err := read("s2", "held"); err != nil || v != "" {
		t.Fatalf("s2 reads held=%q (%v) through the partition", v, err)
	}
	s.Cut("s3")
	poll.Until(t, 60*time.Second, "s3 to be removed from the cluster", func() error {
		_, err := g4.RemoveSite(ctx, &adminv1.RemoveSiteRequest{Site: "s3"})
		return err
	})
	for _, site := range []string{"s1", "s2"} {
		poll.Until(t, 60*time.Second, site+" to learn that s3 is removed", func() error {
			cfg, _ := s.Site(site).Nodes[0].Srv.Cluster().Config()
			if _, ok := cfg.Removed["s3"]; !ok {
				return errors.New("s3 is not recorded as removed")
			}
			return hasKeyspace("ks", "s1", "s2")(cfg)
		})
	}
	// A session that read held at s1 and moves to s2 waits there for
	// what it saw, and is told to retry while s2 cannot have it: before,
	// s2 did not wait for the versions of a site the keyspace no longer
	// lists, and answered that dep, in held's causal past, did not exist.
	r1, err := kv("s1").Get(ctx, &kvv1.GetRequest{Header: header("ks"), Key: []byte("held")})
	if err != nil || string(r1.GetValue()) != "v" {
		t.Fatalf("s1 reads held=%q (%v)", r1.GetValue(), err)
	}
	moved := &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "ks", Session: r1.GetHeader().GetSession()}, Key: []byte("dep")}
	mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
	r2, err := kv("s2").Get(mctx, moved)
	mcancel()
	if err == nil {
		t.Fatalf("the session that read held=v at s1 reads dep=%q (found %v) at s2, which holds neither", r2.GetValue(), r2.GetFound())
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("the moved session's read at s2: %v, want Unavailable", err)
	}
	n1 := s.Site("s1").Nodes[0]
	poll.Until(t, 30*time.Second, "s1's comparison with s2 to fail", func() error {
		if n := counterSum(t, n1, "causeway_geo_anti_entropy_runs_total", "error"); n == 0 {
			return errors.New("no failed anti-entropy run yet")
		}
		return nil
	})

	// The partition heals (s3 stays cut off): s1's pass reaches s2.
	s.Heal()
	s.Cut("s3")
	poll.Until(t, 60*time.Second, "the moved session to read dep=v at s2", func() error {
		r2, err := kv("s2").Get(ctx, moved)
		if err != nil {
			return err
		}
		if string(r2.GetValue()) != "v" {
			t.Fatalf("the session that read held=v at s1 reads dep=%q at s2", r2.GetValue())
		}
		return nil
	})
	waitRead("s2", "held", "v", 30*time.Second)
	cfg, _ := s.Site("s2").Nodes[0].Srv.Cluster().Config()
	if !slices.Equal(cfg.SiteNames(), []string{"s1", "s2", "s4"}) {
		t.Fatalf("s2 knows sites %v", cfg.SiteNames())
	}
}
