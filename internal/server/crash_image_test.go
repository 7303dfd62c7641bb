package server

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/snapstore"
	"github.com/causeway-db/causeway/internal/vfs"
)

var (
	crashSeed   = flag.Uint64("crash-seed", 0, "TestCrashImages: seed of the workload and crash points (0: from the clock)")
	crashPoints = flag.Int("crash-points", 50, "TestCrashImages: crash points per run")
)

// TestCrashImages crashes a real single-node server again and again and
// restarts it on what a power loss would have left on its disk.
//
// The write-ahead log and the raft snapshots are on a vfs.MemFS. Four
// clients put new keys and delete some of the keys they wrote, through
// the gRPC API, and record what was acknowledged; snapshots and log
// truncations happen all along (small SnapshotThreshold and TrailingLogs,
// and forced snapshots at random moments). After a random number of
// operations, with requests in flight, the test takes the crash image
// (MemFS.CrashClone: only what was synced) and copies raft.db and the
// state database's open marker, kills the server, and starts a new one on
// the image with another boot id: the state database is rebuilt from the
// snapshots and the log (docs/adr/006). A linearizable scan must then show
// every acknowledged put and no acknowledged delete; operations in flight
// at the crash may have happened or not, and the scan decides them for
// the next rounds. Each restarted server is itself crashed: round 0 starts
// on an empty directory, round k on the crash image of round k-1, and
// there are crash-points crashes.
//
// What it cannot show. raft.db (the raft stable stores: term and vote) is
// a bbolt file on the real disk: it is copied byte for byte, twice until
// both copies agree, so the copy is the file as it was between two
// commits. bbolt fsyncs every commit, so that is what a power loss leaves,
// provided bbolt is right; an unsynced raft.db write cannot be caught here.
// raft.db only changes when a group elects a leader, which a single node
// does only as it starts, so the image of raft.db (taken just after the
// MemFS image) and the one of the log agree. The state database is thrown
// away, not imaged. And the crash model has no torn writes: a write that
// was not synced is lost whole (see package vfs).
//
// With the causeway_guards build tag and CAUSEWAY_GUARDS_OFF=wal-sync or
// snapshot-sync, the write-ahead log or the snapshot store skips its syncs
// and this test fails.
func TestCrashImages(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	points := *crashPoints
	if testing.Short() {
		points = min(points, 10)
	}
	c := &crashRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), root: t.TempDir(), fs: vfs.NewMem()}
	for w := range c.keys {
		c.keys[w] = map[string]*crashKey{}
	}
	// The data directory exists before the node starts, as an operator
	// would have made it.
	if err := vfs.MkdirAllSync(c.fs, c.dir(0), 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for gen := 0; gen <= points; gen++ {
		c.gen = gen
		n := c.start()
		c.verify(n)
		if gen == points {
			n.srv.Stop()
			break
		}
		c.run(n)
	}
	t.Logf("seed %d: %d crash points in %v; %d keys, %d acknowledged puts and %d acknowledged deletes; %d crash images had truncated logs",
		seed, points, time.Since(start).Round(time.Millisecond), c.total(), c.puts, c.dels, c.truncated)
	if c.truncated < points/4 {
		t.Fatalf("seed %d: only %d of %d crash images had a log truncated behind a snapshot", seed, c.truncated, points)
	}
}

const crashWorkers = 4

// Key states.
const (
	mustExist = iota + 1
	mustNotExist
	inDoubt // an operation on it was in flight at the crash
)

type crashKey struct {
	value string
	want  int
}

type crashRun struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	root string
	gen  int
	fs   *vfs.MemFS
	logs *warnings

	// keys[w] are the keys worker w writes; each worker changes only its
	// own map, and the test reads them once the workers stopped.
	keys [crashWorkers]map[string]*crashKey

	puts, dels, truncated int
}

func (c *crashRun) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("seed %d (rerun with -crash-seed=%d), round %d: %s", c.seed, c.seed, c.gen, fmt.Sprintf(format, args...))
}

func (c *crashRun) dir(gen int) string { return filepath.Join(c.root, fmt.Sprintf("gen%03d", gen)) }

