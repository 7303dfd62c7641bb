package storage

import (
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/causeway-db/causeway/internal/guards"
)

// ErrFailed wraps the error that made a database with deferred commits
// stop: an apply that failed inside the open transaction, or a commit that
// failed. Applies acknowledged since the last commit are lost from the
// database (they are still in the raft log), so every later call fails
// with it and the node must restart; see docs/adr/020, step 21.
var ErrFailed = errors.New("storage: the state database failed")

// deferred is the state of a database that commits applies at an interval
// (Config.CommitInterval) instead of one transaction per group commit:
// ApplyShard writes into one open read-write transaction and returns at
// once; a background committer commits it CommitInterval after its first
// apply, or as soon as MaxPending applies are in it. Reads of a shard with
// applies in the open transaction (dirty) read through that transaction
// (ViewShard); everything else that needs the newest state (View,
// BeginRead, Update, UpdateAlone, Close) commits the open transaction
// first.
type deferred struct {
	// mu serializes the open transaction: applies, reads through it and
	// its commit.
	mu      sync.Mutex
	wtx     *bolt.Tx // REQUIRES: mu
	pending int      // applies in wtx; REQUIRES: mu
	// shards are the buckets of the shards applied to in wtx, opened once
	// per transaction rather than per apply (opening them allocates about
	// a dozen objects); cleared with wtx. REQUIRES: mu
	shards map[ShardID]*ShardTx
	since  time.Time
	err    error // non-nil once failed; REQUIRES: mu
	failed chan struct{}

	// dirtyMu guards dirty, the shards with applies in wtx. It is taken
	// alone by readers, so a reader of a clean shard never waits for a
	// commit; dirty shrinks only with mu held, after the commit.
	dirtyMu sync.RWMutex
	dirty   map[ShardID]struct{}

	kick chan struct{} // a first apply opened wtx, or it is full
	stop chan struct{}
	done chan struct{}
}

