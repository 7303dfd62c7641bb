package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	"github.com/causeway-db/causeway/internal/poll"
)

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig("/tmp/x.db", testID)
	if err := good.Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	if good.Path != "/tmp/x.db" || good.Identity != testID || good.Name == "" || good.MaxBatch < 1 || good.NoSync {
		t.Fatalf("DefaultConfig = %+v", good)
	}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"empty path", func(c *Config) { c.Path = "" }},
		{"empty name", func(c *Config) { c.Name = "" }},
		{"zero MaxBatch", func(c *Config) { c.MaxBatch = 0 }},
		{"negative MaxBatch", func(c *Config) { c.MaxBatch = -1 }},
		{"no site", func(c *Config) { c.Identity.Site = "" }},
		{"no node id", func(c *Config) { c.Identity.NodeID = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			tc.mod(&c)
			if err := c.Validate(); err == nil {
				t.Fatal("Validate accepted the config")
			}
			if db, err := Open(c, discardLogger(), nil); err == nil {
				_ = db.Close()
				t.Fatal("Open accepted the config")
			}
		})
	}
}

func TestOpenCreatesAndReopens(t *testing.T) {
	cfg := testConfig(t)
	if _, err := os.Stat(cfg.Path); !os.IsNotExist(err) {
		t.Fatalf("file exists before Open: %v", err)
	}
	db := openDB(t, cfg)
	if db.Path() != cfg.Path {
		t.Fatalf("Path() = %q, want %q", db.Path(), cfg.Path)
	}
	if _, err := os.Stat(cfg.Path); err != nil {
		t.Fatalf("Open did not create the file: %v", err)
	}
	if db.Size() <= 0 {
		t.Fatalf("Size() = %d", db.Size())
	}
	if got := boltBucketNames(t, db); len(got) != 1 || got[0] != "meta" {
		t.Fatalf("fresh database has buckets %q, want [meta]", got)
	}
	putRecords(t, db, testShard, Record{Key: []byte("k"), Version: ver(1, "site-a"), Value: []byte("v")})
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db2 := openDB(t, cfg)
	view(t, db2, testShard, func(s *ShardTx) {
		r, ok, err := s.Latest([]byte("k"), false)
		if err != nil || !ok || string(r.Value) != "v" {
			t.Fatalf("after reopen Latest = %+v %v %v", r, ok, err)
		}
	})
}

func TestOpenForeign(t *testing.T) {
	tests := []struct {
		name string
		id   Identity
	}{
		{"other site", Identity{Site: "site-b", NodeID: testID.NodeID}},
		{"other node", Identity{Site: testID.Site, NodeID: "node-2"}},
		{"both", Identity{Site: "site-b", NodeID: "node-2"}},
		{"case differs", Identity{Site: "Site-A", NodeID: testID.NodeID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			db := openDB(t, cfg)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			other := cfg
			other.Identity = tc.id
			db2, err := Open(other, discardLogger(), nil)
			if err == nil {
				_ = db2.Close()
				t.Fatal("Open with another identity succeeded")
			}
			if !errors.Is(err, ErrForeign) {
				t.Fatalf("err = %v, want ErrForeign", err)
			}
			// The message says what to do.
			if !strings.Contains(err.Error(), "start the node with the site and node id it was created with") {
				t.Fatalf("err = %v: it does not say what to do", err)
			}
			// The refused Open released the file: the owner can open it.
			db3 := openDB(t, cfg)
			_ = db3.Close()
		})
	}
}

func TestOpenForeignFormat(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaFormat, []byte("9"))
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrForeign) {
		t.Fatalf("Open of a format-9 file: %v, want ErrForeign", err)
	}
}

