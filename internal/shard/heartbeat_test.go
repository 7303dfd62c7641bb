package shard

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestLeaderHeartbeatTimeout: a replica runs raft with
// LeaderHeartbeatTimeout while it leads (rare heartbeats) and goes back to
// HeartbeatTimeout when it stops leading, so that as a follower it detects
// a failed leader as fast as before.
func TestLeaderHeartbeatTimeout(t *testing.T) {
	dir := t.TempDir()
	db, logs := testStores(t, dir)
	cfg := DefaultConfig()
	cfg.SnapshotDir = filepath.Join(dir, "snapshots")
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.LeaderHeartbeatTimeout = time.Second
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
	defer g.Close()
	poll.Until(t, 10*time.Second, "the leader runs with LeaderHeartbeatTimeout", func() error {
		if !g.IsLeader() {
			return fmt.Errorf("not leader yet")
		}
		if rc := g.Raft().ReloadableConfig(); rc.HeartbeatTimeout != time.Second || rc.ElectionTimeout != time.Second {
			return fmt.Errorf("heartbeat timeout %v, election timeout %v", rc.HeartbeatTimeout, rc.ElectionTimeout)
		}
		return nil
	})
}
