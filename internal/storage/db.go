package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/causeway-db/causeway/internal/guards"
)

// Errors returned by Open and DB methods.
var (
	// ErrClosed is returned by calls on a closed DB.
	ErrClosed = errors.New("storage: closed")
	// ErrForeign is returned when the database belongs to another node or
	// site, or was written by an unknown format.
	ErrForeign = errors.New("storage: database belongs to another node")
	// ErrCorrupt is returned when the database file cannot be read.
	ErrCorrupt = errors.New("storage: database is corrupt or not a Causeway database")
	// ErrDamaged is returned when a stored version fails its checksum: the
	// disk changed what was written. The database stops serving
	// (DB.Damaged) and is rebuilt at the next start (ADR 021).
	ErrDamaged = errors.New("storage: a stored version fails its checksum")
	// ErrStale is returned by Open for a Derived database written in an
	// earlier format: it is rebuilt from its source rather than migrated.
	ErrStale = errors.New("storage: derived database was written in an earlier format")
	// ErrLocked is returned when another process holds the database.
	ErrLocked = errors.New("storage: database is in use by another process")
	// ErrUnclean is returned by Open for a Derived database that was not
	// closed cleanly before the machine restarted: its unsynced pages may be
	// torn, so it must be rebuilt from its source.
	ErrUnclean = errors.New("storage: derived database was not closed cleanly before a restart")
)

// Identity names the node a database belongs to. Open refuses a database
// written by another identity.
type Identity struct {
	Site   string
	NodeID string
}

// Config configures a DB.
type Config struct {
	// Path of the database file.
	Path string
	// Name labels the database's metrics (db="raft", db="state").
	Name string
	// Identity of the owning node.
	Identity Identity
	// NoSync disables fsync. Only for tests and benchmarks that measure
	// everything but the disk; never in production.
	NoSync bool
	// Derived marks a database whose content can be rebuilt from elsewhere
	// (shard state, from raft snapshots and logs). Its commits are not
	// fsynced. While it is open, a marker file (Path + ".open") holds the
	// boot id; Close syncs the database and removes the marker. Open
	// returns ErrUnclean, without reading the database, when the marker of
	// an earlier boot is still there: the machine restarted before the
	// database was closed, so unsynced pages may not have reached the disk.
	// After a mere process crash the page cache holds every commit, the
	// boot id matches, and Open succeeds.
	Derived bool
	// BootID identifies the current boot of the machine (Linux:
	// /proc/sys/kernel/random/boot_id). Empty means unknown: every unclean
	// close of a Derived database then counts as a restart.
	BootID string
	// MaxBatch is the most Update calls committed in one transaction.
	MaxBatch int
	// LockTimeout is how long Open waits for another process to release the
	// file before failing with ErrLocked.
	LockTimeout time.Duration
	// InitialMmapBytes is the initial memory map size; a large value avoids
	// remapping (which waits for readers) as the file grows.
	InitialMmapBytes int
	// CommitInterval, for a Derived database, defers the commits of
	// ApplyShard: applies go into one open transaction, committed this
	// long after its first apply (or at MaxPending applies, or when a
	// reader needs the file). Zero commits every apply (group commit, as
	// Update). See ApplyShard and docs/adr/020, step 21.
	CommitInterval time.Duration
	// MaxPending is the most applies an open transaction takes before it
	// is committed (deferred commits only).
	MaxPending int
}

// DefaultCommitInterval is how long a Derived database keeps applies in
// its open transaction before it commits them.
const DefaultCommitInterval = 100 * time.Millisecond

// DefaultConfig returns the production defaults for a database at path.
func DefaultConfig(path string, id Identity) Config {
	return Config{
		Path:             path,
		Name:             "state",
		Identity:         id,
		MaxBatch:         1024,
		LockTimeout:      2 * time.Second,
		InitialMmapBytes: 1 << 30,
		CommitInterval:   DefaultCommitInterval,
		MaxPending:       4096,
	}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("storage: empty path")
	case c.Name == "":
		return errors.New("storage: Name is required")
	case c.MaxBatch < 1:
		return errors.New("storage: MaxBatch must be at least 1")
	case c.CommitInterval < 0:
		return errors.New("storage: CommitInterval must not be negative")
	case c.CommitInterval > 0 && c.Derived && c.MaxPending < 1:
		return errors.New("storage: MaxPending must be at least 1")
	case c.Identity.Site == "" || c.Identity.NodeID == "":
		return errors.New("storage: identity needs a site and a node id")
	}
	return nil
}