// A valid bbolt file that is not a Causeway database is refused.
func TestOpenForeignBoltFile(t *testing.T) {
	cfg := testConfig(t)
	b, err := bolt.Open(cfg.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("someone-else"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	db, err := Open(cfg, discardLogger(), nil)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open accepted a foreign bbolt file")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

// An empty existing file (for example created by touch) is a new database.
func TestOpenEmptyFile(t *testing.T) {
	cfg := testConfig(t)
	if err := os.WriteFile(cfg.Path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, cfg)
	putRecords(t, db, testShard, Record{Key: []byte("k"), Version: ver(1, "a")})
}

func TestOpenGarbage(t *testing.T) {
	for _, size := range []int{1 << 10, 3 << 10, 4 << 10, 5 << 10, 8 << 10, 16 << 10, 64 << 10} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) {
			cfg := testConfig(t)
			r := rand.New(rand.NewPCG(uint64(size), 1))
			garbage := make([]byte, size)
			for i := range garbage {
				garbage[i] = byte(r.Uint32())
			}
			if err := os.WriteFile(cfg.Path, garbage, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(cfg, discardLogger(), nil)
			if err == nil {
				_ = db.Close()
				t.Fatal("Open accepted garbage")
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			// The file was not modified.
			got, _ := os.ReadFile(cfg.Path)
			if !bytes.Equal(got, garbage) {
				t.Fatal("Open modified the garbage file")
			}
		})
	}
}

// TestOpenDamagedPages: a database whose meta pages are intact but whose
// other pages were overwritten (a disk fault) is refused with ErrCorrupt,
// not with a panic of bbolt's, whatever page the damage hits and however
// it was written (with page headers that name other pages, or zeros).
func TestOpenDamagedPages(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	for i := range 500 {
		putRecords(t, db, testShard, Record{Key: fmt.Appendf(nil, "k%04d", i), Value: bytes.Repeat([]byte("v"), 200), Version: ver(uint64(i+1), "a")})
	}
	var size int64
	_ = db.bolt.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := int(size / page) // the pages in use; the file is larger
	for _, fill := range []byte{0x00, 0xA5} {
		for first := 2; first < pages; first += max(1, pages/8) {
			t.Run(fmt.Sprintf("fill %#x from page %d", fill, first), func(t *testing.T) {
				b := append([]byte(nil), raw...)
				for p := first; p < pages; p++ {
					for i := range 16 {
						b[p*page+i] = fill
					}
				}
				c := testConfig(t)
				if err := os.WriteFile(c.Path, b, 0o600); err != nil {
					t.Fatal(err)
				}
				db, err := Open(c, discardLogger(), nil)
				if err == nil {
					_ = db.Close()
					t.Fatal("Open accepted a database with damaged pages")
				}
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

// TestChangedBranchKeyIsRefused: a branch page whose key changed still
// lists every page, so a walk in key order reads every version with a
// good checksum, but a lookup of the keys below the changed one goes down
// the wrong branch and misses them. Open refuses the file (a state.db is
// then rebuilt) instead of letting bbolt's own walk of the read-write
// open panic on a goroutine of its own, which ended the process with a
// stack trace.
func TestChangedBranchKeyIsRefused(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	for i := range 500 {
		putRecords(t, db, testShard, Record{Key: fmt.Appendf(nil, "k%04d", i), Value: bytes.Repeat([]byte("v"), 200), Version: ver(uint64(i+1), "a")})
	}
	// A shard after it, whose pages bbolt's walk still reads after it
	// found the damage.
	next := ShardID{Keyspace: testShard.Keyspace, Shard: testShard.Shard + 1}
	for i := range 100 {
		recs := make([]Record, 0, 50)
		for j := range 50 {
			recs = append(recs, Record{Key: fmt.Appendf(nil, "z%06d", i*50+j), Value: bytes.Repeat([]byte("v"), 200), Version: ver(uint64(i+1), "a")})
		}
		putRecords(t, db, next, recs...)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt's page: id (8 bytes), flags (2; 0x01 is a branch), count (2),
	// overflow (4), then count elements of 16 bytes: pos (4), key size
	// (4), child page (8); an element's key is at its offset plus pos.
	const page, branch = 4096, 0x01
	changed := 0
	for off := 0; off+page <= len(raw); off += page {
		p := raw[off : off+page]
		if binary.LittleEndian.Uint16(p[8:]) != branch || binary.LittleEndian.Uint64(p) != uint64(off/page) {
			continue
		}
		if binary.LittleEndian.Uint16(p[10:]) < 3 {
			continue
		}
		// The second element's key: its user key's last character
		// goes up by one, above the first key of its child page.
		e := p[16+16:]
		at := 16 + 16 + int(binary.LittleEndian.Uint32(e))
		key := p[at : at+int(binary.LittleEndian.Uint32(e[4:]))]
		end := bytes.IndexByte(key, 0)
		if !bytes.HasPrefix(key, []byte("k")) || end < 2 {
			continue
		}
		key[end-1]++
		changed++
	}
	if changed == 0 {
		t.Fatal("no branch page of the data bucket found")
	}
	if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(cfg, discardLogger(), nil)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open accepted a database whose branch page misroutes lookups")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), cfg.Path) {
		t.Fatalf("err = %v, want ErrCorrupt naming %s", err, cfg.Path)
	}
}

func TestOpenLocked(t *testing.T) {
	cfg := testConfig(t)
	cfg.LockTimeout = 100 * time.Millisecond
	db := openDB(t, cfg)
	db2, err := Open(cfg, discardLogger(), nil)
	if err == nil {
		_ = db2.Close()
		t.Fatal("second Open of a held file succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	// The first handle still works, and after it closes the file opens.
	putRecords(t, db, testShard, Record{Key: []byte("k"), Version: ver(1, "a"), Value: []byte("v")})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db3 := openDB(t, cfg)
	_ = db3.Close()
}

func TestOpenMissingDirectory(t *testing.T) {
	cfg := testConfig(t)
	cfg.Path = filepath.Join(t.TempDir(), "no", "such", "dir", "node.db")
	db, err := Open(cfg, discardLogger(), nil)
	if err == nil {
		_ = db.Close()
		t.Fatal("Open in a missing directory succeeded")
	}
	for _, sentinel := range []error{ErrCorrupt, ErrForeign, ErrLocked} {
		if errors.Is(err, sentinel) {
			t.Fatalf("err = %v, misclassified as %v", err, sentinel)
		}
	}
}

func TestCloseTwice(t *testing.T) {
	db := newDB(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
}

// Update after Close must return ErrClosed. It runs many times because
// Update chooses between its send and the closed channel at random.
func TestUpdateAfterClose(t *testing.T) {
	db := newDB(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 64; i++ {
			if err := db.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
				done <- fmt.Errorf("Update after Close = %v, want ErrClosed", err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Update after Close did not return")
	}
}

// The documented contract is that calls on a closed DB return ErrClosed.
func TestReadsAfterClose(t *testing.T) {
	db := newDB(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
	if tx, err := db.BeginRead(); !errors.Is(err, ErrClosed) {
		if tx != nil {
			_ = tx.Rollback()
		}
		t.Errorf("BeginRead after Close = %v, want ErrClosed", err)
	}
}

// Reads after Close fail (whatever the error) instead of touching unmapped
// memory.
func TestReadsAfterCloseFail(t *testing.T) {
	db := newDB(t)
	rs := db.RaftStore("g")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(*Tx) error { return nil }); err == nil {
		t.Error("View after Close succeeded")
	}
	if tx, err := db.BeginRead(); err == nil {
		_ = tx.Rollback()
		t.Error("BeginRead after Close succeeded")
	}
	if _, err := rs.FirstIndex(); err == nil {
		t.Error("FirstIndex after Close succeeded")
	}
	if _, err := rs.Get([]byte("k")); err == nil {
		t.Error("Get after Close succeeded")
	}
}

// Updates queued before Close are committed by Close.
func TestCloseDrainsQueuedUpdates(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	release := blockCommitter(t, db)
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Update(func(tx *Tx) error {
				s, err := tx.Shard(testShard)
				if err != nil {
					return err
				}
				return s.Put(Record{Key: []byte{byte('a' + i)}, Version: ver(1, "a"), Value: []byte("v")})
			})
		}()
		// Spin (yielding, not sleeping): the request is queued within
		// microseconds.
		poll.Every(0).Until(t, 30*time.Second, "the update to queue", poll.True(func() bool { return len(db.reqs) == i+1 }))
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	poll.Every(0).Until(t, 30*time.Second, "Close to start", poll.True(func() bool {
		select {
		case <-db.closing:
			return true
		default:
			return false
		}
	}))
	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("queued Update %d: %v", i, err)
		}
	}
	db2 := openDB(t, cfg)
	if got := len(allVersions(t, db2, testShard)); got != n {
		t.Fatalf("after reopen %d versions, want %d", got, n)
	}
}

func TestGroupCommitConcurrent(t *testing.T) {
	for _, maxBatch := range []int{1, 3, 1024} {
		t.Run(fmt.Sprintf("MaxBatch=%d", maxBatch), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxBatch = maxBatch
			reg := prometheus.NewRegistry()
			db, err := Open(cfg, discardLogger(), reg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })

			const writers, perWriter = 32, 20
			var wg sync.WaitGroup
			errs := make(chan error, writers*perWriter)
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < perWriter; i++ {
						key := []byte(fmt.Sprintf("w%02d/%03d", w, i))
						err := db.Update(func(tx *Tx) error {
							s, err := tx.Shard(ShardID{Keyspace: "ks", Shard: uint32(w % 4)})
							if err != nil {
								return err
							}
							return s.Put(Record{Key: key, Version: ver(uint64(i+1), "a"), Value: key})
						})
						if err != nil {
							errs <- err
							return
						}
						// Read-your-writes: once Update returns, View sees it.
						err = db.View(func(tx *Tx) error {
							s, err := tx.Shard(ShardID{Keyspace: "ks", Shard: uint32(w % 4)})
							if err != nil {
								return err
							}
							r, ok, err := s.Latest(key, false)
							if err != nil {
								return err
							}
							if !ok || !bytes.Equal(r.Value, key) {
								return fmt.Errorf("write %s not visible after Update returned", key)
							}
							return nil
						})
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			total := 0
			for sh := 0; sh < 4; sh++ {
				recs := allVersions(t, db, ShardID{Keyspace: "ks", Shard: uint32(sh)})
				total += len(recs)
				for _, r := range recs {
					if !bytes.Equal(r.Key, r.Value) {
						t.Fatalf("record %s has value %q", r.Key, r.Value)
					}
				}
			}
			if total != writers*perWriter {
				t.Fatalf("%d versions stored, want %d", total, writers*perWriter)
			}
			count, sum, maxSeen := batchStats(t, reg)
			if sum != writers*perWriter {
				t.Errorf("batch size histogram sums to %v, want %d", sum, writers*perWriter)
			}
			if count < 1 || count > writers*perWriter {
				t.Errorf("%d commits for %d updates", count, writers*perWriter)
			}
			// The histogram buckets are powers of two: every batch must fall
			// in a bucket no larger than the first bound >= MaxBatch.
			limit := 1.0
			for limit < float64(maxBatch) {
				limit *= 2
			}
			if maxSeen > limit {
				t.Errorf("a batch of more than %v updates with MaxBatch %d", limit, maxBatch)
			}
		})
	}
}

// batchStats reads the batch-size histogram: number of commits, sum of batch
// sizes, and the smallest bucket bound that holds every observation.
func batchStats(t *testing.T, reg *prometheus.Registry) (count uint64, sum, maxBound float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "causeway_storage_commit_batch_size" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		count, sum = h.GetSampleCount(), h.GetSampleSum()
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() == count {
				return count, sum, b.GetUpperBound()
			}
		}
		return count, sum, 0
	}
	t.Fatal("batch size histogram not registered")
	return
}

// blockCommitter makes the commit loop run a function that waits for the
// returned release func, and returns once the loop is inside it, so that
// later Updates queue up and are committed as one batch.
func blockCommitter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- db.Update(func(*Tx) error {
			select {
			case <-entered:
			default:
				close(entered)
			}
			<-ch
			return nil
		})
	}()
	<-entered
	return func() {
		close(ch)
		if err := <-done; err != nil {
			t.Errorf("blocking update: %v", err)
		}
	}
}

func TestGroupCommitFailingUpdate(t *testing.T) {
	db := newDB(t)
	release := blockCommitter(t, db)

	errBoom := errors.New("boom")
	type call struct {
		key  string
		fail bool
		runs atomic.Int32
		err  error
	}
	calls := []*call{{key: "good-1"}, {key: "bad", fail: true}, {key: "good-2"}, {key: "good-3"}}
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.err = db.Update(func(tx *Tx) error {
				c.runs.Add(1)
				s, err := tx.Shard(testShard)
				if err != nil {
					return err
				}
				if err := s.Put(Record{Key: []byte(c.key), Version: ver(1, "a"), Value: []byte(c.key)}); err != nil {
					return err
				}
				if c.fail {
					return fmt.Errorf("update %s: %w", c.key, errBoom)
				}
				return nil
			})
		}()
		// Queue them in order, all behind the blocked commit.
		poll.Every(0).Until(t, 30*time.Second, "the update to queue", poll.True(func() bool { return len(db.reqs) == i+1 }))
	}
	release()
	wg.Wait()

	for _, c := range calls {
		if c.fail {
			if !errors.Is(c.err, errBoom) {
				t.Errorf("failing update got %v, want errBoom", c.err)
			}
		} else if c.err != nil {
			t.Errorf("update %s got %v, want success", c.key, c.err)
		}
	}
	// They were batched together: the functions that ran before the failing
	// one in the batch ran twice (batch, then alone); the failing one ran in
	// the batch and again alone; the ones after it ran only alone.
	wantRuns := map[string]int32{"good-1": 2, "bad": 2, "good-2": 1, "good-3": 1}
	for _, c := range calls {
		if got := c.runs.Load(); got != wantRuns[c.key] {
			t.Errorf("update %s ran %d times, want %d", c.key, got, wantRuns[c.key])
		}
	}
	view(t, db, testShard, func(s *ShardTx) {
		for _, c := range calls {
			_, ok, err := s.Latest([]byte(c.key), false)
			if err != nil {
				t.Fatal(err)
			}
			if ok == c.fail {
				t.Errorf("key %s present = %v", c.key, ok)
			}
		}
	})
}

// A lone failing Update returns its own error and writes nothing.
func TestUpdateErrorRollsBack(t *testing.T) {
	db := newDB(t)
	errBoom := errors.New("boom")
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.Put(Record{Key: []byte("k"), Version: ver(1, "a")}); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want errBoom", err)
	}
	if got := boltBucketNames(t, db); len(got) != 1 {
		t.Fatalf("failed Update left buckets %q", got)
	}
	// The DB is still usable.
	putRecords(t, db, testShard, Record{Key: []byte("k2"), Version: ver(1, "a")})
}

// metricValues gathers reg and returns, per metric name and db label, the
// gauge value or the histogram sample count.
func metricValues(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			db := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "db" {
					db = l.GetValue()
				}
			}
			if out[mf.GetName()] == nil {
				out[mf.GetName()] = map[string]float64{}
			}
			if h := m.GetHistogram(); h != nil {
				out[mf.GetName()][db] = float64(h.GetSampleCount())
			} else {
				out[mf.GetName()][db] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A node runs two databases (raft and state) registered on one registry;
// their metrics are told apart by the db label.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	open := func(name string) *DB {
		cfg := testConfig(t)
		cfg.Path = filepath.Join(dir, name+".db")
		cfg.Name = name
		db, err := Open(cfg, discardLogger(), reg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	raftDB, stateDB := open("raft"), open("state")
	for i := 0; i < 3; i++ {
		putRecords(t, stateDB, testShard, Record{Key: []byte{byte(i)}, Version: ver(1, "a")})
	}
	if err := raftDB.RaftStore("g").StoreLogs(makeLogs(1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	got := metricValues(t, reg)
	want := map[string]map[string]float64{
		"causeway_storage_commit_seconds":    {"raft": 1, "state": 3},
		"causeway_storage_commit_batch_size": {"raft": 1, "state": 3},
		"causeway_storage_bytes":             {"raft": float64(raftDB.Size()), "state": float64(stateDB.Size())},
	}
	for name, byDB := range want {
		for db, v := range byDB {
			if g, ok := got[name][db]; !ok || g != v {
				t.Errorf("%s{db=%q} = %v (present %v), want %v", name, db, g, ok, v)
			}
		}
		if len(got[name]) != len(byDB) {
			t.Errorf("%s has series %v, want db labels raft and state", name, got[name])
		}
	}
	if raftDB.Size() <= 0 || stateDB.Size() <= 0 {
		t.Errorf("sizes %d %d", raftDB.Size(), stateDB.Size())
	}
}

// Open with a nil registry registers nothing and still works.
func TestOpenNilRegistry(t *testing.T) {
	db, err := Open(testConfig(t), discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	putRecords(t, db, testShard, Record{Key: []byte("k"), Version: ver(1, "a")})
}

func TestUpdateAlone(t *testing.T) {
	db := newDB(t)
	runs := 0
	err := db.UpdateAlone(func(tx *Tx) error {
		runs++
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		return s.Put(rec("alone", 1, "a", "v"))
	})
	if err != nil || runs != 1 {
		t.Fatalf("UpdateAlone = %v after %d runs", err, runs)
	}
	view(t, db, testShard, func(s *ShardTx) {
		if r, ok, err := s.Latest([]byte("alone"), false); err != nil || !ok || string(r.Value) != "v" {
			t.Fatalf("Latest = %s %v %v", fmtRecord(r), ok, err)
		}
	})

	errBoom := errors.New("boom")
	runs = 0
	err = db.UpdateAlone(func(tx *Tx) error {
		runs++
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.Put(rec("rolled-back", 1, "a", "v")); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) || runs != 1 {
		t.Fatalf("failing UpdateAlone = %v after %d runs", err, runs)
	}
	view(t, db, testShard, func(s *ShardTx) {
		if _, ok, _ := s.Latest([]byte("rolled-back"), false); ok {
			t.Fatal("failed UpdateAlone committed its write")
		}
	})

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	called := false
	if err := db.UpdateAlone(func(*Tx) error { called = true; return nil }); !errors.Is(err, ErrClosed) || called {
		t.Fatalf("UpdateAlone after Close = %v (fn called %v), want ErrClosed", err, called)
	}
}

// UpdateAlone and group-committed Updates interleave safely.
func TestUpdateAloneConcurrentWithUpdate(t *testing.T) {
	db := newDB(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		wg.Add(2)
		put := func(key string) func(*Tx) error {
			return func(tx *Tx) error {
				s, err := tx.Shard(testShard)
				if err != nil {
					return err
				}
				return s.Put(rec(key, 1, "a", key))
			}
		}
		go func() { defer wg.Done(); errs <- db.Update(put(fmt.Sprintf("group-%02d", i))) }()
		go func() { defer wg.Done(); errs <- db.UpdateAlone(put(fmt.Sprintf("alone-%02d", i))) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(allVersions(t, db, testShard)); got != 2*n {
		t.Fatalf("%d versions, want %d", got, 2*n)
	}
}
