package shard

import (
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/poll"
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
	g := openOn(t, db, logs, cfg, true)
	poll.Until(t, 30*time.Second, "the bootstrapped sole voter to lead", poll.True(g.IsLeader))
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	g = openOn(t, db, logs, cfg, false)
	defer func() { _ = g.Close() }()
	poll.Until(t, 30*time.Second, "the reopened sole voter to lead", poll.True(g.IsLeader))
}
