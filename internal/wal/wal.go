package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/vfs"
)

// Errors returned by the WAL.
var (
	// ErrCorrupt is returned by Open when a record before the tail of the
	// last segment is damaged (the log cannot be trusted past it), and by
	// reads of a damaged record.
	ErrCorrupt = errors.New("wal: log is corrupt")
	// ErrClosed is returned by calls on a closed WAL.
	ErrClosed = errors.New("wal: closed")
	// ErrOrder is returned by StoreLogs for entries whose indexes do not
	// increase.
	ErrOrder = errors.New("wal: log indexes must increase")
	// ErrFailed is matched by every error of a write that failed or was
	// refused because a write or fdatasync failed (Failed): the WAL fails
	// stop, and a caller can tell that no retry can succeed until the
	// node restarts.
	ErrFailed = errors.New("wal: a write failed; the log refuses writes until it is reopened")
	// ErrMissing is returned by Open with Config.Existing when the log
	// holds no segment: Dir is missing or empty, or its only segment has
	// no valid header (an empty or zeroed file).
	ErrMissing = errors.New("wal: the log is missing")
)

// failure is the sticky error of a failed WAL: the error of the write or
// fdatasync that failed (its message), and ErrFailed.
type failure struct{ err error }

func (f *failure) Error() string   { return f.err.Error() }
func (f *failure) Unwrap() []error { return []error{ErrFailed, f.err} }

const (
	segmentSuffix = ".wal"
	segHeaderLen  = 16
	segMagic      = "CWYWAL\x00\x01"
)

// Config configures a WAL.
type Config struct {
	// Dir is the directory of the segment files; created if missing.
	Dir string
	// SegmentBytes is the size a segment is preallocated to; a batch that
	// does not fit in the head segment starts a new one.
	SegmentBytes int64
	// MaxSegments is the segment count above which starting a new segment
	// also copies the live entries of the oldest segment into the new
	// one, so that the oldest can be removed. It bounds the disk used by
	// groups that stop writing while their entries pin old segments.
	MaxSegments int
	// MaxBatchBytes bounds the records gathered by one group commit (one
	// larger request is still written alone). Whatever it is, one
	// fdatasync covers at most 1 MiB of records (a larger record alone):
	// a larger group commit is written in several synced pieces.
	MaxBatchBytes int
	// NoSync disables every fdatasync, fsync and directory sync. Only for
	// tests and benchmarks that measure everything but the disk; never in
	// production.
	NoSync bool
	// FS is the file system of Dir; nil means the real one (vfs.Default).
	// Tests set it to a vfs.MemFS to take crash images.
	FS vfs.FS
	// Existing says the log was used before (its owner recorded so): a
	// used log always keeps a head segment with a valid header, so Open
	// then fails with ErrMissing, creating and removing nothing, when Dir
	// is missing, holds no segment, or its only segment has no valid
	// header (an interrupted creation can only leave such a segment after
	// a complete one).
	Existing bool
}

// DefaultConfig returns the production defaults for a WAL in dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, SegmentBytes: 64 << 20, MaxSegments: 8, MaxBatchBytes: 16 << 20}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("wal: empty directory")
	case c.SegmentBytes < 4096 || c.SegmentBytes > math.MaxUint32:
		return errors.New("wal: SegmentBytes must be between 4 KiB and 4 GiB")
	case c.MaxSegments < 2:
		return errors.New("wal: MaxSegments must be at least 2")
	case c.MaxBatchBytes < 1:
		return errors.New("wal: MaxBatchBytes must be positive")
	}
	return nil
}