// start runs a server on c.fs and the data directory of c.gen, and waits
// until it is ready.
func (c *crashRun) start() *node {
	c.t.Helper()
	cfg := testConfig(c.dir(c.gen))
	cfg.Shards = 2
	cfg.FS = c.fs
	cfg.BootID = fmt.Sprint("boot-", c.gen) // every restart follows a machine crash
	cfg.Shard.SnapshotThreshold = 24
	cfg.Shard.SnapshotInterval, cfg.Shard.SnapshotCountInterval = 20*time.Millisecond, 20*time.Millisecond
	cfg.Shard.TrailingLogs = 4
	cfg.ShutdownGrace = 100 * time.Millisecond
	c.logs = &warnings{}
	srv, err := New(cfg, slog.New(c.logs))
	if err != nil {
		c.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		c.fatalf("the node refused to start on the crash image (%d acknowledged operations are lost with it): %v", c.acknowledged(), err)
	}
	c.t.Cleanup(srv.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for srv.Ready() != nil {
		if strings.Contains(c.logs.String(), snapstore.ErrLogGap.Error()) {
			c.fatalf("the crash image lost acknowledged writes (of %d acknowledged operations): a raft log was truncated behind a snapshot that is not in the image:\n%s", c.acknowledged(), c.logs)
		}
		if time.Now().After(deadline) {
			c.fatalf("the node on the crash image is not ready: %v; its last warnings:\n%s", srv.Ready(), c.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	conn, err := grpc.NewClient(srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return &node{srv: srv, kv: kvv1.NewKVClient(conn)}
}

// verify scans every key linearizably and compares with what was
// acknowledged; then the scan decides the operations that were in doubt.
func (c *crashRun) verify(n *node) {
	c.t.Helper()
	got := map[string]string{}
	req := &kvv1.ScanRequest{Prefix: []byte("k/"), Limit: 10000, Consistency: kvv1.Consistency_CONSISTENCY_STRONG}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := n.kv.Scan(ctx, req)
		cancel()
		if err != nil {
			c.fatalf("scan: %v", err)
		}
		for _, it := range resp.Items {
			got[string(it.Key)] = string(it.Value)
		}
		if len(resp.Continuation) == 0 {
			break
		}
		req.Continuation = resp.Continuation
	}
	var problems []string
	known := 0
	for w := range c.keys {
		for k, st := range c.keys[w] {
			known++
			v, ok := got[k]
			switch {
			case st.want == mustExist && !ok:
				problems = append(problems, fmt.Sprintf("acknowledged put of %s lost", k))
			case ok && v != st.value:
				problems = append(problems, fmt.Sprintf("%s = %q, put %q", k, v, st.value))
			case st.want == mustNotExist && ok:
				problems = append(problems, fmt.Sprintf("%s is back: its delete was acknowledged, or its put failed", k))
			}
			if ok {
				st.want = mustExist
			} else {
				st.want = mustNotExist
			}
		}
	}
	for k := range got {
		if c.owner(k) < 0 || c.keys[c.owner(k)][k] == nil {
			problems = append(problems, fmt.Sprintf("%s was never written", k))
		}
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		c.fatalf("%d problems after the restart:\n%s\nthe node's last warnings:\n%s", len(problems), strings.Join(problems, "\n"), c.logs)
	}
}

func (c *crashRun) owner(key string) int {
	var gen, w, seq int
	if _, err := fmt.Sscanf(key, "k/%d/%d/%d", &gen, &w, &seq); err != nil || w < 0 || w >= crashWorkers {
		return -1
	}
	return w
}

// acknowledged counts the keys whose last operation was acknowledged.
func (c *crashRun) acknowledged() int {
	n := 0
	for w := range c.keys {
		for _, st := range c.keys[w] {
			if st.want != inDoubt {
				n++
			}
		}
	}
	return n
}

func (c *crashRun) total() int {
	n := 0
	for w := range c.keys {
		n += len(c.keys[w])
	}
	return n
}

// run writes until a random crash point, takes the crash image and kills
// the server. The next data directory holds the image.
func (c *crashRun) run(n *node) {
	c.t.Helper()
	var mu sync.RWMutex // workers record outcomes under R; the crash takes W
	crashed := false
	var wg sync.WaitGroup
	// The crash comes after crashAt acknowledged operations.
	crashAt := int64(10 + c.rng.IntN(120))
	var acks, puts, dels atomic.Int64 // acknowledged before the crash
	countdown := make(chan struct{})
	tick := func() {
		if acks.Add(1) == crashAt {
			close(countdown)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		rng := rand.New(rand.NewPCG(c.seed, uint64(c.gen*crashWorkers+w+1)))
		go func(w int) {
			defer wg.Done()
			mine := c.keys[w]
			var live []string
			for k, st := range mine {
				if st.want == mustExist {
					live = append(live, k)
				}
			}
			for seq := 0; ; seq++ {
				mu.RLock()
				stop := crashed
				mu.RUnlock()
				if stop || ctx.Err() != nil {
					return
				}
				var err error
				var key string
				del := len(live) > 0 && rng.IntN(4) == 0
				if del {
					i := rng.IntN(len(live))
					key = live[i]
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
					mine[key].want = inDoubt
					rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
					_, err = n.kv.Delete(rctx, &kvv1.DeleteRequest{Key: []byte(key)})
					rcancel()
				} else {
					key = fmt.Sprintf("k/%d/%d/%d", c.gen, w, seq)
					value := fmt.Sprintf("v%d.%d.%d.%s", c.gen, w, seq, strings.Repeat("x", rng.IntN(48)))
					mine[key] = &crashKey{value: value, want: inDoubt}
					rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
					_, err = n.kv.Put(rctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(value)})
					rcancel()
				}
				if err != nil {
					continue // in doubt until the next restart
				}
				mu.RLock()
				if !crashed {
					if del {
						mine[key].want = mustNotExist
						dels.Add(1)
					} else {
						mine[key].want = mustExist
						live = append(live, key)
						puts.Add(1)
					}
				}
				mu.RUnlock()
				tick()
			}
		}(w)
	}
	// Forced snapshots (and log truncations) at a random moment.
	if c.rng.IntN(2) == 0 {
		wg.Add(1)
		delay := time.Duration(c.rng.IntN(50)) * time.Millisecond
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			for _, g := range n.srv.Groups() {
				_ = g.Snapshot(ctx) // fails once the server is killed
			}
		}()
	}
	select {
	case <-countdown:
	case <-time.After(60 * time.Second):
		c.fatalf("the workers stalled before the crash point (%d operations)", crashAt)
	}
	for _, g := range n.srv.Groups() {
		if st := g.Status(); st.FirstLogIndex > 1 && st.LastSnapshotIndex > 0 {
			c.truncated++
			break
		}
	}

	// The crash: the image of the MemFS and of raft.db at this instant.
	mu.Lock()
	img := c.fs.CrashClone()
	crashed = true
	raftDB := copyQuiet(c.t, filepath.Join(c.dir(c.gen), raftFile))
	marker, err := os.ReadFile(filepath.Join(c.dir(c.gen), stateFile+".open"))
	mu.Unlock()
	if err != nil {
		c.t.Fatal(err)
	}
	n.srv.Kill()
	cancel()
	wg.Wait()
	c.puts += int(puts.Load())
	c.dels += int(dels.Load())

	// The next data directory: raft.db and the open marker of the crashed
	// boot on the real disk, the image's files moved under it in the
	// MemFS.
	next := c.dir(c.gen + 1)
	if err := os.MkdirAll(next, 0o700); err != nil {
		c.t.Fatal(err)
	}
	for name, b := range map[string][]byte{raftFile: raftDB, stateFile + ".open": marker} {
		if err := os.WriteFile(filepath.Join(next, name), b, 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := img.Rename(c.dir(c.gen), next); err != nil {
		c.fatalf("the crash image has no data directory: %v\n%s", err, img)
	}
	if err := vfs.SyncDir(img, c.root); err != nil {
		c.t.Fatal(err)
	}
	c.fs = img
}

// copyQuiet copies a bbolt file of a running node: it reads the file until
// two reads in a row agree, so that no commit was half written into the
// copy (bbolt writes the meta page, at the start of the file, last).
func copyQuiet(t *testing.T, path string) []byte {
	t.Helper()
	prev, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b, prev) {
			return b
		}
		prev = b
	}
	t.Fatalf("%s keeps changing", path)
	return nil
}

// warnings is a slog.Handler that keeps the last distinct warnings and
// errors, to show why a node did not start.
type warnings struct {
	mu   sync.Mutex
	last []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.Contains(w.last, b.String()) {
		return nil
	}
	w.last = append(w.last, b.String())
	if len(w.last) > 8 {
		w.last = w.last[1:]
	}
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return "(none)"
	}
	return strings.Join(w.last, "\n")
}

// TestMissingSnapshotIsRefused: a shard whose raft log was truncated
// behind a snapshot that is gone (here: deleted) does not open, and the
// node stops saying why (both shards), instead of running without the
// truncated entries (raft would panic applying them).
func TestMissingSnapshotIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.FS = fs
	cfg.Shard.TrailingLogs = 4
	n := start(t, cfg)
	for i := 0; i < 50; i++ {
		n.put(t, fmt.Sprint("k", i), "v")
	}
	for _, g := range n.srv.Groups() {
		if err := g.Snapshot(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if st := g.Status(); st.FirstLogIndex <= 1 {
			t.Fatalf("shard %s: log not truncated: %+v", st.ID, st)
		}
	}
	n.srv.Stop()
	if err := fs.RemoveAll(filepath.Join(dir, "snapshots", "default")); err != nil {
		t.Fatal(err)
	}

	logs := &warnings{}
	srv, err := New(cfg, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitFor(t, 20*time.Second, "the shards are refused", func() bool {
		return errors.Is(srv.fatalError(), snapstore.ErrLogGap) && strings.Count(srv.fatalError().Error(), snapstore.ErrLogGap.Error()) >= 2
	})
	if srv.Ready() == nil {
		t.Fatal("the node is ready without its snapshots")
	}
}

// TestUnopenableSnapshotDirStopsTheNode: a shard's snapshot directory
// replaced by a file (or one kvd may not read) cannot be fixed by
// retrying. The node stops with an error that names it instead of
// retrying every second, never ready, for good.
func TestUnopenableSnapshotDirStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 1
	n := start(t, cfg)
	n.put(t, "k", "v")
	n.srv.Stop()
	p := filepath.Join(dir, "snapshots", "default", "0")
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(&warnings{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("start: %v; want an error that names the snapshot directory", err)
		}
		return
	}
	defer srv.Stop()
	waitFor(t, 20*time.Second, "the node stops on the snapshot directory", func() bool {
		return errors.Is(srv.fatalError(), syscall.ENOTDIR) && strings.Contains(srv.fatalError().Error(), p)
	})
}

// TestMissingSnapshotStateStopsTheNode: a shard's newest snapshot whose
// state.bin is gone (meta.json still lists it), on a start that rebuilds
// state.db from it, is damage: the node stops with an error naming the
// file, instead of retrying the shard every second, never ready, for
// good.
func TestMissingSnapshotStateStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 1
	n := start(t, cfg)
	n.put(t, "k", "v")
	for _, g := range n.srv.Groups() {
		if err := g.Snapshot(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	n.srv.Stop()
	states, err := filepath.Glob(filepath.Join(dir, "snapshots", "default", "0", "snapshots", "*", "state.bin"))
	if err != nil || len(states) == 0 {
		t.Fatalf("no snapshot state of shard default/0: %v", err)
	}
	for _, p := range append(states, filepath.Join(dir, "state.db")) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := New(cfg, slog.New(&warnings{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		if !errors.Is(err, snapstore.ErrCorrupt) {
			t.Fatalf("start: %v; want an error that names the snapshot's state", err)
		}
		return
	}
	defer srv.Stop()
	waitFor(t, 20*time.Second, "the node stops on the snapshot's missing state", func() bool {
		err := srv.fatalError()
		return errors.Is(err, snapstore.ErrCorrupt) && strings.Contains(err.Error(), "state.bin")
	})
	if srv.Ready() == nil {
		t.Fatal("the node is ready without shard default/0")
	}
}

// TestUnusableFileSaysWhatToDo: a start that finds a file of the data
// directory it may not use (here the write-ahead log's segment replaced
// by a directory) names it and says what to check, instead of an open
// error alone.
func TestUnusableFileSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 1
	n := start(t, cfg)
	n.put(t, "k", "v")
	n.srv.Stop()
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v: %v", segs, err)
	}
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(segs[0], 0o700); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, slog.New(&warnings{}))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("started on a segment that is a directory")
	}
	if msg := err.Error(); !errors.Is(err, syscall.EISDIR) || !strings.Contains(msg, segs[0]) ||
		!strings.Contains(msg, "kvd cannot use a file or directory of its data directory") || !strings.Contains(msg, "docs/operations.md") {
		t.Fatalf("start: %v; want the segment named and what to check", err)
	}
}
