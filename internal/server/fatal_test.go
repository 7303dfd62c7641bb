package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
)

// TestFailedLogSyncStopsTheNode: an fdatasync of the write-ahead log
// fails while clients write. The write it was for is not acknowledged,
// /readyz reports the node not ready, Run returns the error (kvd exits
// non-zero with it), and a restart on what was synced (a crash image of
// the file system, with the state database rebuilt) has every
// acknowledged write.
func TestFailedLogSyncStopsTheNode(t *testing.T) {
	cfg, mem, tog := walFaultConfig(t, errorfs.Syncs)
	dir := cfg.DataDir
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()

	var (
		mu       sync.Mutex
		acked    []string
		failed   int
		injected bool
	)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("c%d-%05d", c, i)
				mu.Lock()
				after := injected
				mu.Unlock()
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := n.kv.Put(cctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(key)})
				cancel()
				mu.Lock()
				if err == nil {
					acked = append(acked, key)
				} else if after {
					failed++
				}
				mu.Unlock()
				if err != nil && after {
					return // the node is going away
				}
			}
		}()
	}
	poll.Until(t, 20*time.Second, "writes to be acknowledged", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < 200 {
			return fmt.Errorf("%d acknowledged", len(acked))
		}
		return nil
	})
	mu.Lock()
	injected = true
	mu.Unlock()
	tog.On()

	var err error
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the log's sync failed")
	}
	close(stop)
	wg.Wait()
	if !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), "write-ahead log") {
		t.Fatalf("Run returned %v; want the failed sync", err)
	}
	t.Logf("Run: %v", err)
	if rerr := n.srv.Ready(); rerr == nil {
		t.Fatal("a node that cannot write is ready")
	}
	mu.Lock()
	if failed == 0 {
		t.Fatal("no write failed after the sync failure was injected")
	}
	t.Logf("%d writes acknowledged, %d failed", len(acked), failed)
	keys := append([]string(nil), acked...)
	mu.Unlock()

	// Restart on what the disk holds: only what was synced, and the state
	// database rebuilt from it.
	again := testConfig(dir)
	again.Shards = 2
	again.FS = mem.CrashClone()
	again.BootID = "boot-2"
	n2 := start(t, again)
	for _, k := range keys {
		if g := n2.getStrong(t, k); !g.Found || string(g.Value) != k {
			t.Fatalf("acknowledged %s is missing after the restart: %v", k, g)
		}
	}
}

// TestFailedLogWriteFailsFast: the disk under the write-ahead log fills
// up while clients write (every write, preallocation and sync there fails,
// as a segment roll on a full tmpfs did). The log fails stop, and nothing
// may wait on it: the writes in flight fail at once with UNAVAILABLE and
// the log's error, not when their own deadline (30 s) or the router's wait
// for a new leader runs out; raft does not retry storing its log in a loop
// (a sole voter that stepped down after the failed store used to be
// re-elected at once, and fail again: "failed to commit logs" was logged
// tens of thousands of times); and Run returns the error promptly, though
// a stop lets requests in flight finish for up to 30 s here. The bounds
// are generous for a loaded machine: the point is that nothing hangs.
func TestFailedLogWriteFailsFast(t *testing.T) {
	cfg, _, tog := walFaultConfig(t, errorfs.Writes)
	cfg.ShutdownGrace = 30 * time.Second
	lines := &countLines{substr: "failed to commit logs"}
	n := startLogged(t, cfg, slog.New(lines))
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()

	const (
		deadline = 30 * time.Second // each Put's
		bound    = 10 * time.Second // for anything after the failure
	)
	type outcome struct {
		err    error
		waited time.Duration // after the failure was injected
	}
	var (
		mu       sync.Mutex
		acked    int
		injected time.Time // zero until injected
		failed   []outcome
	)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("c%d-%05d", c, i)
				cctx, cancel := context.WithTimeout(context.Background(), deadline)
				_, err := n.kv.Put(cctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(key)})
				cancel()
				mu.Lock()
				at := injected
				switch {
				case err == nil:
					acked++
				case at.IsZero():
					t.Errorf("put %s before the failure: %v", key, err)
				default:
					failed = append(failed, outcome{err: err, waited: time.Since(at)})
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	poll.Until(t, 20*time.Second, "writes to be acknowledged", func() error {
		mu.Lock()
		defer mu.Unlock()
		if acked < 100 {
			return fmt.Errorf("%d acknowledged", acked)
		}
		return nil
	})
	mu.Lock()
	injected = time.Now()
	tog.On()
	mu.Unlock()

	var err error
	select {
	case err = <-ran:
	case <-time.After(bound):
		t.Fatalf("Run did not return within %v of the failed write", bound)
	}
	t.Logf("Run returned %v after the failure: %v", time.Since(injected).Round(time.Millisecond), err)
	if !errors.Is(err, errorfs.ErrInjected) || !strings.Contains(err.Error(), "write-ahead log") {
		t.Fatalf("Run returned %v; want the failed write", err)
	}
	if n.srv.Ready() == nil {
		t.Fatal("a node that cannot write is ready")
	}
	wg.Wait()

	named := false
	for _, o := range failed {
		t.Logf("a put failed %v after the failure: %v", o.waited.Round(time.Millisecond), o.err)
		if code := status.Code(o.err); code != codes.Unavailable {
			t.Errorf("a put failed with %v, want Unavailable: %v", code, o.err)
		}
		if o.waited > bound {
			t.Errorf("a put waited %v on the failed log", o.waited)
		}
		named = named || strings.Contains(o.err.Error(), errorfs.ErrInjected.Error())
	}
	if len(failed) == 0 {
		t.Fatal("no write failed after the failure was injected")
	}
	if !named {
		t.Error("no failed put names the log's failure: they waited for something else to give up")
	}
	if got := lines.n.Load(); got > 10 {
		t.Errorf("%q logged %d times; want a few (one per raft group storing at the failure)", lines.substr, got)
	} else {
		t.Logf("%q logged %d times", lines.substr, got)
	}
}