// WAL is a node's write-ahead log: the raft logs of all its groups in one
// sequence of segment files. It is safe for concurrent use.
type WAL struct {
	cfg    Config
	fs     vfs.FS
	noSync bool // cfg.NoSync, or the wal-sync guard is off
	log    *slog.Logger
	m      *metrics

	mu struct {
		sync.RWMutex
		groups map[string]*groupIndex // written only by the committer
		segs   map[uint32]*segment
		closed bool
		err    error // sticky write failure
	}

	// Owned by the committer goroutine (by Open before it starts).
	order    []*segment // oldest first; the last one is the head
	buf      []byte
	ops      []op
	pending  map[string]uint64
	writeSeq uint64   // the last write's sequence number (its mark's)
	shifts   []shift  // writeRecords: where the pieces of the last write went
	pieces   [][]byte // writeRecords: the buffers of one piece

	segCount, diskBytes atomic.Int64
	fresh               bool // Open found no segment
	removeFailing       bool // removeDead failed since it last succeeded; committer only

	failed    chan struct{} // closed by the first write failure
	reqs      chan *request
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type segment struct {
	seq  uint32
	f    vfs.File
	size int64 // end of the written records; committer only
	// live counts the entries whose current location is in this segment;
	// written by the committer under mu.
	live      int
	liveBytes int64
}

// op is one effect of a record on the index.
type op struct {
	kind     kind
	group    string
	index    uint64 // kindEntry
	l        loc    // kindEntry; off relative to the batch until placed
	min, max uint64 // kindDelete
}

type request struct {
	group string
	// StoreLogs: the framed records and, per entry, its index, offset
	// in recs and length.
	recs        []byte
	spans       []span
	first, last uint64
	// DeleteRange.
	del      bool
	min, max uint64

	done chan error
}

type span struct {
	index uint64
	off   uint32
	n     uint32
}

// Open opens the WAL in cfg.Dir, creating it if needed, and recovers the
// index of every group by reading all segments. A damaged or torn record
// at the end of the last segment (an interrupted write) is cut off, with a
// warning, and appends continue from there; damage anywhere else fails
// with ErrCorrupt. The caller ensures
// that one process at a time opens a directory.
func Open(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*WAL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	w := &WAL{
		cfg:     cfg,
		fs:      vfs.OrDefault(cfg.FS),
		noSync:  cfg.NoSync || guards.Off(guards.WALSync),
		log:     logger.With("component", "wal"),
		pending: make(map[string]uint64),
		failed:  make(chan struct{}),
		reqs:    make(chan *request, 1024),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	w.mu.groups = make(map[string]*groupIndex)
	w.mu.segs = make(map[uint32]*segment)
	if err := w.recover(); err != nil {
		w.closeFiles()
		return nil, err
	}
	w.m = newMetrics(reg, w)
	go w.commitLoop()
	return w, nil
}

func segmentName(seq uint32) string { return fmt.Sprintf("%016x%s", seq, segmentSuffix) }

func (w *WAL) recover() error {
	if w.cfg.Existing {
		if _, err := w.fs.Stat(w.cfg.Dir); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: directory %s does not exist", ErrMissing, w.cfg.Dir)
		}
	}
	mkdir := func() error { return vfs.MkdirAllSync(w.fs, w.cfg.Dir, 0o700) }
	if w.noSync {
		mkdir = func() error { return w.fs.MkdirAll(w.cfg.Dir, 0o700) }
	}
	if err := mkdir(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	entries, err := w.fs.ReadDir(w.cfg.Dir)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	var seqs []uint32
	for _, e := range entries {
		name := e.Name()
		if name == probeName { // left by a crash during Open's probe
			if err := w.fs.Remove(filepath.Join(w.cfg.Dir, name)); err != nil {
				return w.dirUnusable(err)
			}
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(name, segmentSuffix), 16, 32)
		if !strings.HasSuffix(name, segmentSuffix) || err != nil || name != segmentName(uint32(seq)) {
			return fmt.Errorf("%w: unexpected file %q in %s", ErrCorrupt, name, w.cfg.Dir)
		}
		seqs = append(seqs, uint32(seq))
	}
	slices.Sort(seqs)
	w.fresh = len(seqs) == 0
	if w.fresh && w.cfg.Existing {
		return fmt.Errorf("%w: %s holds no segment", ErrMissing, w.cfg.Dir)
	}
	next := uint32(1)
	for k, seq := range seqs {
		last := k == len(seqs)-1
		// A used log's only segment was created completely: one without
		// a header is not an interrupted creation.
		s, err := w.recoverSegment(seq, last, !w.cfg.Existing || len(w.order) > 0)
		if err != nil {
			return err
		}
		next = seq + 1
		if s != nil {
			w.order = append(w.order, s)
			w.mu.segs[seq] = s
		}
	}
	// Appends continue in the last segment, cut at its last good record.
	if len(w.order) == 0 {
		head, err := w.createSegment(next)
		if err != nil {
			return err
		}
		w.order = append(w.order, head)
		w.mu.segs[head.seq] = head
	}
	if err := w.probeDir(); err != nil {
		return err
	}
	w.removeDead()
	w.updateGauges()
	w.log.Info("wal opened", "dir", w.cfg.Dir, "segments", len(w.order), "groups", len(w.mu.groups))
	return nil
}

// probeName is the file Open creates and removes in Dir (probeDir).
const probeName = "probe.tmp"

// probeDir checks that Dir takes a new file and lets it be removed. The
// log creates its next segment and removes old ones while the node runs;
// a directory that refuses that (its mode, owner or immutable flag
// changed) would otherwise be found only when the head segment fills up,
// possibly days later, and the node would stop then.
func (w *WAL) probeDir() error {
	path := filepath.Join(w.cfg.Dir, probeName)
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Close()
		if rerr := w.fs.Remove(path); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return w.dirUnusable(err)
	}
	return nil
}

func (w *WAL) dirUnusable(err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("wal: probing the log directory %s: %w", w.cfg.Dir, err)
	}
	return fmt.Errorf("wal: the log directory %s does not let kvd create and remove files in it: %w (the log starts new segments and removes old ones while the node runs; check the directory's owner, mode and attributes, such as an immutable flag: lsattr -d)", w.cfg.Dir, err)
}

