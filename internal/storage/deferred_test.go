package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/poll"
)

// deferredDB opens a Derived database whose applies are committed only
// after interval or at maxPending applies.
func deferredDB(t *testing.T, interval time.Duration, maxPending int) (*DB, Config) {
	t.Helper()
	cfg := testConfig(t)
	cfg.Derived, cfg.BootID = true, "boot-1"
	cfg.CommitInterval, cfg.MaxPending = interval, maxPending
	return openDB(t, cfg), cfg
}

// applyPut stores one version of key in shard id through ApplyShard.
func applyPut(t *testing.T, db *DB, id ShardID, key string, hlc uint64) {
	t.Helper()
	err := db.ApplyShard(id, func(s *ShardTx) error {
		if err := s.Put(Record{Key: []byte(key), Version: ver(hlc, "site-a"), Value: []byte(fmt.Sprint("v", hlc))}); err != nil {
			return err
		}
		return s.SetApplied(hlc, hlc)
	})
	if err != nil {
		t.Fatalf("ApplyShard(%s): %v", key, err)
	}
}

// committedHas reports whether the last commit of db holds key in shard id
// (a read-only transaction of its own, past the open one).
func committedHas(t *testing.T, db *DB, id ShardID, key string) bool {
	t.Helper()
	var found bool
	if err := db.view(func(tx *Tx) error {
		_, ok, err := db.shardOf(tx.btx, id).Latest([]byte(key), false)
		found = ok
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestDeferredApplyIsReadBeforeItsCommit: an apply that returned is read
// at once by ViewShard (through the open transaction) although no commit
// happened yet; View and BeginRead commit first. Guard state-open-reads
// makes ViewShard read the last commit.
func TestDeferredApplyIsReadBeforeItsCommit(t *testing.T) {
	db, _ := deferredDB(t, time.Hour, 1<<20)
	other := ShardID{Keyspace: "ks", Shard: 8}
	applyPut(t, db, testShard, "k1", 10)
	if committedHas(t, db, testShard, "k1") {
		t.Fatal("the apply was committed at once; the test needs it pending")
	}
	var rec Record
	var found bool
	if err := db.ViewShard(testShard, func(s *ShardTx) (err error) {
		rec, found, err = s.Latest([]byte("k1"), false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !found || string(rec.Value) != "v10" {
		t.Fatalf("ViewShard after the apply returned: found=%v value=%q; want v10", found, rec.Value)
	}
	// A shard without pending applies is read in a transaction of its
	// own; it is empty here.
	if err := db.ViewShard(other, func(s *ShardTx) error {
		if idx, _ := s.Applied(); idx != 0 {
			return fmt.Errorf("other shard applied %d", idx)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if committedHas(t, db, testShard, "k1") {
		t.Fatal("ViewShard committed the open transaction")
	}
	view(t, db, testShard, func(s *ShardTx) {
		if idx, _ := s.Applied(); idx != 10 {
			t.Fatalf("View: applied %d, want 10", idx)
		}
	})
	if !committedHas(t, db, testShard, "k1") {
		t.Fatal("View did not commit the open transaction")
	}
}

// TestDeferredSnapshotHoldsEveryApply: a snapshot (BeginRead) taken right
// after applies holds them. Guard state-flush leaves them out.
func TestDeferredSnapshotHoldsEveryApply(t *testing.T) {
	db, _ := deferredDB(t, time.Hour, 1<<20)
	for i := uint64(1); i <= 5; i++ {
		applyPut(t, db, testShard, fmt.Sprint("k", i), i)
	}
	stream := snapshot(t, db, testShard)
	target := newDB(t)
	if err := restore(target, testShard, stream); err != nil {
		t.Fatal(err)
	}
	view(t, target, testShard, func(s *ShardTx) {
		if idx, _ := s.Applied(); idx != 5 {
			t.Errorf("restored snapshot: applied %d, want 5", idx)
		}
		for i := 1; i <= 5; i++ {
			if _, ok, err := s.Latest([]byte(fmt.Sprint("k", i)), false); err != nil || !ok {
				t.Errorf("restored snapshot lacks k%d (found=%v, err=%v)", i, ok, err)
			}
		}
	})
}

// TestDeferredFailedApplyStopsTheDatabase: an apply that fails rolls back
// the open transaction with another shard's acknowledged apply in it; the
// database then fails every call, so nothing reads the state without that
// apply. Guard state-fail-stop lets reads go on.
func TestDeferredFailedApplyStopsTheDatabase(t *testing.T) {
	db, _ := deferredDB(t, time.Hour, 1<<20)
	other := ShardID{Keyspace: "ks", Shard: 8}
	applyPut(t, db, testShard, "k1", 1)
	boom := errors.New("boom")
	if err := db.ApplyShard(other, func(*ShardTx) error { return boom }); !errors.Is(err, ErrFailed) {
		t.Fatalf("failed apply: %v, want ErrFailed", err)
	}
	select {
	case <-db.Failed():
	default:
		t.Fatal("Failed() is not closed after a failed apply")
	}
	err := db.ViewShard(testShard, func(s *ShardTx) error {
		if _, ok, _ := s.Latest([]byte("k1"), false); !ok {
			return errors.New("read the state without k1, whose apply had returned")
		}
		return nil
	})
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("ViewShard after the failure: %v, want ErrFailed", err)
	}
	if err := db.ApplyShard(testShard, func(*ShardTx) error { return nil }); !errors.Is(err, ErrFailed) {
		t.Fatalf("ApplyShard after the failure: %v, want ErrFailed", err)
	}
	if err := db.View(func(*Tx) error { return nil }); !errors.Is(err, ErrFailed) {
		t.Fatalf("View after the failure: %v, want ErrFailed", err)
	}
}

// TestDeferredCommits: the open transaction is committed CommitInterval
// after its first apply, at MaxPending applies, and by Close; a reopened
// database holds everything.
func TestDeferredCommits(t *testing.T) {
	t.Run("interval", func(t *testing.T) {
		db, _ := deferredDB(t, 5*time.Millisecond, 1<<20)
		applyPut(t, db, testShard, "k1", 1)
		poll.Until(t, 10*time.Second, "the timed commit", func() error {
			if !committedHas(t, db, testShard, "k1") {
				return errors.New("not committed")
			}
			return nil
		})
	})
	t.Run("full", func(t *testing.T) {
		db, _ := deferredDB(t, time.Hour, 3)
		applyPut(t, db, testShard, "k1", 1)
		applyPut(t, db, testShard, "k2", 2)
		if committedHas(t, db, testShard, "k1") {
			t.Fatal("committed before MaxPending applies")
		}
		applyPut(t, db, testShard, "k3", 3)
		poll.Until(t, 10*time.Second, "the commit of a full transaction", func() error {
			if !committedHas(t, db, testShard, "k3") {
				return errors.New("not committed")
			}
			return nil
		})
	})
	t.Run("close", func(t *testing.T) {
		db, cfg := deferredDB(t, time.Hour, 1<<20)
		applyPut(t, db, testShard, "k1", 7)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db2 := openDB(t, cfg)
		view(t, db2, testShard, func(s *ShardTx) {
			if idx, _ := s.Applied(); idx != 7 {
				t.Fatalf("after Close and reopen: applied %d, want 7", idx)
			}
		})
		if err := db2.ApplyShard(testShard, func(*ShardTx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db2.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db2.ApplyShard(testShard, func(*ShardTx) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("ApplyShard after Close: %v, want ErrClosed", err)
		}
	})
}

// TestDeferredConcurrent runs applies, reads of their shards, snapshots
// and Updates from many goroutines (for the race detector): every read
// sees at least what its shard's applier finished before it.
func TestDeferredConcurrent(t *testing.T) {
	db, _ := deferredDB(t, time.Millisecond, 16)
	const shards, writes = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, shards*2)
	for i := 0; i < shards; i++ {
		id := ShardID{Keyspace: "ks", Shard: uint32(i)}
		var mu sync.Mutex
		done := uint64(0)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for n := uint64(1); n <= writes; n++ {
				if err := db.ApplyShard(id, func(s *ShardTx) error { return s.SetApplied(n, n) }); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				done = n
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			for k := 0; k < writes; k++ {
				mu.Lock()
				want := done
				mu.Unlock()
				read := func(s *ShardTx) error {
					if idx, _ := s.Applied(); idx < want {
						return fmt.Errorf("shard %s: read applied %d after %d returned", id, idx, want)
					}
					return nil
				}
				var err error
				switch k % 10 {
				case 0:
					err = db.ViewShardLong(id, read)
				case 1:
					err = db.Update(func(*Tx) error { return nil })
				default:
					err = db.ViewShard(id, read)
				}
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
}
