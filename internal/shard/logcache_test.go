package shard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestLogCacheIsBoundedInBytes: a replica's cache of its newest raft log
// entries holds at most LogCacheBytes of them. raft's LogCache, which it
// replaces, held the last 1,024 entries whatever their size: a replica
// that took 200 writes of 256 KiB kept 50 MiB of them in its heap (a
// node of 16 replicas taking values of up to 1 MiB grew by gigabytes).
// Every entry stays readable, from the cache or the write-ahead log.
func TestLogCacheIsBoundedInBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	db, logs := testStores(t, dir)
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
	defer func() { _ = g.Close() }()
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	const writes, size = 200, 256 << 10
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	for i := range writes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: fmt.Appendf(nil, "k%d", i%10), Value: value(i), Site: "s1"}}}
		_, err := g.Propose(ctx, cmd)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The state database's open transaction holds applies for up to its
	// commit interval; what stays after it is the cache.
	const bound = 24 << 20
	var grown uint64
	poll.Until(t, 20*time.Second, "the heap to hold no more than the cache's bound of the writes", func() error {
		if h := heap(); h > base {
			grown = h - base
		}
		if grown >= bound {
			return fmt.Errorf("the heap grew by %d MiB", grown>>20)
		}
		return nil
	})
	t.Logf("heap grew by %d KiB after %d MiB of writes", grown>>10, writes*size>>20)
	// Every entry reads the same through the cache as from the log.
	store := logs.RaftStore(g.id.String())
	first, _ := g.logs.FirstIndex()
	last, _ := g.logs.LastIndex()
	for i := first; i <= last; i++ {
		var a, b raft.Log
		if err := g.logs.GetLog(i, &a); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if err := store.GetLog(i, &b); err != nil {
			t.Fatalf("the log's GetLog(%d): %v", i, err)
		}
		if a.Index != b.Index || a.Term != b.Term || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("entry %d differs between the cache and the log", i)
		}
	}
}

// TestLogCacheReadsAsItsStore: whatever raft does to its log (appends,
// entries replacing a suffix, compactions, a gap after a snapshot
// install), every entry reads through the cache as it reads from the
// store, with entries of every size against a small byte bound.
func TestLogCacheReadsAsItsStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	store := raft.NewInmemStore()
	c := newLogCache(store, 4<<10)
	var last uint64
	term := uint64(1)
	for step := range 3000 {
		first, _ := store.FirstIndex()
		switch op := rng.IntN(100); {
		case op < 70 || last == 0:
			n := 1 + rng.IntN(6)
			logs := make([]*raft.Log, n)
			for k := range logs {
				logs[k] = &raft.Log{Index: last + 1 + uint64(k), Term: term, Type: raft.LogCommand,
					Data: bytes.Repeat([]byte{byte(step), byte(k)}, rng.IntN(1500))}
			}
			if err := c.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			last += uint64(n)
		case op < 85 && last > first: // a new leader's entries replace a suffix
			from := first + 1 + uint64(rng.IntN(int(last-first)))
			term++
			if err := c.DeleteRange(from, last); err != nil {
				t.Fatal(err)
			}
			if err := c.StoreLogs([]*raft.Log{{Index: from, Term: term, Type: raft.LogNoop}}); err != nil {
				t.Fatal(err)
			}
			last = from
		case op < 97 && last > first: // compaction
			if err := c.DeleteRange(first, first+uint64(rng.IntN(int(last-first)))); err != nil {
				t.Fatal(err)
			}
		default: // a snapshot installed far ahead: the log starts again
			if err := c.DeleteRange(first, last); err != nil {
				t.Fatal(err)
			}
			last += 100
			if err := c.StoreLogs([]*raft.Log{{Index: last, Term: term, Type: raft.LogNoop}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, b := c.cached(); b > 4<<10 {
			t.Fatalf("step %d: the cache holds %d bytes, above its bound", step, b)
		}
		first, _ = store.FirstIndex()
		for i := first; i <= last; i++ {
			var a, b raft.Log
			errA := store.GetLog(i, &a)
			errB := c.GetLog(i, &b)
			if (errA == nil) != (errB == nil) || errA == nil && (a.Index != b.Index || a.Term != b.Term || !bytes.Equal(a.Data, b.Data)) {
				t.Fatalf("step %d: GetLog(%d): cache %+v, %v; store %+v, %v", step, i, b.Index, errB, a.Index, errA)
			}
		}
	}
}

// TestLargeEntriesAreSnapshottedByBytes: a replica snapshots its log
// once the entries since its last snapshot hold SnapshotThresholdBytes
// (or as many bytes as that snapshot), and keeps only TrailingBytes of
// entries after it. Counted in entries alone (8,192 between snapshots,
// 10,240 kept after one), a shard taking values of up to 1 MiB kept
// gigabytes of log in the node's write-ahead log; here 60 MiB of writes
// would all have stayed in wal/.
func TestLargeEntriesAreSnapshottedByBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.SnapshotThresholdBytes, cfg.TrailingBytes = 8<<20, 2<<20
	cfg.SnapshotInterval = 50 * time.Millisecond
	// Overwritten versions are collected: the state, and so each
	// snapshot, stays about ten values large (a snapshot as large as the
	// log would hold the next one off).
	cfg.VersionRetention, cfg.GCInterval = time.Millisecond, 100*time.Millisecond
	db, logs := testStores(t, dir)
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
	defer func() { _ = g.Close() }()
	poll.Until(t, 10*time.Second, "the replica leads", poll.True(g.IsLeader))
	const writes, size = 240, 256 << 10
	for i := range writes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: fmt.Appendf(nil, "k%d", i%10), Value: bytes.Repeat([]byte{byte(i)}, size), Site: "s1"}}}
		_, err := g.Propose(ctx, cmd)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	store := logs.RaftStore(g.id.String())
	walBytes := func() int64 {
		var n int64
		_ = filepath.WalkDir(filepath.Join(dir, "wal"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					n += fi.Size()
				}
			}
			return err
		})
		return n
	}
	// At most the threshold, plus the trailing entries, plus a snapshot
	// check interval of writes (none now), plus partly used segments.
	const bound = 8<<20 + 2<<20 + 4<<20
	poll.Until(t, 30*time.Second, "the log to be snapshotted and compacted", func() error {
		if n, w := store.(raft.LogSizer).BytesAfter(0), walBytes(); n >= bound || w >= bound+2<<20 {
			return fmt.Errorf("the log holds %d MiB in %d MiB of segments", n>>20, w>>20)
		}
		return nil
	})
	if st := g.Status(); st.LastSnapshotIndex == 0 {
		t.Errorf("no snapshot after %d MiB of writes: %+v", writes*size>>20, st)
	}
	// The writes are all there.
	err = g.Read(func(s *storage.ShardTx) error {
		for k := range 10 {
			r, ok, err := s.Latest(fmt.Appendf(nil, "k%d", k), false)
			if err != nil || !ok || len(r.Value) != size || r.Value[0] != byte(writes-10+k) {
				return fmt.Errorf("k%d: found %v, %v", k, ok, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