// recoverSegment opens segment seq and replays its records into the index.
// It returns nil for a last segment whose creation was interrupted
// (removed), if mayDrop.
func (w *WAL) recoverSegment(seq uint32, last, mayDrop bool) (*segment, error) {
	path := filepath.Join(w.cfg.Dir, segmentName(seq))
	f, err := w.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	hdr := make([]byte, segHeaderLen)
	if _, err := io.ReadFull(f, hdr); err != nil || string(hdr[:8]) != segMagic || binary.BigEndian.Uint64(hdr[8:]) != uint64(seq) {
		if last && !mayDrop && (err != nil || isZero(hdr)) {
			_ = f.Close()
			return nil, fmt.Errorf("%w: %s, its only segment, has no valid segment header (an empty or zeroed file): the raft logs it held are gone", ErrMissing, path)
		}
		if last && (err != nil || isZero(hdr)) {
			// Crashed while creating the segment: it holds nothing.
			w.log.Warn("wal: removing incompletely created segment", "segment", path)
			_ = f.Close()
			if err := w.fs.Remove(path); err != nil {
				return nil, fmt.Errorf("wal: %w", err)
			}
			return nil, w.syncDir()
		}
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s has no valid segment header; refusing to start (see \"A damaged data directory\" in docs/operations.md)", ErrCorrupt, path)
	}
	s := &segment{seq: seq, f: f, size: segHeaderLen}
	w.mu.segs[seq] = s // apply looks segments up
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("wal: %w", err)
	}
	var in write // the write of the last mark read
	end, tail, err := scan(bufio.NewReaderSize(f, 1<<20), segHeaderLen, fi.Size()-segHeaderLen, func(off int64, n int, r record) {
		if r.kind == kindMark {
			in = write{seq: r.seq, start: off, end: off + int64(n) + int64(r.size)}
			w.writeSeq = max(w.writeSeq, r.seq)
			return
		}
		w.apply(op{kind: r.kind, group: r.group, index: r.index, min: r.min, max: r.max,
			l: loc{seg: seq, off: uint32(off), n: uint32(n)}})
	})
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("wal: reading %s: %w", path, err)
	}
	s.size = end
	refuse := func(what string) (*segment, error) {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s at offset %d: %s; refusing to start (see \"A damaged data directory\" in docs/operations.md)", ErrCorrupt, path, end, what)
	}
	// A segment is preallocated when it is created, before its header is
	// written and synced, and it never shrinks (Open zeroes what follows
	// the records instead of cutting it off). A shorter file that holds
	// records was truncated: a truncated copy, a lost file tail. The
	// records cut off its end were synced, so acknowledged, and no check
	// after this one could tell: a cut at a record boundary leaves a
	// well-formed log. (A segment without records may be short: a crash
	// while it was created can keep its header and lose its
	// preallocation.)
	if prealloc := min(w.cfg.SegmentBytes, maxPreallocCheck); fi.Size() < prealloc && end > segHeaderLen && !guards.Off(guards.WALLength) {
		return refuse(fmt.Sprintf("the file is %d bytes, shorter than the %d it was preallocated to: it was truncated, and the records cut off its end were acknowledged", fi.Size(), prealloc))
	}
	if !last {
		// Every write to it was synced before the next segment began.
		if tail != nil {
			return refuse(tail.Error() + ", in a segment that is not the last")
		}
		if err := checkClean(f, end, fi.Size(), in); err != nil {
			return refuse(err.Error())
		}
		return s, nil
	}
	cut := false // an interrupted write is cut off at end
	if tail != nil || end < fi.Size() || in.holds(end) {
		// Only the last write can be incomplete, and it ends the log: if
		// valid records follow the damage, it is not an interrupted
		// write (unless lost sectors of that last write explain it).
		dropped, err := checkTail(f, end, fi.Size(), in)
		if err != nil {
			reason := "zeroed records"
			if tail != nil {
				reason = tail.Error()
			}
			return refuse(reason + ", and " + err.Error())
		}
		cut = tail != nil || dropped >= 0 || in.holds(end)
		if cut {
			reason := "zeroed sectors"
			switch {
			case tail != nil:
				reason = tail.Error()
			case dropped < 0:
				reason = fmt.Sprintf("write %d holds records up to offset %d; the rest are zeros", in.seq, in.end)
			}
			w.log.Warn("wal: cutting off an incomplete write at the end of the log", "segment", path, "offset", end, "reason", reason, "unsynced_records_from", dropped)
		}
	}
	// New records will follow end. Whatever the file holds after it (an
	// interrupted write may leave intact records after a hole) is
	// overwritten with zeros, so that nothing stale can ever follow a new
	// record; the file keeps its size (see the length check above), and a
	// segment whose creation lost its preallocation gets it.
	err = zeroAfter(f, end, fi.Size())
	if err == nil {
		err = f.Preallocate(w.cfg.SegmentBytes)
	}
	if err == nil && !w.noSync {
		err = f.Sync()
	}
	if err == nil && cut {
		// A mark of an empty write where the interrupted one was cut
		// off: the segment's last write is then complete, as checkClean
		// requires once a later segment begins. Written only after the
		// zeros are durable, so that a crash cannot keep it and lose
		// them (it would break a zeroed sector that tells the next Open
		// this was an interrupted write).
		w.writeSeq++
		mark := appendMark(nil, w.writeSeq, 0)
		if _, err = f.WriteAt(mark, end); err == nil && !w.noSync {
			err = f.SyncData()
		}
		s.size = end + int64(len(mark))
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("wal: %w", err)
	}
	return s, nil
}

