package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrNotFound is returned by RaftStore.Get for a missing key; hashicorp/raft
// expects exactly this message for an empty stable store.
var ErrNotFound = errors.New("not found")

// RaftStore is the raft log and stable store of one raft group, kept in the
// node's database. It implements raft.LogStore and raft.StableStore; its
// writes join the group commit with every other group's.
type RaftStore struct {
	db     *DB
	bucket []byte
}

var (
	_ raft.LogStore    = (*RaftStore)(nil)
	_ raft.StableStore = (*RaftStore)(nil)
)

// RaftStore returns the store of the named raft group.
func (db *DB) RaftStore(group string) *RaftStore {
	return &RaftStore{db: db, bucket: []byte(prefixRaft + group)}
}

func (s *RaftStore) view(sub []byte, fn func(b *bolt.Bucket) error) error {
	return s.db.bolt.View(func(tx *bolt.Tx) error {
		root := tx.Bucket(s.bucket)
		if root == nil || root.Bucket(sub) == nil {
			return fn(nil)
		}
		return fn(root.Bucket(sub))
	})
}

func (s *RaftStore) update(sub []byte, fn func(b *bolt.Bucket) error) error {
	return s.db.Update(func(tx *Tx) error {
		root, err := tx.btx.CreateBucketIfNotExists(s.bucket)
		if err != nil {
			return err
		}
		b, err := root.CreateBucketIfNotExists(sub)
		if err != nil {
			return err
		}
		return fn(b)
	})
}

// FirstIndex implements raft.LogStore.
func (s *RaftStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.view(bucketLog, func(b *bolt.Bucket) error {
		if b != nil {
			if k, _ := b.Cursor().First(); k != nil {
				idx = binary.BigEndian.Uint64(k)
			}
		}
		return nil
	})
	return idx, err
}

// LastIndex implements raft.LogStore.
func (s *RaftStore) LastIndex() (uint64, error) {
	var idx uint64
	err := s.view(bucketLog, func(b *bolt.Bucket) error {
		if b != nil {
			if k, _ := b.Cursor().Last(); k != nil {
				idx = binary.BigEndian.Uint64(k)
			}
		}
		return nil
	})
	return idx, err
}