// DB is a node's database. It is safe for concurrent use.
type DB struct {
	bolt    *bolt.DB
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	// def is set when commits are deferred (Derived, CommitInterval).
	def *deferred
	// reqIdx indexes the request ids of every shard (requests.go).
	reqIdx reqIndexes

	reqs      chan *commitReq
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error

	// damaged is closed once a read found a version that fails its
	// checksum; damagedErr says which (set before damaged is closed).
	damaged     chan struct{}
	damagedOnce sync.Once
	damagedErr  error

	// writeFailed is closed once a commit outside deferred commits
	// failed to write or sync the file (noteWriteFailure); writeErr says
	// why (set before writeFailed is closed).
	writeFailed     chan struct{}
	writeFailedOnce sync.Once
	writeErr        error
	// writeFault, when set (FailWritesForTest), fails every commit of the
	// group committer as a full disk would.
	writeFault atomic.Pointer[error]
}

// WriteFailed is closed once a commit of the database failed to write or
// sync its file (a full or failing disk), outside deferred commits: on
// raft.db, whatever the commit was to save, a raft group's term or vote,
// is not durable, and raft cannot follow a newer term without saving it.
// The node stops (WriteErr says why), as it does when its write-ahead log
// fails. A database with deferred commits fails through Failed instead.
func (db *DB) WriteFailed() <-chan struct{} { return db.writeFailed }

// WriteErr returns the failed commit that closed WriteFailed, or nil.
func (db *DB) WriteErr() error {
	select {
	case <-db.writeFailed:
		return db.writeErr
	default:
		return nil
	}
}

// noteWriteFailure closes WriteFailed with err, the error of a commit
// that failed to write or sync the file, the first time.
func (db *DB) noteWriteFailure(err error) {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) || guards.Off(guards.RaftDBFailStop) {
		return
	}
	db.writeFailedOnce.Do(func() {
		db.writeErr = fmt.Errorf("storage: %s cannot be written: %w", db.cfg.Path, err)
		db.log.Error("a commit of the database failed (a full or failing disk): what it was to save is not durable, and the node must stop", "db", db.cfg.Path, "err", err)
		close(db.writeFailed)
	})
}

// Damaged is closed once a read of this database found a stored version
// that fails its checksum (DamagedErr says which). What else the disk
// changed is unknown: the node stops, and its next start finds the damage
// when it opens the file, moves the file aside and rebuilds it.
func (db *DB) Damaged() <-chan struct{} { return db.damaged }

// DamagedErr returns the first checksum failure a read found, or nil.
func (db *DB) DamagedErr() error {
	select {
	case <-db.damaged:
		return db.damagedErr
	default:
		return nil
	}
}

// noteDamage closes Damaged when err is a checksum failure. It returns
// err.
func (db *DB) noteDamage(err error) error {
	if db == nil || !errors.Is(err, ErrDamaged) {
		return err
	}
	db.damagedOnce.Do(func() {
		db.damagedErr = err
		db.log.Error("the state database is damaged: a stored version fails its checksum (a disk or file-system fault: check the disk); the node stops, and its next start moves the file aside and rebuilds it", "err", err)
		close(db.damaged)
	})
	return err
}

type commitReq struct {
	fn   func(*Tx) error
	done chan error
}

// Identity returns the node the database belongs to.
func (db *DB) Identity() Identity { return db.cfg.Identity }

// Open opens or creates the database described by cfg. It refuses a file
// that is not a Causeway database, one written by another node, and one
// held by another process.
func Open(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	existed := false
	if fi, err := os.Stat(cfg.Path); err == nil && fi.Size() > 0 {
		existed = true
	}
	if cfg.Derived {
		if err := checkMarker(cfg.Path, cfg.BootID); err != nil {
			return nil, err
		}
	}
	opts := &bolt.Options{
		Timeout:         cfg.LockTimeout,
		NoSync:          cfg.NoSync || cfg.Derived,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: cfg.InitialMmapBytes,
	}
	if existed {
		if err := verifyFile(cfg.Path, *opts); err != nil {
			return nil, err
		}
	}
	b, err := openBolt(cfg.Path, opts)
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w: %s", ErrLocked, cfg.Path)
	case errors.Is(err, ErrCorrupt):
		// openBolt names the file already (a panic of bbolt's on a
		// damaged file, such as keys out of order).
		return nil, err
	case errors.Is(err, syscall.EROFS):
		// Not damage: verifyFile read the file, but it cannot be opened
		// for writing.
		return nil, fmt.Errorf("%w (kvd writes to its data directory: mount its file system read-write)", err)
	case errors.As(err, &pathErr) && pathErr.Op == "open" && !errors.Is(err, os.ErrPermission):
		// Not damage either: the file system refused to open the file
		// (what the file holds was never read).
		return nil, err
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum),
		err != nil && existed && !errors.Is(err, os.ErrPermission):
		// bbolt reports some damaged files with plain errors ("file size
		// too small"): an existing file it cannot open is not ours.
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, cfg.Path, err)
	case errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("open %s: %w (check the owner and mode of the file and of the data directory)", cfg.Path, err)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", cfg.Path, err)
	}
	if err := checkIdentity(b, cfg.Path, cfg.Identity, cfg.Derived); err != nil {
		_ = b.Close()
		return nil, err
	}
	if cfg.Derived {
		if err := writeMarker(cfg.Path, cfg.BootID); err != nil {
			_ = b.Close()
			return nil, err
		}
	}
	db := &DB{
		bolt:    b,
		cfg:     cfg,
		log:     logger,
		reqs:    make(chan *commitReq, cfg.MaxBatch),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		damaged: make(chan struct{}),

		writeFailed: make(chan struct{}),
	}
	db.metrics = newMetrics(reg, b, cfg.Name, &db.reqIdx)
	if cfg.Derived && cfg.CommitInterval > 0 {
		db.def = newDeferred()
		go db.committer()
	}
	go db.commitLoop()
	return db, nil
}