// countLines is a slog.Handler that counts the records whose message
// holds substr.
type countLines struct {
	substr string
	n      atomic.Int64
}

func (c *countLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (c *countLines) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, c.substr) {
		c.n.Add(1)
	}
	return nil
}

func (c *countLines) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countLines) WithGroup(string) slog.Handler      { return c }

// TestStoppedReplicaStopsTheNode: a replica whose state machine stops (a
// committed command it cannot decode) makes Run return the error, and
// the node is not ready from then on.
func TestStoppedReplicaStopsTheNode(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Shards = 2
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()
	n.put(t, "k", "v")
	g := n.srv.Groups()[0]
	_ = g.Raft().Apply([]byte{0xFF, 0xFF, 0xFF}, 5*time.Second).Error()
	var err error
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a replica stopped")
	}
	if err == nil || !strings.Contains(err.Error(), "a shard replica stopped") || !strings.Contains(err.Error(), g.ID().String()) {
		t.Fatalf("Run returned %v; want the stopped replica", err)
	}
	t.Logf("Run: %v", err)
	if n.srv.Ready() == nil {
		t.Fatal("a node with a stopped replica is ready")
	}
}

// TestFailedStateDatabaseStopsTheNode: the state database fails (as a
// failed commit of its open transaction would: the applies since its last
// commit rolled back). Run returns the error, the node is not ready, and a
// restart on the same data directory replays what the raft log holds:
// every acknowledged write reads back.
func TestFailedStateDatabaseStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()
	var keys []string
	for i := range 50 {
		k := fmt.Sprintf("k%03d", i)
		n.put(t, k, k)
		keys = append(keys, k)
	}
	if err := storage.FailForTest(n.srv.db, errors.New("injected commit failure")); !errors.Is(err, storage.ErrFailed) {
		t.Fatalf("FailForTest: %v", err)
	}
	var err error
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the state database failed")
	}
	if err == nil || !strings.Contains(err.Error(), "the state database failed") {
		t.Fatalf("Run returned %v; want the failed state database", err)
	}
	t.Logf("Run: %v", err)
	if n.srv.Ready() == nil {
		t.Fatal("a node whose state database failed is ready")
	}
	n.srv.Stop()

	n2 := start(t, cfg)
	for _, k := range keys {
		if g := n2.getStrong(t, k); !g.Found || string(g.Value) != k {
			t.Fatalf("acknowledged %s after the restart: %v", k, g)
		}
	}
}

// walFaultConfig returns the configuration of a 2-shard node whose data
// directory lives in a memory file system (returned, for crash images)
// where the operations pred selects under the WAL directory fail once
// the returned toggle is on.
func walFaultConfig(t *testing.T, pred errorfs.Predicate) (Config, *vfs.MemFS, *errorfs.Toggle) {
	t.Helper()
	mem := vfs.NewMem()
	dir := filepath.Join(t.TempDir(), "data")
	if err := vfs.MkdirAllSync(mem, dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tog := errorfs.NewToggle(errorfs.Under(filepath.Join(dir, walDir), pred))
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.FS = errorfs.Wrap(mem, tog)
	cfg.BootID = "boot-1"
	return cfg, mem, tog
}

// TestFailedRaftDBWriteStopsTheNode: raft.db, where raft saves its terms
// and votes, cannot be written any more (as on a full disk: the commit
// fails with ENOSPC) when the node must save a term: here the first term
// of the shards of a keyspace created meanwhile. Run returns the error,
// which names raft.db and says the file system is full, the node is not
// ready, and a restart on the same data directory, the disk writable
// again, serves the new keyspace and every acknowledged write. Without
// the stop, the node ran on without the keyspace's shards, retrying to
// open them; and before that, hashicorp/raft panicked when it could not
// save a term (raft.Config.TermSaveFailed, third_party/raft/FORK.md).
// Guard raft-db-fail-stop.
func TestFailedRaftDBWriteStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()
	n.put(t, "k", "v")

	path := filepath.Join(dir, raftFile)
	storage.FailWritesForTest(n.srv.logDB, &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC})
	conn, err := grpc.NewClient(n.srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := adminv1.NewGeoClient(conn).CreateKeyspace(ctx(t), &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 2, Sites: []string{cfg.Site}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after raft.db could not be written")
	}
	t.Logf("Run: %v", err)
	for _, want := range []string{"raft's terms and votes cannot be saved", path, "no space left on device", "the file system of the data directory " + dir + " is full"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run returned %v; want it to say %q", err, want)
		}
	}
	if n.srv.Ready() == nil {
		t.Fatal("a node whose raft.db cannot be written is ready")
	}
	n.srv.Stop()

	n2 := start(t, cfg)
	if g := n2.getStrong(t, "k"); !g.Found || string(g.Value) != "v" {
		t.Fatalf("acknowledged k after the restart: %v", g)
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := n2.kv.Put(c, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: "orders"}, Key: []byte("o"), Value: []byte("1")}); err != nil {
		t.Fatalf("a write to the keyspace created while raft.db failed, after the restart: %v", err)
	}
}
