package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestShardsOfANodeStoppedBeforeTheirBootstrapGetLeaders: n3's disk is
// full (raft.db cannot be written) when a keyspace is created, so n3
// stops before it bootstraps the new shards the catalog placed on it
// alone; the catalog goes on and adds learners of those shards on n1 and
// n2, which wait for a leader that does not exist yet. Once n3 starts
// again (space freed), it bootstraps them, although its map now lists
// learners beside it (it is still their only voter), and every shard of
// the keyspace takes writes. Before, a new replica bootstrapped only
// when the map listed it alone: n3 opened those shards empty, nobody
// could elect a leader in them, and the whole site stayed unready for
// good (seen on real processes, a 3-node site whose third node's tmpfs
// was full when a keyspace was created).
func TestShardsOfANodeStoppedBeforeTheirBootstrapGetLeaders(t *testing.T) {
	c := New(t, 3, nil)
	c.WaitSettled(time.Minute)
	n1, n3 := c.Node("n1"), c.Node("n3")
	server.FailRaftDBWritesForTest(n3.Srv, &os.PathError{Op: "write", Path: filepath.Join(n3.Cfg.DataDir, "raft.db"), Err: syscall.ENOSPC})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const shards = 6
	if _, err := geoClient(t, n1).CreateKeyspace(ctx, &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: shards, Sites: []string{"s1"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n3.Srv.Fatal():
	case <-time.After(30 * time.Second):
		t.Fatal("n3 did not stop when raft.db could not be written")
	}
	c.Kill(n3)
	// Learners are added to a shard that only n3 was to create.
	var stranded []placement.Shard
	poll.Until(t, 30*time.Second, "learners placed beside n3 on a shard of orders it never created", func() error {
		m, _ := n1.Srv.Catalog().Map()
		stranded = stranded[:0]
		for s, reps := range m.Shards {
			voters, learners, n3Votes := 0, 0, false
			for _, r := range reps {
				if r.Voter {
					voters++
					n3Votes = n3Votes || r.Node == "n3"
				} else {
					learners++
				}
			}
			if s.Keyspace == "orders" && voters == 1 && n3Votes && learners > 0 {
				stranded = append(stranded, s)
			}
		}
		if len(stranded) == 0 {
			return fmt.Errorf("map epoch %d: none yet", m.Epoch)
		}
		return nil
	})
	t.Logf("shards of orders n3 was to create, with learners: %v", stranded)

	c.Restart(n3, nil)
	keys := map[uint32]string{}
	for i := 0; len(keys) < shards; i++ {
		k := fmt.Sprint("o", i)
		sh, err := n1.Srv.Router().Shard("orders", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keys[sh.ID]; !ok {
			keys[sh.ID] = k
		}
	}
	for id, k := range keys {
		poll.Until(t, 60*time.Second, fmt.Sprintf("a write to shard %d of orders", id), func() error {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := n1.KV.Put(wctx, &kvv1.PutRequest{Header: header("orders"), Key: []byte(k), Value: []byte("v")})
			return err
		})
	}
}
