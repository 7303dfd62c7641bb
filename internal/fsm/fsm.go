package fsm

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

// CommandFormat is the peer.v1.Command format this build writes and accepts.
const CommandFormat = 1

// Errors decided by the state machine. They are returned inside Result, not
// as apply failures: the command was applied (as a no-op).
var (
	// ErrVersionMismatch: a compare-and-swap expected another version.
	ErrVersionMismatch = errors.New("fsm: version mismatch")
	// ErrKeyNotFound: a compare-and-swap expected a version of a key that
	// is absent or deleted.
	ErrKeyNotFound = errors.New("fsm: key not found")
	// ErrKeyExists: a compare-and-swap expected the key to be absent.
	ErrKeyExists = errors.New("fsm: key exists")
	// ErrUnknownCommand: the replica cannot interpret a committed command
	// and has stopped.
	ErrUnknownCommand = errors.New("fsm: unknown command")
	// ErrSeqGap: a Replicate command skips sequence numbers of its origin
	// (Result.NextSeq is the one expected); nothing of it was applied.
	ErrSeqGap = errors.New("fsm: gap in an origin's sequence")
	// ErrBadReplicate: a Replicate command is malformed (no origin,
	// sequence numbers not consecutive, HLCs not growing); nothing of it
	// was applied.
	ErrBadReplicate = errors.New("fsm: malformed replicated write")
)

// Result is the outcome of one applied command.
type Result struct {
	// Version written (zero when nothing was written).
	Version causal.Version
	// Existed reports whether the key held a live value before the write.
	Existed bool
	// Current is the key's newest version when a condition failed.
	Current causal.Version
	// CurrentFound reports whether the key held a live value when a
	// condition failed.
	CurrentFound bool
	// Next is where a Collect pass resumes (nil when it finished).
	Next []byte
	// Removed counts versions removed by Collect.
	Removed int
	// Applied and Duplicates count the writes of a Replicate command
	// applied and skipped as already applied; NextSeq is the sequence
	// number the origin's next write must carry.
	Applied, Duplicates int
	NextSeq             uint64
	// Superseded counts the replicated (or repaired) writes that were
	// older than their key's newest version (last-writer-wins).
	Superseded int
	// Seq is this site's outbound sequence number of a write that entered
	// the outbound log (zero when the shard has no chain).
	Seq uint64
	// Err is a decided failure (ErrVersionMismatch, ErrKeyNotFound,
	// ErrKeyExists) or ErrUnknownCommand.
	Err error
}

// Hooks are the calls an FSM makes to its owner. A nil hook is not called.
// They run on raft's FSM goroutine and must not block.
type Hooks struct {
	// Fatal is called once when the replica must stop because it met a
	// command it cannot apply or storage failed under it.
	Fatal func(error)
	// Digest is called for every applied DigestCheck command with its
	// index and a read transaction on the shard's state as of that index
	// (nothing after it applied yet). Digest owns tx and must roll it back,
	// soon: an open read transaction delays the growth of the database
	// file. Without this hook the transaction is not opened.
	Digest func(index uint64, tx *storage.Tx)
	// Restored is called after a snapshot replaced the shard's state.
	Restored func(applied uint64)
	// Advanced is called after a batch that raised the shard's newest HLC
	// of this site (maxHLC): it applied a write of this site or a Close,
	// each stamped by the leader's clock at about the present.
	Advanced func()
	// Gate, if set, is called before each batch is applied and may
	// block it (shard.PauseApplyForTest holds a replica's applies).
	Gate func()
	// Publish, if set, is called after a batch is stored in the state
	// database (reads see it) and before Applied reports it, and may
	// block there (shard.PausePublishForTest).
	Publish func()
}

