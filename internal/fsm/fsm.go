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
	// Err is a decided failure (ErrVersionMismatch, ErrKeyNotFound,
	// ErrKeyExists) or ErrUnknownCommand.
	Err error
}

// FSM is the state machine of one shard replica.
type FSM struct {
	id    storage.ShardID
	db    *storage.DB
	log   *slog.Logger
	fatal func(error)

	mu      sync.Mutex
	applied uint64        // REQUIRES: mu
	maxHLC  uint64        // REQUIRES: mu
	changed chan struct{} // closed and replaced on every apply; REQUIRES: mu
	stopped error         // REQUIRES: mu
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns the FSM of shard id, resuming from the state in db. fatal is
// called (once) when the replica must stop because it met a command it
// cannot apply.
func New(id storage.ShardID, db *storage.DB, logger *slog.Logger, fatal func(error)) (*FSM, error) {
	f := &FSM{id: id, db: db, log: logger, fatal: fatal, changed: make(chan struct{})}
	err := db.View(func(tx *storage.Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		f.applied, f.maxHLC = s.Applied()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fsm %s: load state: %w", id, err)
	}
	return f, nil
}

// Applied returns the last applied index, the shard's newest HLC and a
// channel that is closed when either changes.
func (f *FSM) Applied() (index, maxHLC uint64, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.maxHLC, f.changed
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: the whole batch is applied in one
// storage transaction.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	applied, maxHLC, stopped := f.applied, f.maxHLC, f.stopped
	f.mu.Unlock()
	if stopped != nil {
		for i := range out {
			out[i] = Result{Err: stopped}
		}
		return out
	}

	cmds := make([]*peerv1.Command, len(logs))
	var fatalErr error
	lastIndex := applied
	for i, l := range logs {
		if l.Index <= applied {
			continue // applied before a restart
		}
		if l.Type == raft.LogCommand {
			cmd, err := decode(l.Data)
			if err != nil {
				fatalErr = fmt.Errorf("%w: index %d: %v", ErrUnknownCommand, l.Index, err)
				for j := i; j < len(out); j++ {
					out[j] = Result{Err: fatalErr}
				}
				break
			}
			cmds[i] = cmd
		}
		lastIndex = l.Index
	}

	var newMax uint64
	err := f.db.Update(func(tx *storage.Tx) error {
		s, err := tx.Shard(f.id)
		if err != nil {
			return err
		}
		newMax = maxHLC
		for i, cmd := range cmds {
			if cmd == nil {
				continue
			}
			r, err := apply(s, cmd, &newMax)
			if err != nil {
				return err
			}
			out[i] = r
		}
		if lastIndex == applied {
			return nil
		}
		return s.SetApplied(lastIndex, newMax)
	})
	if err != nil {
		// Storage failed under us: the state is unknown, so this replica
		// must not go on applying.
		fatalErr = fmt.Errorf("fsm %s: apply: %w", f.id, err)
		for i := range out {
			out[i] = Result{Err: fatalErr}
		}
		lastIndex, newMax = applied, maxHLC
	}
	f.mu.Lock()
	f.applied, f.maxHLC = lastIndex, newMax
	if fatalErr != nil {
		f.stopped = fatalErr
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	if fatalErr != nil {
		f.log.Error("replica stopped", "shard", f.id.String(), "err", fatalErr)
		f.fatal(fatalErr)
	}
	return out
}

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

// Snapshot implements raft.FSM. It only opens a read transaction; Persist
// does the work.
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
	err := f.db.UpdateAlone(func(tx *storage.Tx) error {
		if err := tx.RestoreShard(f.id, rc); err != nil {
			return err
		}
		s, err := tx.Shard(f.id)
		if err != nil {
			return err
		}
		applied, maxHLC = s.Applied()
		return nil
	})
	if err != nil {
		return fmt.Errorf("fsm %s: restore: %w", f.id, err)
	}
	f.mu.Lock()
	f.applied, f.maxHLC = applied, maxHLC
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	f.log.Info("restored shard from snapshot", "shard", f.id.String(), "applied", applied)
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