// maxPreallocCheck bounds the length a segment file must have
// (SegmentBytes, 64 MiB by default): segments written with a smaller
// SegmentBytes stay valid if a later release raises it.
const maxPreallocCheck = 64 << 20

// zeroAfter overwrites the bytes of f in [from, size) that are not zero
// with zeros.
func zeroAfter(f vfs.File, from, size int64) error {
	buf, zeros := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := from; off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
			return err
		}
		if bytes.Equal(b, zeros[:len(b)]) {
			continue
		}
		first, last := 0, len(b)-1
		for b[first] == 0 {
			first++
		}
		for b[last] == 0 {
			last--
		}
		if _, err := f.WriteAt(zeros[:last+1-first], off+int64(first)); err != nil {
			return err
		}
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scan reads the records of a segment from r, which starts at offset off
// and holds size bytes, and calls fn for each. It stops at the end marker or end of file (tail
// nil), or at the first torn or damaged record (tail says why); end is the
// offset just after the last good record. err is a read error.
func scan(r io.Reader, off, size int64, fn func(off int64, n int, rec record)) (end int64, tail, err error) {
	start := off
	hdr := make([]byte, headerLen)
	var body []byte
	for {
		k, err := io.ReadFull(r, hdr)
		switch {
		case err == io.EOF:
			return off, nil, nil
		case err == io.ErrUnexpectedEOF:
			if isZero(hdr[:k]) {
				return off, nil, nil
			}
			return off, errors.New("torn record header"), nil
		case err != nil:
			return off, nil, err
		}
		length, st := checkFrame(hdr)
		switch st {
		case frameEnd:
			return off, nil, nil
		case frameCorrupt:
			return off, errors.New("bad record length"), nil
		}
		if int64(headerLen+length) > size-(off-start) {
			return off, errors.New("torn record"), nil
		}
		if need := headerLen + length; cap(body) < need {
			body = make([]byte, need)
		}
		buf := body[:headerLen+length]
		copy(buf, hdr)
		if _, err := io.ReadFull(r, buf[headerLen:]); err == io.EOF || err == io.ErrUnexpectedEOF {
			return off, errors.New("torn record"), nil
		} else if err != nil {
			return off, nil, err
		}
		n, st := checkFrame(buf)
		if st != frameOK {
			return off, errors.New("record checksum mismatch"), nil
		}
		rec, derr := decodeRecord(buf[headerLen:n], nil)
		if derr != nil {
			return off, derr, nil
		}
		fn(off, n, rec)
		off += int64(n)
	}
}

func (w *WAL) createSegment(seq uint32) (*segment, error) {
	path := filepath.Join(w.cfg.Dir, segmentName(seq))
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	hdr := append([]byte(segMagic), make([]byte, 8)...)
	binary.BigEndian.PutUint64(hdr[8:], uint64(seq))
	err = f.Preallocate(w.cfg.SegmentBytes)
	if err == nil {
		_, err = f.WriteAt(hdr, 0)
	}
	if err == nil && !w.noSync {
		err = f.Sync()
	}
	if err == nil {
		err = w.syncDir()
	}
	if err != nil {
		_ = f.Close()
		_ = w.fs.Remove(path)
		return nil, fmt.Errorf("wal: create segment: %w", err)
	}
	return &segment{seq: seq, f: f, size: segHeaderLen}, nil
}

// syncDir makes the segment directory's entries durable (unless syncs
// are off).
func (w *WAL) syncDir() error {
	if w.noSync {
		return nil
	}
	if err := vfs.SyncDir(w.fs, w.cfg.Dir); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}

// apply applies one record's effect to the index and the segments' live
// counts. REQUIRES: w.mu held for writing, or Open before the WAL is shared.
func (w *WAL) apply(o op) {
	g := w.mu.groups[o.group]
	drop := func(l loc) {
		if s := w.mu.segs[l.seg]; s != nil {
			s.live--
			s.liveBytes -= int64(l.n)
		}
	}
	switch o.kind {
	case kindEntry:
		if g == nil {
			g = &groupIndex{}
			w.mu.groups[o.group] = g
		}
		if old, ok := g.put(o.index, o.l); ok {
			drop(old)
		}
		if s := w.mu.segs[o.l.seg]; s != nil {
			s.live++
			s.liveBytes += int64(o.l.n)
		}
	case kindDelete:
		if g == nil {
			return
		}
		g.deleteRange(o.min, o.max, drop)
		if g.empty() {
			delete(w.mu.groups, o.group)
		}
	}
}

