package snapstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/vfs"
)

// Errors returned by the store.
var (
	// ErrCorrupt: a snapshot's state does not match the size or CRC in
	// its meta.json, or its meta.json does not match the snapshot's
	// directory name.
	ErrCorrupt = errors.New("snapstore: snapshot is corrupt")
	// ErrLogGap: a group's raft log does not continue its newest snapshot
	// (see CheckLog).
	ErrLogGap = errors.New("snapstore: raft log entries are missing after the newest snapshot")
)

// The names of hashicorp/raft's FileSnapshotStore layout.
const (
	snapDir   = "snapshots"
	metaFile  = "meta.json"
	stateFile = "state.bin"
	tmpSuffix = ".tmp"
)

// Config configures a store.
type Config struct {
	// Dir is the store's directory; the snapshots are in Dir/snapshots/.
	// Created if missing.
	Dir string
	// Retain is how many snapshots are kept (at least 1).
	Retain int
	// FS is the file system of Dir; nil means the real one.
	FS vfs.FS
	// NoSync skips every fsync. Only for tests and benchmarks; never in
	// production.
	NoSync bool
	// Now names new snapshots (milliseconds); nil means time.Now.
	Now func() time.Time
}

// Store is a raft.SnapshotStore in a directory of a vfs.FS.
type Store struct {
	fs     vfs.FS
	dir    string // Dir/snapshots
	retain int
	sync   bool
	now    func() time.Time
	log    *slog.Logger

	// replace takes a new snapshot when Open finds the newest damaged
	// (SetReplace); replacing is set while one runs.
	replace   atomic.Pointer[func() error]
	replacing atomic.Bool
}

var _ raft.SnapshotStore = (*Store)(nil)

// meta is the content of meta.json, as the FileSnapshotStore writes it.
type meta struct {
	raft.SnapshotMeta
	CRC []byte
}

// New opens the store in cfg.Dir, creating its directory (durably) if
// needed, and removes temporary directories left by interrupted snapshots.
func New(cfg Config, logger *slog.Logger) (*Store, error) {
	if cfg.Retain < 1 {
		return nil, errors.New("snapstore: Retain must be at least 1")
	}
	if cfg.Dir == "" {
		return nil, errors.New("snapstore: empty directory")
	}
	if logger == nil {
		logger = slog.Default()
	}
	s := &Store{
		fs:     vfs.OrDefault(cfg.FS),
		dir:    filepath.Join(cfg.Dir, snapDir),
		retain: cfg.Retain,
		sync:   !cfg.NoSync && !guards.Off(guards.SnapshotSync),
		now:    cfg.Now,
		log:    logger.With("snapshots", filepath.Join(cfg.Dir, snapDir)),
	}
	if s.now == nil {
		s.now = time.Now
	}
	mkdir := vfs.MkdirAllSync
	if !s.sync {
		mkdir = func(fs vfs.FS, dir string, perm os.FileMode) error { return fs.MkdirAll(dir, perm) }
	}
	if err := mkdir(s.fs, s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), tmpSuffix) {
			s.log.Warn("removing an interrupted snapshot", "name", e.Name())
			if err := s.fs.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
				return nil, fmt.Errorf("snapstore: %w", err)
			}
		}
	}
	return s, nil
}

// Create implements raft.SnapshotStore.
func (s *Store) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("snapstore: unsupported snapshot version %d", version)
	}
	name := fmt.Sprintf("%d-%d-%d", term, index, s.now().UnixMilli())
	tmp := filepath.Join(s.dir, name+tmpSuffix)
	if err := s.fs.MkdirAll(tmp, 0o700); err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	f, err := s.fs.OpenFile(filepath.Join(tmp, stateFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		_ = s.fs.RemoveAll(tmp)
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	k := &sink{
		s:    s,
		tmp:  tmp,
		f:    f,
		hash: crc64.New(crc64.MakeTable(crc64.ECMA)),
		meta: meta{SnapshotMeta: raft.SnapshotMeta{
			Version:            version,
			ID:                 name,
			Index:              index,
			Term:               term,
			Configuration:      configuration,
			ConfigurationIndex: configurationIndex,
		}},
	}
	k.buf = bufio.NewWriterSize(io.MultiWriter(f, k.hash), 1<<16)
	return k, nil
}

// List implements raft.SnapshotStore: the newest Retain snapshots, newest
// first. Directories whose meta.json cannot be read are skipped.
func (s *Store) List() ([]*raft.SnapshotMeta, error) {
	all, err := s.all()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, min(len(all), s.retain))
	for _, m := range all[:min(len(all), s.retain)] {
		out = append(out, &m.SnapshotMeta)
	}
	return out, nil
}

