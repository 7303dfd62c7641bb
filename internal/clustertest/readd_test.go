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

// TestSiteAddedBackGetsTheWritesItMissed: a site removed from a keyspace
// and added back later receives what the keyspace's sites wrote while it
// was out (a delete and a put), without an operator's repair and without
// the periodic anti-entropy (off in these tests): the writes made while it
// was out are in no outbound log towards it.
func TestSiteAddedBackGetsTheWritesItMissed(t *testing.T) {
	s := NewSites(t, SitesOptions{Sites: []string{"s1", "s2", "s3"}, NodesPerSite: 1, Shards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	g1 := geoClient(t, s.Site("s1").Nodes[0])
	if _, err := g1.CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 1, Sites: []string{"s1", "s2"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("orders", "s1", "s2"))
	kv1, kv2 := s.Site("s1").Nodes[0].KV, s.Site("s2").Nodes[0].KV
	poll.Until(t, 60*time.Second, "a write at s1", func() error {
		_, err := kv1.Put(ctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte("gone"), Value: []byte("before")})
		return err
	})
	read2 := func(key string) (string, error) {
		g, err := kv2.Get(ctx, &kvv1.GetRequest{Header: header("orders"), Key: []byte(key)})
		if err != nil {
			return "", err
		}
		if !g.Found {
			return "", nil
		}
		return string(g.Value), nil
	}
	poll.Until(t, 60*time.Second, "the write to reach s2", func() error {
		if v, err := read2("gone"); err != nil || v != "before" {
			return fmt.Errorf("s2 reads %q, %v", v, err)
		}
		return nil
	})

	poll.Until(t, 60*time.Second, "s2 to be removed from orders", func() error {
		_, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "orders", Sites: []string{"s1"}})
		return err
	})
	s.WaitConfig(30*time.Second, hasKeyspace("orders", "s1"))
	if _, err := kv1.Delete(ctx, &kvv1.DeleteRequest{Header: header("orders"), Key: []byte("gone")}); err != nil {
		t.Fatal(err)
	}
	if _, err := kv1.Put(ctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte("new"), Value: []byte("while-out")}); err != nil {
		t.Fatal(err)
	}

	if _, err := g1.SetKeyspaceSites(ctx, &adminv1.SetKeyspaceSitesRequest{Name: "orders", Sites: []string{"s1", "s2"}}); err != nil {
		t.Fatal(err)
	}
	s.WaitConfig(30*time.Second, hasKeyspace("orders", "s1", "s2"))
	// A later write travels down the chain as usual.
	poll.Until(t, 60*time.Second, "a write at s1 after s2 is back", func() error {
		_, err := kv1.Put(ctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte("after"), Value: []byte("v")})
		return err
	})
	poll.Until(t, 60*time.Second, "s2 to hold what s1 wrote while it was out", func() error {
		for key, want := range map[string]string{"gone": "", "new": "while-out", "after": "v"} {
			if v, err := read2(key); err != nil || v != want {
				return fmt.Errorf("s2 reads %s=%q (%v), want %q", key, v, err, want)
			}
		}
		return nil
	})
}