// removeDead removes the oldest segments while no live entry is in them.
// Only a prefix of the log is ever removed, one segment at a time with a
// directory sync after each, so that after a crash the removed segments
// are still a prefix: a delete record must outlive every older record
// whose entries it deleted. Committer only.
func (w *WAL) removeDead() {
	for len(w.order) > 1 && w.order[0].live == 0 {
		s := w.order[0]
		path := filepath.Join(w.cfg.Dir, segmentName(s.seq))
		err := w.fs.Remove(path)
		if errors.Is(err, os.ErrNotExist) { // removed, but the sync failed
			err = nil
		}
		if err == nil {
			err = w.syncDir()
		}
		if err != nil {
			// Retried after every commit; logged once until it succeeds.
			if !w.removeFailing {
				w.log.Error("wal: cannot remove a segment that holds no live entry; retrying after each write, and logging again only once it succeeded", "segment", path, "err", err)
			}
			w.removeFailing = true
			return
		}
		if w.removeFailing {
			w.log.Info("wal: removed the segment that could not be removed before", "segment", path)
			w.removeFailing = false
		}
		w.mu.Lock()
		delete(w.mu.segs, s.seq)
		w.mu.Unlock()
		w.order = w.order[1:]
		_ = s.f.Close()
		w.log.Debug("wal: removed segment", "segment", path)
	}
}

func (w *WAL) updateGauges() {
	var disk int64
	for _, s := range w.order {
		disk += max(s.size, w.cfg.SegmentBytes)
	}
	w.segCount.Store(int64(len(w.order)))
	w.diskBytes.Store(disk)
}

// submit hands r to the committer and waits for its outcome.
func (w *WAL) submit(r *request) error {
	w.mu.RLock()
	closed, ferr := w.mu.closed, w.mu.err
	w.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if ferr != nil {
		return ferr
	}
	r.done = make(chan error, 1)
	select {
	case w.reqs <- r:
	case <-w.closing:
		return ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-w.done:
		select {
		case err := <-r.done:
			return err
		default:
			return ErrClosed
		}
	}
}

// commitLoop is the group committer: it writes every request that arrived
// while the previous batch was being synced in one write and one
// fdatasync. It owns the head segment and is the only writer of the index.
func (w *WAL) commitLoop() {
	defer close(w.done)
	var batch []*request
	for {
		var first *request
		select {
		case first = <-w.reqs:
		case <-w.closing:
			for {
				select {
				case r := <-w.reqs:
					w.commit([]*request{r})
				default:
					return
				}
			}
		}
		batch = append(batch[:0], first)
		size := len(first.recs)
		// Yield once before gathering: the raft goroutines of other
		// groups that are runnable now (a follower storing a batch of
		// several groups' entries, leaders appending at once) submit
		// first and share this fdatasync.
		runtime.Gosched()
	fill:
		for size < w.cfg.MaxBatchBytes {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
				size += len(r.recs)
			default:
				break fill
			}
		}
		w.commit(batch)
		clear(batch)
	}
}

func (w *WAL) commit(batch []*request) {
	start := time.Now()
	w.mu.RLock()
	ferr := w.mu.err
	w.mu.RUnlock()
	if ferr != nil {
		for _, r := range batch {
			r.done <- ferr
		}
		return
	}
	buf, ops := w.buf[:0], w.ops[:0]
	clear(w.pending)
	entries := 0
	for _, r := range batch {
		if r.del {
			buf = appendDelete(buf, r.group, r.min, r.max)
			ops = append(ops, op{kind: kindDelete, group: r.group, min: r.min, max: r.max})
			continue
		}
		// Entries replace any at or after their first index: if there may
		// be some, a delete record says so first.
		upper := w.pending[r.group]
		if g := w.mu.groups[r.group]; g != nil {
			upper = max(upper, g.last())
		}
		if r.first <= upper {
			buf = appendDelete(buf, r.group, r.first, math.MaxUint64)
			ops = append(ops, op{kind: kindDelete, group: r.group, min: r.first, max: math.MaxUint64})
		}
		base := uint32(len(buf))
		buf = append(buf, r.recs...)
		for _, s := range r.spans {
			ops = append(ops, op{kind: kindEntry, group: r.group, index: s.index, l: loc{off: base + s.off, n: s.n}})
		}
		entries += len(r.spans)
		w.pending[r.group] = max(w.pending[r.group], r.last)
	}
	w.buf, w.ops = buf, ops

	var reloc []byte
	var relocOps []op
	head := w.order[len(w.order)-1]
	if head.size > segHeaderLen && head.size+int64(len(buf)) > w.cfg.SegmentBytes {
		var err error
		if reloc, relocOps, err = w.roll(); err != nil {
			w.fail(err, batch)
			return
		}
		head = w.order[len(w.order)-1]
	}
	if head.size+int64(len(reloc)+len(buf))+markBytes(len(reloc)+len(buf)) > math.MaxUint32 {
		// Nothing was written; only a single request of gigabytes gets here.
		for _, r := range batch {
			r.done <- errors.New("wal: batch too large for a segment")
		}
		return
	}
	off := head.size
	end, err := w.writeRecords(head.f, off, reloc, buf)
	if err != nil {
		w.fail(fmt.Errorf("wal: write: %w", err), batch)
		return
	}
	w.mu.Lock()
	for _, o := range relocOps {
		o.l.seg, o.l.off = head.seq, w.placed(off, o.l.off)
		w.apply(o)
	}
	for _, o := range ops {
		if o.kind == kindEntry {
			o.l.seg, o.l.off = head.seq, w.placed(off, o.l.off+uint32(len(reloc)))
		}
		w.apply(o)
	}
	w.mu.Unlock()
	head.size = end
	w.removeDead()
	w.updateGauges()
	for _, r := range batch {
		r.done <- nil
	}
	w.m.observeBatch(entries, len(buf), time.Since(start))
}

