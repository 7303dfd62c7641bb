package shard

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

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

// failingLogs is an in-memory raft log whose writes fail while fail is
// set: a log that failed stop (the write-ahead log after a failed write).
type failingLogs struct {
	*raft.InmemStore
	fail atomic.Bool
}

var errLogFailed = errors.New("injected: the log cannot be written")

func (s *failingLogs) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *failingLogs) StoreLogs(logs []*raft.Log) error {
	if s.fail.Load() {
		return errLogFailed
	}
	return s.InmemStore.StoreLogs(logs)
}

// lineCounter counts the lines written to it that hold substr.
type lineCounter struct {
	substr string
	n      atomic.Int64
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(strings.Count(string(p), c.substr)))
	return len(p), nil
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

// TestSoleVoterWhoseLogFailedDoesNotStandAtOnce: a sole voter whose log
// store fails as it leads steps down, and does not elect itself at once
// again (raft.Config.SoleVoterElectsAtOnce, third_party/raft/FORK.md): it
// waits a HeartbeatTimeout (an hour here), as any follower does. Standing
// at once, it failed the store of its no-op entry, stepped down and stood
// again in a hot loop (thousands of "failed to commit logs" a second),
// with the leader's parallel append (the shards) or without it (the site
// catalog and the cluster configuration group).
func TestSoleVoterWhoseLogFailedDoesNotStandAtOnce(t *testing.T) {
	for _, parallel := range []bool{true, false} {
		t.Run(fmt.Sprintf("parallel=%v", parallel), func(t *testing.T) {
			lines := &lineCounter{substr: "failed to commit logs"}
			conf := raft.DefaultConfig()
			conf.LocalID = "n1"
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
			conf.SoleVoterElectsAtOnce = true
			conf.ParallelLeaderAppend = parallel
			conf.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: lines})
			store := &failingLogs{InmemStore: raft.NewInmemStore()}
			snaps := raft.NewInmemSnapshotStore()
			_, trans := raft.NewInmemTransport("n1")
			if err := raft.BootstrapCluster(conf, store, store, snaps, trans,
				raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: trans.LocalAddr()}}}); err != nil {
				t.Fatal(err)
			}
			r, err := raft.NewRaft(conf, nopFSM{}, store, store, snaps, trans)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Shutdown().Error() }()
			poll.Until(t, 30*time.Second, "the sole voter to lead", poll.True(func() bool { return r.State() == raft.Leader }))
			if err := r.Apply([]byte("ok"), 10*time.Second).Error(); err != nil {
				t.Fatal(err)
			}

			store.fail.Store(true)
			if err := r.Apply([]byte("lost"), 10*time.Second).Error(); err == nil {
				t.Fatal("an entry the leader could not store was applied")
			}
			poll.Until(t, 30*time.Second, "the leader to step down", poll.True(func() bool { return r.State() != raft.Leader }))
			// Long enough for a hot loop to show (it ran thousands of
			// rounds a second), well short of the HeartbeatTimeout.
			time.Sleep(300 * time.Millisecond)
			if got := lines.n.Load(); got != 1 {
				t.Errorf("%q logged %d times; want once: the sole voter stood again at once", lines.substr, got)
			}
			if s := r.State(); s == raft.Leader || s == raft.Candidate {
				t.Errorf("the sole voter whose log failed is %v; want a follower until its HeartbeatTimeout", s)
			}
		})
	}
}
