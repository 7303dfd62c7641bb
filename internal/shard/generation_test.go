package shard

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/wal"
)

// testStores opens the state database, raft.db and the write-ahead log of
// one node in dir.
// testConfig is a one-node group's configuration with short raft timings
// and no background garbage collection or digests.
func testConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.SnapshotDir = filepath.Join(dir, "snapshots")
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.GCInterval, cfg.DigestInterval = 0, 0
	return cfg
}

// openAlone bootstraps shard default/0 as the only voter on node n1 with
// fresh stores under dir.
func openAlone(t *testing.T, dir string, cfg Config) *Group {
	t.Helper()
	db, logs := testStores(t, dir)
	return openOn(t, db, logs, cfg, true)
}

// openOn opens shard default/0 on node n1 on the given stores,
// bootstrapping it as the only voter if bootstrap is set.
func openOn(t *testing.T, db *storage.DB, logs *storage.RaftLogs, cfg Config, bootstrap bool) *Group {
	t.Helper()
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

func testStores(t *testing.T, dir string) (*storage.DB, *storage.RaftLogs) {
	t.Helper()
	return testStoresOn(t, dir, nil)
}

// testStoresOn is testStores with the write-ahead log on walFS (nil: the
// real file system).
func testStoresOn(t *testing.T, dir string, walFS vfs.FS) (*storage.DB, *storage.RaftLogs) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := storage.Identity{Site: "s1", NodeID: "n1"}
	cfg := storage.DefaultConfig(filepath.Join(dir, "state.db"), id)
	cfg.NoSync = true
	db, err := storage.Open(cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rcfg := storage.DefaultConfig(filepath.Join(dir, "raft.db"), id)
	rcfg.Name, rcfg.NoSync = "raft", true
	rdb, err := storage.Open(rcfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	wcfg := wal.DefaultConfig(filepath.Join(dir, "wal"))
	wcfg.NoSync, wcfg.SegmentBytes, wcfg.FS = true, 1<<20, walFS
	w, err := wal.Open(wcfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	logs, err := storage.OpenRaftLogs(rdb, w, log)
	if err != nil {
		t.Fatal(err)
	}
	return db, logs
}

// TestOpenGenerations: a replica with no state starts the generation it is
// given; one with state refuses to open at a newer generation
// (ErrStaleGeneration: a recovery gave it up), opens at its own or an
// older one (a map that lags), and takes the newer one only in a recovery
// or when told to (the shard's only voter).
func TestOpenGenerations(t *testing.T) {
	dir := t.TempDir()
	db, logs := testStores(t, dir)
	cfg := testConfig(dir)
	id := storage.ShardID{Keyspace: "default", Shard: 0}
	open := func(d Deps) (*Group, error) {
		_, trans := raft.NewInmemTransport("n1")
		d.DB, d.LogDB, d.NodeID, d.Transport = db, logs, "n1", trans
		d.Clock = causal.NewClock(func() uint64 { return uint64(time.Now().UnixMilli()) })
		d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		return Open(id, cfg, d)
	}
	mustOpen := func(d Deps, wantGen uint64) {
		t.Helper()
		g, err := open(d)
		if err != nil {
			t.Fatal(err)
		}
		if g.Generation() != wantGen {
			t.Errorf("generation %d, want %d", g.Generation(), wantGen)
		}
		poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}

	mustOpen(Deps{Bootstrap: true, Generation: 2}, 2)
	if g, err := open(Deps{Generation: 3}); !errors.Is(err, ErrStaleGeneration) {
		if g != nil {
			_ = g.Close()
		}
		t.Fatalf("open at a newer generation = %v, want ErrStaleGeneration", err)
	}
	mustOpen(Deps{Generation: 2}, 2)
	mustOpen(Deps{Generation: 1}, 2) // the map lags
	// A recovery (here of a replica already alone) takes the new one.
	mustOpen(Deps{Generation: 3, Recover: &recovery.Options{Force: true}}, 3)
	mustOpen(Deps{Generation: 3}, 3)
	// The shard's only voter takes a newer generation rather than fail.
	mustOpen(Deps{Generation: 5, TakeGeneration: true}, 5)
	if gen, err := recovery.Generation(logs.RaftStore(id.String())); gen != 5 || err != nil {
		t.Fatalf("stored generation %d, %v", gen, err)
	}
}