// openBolt is bolt.Open, with a panic of bbolt's on a damaged file
// returned as ErrCorrupt.
func openBolt(path string, opts *bolt.Options) (b *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()
	return bolt.Open(path, 0o600, opts)
}

// checkIdentity creates the meta bucket of a fresh file, and checks the
// format and owner of an existing one. A Derived database of an earlier
// format is ErrStale: it is rebuilt rather than migrated. path names the
// file in errors.
func checkIdentity(b *bolt.DB, path string, id Identity, derived bool) error {
	want := fmt.Sprint(formatVersion)
	if derived {
		want = fmt.Sprint(derivedFormatVersion)
	}
	return b.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			// A fresh file must be empty: no foreign buckets.
			if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				return fmt.Errorf("%w: unexpected bucket %q", ErrCorrupt, name)
			}); err != nil {
				return err
			}
			m, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			for k, v := range map[string]string{string(metaFormat): want, string(metaSite): id.Site, string(metaNodeID): id.NodeID} {
				if err := m.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		}
		m := tx.Bucket(bucketMeta)
		f := m.Get(metaFormat)
		v1 := bytes.Equal(f, []byte("1"))
		site, node := string(m.Get(metaSite)), string(m.Get(metaNodeID))
		if site != id.Site || node != id.NodeID {
			return fmt.Errorf("%w: %s was created by node %q of site %q, not node %q of site %q: start the node with the site and node id it was created with, or give it another data directory (if --site and --node-id are right, the file is damaged: see \"A damaged data directory\" in docs/operations.md)",
				ErrForeign, path, node, site, id.NodeID, id.Site)
		}
		if derived && (v1 || bytes.Equal(f, []byte("2")) || bytes.Equal(f, []byte("3"))) {
			return fmt.Errorf("%w: %s: on-disk format %q, this build writes %s", ErrStale, path, f, want)
		}
		v2 := !derived && bytes.Equal(f, []byte("2"))
		if !v1 && !v2 && !bytes.Equal(f, []byte(want)) {
			return fmt.Errorf("%w: %s: on-disk format %q, this build reads %s", ErrForeign, path, f, want)
		}
		if (v1 || v2) && !derived && sealedAlready(tx) {
			// Sealing them again would rewrite every value of a file
			// whose only damage is its format record.
			return fmt.Errorf("%w: %s: its format record says %q, but raft's stable values are sealed as format %s seals them: the format record is damaged", ErrCorrupt, path, f, want)
		}
		if v1 {
			// Format 1 keyed request records by client id.
			if err := migrateRequestsV1(tx); err != nil {
				return fmt.Errorf("%w: migrating from format 1: %v", ErrCorrupt, err)
			}
		}
		if (v1 || v2) && !derived {
			// Formats 1 and 2 stored raft's stable values unsealed.
			if err := sealStableValues(tx); err != nil {
				return fmt.Errorf("%w: migrating from format %s: %v", ErrCorrupt, f, err)
			}
		}
		if v1 || v2 {
			return m.Put(metaFormat, []byte(want))
		}
		return nil
	})
}

// Update runs fn in a read-write transaction and returns once the
// transaction is durable. fn may run more than once (if another function
// batched with it fails) and must not have side effects outside tx.
//
// With deferred commits (Config.CommitInterval) it commits the open
// transaction first and runs fn once, in a transaction of its own.
func (db *DB) Update(fn func(*Tx) error) error {
	if db.closed() {
		return ErrClosed
	}
	if db.def != nil {
		return db.exclusive(fn)
	}
	r := &commitReq{fn: fn, done: make(chan error, 1)}
	select {
	case db.reqs <- r:
	case <-db.closing:
		return ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-db.done:
		// The committer has exited; it may have answered just before.
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	}
}