// FSM is the state machine of one shard replica.
type FSM struct {
	id    storage.ShardID
	db    *storage.DB
	log   *slog.Logger
	hooks Hooks

	mu      sync.Mutex
	applied uint64        // REQUIRES: mu
	st      state         // REQUIRES: mu
	changed chan struct{} // closed and replaced on every apply; REQUIRES: mu
	stopped error         // REQUIRES: mu
}

// state is what the FSM keeps in memory of the shard's persistent state.
type state struct {
	// maxHLC is the newest HLC of this site's writes (and closes).
	maxHLC uint64
	// site is this site's name: a Replicate command from it is refused
	// (this site's writes are ordered by the log, not by sequence).
	site string
	// origins is the progress of other sites' writes. It is never
	// modified in place once shared: apply copies it first (owned).
	origins map[string]storage.Progress
	owned   bool
	// chain is the shard's chain of sites (nil: one site, no outbound
	// log) and capBytes its outbound log's cap.
	chain    []string
	capBytes uint64
	// localSeq is the sequence number of this site's last outbound write.
	localSeq uint64
	// stable is, per origin, the progress every chain site applied. Like
	// origins, never modified in place once shared (stableOwned).
	stable      map[string]storage.Progress
	stableOwned bool
	// joinMarks: per site, the configuration version of this site's join
	// of the keyspace whose repair of the shard that site completed
	// (docs/adr/019). Never modified in place: a new mark replaces it.
	joinMarks map[string]uint64
}

// setStable records origin's stable progress, copying stable first if
// shared.
func (st *state) setStable(origin string, p storage.Progress) {
	if !st.stableOwned {
		m := make(map[string]storage.Progress, len(st.stable)+1)
		for k, v := range st.stable {
			m[k] = v
		}
		st.stable, st.stableOwned = m, true
	}
	st.stable[origin] = p
}

// forwards reports whether this site passes origin's writes on: the shard
// has a chain, this site is on it, and it is not the last site of origin's
// chain (the site before origin in the list).
func (st *state) forwards(origin string) bool {
	n := len(st.chain)
	if n < 2 {
		return false
	}
	self, org := -1, -1
	for i, s := range st.chain {
		if s == st.site {
			self = i
		}
		if s == origin {
			org = i
		}
	}
	if self < 0 || org < 0 {
		return false
	}
	return (self-org+n)%n != n-1
}

// setOrigin records origin's progress, copying origins first if shared.
func (st *state) setOrigin(origin string, p storage.Progress) {
	if !st.owned {
		m := make(map[string]storage.Progress, len(st.origins)+1)
		for k, v := range st.origins {
			m[k] = v
		}
		st.origins, st.owned = m, true
	}
	st.origins[origin] = p
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns the FSM of shard id, resuming from the state in db.
func New(id storage.ShardID, db *storage.DB, logger *slog.Logger, hooks Hooks) (*FSM, error) {
	f := &FSM{id: id, db: db, log: logger, hooks: hooks, changed: make(chan struct{})}
	err := db.View(func(tx *storage.Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		f.applied, f.st.maxHLC = s.Applied()
		f.st.site = db.Identity().Site
		return loadGeo(s, &f.st)
	})
	if err != nil {
		return nil, fmt.Errorf("fsm %s: load state: %w", id, err)
	}
	return f, nil
}

// Progress returns the progress of origin's replicated writes (zero when
// none arrived) and a channel that is closed when anything applies.
func (f *FSM) Progress(origin string) (storage.Progress, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st.origins[origin], f.changed
}

// Origins returns a copy of every origin's progress.
func (f *FSM) Origins() map[string]storage.Progress {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]storage.Progress, len(f.st.origins))
	for k, v := range f.st.origins {
		out[k] = v
	}
	return out
}