func newDeferred() *deferred {
	return &deferred{
		failed: make(chan struct{}),
		dirty:  map[ShardID]struct{}{},
		shards: map[ShardID]*ShardTx{},
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// Failed is closed when the database stopped after a failed apply or
// commit (Err says why). Only a database with deferred commits fails this
// way; for the others it is never closed.
func (db *DB) Failed() <-chan struct{} {
	if db.def == nil {
		return nil
	}
	return db.def.failed
}

// Err returns why the database failed, or nil.
func (db *DB) Err() error {
	if db.def == nil {
		return nil
	}
	select {
	case <-db.def.failed:
		return db.def.err // set before failed was closed
	default:
		return nil
	}
}

// ApplyShard runs fn on shard id's buckets in a read-write transaction. It
// is how the state machine applies committed commands.
//
// With deferred commits it returns once fn ran in the open transaction:
// what fn wrote is visible to ViewShard, View and BeginRead from then on,
// but reaches the file only at the next commit, and is lost if the process
// dies first (the raft log replays it: the applied index fn records is
// lost with it). fn runs exactly once; if it fails, the open transaction
// is rolled back with every other shard's applies in it and the database
// fails (ErrFailed). The keys and values fn puts must not be reused by
// their owner: bbolt holds them until the commit. Without deferred
// commits it is Update.
func (db *DB) ApplyShard(id ShardID, fn func(*ShardTx) error) error {
	if db.def == nil {
		return db.Update(func(tx *Tx) error {
			s, err := tx.Shard(id)
			if err != nil {
				return err
			}
			return fn(s)
		})
	}
	d := db.def
	if db.closed() {
		return ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	if db.closed() {
		return ErrClosed
	}
	if d.wtx == nil {
		btx, err := db.bolt.Begin(true)
		if err != nil {
			return db.failLocked(fmt.Errorf("begin: %w", err))
		}
		d.wtx, d.since = btx, time.Now()
		d.signal()
	}
	s, err := d.shards[id], error(nil)
	if s == nil {
		if s, err = (&Tx{btx: d.wtx, db: db}).Shard(id); err == nil {
			d.shards[id] = s
		}
	}
	if err == nil {
		err = fn(s)
	}
	if err != nil {
		return db.failLocked(fmt.Errorf("apply to shard %s: %w", id, err))
	}
	d.dirtyMu.RLock()
	_, ok := d.dirty[id]
	d.dirtyMu.RUnlock()
	if !ok {
		d.dirtyMu.Lock()
		d.dirty[id] = struct{}{}
		d.dirtyMu.Unlock()
	}
	d.pending++
	if d.pending == db.cfg.MaxPending {
		d.signal()
	}
	return nil
}

// signal wakes the committer.
func (d *deferred) signal() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// failLocked rolls the open transaction back and fails the database with
// err. REQUIRES: d.mu.
func (db *DB) failLocked(err error) error {
	d := db.def
	db.reqIdx.dropAll()
	if d.wtx != nil {
		_ = d.wtx.Rollback()
		d.wtx, d.pending = nil, 0
		clear(d.shards)
	}
	e := fmt.Errorf("%w: %v", ErrFailed, err)
	if guards.Off(guards.StateFailStop) {
		// Off: the lost applies go unnoticed and reads serve the state
		// before them.
		return e
	}
	d.err = e
	close(d.failed)
	db.log.Error("the state database failed; applies since its last commit are lost and the node must restart (the raft log replays them)", "err", err)
	return e
}

// commitLocked commits the open transaction, if any. REQUIRES: d.mu.
func (db *DB) commitLocked() error {
	d := db.def
	if d.err != nil {
		return d.err
	}
	if d.wtx == nil {
		return nil
	}
	start, n := time.Now(), d.pending
	err := d.wtx.Commit()
	d.wtx, d.pending = nil, 0
	clear(d.shards)
	if err != nil {
		return db.failLocked(fmt.Errorf("commit: %w", err))
	}
	db.metrics.observeCommit(n, time.Since(start))
	d.dirtyMu.Lock()
	clear(d.dirty)
	d.dirtyMu.Unlock()
	return nil
}

// flush commits the open transaction, if any.
func (db *DB) flush() error {
	if db.def == nil {
		return nil
	}
	if guards.Off(guards.StateFlush) {
		return nil
	}
	db.def.mu.Lock()
	defer db.def.mu.Unlock()
	return db.commitLocked()
}

// committer commits the open transaction CommitInterval after it was
// opened, or when it is full.
func (db *DB) committer() {
	d := db.def
	defer close(d.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-d.kick:
		case <-timer.C:
		case <-d.stop:
			return
		}
		d.mu.Lock()
		if d.wtx != nil && d.err == nil {
			if wait := db.cfg.CommitInterval - time.Since(d.since); wait > 0 && d.pending < db.cfg.MaxPending {
				d.mu.Unlock()
				timer.Reset(wait)
				continue
			}
			_ = db.commitLocked()
		}
		d.mu.Unlock()
	}
}

// ViewShard runs fn on shard id's state as of every apply that returned.
// A shard with applies in the open transaction (deferred commits) is read
// through it, one reader at a time; any other in a read-only transaction
// of its own, as View.
func (db *DB) ViewShard(id ShardID, fn func(*ShardTx) error) error {
	if d := db.def; d != nil && !guards.Off(guards.StateOpenReads) {
		d.dirtyMu.RLock()
		_, dirty := d.dirty[id]
		d.dirtyMu.RUnlock()
		if dirty {
			d.mu.Lock()
			if d.err != nil {
				d.mu.Unlock()
				return d.err
			}
			if d.wtx != nil {
				defer d.mu.Unlock()
				db.metrics.openTxReads.Inc()
				return fn(db.shardOf(d.wtx, id))
			}
			// Committed since the check: a read-only transaction sees it.
			d.mu.Unlock()
		}
	}
	return db.view(func(tx *Tx) error { return fn(db.shardOf(tx.btx, id)) })
}

// ViewShardLong is ViewShard for reads that take long or call out while
// they hold the state (a scan of the whole shard, network calls): with
// deferred commits it commits the open transaction first and reads in a
// read-only transaction of its own, so that the applies of every shard go
// on meanwhile.
func (db *DB) ViewShardLong(id ShardID, fn func(*ShardTx) error) error {
	return db.View(func(tx *Tx) error { return fn(db.shardOf(tx.btx, id)) })
}

// shardOf opens shard id's buckets for reading, in any transaction (db
// may be nil).
func (db *DB) shardOf(btx *bolt.Tx, id ShardID) *ShardTx {
	b := btx.Bucket(id.bucket())
	if b == nil {
		return &ShardTx{}
	}
	return &ShardTx{data: b.Bucket(bucketData), state: b.Bucket(bucketState), reqs: b.Bucket(bucketRequests), out: b.Bucket(bucketOutbound),
		db: db, id: id, writable: btx.Writable()}
}

// view runs fn in a read-only transaction.
func (db *DB) view(fn func(*Tx) error) error {
	if db.closed() {
		return ErrClosed
	}
	if err := db.Err(); err != nil {
		return err
	}
	err := db.bolt.View(func(btx *bolt.Tx) error { return fn(&Tx{btx: btx, db: db}) })
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// exclusive commits the open transaction and runs fn in a read-write
// transaction of its own while no apply can start one.
func (db *DB) exclusive(fn func(*Tx) error) error {
	d := db.def
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := db.commitLocked(); err != nil {
		return err
	}
	if db.closed() {
		return ErrClosed
	}
	return db.update(fn)
}

// closeDeferred stops the committer and commits the open transaction.
func (db *DB) closeDeferred() error {
	d := db.def
	close(d.stop)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return db.commitLocked()
}