// all returns every complete snapshot, newest first.
func (s *Store) all() ([]*meta, error) {
	entries, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("snapstore: %w", err)
	}
	var out []*meta
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		m, err := s.readMeta(e.Name())
		if err != nil {
			s.log.Warn("skipping a snapshot whose metadata cannot be read", "name", e.Name(), "err", err)
			continue
		}
		if m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax {
			s.log.Warn("skipping a snapshot of an unsupported version", "name", e.Name(), "version", m.Version)
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { // newest first
		a, b := out[i], out[j]
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	return out, nil
}

func (s *Store) readMeta(name string) (*meta, error) {
	f, err := s.fs.Open(filepath.Join(s.dir, name, metaFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &meta{}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(m); err != nil {
		return nil, fmt.Errorf("%s: %w", metaFile, err)
	}
	// The CRC covers the state, not meta.json: a changed digit in its
	// term or index still decodes, and raft would then skip (or replay)
	// entries after the snapshot. The directory name, <term>-<index>-<ms>,
	// repeats them.
	if m.ID != name || !strings.HasPrefix(name, fmt.Sprintf("%d-%d-", m.Term, m.Index)) {
		return nil, fmt.Errorf("%w: %s: %s says snapshot %q of term %d and index %d, which the directory's name contradicts",
			ErrCorrupt, name, metaFile, m.ID, m.Term, m.Index)
	}
	return m, nil
}

// Open implements raft.SnapshotStore. It reads the whole state once to
// check its size and CRC before returning it.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if id == "" || filepath.Base(id) != id || strings.HasSuffix(id, tmpSuffix) {
		return nil, nil, fmt.Errorf("snapstore: invalid snapshot id %q", id)
	}
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, fmt.Errorf("snapstore: open %s: %w", id, err)
	}
	path := filepath.Join(s.dir, id, stateFile)
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, nil, s.openFailed(id, err)
	}
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		_ = f.Close()
		return nil, nil, s.openFailed(id, err)
	}
	if n != m.Size || !bytes.Equal(h.Sum(nil), m.CRC) {
		_ = f.Close()
		err := fmt.Errorf("%w: %s: state has %d bytes and CRC %x; meta.json says %d and %x", ErrCorrupt, path, n, h.Sum(nil), m.Size, m.CRC)
		s.replaceDamaged(id, err)
		return nil, nil, err
	}
	return &m.SnapshotMeta, &reader{Reader: bufio.NewReaderSize(io.NewSectionReader(f, 0, n), 1<<16), f: f}, nil
}

// openFailed is Open's error when the state of snapshot id cannot be
// read. A state.bin that is gone, or that is a directory, beside a
// meta.json that lists the snapshot is damage like a changed byte
// (ErrCorrupt, replaced like one): retrying cannot bring it back, and a
// group that retried would stay without its replica, or a leader
// without a snapshot to send, for good
// (TestMissingStateIsCorrupt).
func (s *Store) openFailed(id string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EISDIR) {
		return fmt.Errorf("snapstore: open %s: %w", id, err)
	}
	err = fmt.Errorf("%w: %w: %s lists the snapshot, but its state cannot be read", ErrCorrupt, err, filepath.Join(s.dir, id, metaFile))
	s.replaceDamaged(id, err)
	return err
}

// SetReplace sets how the store gets a new snapshot to replace a damaged
// one: a raft group's own snapshot (raft.Raft.Snapshot), which writes the
// group's current state as the newest snapshot. Without it a leader whose
// newest snapshot was damaged on disk could never send one again: every
// attempt to bring a new or lagging replica up to date failed on the same
// file, until enough writes made raft take another snapshot, which on an
// idle group is never (TestDamagedSnapshotIsReplaced, internal/clustertest).
func (s *Store) SetReplace(take func() error) {
	s.replace.Store(&take)
}

// ReplaceWith is SetReplace with the snapshot of group r.
func (s *Store) ReplaceWith(r *raft.Raft) {
	s.SetReplace(func() error {
		if err := r.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return err
		}
		return nil
	})
}

// replaceDamaged takes a new snapshot in the background after Open found
// snapshot id damaged, once at a time. The damaged one stays until the
// store's retention removes it; the new one is listed first (same term and
// index, a later name).
func (s *Store) replaceDamaged(id string, damage error) {
	take := s.replace.Load()
	if take == nil || !s.replacing.CompareAndSwap(false, true) {
		s.log.Error("snapshot is damaged", "id", id, "err", damage)
		return
	}
	s.log.Error("snapshot is damaged; taking a new one from the current state to replace it", "id", id, "err", damage)
	go func() {
		defer s.replacing.Store(false)
		if err := (*take)(); err != nil {
			s.log.Error("could not replace the damaged snapshot", "id", id, "err", err)
			return
		}
		s.log.Info("replaced the damaged snapshot", "id", id)
	}()
}