// loadGeo reads the origins' progress and the chain state into st.
func loadGeo(s *storage.ShardTx, st *state) error {
	var err error
	if st.origins, err = s.Origins(); err != nil {
		return err
	}
	if st.stable, err = s.Stable(); err != nil {
		return err
	}
	if st.joinMarks, err = s.JoinMarks(); err != nil {
		return err
	}
	c, err := s.Chain()
	if err != nil {
		return err
	}
	if len(c.Sites) > 1 {
		st.chain, st.capBytes = c.Sites, c.CapBytes
	}
	st.localSeq = s.LocalSeq()
	return nil
}

// Geo is a replica's chain state, as of one applied index.
type Geo struct {
	// Applied is the last applied index.
	Applied uint64
	// Chain is the shard's chain of sites (nil: one site) and Site this
	// replica's site.
	Chain []string
	Site  string
	// Local is this site's own progress: the last outbound sequence
	// number and the shard's newest HLC (every later write of this site
	// gets a larger one).
	Local storage.Progress
	// Origins and Stable: per origin, what this replica applied and what
	// every chain site applied. Shared: do not modify.
	Origins, Stable map[string]storage.Progress
	// JoinMarks: per site, the configuration version of this site's join
	// of the keyspace whose repair of the shard that site completed
	// (docs/adr/019). Shared: do not modify.
	JoinMarks map[string]uint64
	// Changed is closed when anything applies next.
	Changed <-chan struct{}
}

// Geo returns the replica's chain state.
func (f *FSM) Geo() Geo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Geo{Applied: f.applied, Chain: f.st.chain, Site: f.st.site, Local: storage.Progress{HLC: f.st.maxHLC, Seq: f.st.localSeq},
		Origins: f.st.origins, Stable: f.st.stable, JoinMarks: f.st.joinMarks, Changed: f.changed}
}

// Applied returns the last applied index, the shard's newest HLC and a
// channel that is closed when either changes.
func (f *FSM) Applied() (index, maxHLC uint64, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.st.maxHLC, f.changed
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: the batch is applied in one
// storage transaction, or in one per DigestCheck command it holds (each
// ends with the DigestCheck, so that the Digest hook sees the state as of
// its index).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if f.hooks.Gate != nil {
		f.hooks.Gate()
	}
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	applied, st, stopped := f.applied, f.st, f.stopped
	f.mu.Unlock()
	startHLC := st.maxHLC
	st.owned, st.stableOwned = false, false
	if stopped != nil {
		for i := range out {
			out[i] = Result{Err: stopped}
		}
		return out
	}

	cmds := make([]*peerv1.Command, len(logs))
	var fatalErr error
	n := len(logs) // logs[:n] are applied
	for i, l := range logs {
		if l.Index <= applied || l.Type != raft.LogCommand {
			continue // applied before a restart, or not a command
		}
		cmd, err := decode(l.Data)
		if err != nil {
			fatalErr = fmt.Errorf("%w: index %d: %v", ErrUnknownCommand, l.Index, err)
			for j := i; j < len(out); j++ {
				out[j] = Result{Err: fatalErr}
			}
			n = i
			break
		}
		cmds[i] = cmd
	}

	for start := 0; start < n; {
		end := start // logs[start:end+1] go into one transaction
		for end < n-1 && !isDigestCheck(cmds[end]) {
			end++
		}
		lastIndex := applied
		for _, l := range logs[start : end+1] {
			lastIndex = max(lastIndex, l.Index)
		}
		next, err := f.applyRange(logs[start:end+1], cmds[start:end+1], out[start:end+1], applied, lastIndex, st)
		if err != nil {
			// Storage failed under us: the state is unknown, so this
			// replica must not go on applying. What earlier transactions
			// of the batch committed keeps its results.
			fatalErr = fmt.Errorf("fsm %s: apply: %w", f.id, err)
			for i := start; i < len(out); i++ {
				out[i] = Result{Err: fatalErr}
			}
			break
		}
		applied, st = lastIndex, next
		if isDigestCheck(cmds[end]) && f.hooks.Digest != nil {
			// Only this goroutine writes the shard, and BeginRead
			// commits what the state database holds open first: a
			// read transaction begun now sees the state as of
			// logs[end].Index.
			if tx, err := f.db.BeginRead(); err == nil {
				f.hooks.Digest(logs[end].Index, tx)
			} else {
				f.log.Warn("no digest at a consistency check", "shard", f.id.String(), "index", logs[end].Index, "err", err)
			}
		}
		start = end + 1
	}
	if f.hooks.Advanced != nil && fatalErr == nil && st.maxHLC > startHLC {
		f.hooks.Advanced()
	}
	if f.hooks.Publish != nil {
		f.hooks.Publish()
	}
	f.mu.Lock()
	f.applied, f.st = applied, st
	if fatalErr != nil {
		f.stopped = fatalErr
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if fatalErr != nil {
		f.log.Error("replica stopped", "shard", f.id.String(), "err", fatalErr)
		if f.hooks.Fatal != nil {
			f.hooks.Fatal(fatalErr)
		}
	}
	return out
}

