package shard

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestSoleVoterElectsAtOnce: a replica that is the only voter of its
// group leads without waiting out a HeartbeatTimeout (an hour here), when
// bootstrapped and when reopened on its state: a single-node site is
// ready as soon as its groups open (raft.Config.SoleVoterElectsAtOnce,
// third_party/raft/FORK.md). Without the option neither would lead
// within the hour.
func TestSoleVoterElectsAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
	cfg.LeaderHeartbeatTimeout = time.Hour
	db, logs := testStores(t, dir)
	open := func(bootstrap bool) *Group {
		_, trans := raft.NewInmemTransport("n1")
		g, err := Open(storage.ShardID{Keyspace: "default", Shard: 0}, cfg, Deps{
			Bootstrap: bootstrap, Generation: 1,
			DB: db, LogDB: logs, NodeID: "n1", Transport: trans,
			Clock:  causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) }),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := open(true)
	poll.Until(t, 30*time.Second, "the bootstrapped sole voter to lead", poll.True(g.IsLeader))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	g = open(false)
	defer func() { _ = g.Close() }()
	poll.Until(t, 30*time.Second, "the reopened sole voter to lead", poll.True(g.IsLeader))
}