type reader struct {
	*bufio.Reader
	f vfs.File
}

func (r *reader) Close() error { return r.f.Close() }

// reap removes the snapshots beyond the newest Retain.
func (s *Store) reap() error {
	all, err := s.all()
	if err != nil {
		return err
	}
	for _, m := range all[min(len(all), s.retain):] {
		s.log.Debug("removing an old snapshot", "name", m.ID)
		if err := s.fs.RemoveAll(filepath.Join(s.dir, m.ID)); err != nil {
			return fmt.Errorf("snapstore: %w", err)
		}
	}
	return nil
}

// CheckLog returns ErrLogGap when the raft log in logs does not continue
// the newest snapshot in snaps: it holds entries after the snapshot, but
// not the one right after it. Raft (which resumes applying after the
// newest snapshot) would panic on the missing entries; this happens only
// when a snapshot that the log was truncated behind was lost.
func CheckLog(snaps raft.SnapshotStore, logs raft.LogStore) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return err
	}
	list, err := snaps.List()
	if err != nil {
		return err
	}
	var snap uint64
	if len(list) > 0 {
		snap = list[0].Index
	}
	if last > snap && first > snap+1 {
		return fmt.Errorf("%w: the log holds entries %d to %d and the newest snapshot ends at %d; entries %d to %d are in neither",
			ErrLogGap, first, last, snap, snap+1, first-1)
	}
	return nil
}

// sink writes one snapshot; see the package documentation for the order
// of its steps.
type sink struct {
	s      *Store
	tmp    string
	f      vfs.File
	hash   hash.Hash64
	buf    *bufio.Writer
	meta   meta
	closed bool
}

func (k *sink) ID() string { return k.meta.ID }

func (k *sink) Write(b []byte) (int, error) { return k.buf.Write(b) }

// Close makes the snapshot durable and lists it, then removes snapshots
// beyond Retain. On failure the temporary directory is removed.
func (k *sink) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	if err := k.finish(); err != nil {
		if rerr := k.s.fs.RemoveAll(k.tmp); rerr != nil {
			k.s.log.Error("removing a failed snapshot", "dir", k.tmp, "err", rerr)
		}
		return fmt.Errorf("snapstore: snapshot %s: %w", k.meta.ID, err)
	}
	return k.s.reap()
}

func (k *sink) finish() error {
	s := k.s
	err := k.buf.Flush()
	if err == nil && s.sync {
		err = k.f.Sync()
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = k.f.Stat()
	}
	if cerr := k.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	k.meta.Size, k.meta.CRC = fi.Size(), k.hash.Sum(nil)
	if err := k.writeMeta(); err != nil {
		return err
	}
	if s.sync {
		if err := vfs.SyncDir(s.fs, k.tmp); err != nil {
			return err
		}
	}
	final := strings.TrimSuffix(k.tmp, tmpSuffix)
	if err := s.fs.Rename(k.tmp, final); err != nil {
		return err
	}
	if s.sync {
		if err := vfs.SyncDir(s.fs, s.dir); err != nil {
			// The snapshot may or may not survive a crash: it must not be
			// used. (Nothing truncates the log behind a failed Close.)
			if rerr := s.fs.RemoveAll(final); rerr != nil {
				s.log.Error("removing a snapshot that could not be made durable", "dir", final, "err", rerr)
			}
			return err
		}
	}
	return nil
}

func (k *sink) writeMeta() error {
	f, err := k.s.fs.OpenFile(filepath.Join(k.tmp, metaFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = json.NewEncoder(w).Encode(&k.meta)
	if err == nil {
		err = w.Flush()
	}
	if err == nil && k.s.sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Cancel abandons the snapshot and removes its temporary directory.
func (k *sink) Cancel() error {
	if k.closed {
		return nil
	}
	k.closed = true
	_ = k.f.Close()
	if err := k.s.fs.RemoveAll(k.tmp); err != nil {
		return fmt.Errorf("snapstore: %w", err)
	}
	return nil
}

// Bytes is a raft snapshot of a state machine encoded whole in memory (the
// small catalog and cluster groups).
type Bytes []byte

// Persist implements raft.FSMSnapshot.
func (b Bytes) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (Bytes) Release() {}