// writeRecords writes the records of bufs, one after the other, from off
// in f and makes them durable; it returns the offset after the last one.
// One fdatasync covers at most maxWriteBytes, cut at a record boundary
// (a larger record is written and synced alone), so a crash can damage
// only the last such write, and Open knows how far valid records can
// follow lost sectors of it (checkTail). Each such write begins with a
// mark record (appendMark) that numbers it and gives the length of its
// records, so Open can also tell damage in an earlier write from lost
// sectors of the last one. A group commit up to maxWriteBytes is one
// write per buffer after the mark, and one fdatasync. placed maps the
// records' offsets in bufs to the file. Committer only.
func (w *WAL) writeRecords(f vfs.File, off int64, bufs ...[]byte) (int64, error) {
	w.shifts = w.shifts[:0]
	pieces := w.pieces[:0]
	defer func() { clear(pieces[:cap(pieces)]); w.pieces = pieces[:0] }()
	var in, from int // bytes of records in pieces; their offset in bufs
	flush := func() error {
		if in == 0 {
			return nil
		}
		w.writeSeq++
		mark := appendMark(make([]byte, 0, maxMarkLen), w.writeSeq, uint64(in))
		w.shifts = append(w.shifts, shift{from: uint32(from), to: uint32(off) + uint32(len(mark))})
		if _, err := f.WriteAt(mark, off); err != nil {
			return err
		}
		off += int64(len(mark))
		for _, p := range pieces {
			if _, err := f.WriteAt(p, off); err != nil {
				return err
			}
			off += int64(len(p))
		}
		from += in
		pieces, in = pieces[:0], 0
		if w.noSync {
			return nil
		}
		start := time.Now()
		err := f.SyncData()
		w.m.fsyncSeconds.Observe(time.Since(start).Seconds())
		return err
	}
	for _, b := range bufs {
		for len(b) > 0 {
			n := recordsWithin(b, maxWriteBytes-maxMarkLen-in)
			if n == 0 && in > 0 {
				if err := flush(); err != nil {
					return off, err
				}
				continue
			}
			if n == 0 { // one record larger than a write
				n = headerLen + int(binary.LittleEndian.Uint32(b[4:]))
			}
			pieces = append(pieces, b[:n])
			in += n
			b = b[n:]
		}
	}
	err := flush()
	return off, err
}

// shift says where the last writeRecords put a piece: the records at
// offset from of its buffers, and after, up to the next piece, went to
// the file at offset to.
type shift struct{ from, to uint32 }

// placed returns the file offset of the record at offset at in the
// buffers of the last writeRecords, which wrote from off. Committer only.
func (w *WAL) placed(off int64, at uint32) uint32 {
	k := sort.Search(len(w.shifts), func(k int) bool { return w.shifts[k].from > at }) - 1
	if k < 0 { // nothing was written
		return uint32(off) + at
	}
	return w.shifts[k].to + at - w.shifts[k].from
}

// markBytes bounds the bytes of the marks writeRecords adds to n bytes
// of records: a mark per piece, and two pieces in a row hold more records
// than one piece may (the second began with a record that did not fit in
// the first).
func markBytes(n int) int64 {
	return int64(2*(n/(maxWriteBytes/2)+1)) * maxMarkLen
}

// recordsWithin returns the length of the longest run of whole records at
// the start of b that fits in limit bytes.
func recordsWithin(b []byte, limit int) int {
	n := 0
	for n+headerLen <= len(b) {
		next := n + headerLen + int(binary.LittleEndian.Uint32(b[n+4:]))
		if next > limit {
			break
		}
		n = next
	}
	return n
}