func (db *DB) closed() bool {
	select {
	case <-db.closing:
		return true
	default:
		return false
	}
}

// View runs fn in a read-only transaction. With deferred commits it
// commits the open transaction first, so fn sees every apply that
// returned; ViewShard reads one shard without that commit.
func (db *DB) View(fn func(*Tx) error) error {
	if db.closed() {
		return ErrClosed
	}
	if err := db.flush(); err != nil {
		return err
	}
	return db.view(fn)
}

// BeginRead starts a read-only transaction that the caller must Rollback.
// Long-lived read transactions delay file growth; use them only for
// snapshots.
func (db *DB) BeginRead() (*Tx, error) {
	if db.closed() {
		return nil, ErrClosed
	}
	// With deferred commits: a snapshot or a digest of a shard must hold
	// every apply that returned before it began.
	if err := db.flush(); err != nil {
		return nil, err
	}
	btx, err := db.bolt.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	return &Tx{btx: btx, db: db}, nil
}

// Size returns the size of the database file in bytes.
func (db *DB) Size() int64 {
	var n int64
	_ = db.bolt.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// Path returns the database file path.
func (db *DB) Path() string { return db.cfg.Path }

// Close waits for queued updates, stops the committer and closes the file.
func (db *DB) Close() error {
	first := false
	db.closeOnce.Do(func() {
		first = true
		close(db.closing)
		<-db.done
		if db.def != nil {
			db.closeErr = db.closeDeferred()
		}
		if db.cfg.Derived && db.closeErr == nil {
			db.closeErr = db.bolt.Sync()
		}
		if err := db.bolt.Close(); db.closeErr == nil {
			db.closeErr = err
		}
		if db.cfg.Derived && db.closeErr == nil {
			db.closeErr = removeMarker(db.cfg.Path)
		}
	})
	if !first {
		return ErrClosed
	}
	return db.closeErr
}

// commitLoop is the group committer. It owns the only bbolt write path.
func (db *DB) commitLoop() {
	defer close(db.done)
	batch := make([]*commitReq, 0, db.cfg.MaxBatch)
	for {
		var first *commitReq
		select {
		case first = <-db.reqs:
		case <-db.closing:
			// Drain what was queued before Close.
			for {
				select {
				case r := <-db.reqs:
					db.commit([]*commitReq{r})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		if db.cfg.Derived {
			// Not fsynced, so a commit is short and the requests of
			// other groups' appliers that are runnable right now would
			// each get one of their own: let them queue first.
			runtime.Gosched()
		}
	fill:
		for len(batch) < db.cfg.MaxBatch {
			select {
			case r := <-db.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		db.commit(batch)
	}
}

func (db *DB) commit(batch []*commitReq) {
	start := time.Now()
	var failed int = -1
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		tx := &Tx{btx: btx, db: db}
		for i, r := range batch {
			if err := r.fn(tx); err != nil {
				failed = i
				return err
			}
		}
		if fault := db.writeFault.Load(); fault != nil {
			return *fault
		}
		return nil
	})
	db.metrics.observeCommit(len(batch), time.Since(start))
	if err != nil {
		db.reqIdx.dropAll()
	}
	if err == nil {
		for _, r := range batch {
			r.done <- nil
		}
		return
	}
	if failed < 0 || len(batch) == 1 {
		if failed < 0 {
			// The commit itself failed (disk error): everyone gets it.
			db.log.Error("storage commit failed", "err", err, "batch", len(batch))
			db.noteWriteFailure(err)
		}
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	// One function failed: its error is its own; the others retry alone.
	for _, r := range batch {
		db.commit([]*commitReq{r})
	}
}

// UpdateAlone runs fn in a durable read-write transaction of its own,
// outside the group commit. fn runs exactly once. Use it for large,
// non-repeatable writes such as restoring a snapshot from a stream.
func (db *DB) UpdateAlone(fn func(*Tx) error) error {
	if db.closed() {
		return ErrClosed
	}
	if db.def != nil {
		return db.exclusive(fn)
	}
	return db.update(fn)
}

// update runs fn in a read-write transaction of its own.
func (db *DB) update(fn func(*Tx) error) error {
	err := db.bolt.Update(func(btx *bolt.Tx) error { return fn(&Tx{btx: btx, db: db}) })
	if err != nil {
		db.reqIdx.dropAll()
	}
	return err
}