// applyRange applies cmds (nil for entries that are not new commands) in
// one storage transaction that records lastIndex as applied, and returns
// the shard's new state.
func (f *FSM) applyRange(logs []*raft.Log, cmds []*peerv1.Command, out []interface{}, applied, lastIndex uint64, st state) (state, error) {
	var next state
	err := f.db.ApplyShard(f.id, func(s *storage.ShardTx) error {
		next = st // a retried transaction starts over
		for i, cmd := range cmds {
			if cmd == nil {
				continue
			}
			r, err := apply(s, cmd, &next)
			if err != nil {
				return err
			}
			out[i] = r
		}
		if lastIndex == applied {
			return nil
		}
		return s.SetApplied(lastIndex, next.maxHLC)
	})
	next.owned, next.stableOwned = false, false
	return next, err
}

func isDigestCheck(cmd *peerv1.Command) bool {
	_, ok := cmd.GetOp().(*peerv1.Command_DigestCheck)
	return ok
}

// Decode unmarshals a command written by Encode.
func Decode(data []byte) (*peerv1.Command, error) { return decode(data) }

func decode(data []byte) (*peerv1.Command, error) {
	cmd := &peerv1.Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return nil, err
	}
	if cmd.Format != CommandFormat {
		return nil, fmt.Errorf("command format %d", cmd.Format)
	}
	return cmd, nil
}

// Encode marshals a command for raft.Apply, stamping the format.
func Encode(cmd *peerv1.Command) ([]byte, error) {
	cmd.Format = CommandFormat
	return proto.Marshal(cmd)
}

// Snapshot implements raft.FSM. It only opens a read transaction (which
// commits the state database's open transaction first: the snapshot holds
// every applied entry); Persist does the work.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	tx, err := f.db.BeginRead()
	if err != nil {
		return nil, err
	}
	return &snapshot{id: f.id, tx: tx}, nil
}

// Restore implements raft.FSM: the shard's state is replaced atomically.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var applied, maxHLC uint64
	var next state
	err := f.db.UpdateAlone(func(tx *storage.Tx) error {
		if err := tx.RestoreShard(f.id, rc); err != nil {
			return err
		}
		s, err := tx.Shard(f.id)
		if err != nil {
			return err
		}
		applied, maxHLC = s.Applied()
		next = state{maxHLC: maxHLC, site: f.st.site}
		return loadGeo(s, &next)
	})
	if err != nil {
		return fmt.Errorf("fsm %s: restore: %w", f.id, err)
	}
	f.mu.Lock()
	f.applied, f.st = applied, next
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	f.log.Info("restored shard from snapshot", "shard", f.id.String(), "applied", applied)
	if f.hooks.Restored != nil {
		f.hooks.Restored(applied)
	}
	return nil
}

type snapshot struct {
	id storage.ShardID
	tx *storage.Tx
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.tx.WriteShardSnapshot(s.id, sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) Release() { _ = s.tx.Rollback() }