// fail makes a write failure permanent: after a failed write or fdatasync
// the file's state is unknown, so the WAL refuses every later write and
// the node must restart (and recover from what is on disk). The batch and
// every later write get err, which then also matches ErrFailed.
func (w *WAL) fail(err error, batch []*request) {
	err = &failure{err: err}
	w.log.Error("wal: write failed; refusing further writes", "err", err)
	w.mu.Lock()
	if w.mu.err == nil {
		w.mu.err = err
		close(w.failed)
	}
	w.mu.Unlock()
	for _, r := range batch {
		r.done <- err
	}
}

// roll starts a new head segment. When there are more than MaxSegments
// segments and the live entries of the oldest fill at most half of a
// segment, it also returns their records (relocated into the new head, so
// that the oldest can go) and the ops that point the index at their
// copies (offsets relative to the start of the returned records).
// Committer only.
//
// A mostly live oldest segment is left in place: its copy would fill most
// of the new head, the next batches would roll again at once, and every
// group commit would copy a whole segment while the groups' logs are
// longer than MaxSegments segments (large entries between two
// snapshots). With the half-segment bound, the copying stays below the
// new data written (TestLongLogsAreNotCopiedOnEveryCommit).
func (w *WAL) roll() ([]byte, []op, error) {
	prev := w.order[len(w.order)-1]
	s, err := w.createSegment(prev.seq + 1)
	if err != nil {
		return nil, nil, err
	}
	w.mu.Lock()
	w.mu.segs[s.seq] = s
	w.mu.Unlock()
	w.order = append(w.order, s)
	if len(w.order) <= w.cfg.MaxSegments || w.order[0].live == 0 || w.order[0].liveBytes > w.cfg.SegmentBytes/2 {
		return nil, nil, nil
	}
	old := w.order[0]
	var buf []byte
	var ops []op
	var rerr error
	names := make([]string, 0, len(w.mu.groups))
	for name := range w.mu.groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w.mu.groups[name].each(func(i uint64, l loc) {
			if l.seg != old.seq || rerr != nil {
				return
			}
			start := len(buf)
			buf = append(buf, make([]byte, l.n)...)
			if _, err := old.f.ReadAt(buf[start:], int64(l.off)); err != nil {
				rerr = fmt.Errorf("wal: relocating %s/%d: %w", name, i, err)
				return
			}
			if n, st := checkFrame(buf[start:]); st != frameOK || n != int(l.n) {
				rerr = fmt.Errorf("%w: relocating %s/%d from segment %d", ErrCorrupt, name, i, old.seq)
				return
			}
			ops = append(ops, op{kind: kindEntry, group: name, index: i, l: loc{off: uint32(start), n: l.n}})
		})
	}
	if rerr != nil {
		return nil, nil, rerr
	}
	w.m.relocatedBytes.Add(float64(len(buf)))
	w.log.Info("wal: relocating live entries of the oldest segment", "segment", old.seq, "entries", len(ops), "bytes", len(buf))
	return buf, ops, nil
}

// Close waits for queued writes, stops the committer and closes the files.
func (w *WAL) Close() error {
	first := false
	w.closeOnce.Do(func() {
		first = true
		close(w.closing)
		<-w.done
		w.mu.Lock()
		w.mu.closed = true
		w.mu.Unlock()
		w.closeFiles()
	})
	if !first {
		return ErrClosed
	}
	return nil
}

func (w *WAL) closeFiles() {
	for _, s := range w.mu.segs {
		_ = s.f.Close()
	}
}

// Failed returns a channel that is closed when a write or fdatasync
// fails. From then on the WAL refuses every write (Err says why; the
// errors match ErrFailed), and the node must stop: what the failed write
// left in the file is unknown until Open reads it again.
func (w *WAL) Failed() <-chan struct{} { return w.failed }

// Err returns the write failure that closed Failed, or nil.
func (w *WAL) Err() error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.mu.err
}

// Fresh reports whether Open found no segment file: a new, empty log.
// (Once used, a WAL always keeps at least its head segment.)
func (w *WAL) Fresh() bool { return w.fresh }

