package shard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestProposalsEndWhenTheGroupCloses: every proposal in flight when a
// replica closes returns, even one made without a deadline. Raft leaves
// some futures unanswered at shutdown (committed entries still queued for
// the state machine, and with BatchApplyCh proposals still queued for the
// leader); Group.wait stops waiting on them once raft is down.
func TestProposalsEndWhenTheGroupCloses(t *testing.T) {
	dir := t.TempDir()
	db, logs := testStores(t, dir)
	cfg := DefaultConfig()
	cfg.SnapshotDir = filepath.Join(dir, "snapshots")
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.GCInterval, cfg.DigestInterval = 0, 0
	_, trans := raft.NewInmemTransport("n1")
	g, err := Open(storage.ShardID{Keyspace: "default", Shard: 0}, cfg, Deps{
		Bootstrap: true, Generation: 1,
		DB: db, LogDB: logs, NodeID: "n1", Transport: trans,
		Clock:  causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) }),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))

	const writers = 32
	var (
		wg       sync.WaitGroup
		returned atomic.Int64
		applied  atomic.Int64
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer returned.Add(1)
			for i := 0; ; i++ {
				cmd := &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte{byte(w), byte(i)}, Value: []byte("v"), Site: "s1"}}}
				if _, err := g.Propose(context.Background(), cmd); err != nil {
					return
				}
				applied.Add(1)
			}
		}()
	}
	poll.Until(t, 10*time.Second, "writes are applied", poll.True(func() bool { return applied.Load() > 200 }))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "every proposal returns after Close", func() error {
		if n := returned.Load(); n != writers {
			return fmt.Errorf("%d of %d writers returned", n, writers)
		}
		return nil
	})
	wg.Wait()
}
