package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/causeway-db/causeway/internal/wal"
)

// ErrMissingLog is returned by OpenRaftLogs when raft.db records that the
// raft logs live in the write-ahead log but the log directory is gone.
var ErrMissingLog = errors.New("storage: the raft write-ahead log is missing")

// GroupStore is one raft group's log and stable store.
type GroupStore interface {
	raft.LogStore
	raft.StableStore
}

// RaftLogs holds the raft state of every group of a node: the logs in the
// write-ahead log (internal/wal), where appends of all groups share one
// fdatasync, and the stable stores (current term, vote: rare writes) in
// the DB (raft.db). See docs/adr/008.
type RaftLogs struct {
	db  *DB
	wal *wal.WAL
}

// RaftLogsMoved reports whether db (raft.db) records that the raft logs
// live in the write-ahead log: that log was used, and must be there
// (wal.Config.Existing).
func RaftLogsMoved(db *DB) (moved bool, err error) {
	err = db.View(func(tx *Tx) error {
		moved = bytes.Equal(tx.btx.Bucket(bucketMeta).Get(metaRaftLogs), []byte("wal"))
		return nil
	})
	return moved, err
}

// OpenRaftLogs combines the stable stores in db with the logs in w. Logs
// that an earlier version kept in db are moved into w first: a group's
// entries are copied (replacing whatever a move interrupted by a crash
// left in w), then deleted from db. It refuses a db whose logs were moved
// when w is a new, empty log.
func OpenRaftLogs(db *DB, w *wal.WAL, logger *slog.Logger) (*RaftLogs, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var moved bool
	var groups []string
	err := db.View(func(tx *Tx) error {
		moved = bytes.Equal(tx.btx.Bucket(bucketMeta).Get(metaRaftLogs), []byte("wal"))
		return tx.btx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !bytes.HasPrefix(name, []byte(prefixRaft)) {
				return nil
			}
			if lb := b.Bucket(bucketLog); lb != nil {
				if k, _ := lb.Cursor().First(); k != nil {
					groups = append(groups, strings.TrimPrefix(string(name), prefixRaft))
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if moved && w.Fresh() {
		return nil, fmt.Errorf("%w: %s says the raft logs are in the write-ahead log, which is missing; refusing to start without them",
			ErrMissingLog, db.Path())
	}
	r := &RaftLogs{db: db, wal: w}
	for _, g := range groups {
		if err := r.migrate(g, logger); err != nil {
			return nil, fmt.Errorf("storage: moving the raft log of %s: %w", g, err)
		}
	}
	if !moved {
		if err := db.Update(func(tx *Tx) error {
			return tx.btx.Bucket(bucketMeta).Put(metaRaftLogs, []byte("wal"))
		}); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// migrateChunk bounds the entries copied per WAL write.
const (
	migrateEntries = 512
	migrateBytes   = 8 << 20
)

func (r *RaftLogs) migrate(group string, logger *slog.Logger) error {
	dst := r.wal.Log(group)
	if err := dst.DeleteRange(0, math.MaxUint64); err != nil {
		return err
	}
	bucket := []byte(prefixRaft + group)
	var next []byte // resume key
	total := 0
	for {
		var chunk []*raft.Log
		size := 0
		err := r.db.View(func(tx *Tx) error {
			c := tx.btx.Bucket(bucket).Bucket(bucketLog).Cursor()
			k, v := c.First()
			if next != nil {
				k, v = c.Seek(next)
			}
			for ; k != nil && len(chunk) < migrateEntries && size < migrateBytes; k, v = c.Next() {
				if len(k) != 8 {
					return fmt.Errorf("%w: raft log key %x", ErrBadEncoding, k)
				}
				var l raft.Log
				if err := decodeLog(v, binary.BigEndian.Uint64(k), &l); err != nil {
					return err
				}
				chunk = append(chunk, &l)
				size += len(v)
			}
			next = nil
			if k != nil {
				next = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(chunk) > 0 {
			if err := dst.StoreLogs(chunk); err != nil {
				return err
			}
			total += len(chunk)
		}
		if next == nil {
			break
		}
	}
	// The copy is durable: the old log can go.
	if err := r.db.Update(func(tx *Tx) error {
		return tx.btx.Bucket(bucket).DeleteBucket(bucketLog)
	}); err != nil {
		return err
	}
	first, _ := dst.FirstIndex()
	last, _ := dst.LastIndex()
	logger.Info("moved raft log from raft.db to the write-ahead log", "group", group, "entries", total, "first", first, "last", last)
	return nil
}

// RaftStore returns the log and stable store of the named raft group.
func (r *RaftLogs) RaftStore(group string) GroupStore {
	return groupStore{Log: r.wal.Log(group), stable: r.db.RaftStore(group)}
}

// Drop deletes a group's log and stable store. Used when the replica
// moves off this node.
func (r *RaftLogs) Drop(group string) error {
	return errors.Join(r.wal.Drop(group), r.db.RaftStore(group).Drop())
}

type groupStore struct {
	*wal.Log
	stable *RaftStore
}

func (s groupStore) Set(key, val []byte) error              { return s.stable.Set(key, val) }
func (s groupStore) Get(key []byte) ([]byte, error)         { return s.stable.Get(key) }
func (s groupStore) SetUint64(key []byte, val uint64) error { return s.stable.SetUint64(key, val) }
func (s groupStore) GetUint64(key []byte) (uint64, error)   { return s.stable.GetUint64(key) }