// Groups returns the names of the groups that have entries, sorted.
func (w *WAL) Groups() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := make([]string, 0, len(w.mu.groups))
	for name := range w.mu.groups {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Drop deletes every entry of group. Used when a replica leaves the node.
func (w *WAL) Drop(group string) error {
	return w.submit(&request{group: group, del: true, min: 0, max: math.MaxUint64})
}

// Log returns the raft.LogStore of group.
func (w *WAL) Log(group string) *Log { return &Log{w: w, group: group} }

// Log is one raft group's log in the WAL. It implements raft.LogStore.
type Log struct {
	w     *WAL
	group string
}

var _ raft.LogStore = (*Log)(nil)

// FirstIndex implements raft.LogStore.
func (l *Log) FirstIndex() (uint64, error) {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	if l.w.mu.closed {
		return 0, ErrClosed
	}
	if g := l.w.mu.groups[l.group]; g != nil {
		return g.first(), nil
	}
	return 0, nil
}

// LastIndex implements raft.LogStore.
func (l *Log) LastIndex() (uint64, error) {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	if l.w.mu.closed {
		return 0, ErrClosed
	}
	if g := l.w.mu.groups[l.group]; g != nil {
		return g.last(), nil
	}
	return 0, nil
}

// Gap returns the first range of indexes above after, and up to the last
// index, that the log does not hold (ok false when it holds all of them).
// Raft reads every entry after its newest snapshot when it starts: a gap
// there means entries were lost (a segment deleted or damaged).
func (l *Log) Gap(after uint64) (first, last uint64, ok bool) {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	g := l.w.mu.groups[l.group]
	if g == nil {
		return 0, 0, false
	}
	prev := after
	for _, r := range g.runs {
		if r.last() <= after {
			continue
		}
		if r.first > prev+1 {
			return prev + 1, r.first - 1, true
		}
		prev = r.last()
	}
	return 0, 0, false
}

// BytesAfter implements raft.LogSizer: the bytes of the group's records
// of entries above index.
func (l *Log) BytesAfter(index uint64) uint64 {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	var n uint64
	if g := l.w.mu.groups[l.group]; g != nil {
		g.eachFromNewest(func(i uint64, lc loc) bool {
			if i <= index {
				return false
			}
			n += uint64(lc.n)
			return true
		})
	}
	return n
}

// NewestWithin implements raft.LogSizer: how many of the group's newest
// entries have records of at most maxBytes together.
func (l *Log) NewestWithin(maxBytes uint64) uint64 {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	var count, n uint64
	if g := l.w.mu.groups[l.group]; g != nil {
		g.eachFromNewest(func(_ uint64, lc loc) bool {
			if n+uint64(lc.n) > maxBytes {
				return false
			}
			n += uint64(lc.n)
			count++
			return true
		})
	}
	return count
}

// GetLog implements raft.LogStore. It reads the entry's record from its
// segment file and checks it.
func (l *Log) GetLog(index uint64, out *raft.Log) error {
	buf, seg, at, err := l.read(index)
	if err != nil {
		return err
	}
	n, st := checkFrame(buf)
	if st != frameOK || n != len(buf) {
		return fmt.Errorf("%w: %s/%d in segment %d at offset %d", ErrCorrupt, l.group, index, seg, at)
	}
	rec, err := decodeRecord(buf[headerLen:], out)
	if err != nil || rec.kind != kindEntry || rec.group != l.group || rec.index != index {
		return fmt.Errorf("%w: %s/%d in segment %d at offset %d holds another record", ErrCorrupt, l.group, index, seg, at)
	}
	return nil
}

func (l *Log) read(index uint64) (buf []byte, seg uint32, off uint32, err error) {
	l.w.mu.RLock()
	defer l.w.mu.RUnlock()
	if l.w.mu.closed {
		return nil, 0, 0, ErrClosed
	}
	g := l.w.mu.groups[l.group]
	if g == nil {
		return nil, 0, 0, raft.ErrLogNotFound
	}
	lc, ok := g.get(index)
	if !ok {
		return nil, 0, 0, raft.ErrLogNotFound
	}
	s := l.w.mu.segs[lc.seg]
	buf = make([]byte, lc.n)
	if _, err := s.f.ReadAt(buf, int64(lc.off)); err != nil {
		return nil, 0, 0, fmt.Errorf("wal: read %s/%d: %w", l.group, index, err)
	}
	return buf, lc.seg, lc.off, nil
}

// StoreLog implements raft.LogStore.
func (l *Log) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore. It returns once the entries are
// durable. Entries replace any existing ones at or after the first index.
func (l *Log) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	r := &request{group: l.group, first: logs[0].Index, last: logs[len(logs)-1].Index, spans: make([]span, len(logs))}
	size := 0
	for _, e := range logs {
		size += 48 + len(l.group) + len(e.Data) + len(e.Extensions)
	}
	r.recs = make([]byte, 0, size)
	for k, e := range logs {
		if k > 0 && e.Index <= logs[k-1].Index {
			return fmt.Errorf("%w: %d after %d", ErrOrder, e.Index, logs[k-1].Index)
		}
		start := len(r.recs)
		r.recs = appendEntry(r.recs, l.group, e)
		r.spans[k] = span{index: e.Index, off: uint32(start), n: uint32(len(r.recs) - start)}
	}
	return l.w.submit(r)
}

// DeleteRange implements raft.LogStore. The deletion is durable when it
// returns.
func (l *Log) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	return l.w.submit(&request{group: l.group, del: true, min: min, max: max})
}