// GetLog implements raft.LogStore.
func (s *RaftStore) GetLog(index uint64, out *raft.Log) error {
	return s.view(bucketLog, func(b *bolt.Bucket) error {
		if b == nil {
			return raft.ErrLogNotFound
		}
		v := b.Get(binary.BigEndian.AppendUint64(nil, index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(v, index, out)
	})
}

// StoreLog implements raft.LogStore.
func (s *RaftStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (s *RaftStore) StoreLogs(logs []*raft.Log) error {
	enc := make([][]byte, len(logs))
	for i, l := range logs {
		enc[i] = encodeLog(l)
	}
	return s.update(bucketLog, func(b *bolt.Bucket) error {
		for i, l := range logs {
			if err := b.Put(binary.BigEndian.AppendUint64(nil, l.Index), enc[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange implements raft.LogStore.
func (s *RaftStore) DeleteRange(min, max uint64) error {
	return s.update(bucketLog, func(b *bolt.Bucket) error {
		c := b.Cursor()
		for k, _ := c.Seek(binary.BigEndian.AppendUint64(nil, min)); k != nil; {
			if binary.BigEndian.Uint64(k) > max {
				break
			}
			var err error
			if k, _, err = deleteAt(c, k); err != nil {
				return err
			}
		}
		return nil
	})
}

// Drop deletes the group's whole log and stable store. Used when the
// replica moves off this node.
func (s *RaftStore) Drop() error {
	return s.db.Update(func(tx *Tx) error {
		if err := tx.btx.DeleteBucket(s.bucket); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		return nil
	})
}

// Set implements raft.StableStore. Values are stored sealed (sealed.go):
// a changed byte of a term or a vote would let the node vote twice in a
// term.
func (s *RaftStore) Set(key, val []byte) error {
	return s.update(bucketStable, func(b *bolt.Bucket) error { return b.Put(key, seal(key, val)) })
}

// Get implements raft.StableStore. A value that fails its seal is an
// error wrapping ErrDamaged.
func (s *RaftStore) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.view(bucketStable, func(b *bolt.Bucket) error {
		var v []byte
		if b != nil {
			v = b.Get(key)
		}
		if v == nil {
			return ErrNotFound
		}
		body, err := unseal("raft stable value", key, v)
		if err != nil {
			return fmt.Errorf("%s: %w", s.db.cfg.Path, err)
		}
		out = bytes.Clone(body)
		return nil
	})
	return out, err
}

// sealStableValues seals every raft stable value and the site incarnation
// of a raft database of format 1 or 2 (stored unsealed).
func sealStableValues(tx *bolt.Tx) error {
	err := tx.ForEach(func(name []byte, root *bolt.Bucket) error {
		if !bytes.HasPrefix(name, []byte(prefixRaft)) {
			return nil
		}
		b := root.Bucket(bucketStable)
		if b == nil {
			return nil
		}
		type kv struct{ k, v []byte }
		var all []kv
		if err := b.ForEach(func(k, v []byte) error {
			if v != nil {
				all = append(all, kv{bytes.Clone(k), seal(k, v)})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, e := range all {
			if err := b.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	m := tx.Bucket(bucketMeta)
	if v := m.Get(metaIncarnation); v != nil {
		return m.Put(metaIncarnation, seal(metaIncarnation, bytes.Clone(v)))
	}
	return nil
}

// sealedAlready reports whether raft's stable values and the site
// incarnation in tx, at least one of them, are all sealed as format 3
// seals them. A file of format 1 or 2 holds them unsealed: that the last
// four bytes of an unsealed value are the CRC-32C of its key and the bytes
// before them is a chance of one in 2^32, for every value at once none.
func sealedAlready(tx *bolt.Tx) bool {
	n, sealed := 0, 0
	check := func(k, v []byte) {
		n++
		if len(v) >= sumLen && valueSum(k, v[:len(v)-sumLen]) == binary.BigEndian.Uint32(v[len(v)-sumLen:]) {
			sealed++
		}
	}
	_ = tx.ForEach(func(name []byte, root *bolt.Bucket) error {
		if !bytes.HasPrefix(name, []byte(prefixRaft)) {
			return nil
		}
		if b := root.Bucket(bucketStable); b != nil {
			_ = b.ForEach(func(k, v []byte) error {
				if v != nil {
					check(k, v)
				}
				return nil
			})
		}
		return nil
	})
	if v := tx.Bucket(bucketMeta).Get(metaIncarnation); v != nil {
		check(metaIncarnation, v)
	}
	return n > 0 && sealed == n
}

// SetUint64 implements raft.StableStore.
func (s *RaftStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (s *RaftStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: stable value %q has %d bytes", ErrBadEncoding, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Log entry: term | type | appendedAt unix nanos (varint) | len data | data | len ext | ext.
func encodeLog(l *raft.Log) []byte {
	b := make([]byte, 0, 24+len(l.Data)+len(l.Extensions))
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	return append(b, l.Extensions...)
}

func decodeLog(v []byte, index uint64, out *raft.Log) error {
	r := reader{b: v}
	term := r.uvarint()
	if r.err != nil || len(r.b) == 0 {
		return fmt.Errorf("%w: raft log %d", ErrBadEncoding, index)
	}
	typ := raft.LogType(r.b[0])
	r.b = r.b[1:]
	at, n := binary.Varint(r.b)
	if n <= 0 {
		return fmt.Errorf("%w: raft log %d", ErrBadEncoding, index)
	}
	r.b = r.b[n:]
	data := r.chunk()
	ext := r.chunk()
	if r.err != nil || len(r.b) != 0 {
		return fmt.Errorf("%w: raft log %d", ErrBadEncoding, index)
	}
	*out = raft.Log{Index: index, Term: term, Type: typ, Data: data, Extensions: ext}
	if at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = ErrBadEncoding
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) chunk() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = ErrBadEncoding
		return nil
	}
	if n == 0 {
		r.b = r.b[n:]
		return nil
	}
	v := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return v
}
