package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/causeway-db/causeway/internal/causal"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Tx is a storage transaction, read-only or read-write.
type Tx struct {
	btx *bolt.Tx
	db  *DB // nil in a transaction of no DB (tests of the encoding)
}

// Rollback ends a transaction started with DB.BeginRead.
func (tx *Tx) Rollback() error { return tx.btx.Rollback() }

// ShardID names one shard of one keyspace.
type ShardID struct {
	Keyspace string
	Shard    uint32
}

func (id ShardID) String() string { return fmt.Sprintf("%s/%d", id.Keyspace, id.Shard) }

func (id ShardID) bucket() []byte { return []byte(prefixShard + id.String()) }

// Record is one version of one key.
type Record struct {
	Key       []byte
	Version   causal.Version
	Value     []byte
	Tombstone bool
	// Stamp is the local HLC at which this site applied a version written
	// at another site (a replicated or repaired write), above everything
	// the shard applied before it; 0 for a version written here, whose
	// HLC is its stamp. A replica whose newest HLC (Applied) reached a
	// stamp has applied that version, and snapshot reads (LatestAtStamp)
	// cut by stamp.
	Stamp uint64
}

// StampOrHLC returns the record's stamp, or its version's HLC if it has
// none.
func (r Record) StampOrHLC() uint64 {
	if r.Stamp != 0 {
		return r.Stamp
	}
	return r.Version.HLC
}

// ShardTx gives access to one shard replica's state inside a transaction.
// In a read-only transaction a shard that was never written reads as empty.
type ShardTx struct {
	data, state, reqs *bolt.Bucket // nil when the shard does not exist (read-only)
	out               *bolt.Bucket // the outbound log; nil as above, or in a read-only transaction on a shard that never had one

	db       *DB // for the request-id index (requests.go); nil: none
	id       ShardID
	writable bool
}

// Shard opens id's buckets, creating them in a read-write transaction.
func (tx *Tx) Shard(id ShardID) (*ShardTx, error) {
	if !tx.btx.Writable() {
		return tx.db.shardOf(tx.btx, id), nil
	}
	b, err := tx.btx.CreateBucketIfNotExists(id.bucket())
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", id, err)
	}
	s := &ShardTx{db: tx.db, id: id, writable: true}
	for _, p := range []struct {
		name []byte
		dst  **bolt.Bucket
	}{{bucketData, &s.data}, {bucketState, &s.state}, {bucketRequests, &s.reqs}, {bucketOutbound, &s.out}} {
		if *p.dst, err = b.CreateBucketIfNotExists(p.name); err != nil {
			return nil, fmt.Errorf("shard %s: %w", id, err)
		}
	}
	return s, nil
}

// Latest returns the newest version of key (a value or a tombstone).
func (s *ShardTx) Latest(key []byte, keysOnly bool) (Record, bool, error) {
	if s.data == nil {
		return Record{}, false, nil
	}
	prefix := keyPrefix(key)
	k, v := s.data.Cursor().Seek(prefix)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return Record{}, false, nil
	}
	return s.record(k, v, keysOnly)
}

// LatestAt returns the newest version of key no newer than atHLC.
func (s *ShardTx) LatestAt(key []byte, atHLC uint64) (Record, bool, error) {
	if s.data == nil {
		return Record{}, false, nil
	}
	prefix := keyPrefix(key)
	seek := binary.BigEndian.AppendUint64(bytes.Clone(prefix), ^atHLC)
	k, v := s.data.Cursor().Seek(seek)
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return Record{}, false, nil
	}
	return s.record(k, v, false)
}

// record decodes the version stored under the data key k; a checksum
// failure marks the database damaged (DB.Damaged).
func (s *ShardTx) record(k, v []byte, keysOnly bool) (Record, bool, error) {
	r, ok, err := decodeRecord(k, v, keysOnly)
	if err != nil {
		return Record{}, false, s.db.noteDamage(err)
	}
	return r, ok, nil
}

func decodeRecord(k, v []byte, keysOnly bool) (Record, bool, error) {
	key, ver, err := decodeVersionKey(k)
	if err != nil {
		return Record{}, false, err
	}
	val, tomb, stamp, err := decodeValue(k, v, keysOnly)
	if err != nil {
		return Record{}, false, err
	}
	return Record{Key: key, Version: ver, Value: val, Tombstone: tomb, Stamp: stamp}, true, nil
}

// Put stores one version. Storing the same version twice overwrites it.
func (s *ShardTx) Put(r Record) error {
	stamp := r.Stamp
	if stamp == r.Version.HLC {
		stamp = 0
	}
	k := encodeVersionKey(r.Key, r.Version)
	return s.data.Put(k, encodeValue(k, r.Value, r.Tombstone, stamp))
}

// LatestAtStamp returns the version of key a snapshot at stamp sees: the
// newest (by last-writer-wins) of the versions whose stamp (or HLC, for a
// version written here) is at most stamp.
func (s *ShardTx) LatestAtStamp(key []byte, stamp uint64) (Record, bool, error) {
	if s.data == nil {
		return Record{}, false, nil
	}
	prefix := keyPrefix(key)
	c := s.data.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		_, ver, err := decodeVersionKey(k)
		if err != nil {
			return Record{}, false, err
		}
		st := valueStamp(v)
		if st == 0 {
			st = ver.HLC
		}
		if st <= stamp {
			return s.record(k, v, false)
		}
	}
	return Record{}, false, nil
}

// History returns up to limit versions of key, newest first.
func (s *ShardTx) History(key []byte, limit int) ([]Record, error) {
	return s.HistoryBytes(key, limit, 0)
}

// HistoryBytes is History that stops once the values returned add up to
// more than maxBytes (0: no bound): the last version returned is the one
// that crosses it. A caller that refuses such a reply then holds at most
// maxBytes and one value, not every retained version (a thousand versions
// of 1 MiB values are a gigabyte).
func (s *ShardTx) HistoryBytes(key []byte, limit, maxBytes int) ([]Record, error) {
	if s.data == nil {
		return nil, nil
	}
	prefix := keyPrefix(key)
	var out []Record
	size := 0
	c := s.data.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit && (maxBytes <= 0 || size <= maxBytes); k, v = c.Next() {
		r, _, err := s.record(k, v, false)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		size += len(r.Value)
	}
	return out, nil
}

// Scan returns up to limit live keys (newest version not a tombstone) with
// start <= key < end, in key order; an empty end means no bound. more
// reports whether live keys may remain after the last one returned.
func (s *ShardTx) Scan(start, end []byte, limit int, keysOnly bool) (recs []Record, more bool, err error) {
	return s.ScanBytes(start, end, limit, 0, keysOnly)
}

// MaxScanPageBytes bounds the size (ScanSize) of one page of a scan, of
// each shard's part of it and of the page the client gets: a page of
// large values took the node's memory (up to 10000 values of 1 MiB from
// each shard) and exceeded the largest message clients accept. 3 MiB
// leaves room for the reply's header in gRPC's default limit of 4 MiB.
const MaxScanPageBytes = 3 << 20

// ScanSize is the size of r in a page of a scan: its key, value and site,
// and an allowance for the fields of its message.
func ScanSize(r Record) int { return len(r.Key) + len(r.Value) + len(r.Version.Site) + 32 }

// ScanBytes is Scan that also stops before the records returned exceed
// maxBytes (ScanSize; 0: no bound); it returns at least one record.
func (s *ShardTx) ScanBytes(start, end []byte, limit, maxBytes int, keysOnly bool) (recs []Record, more bool, err error) {
	if s.data == nil || limit <= 0 {
		return nil, false, nil
	}
	size := 0
	c := s.data.Cursor()
	k, v := c.Seek(keyPrefix(start))
	for k != nil {
		r, _, err := s.record(k, v, keysOnly)
		if err != nil {
			return nil, false, err
		}
		if len(end) > 0 && bytes.Compare(r.Key, end) >= 0 {
			return recs, false, nil
		}
		if !r.Tombstone {
			size += ScanSize(r)
			if len(recs) == limit || (maxBytes > 0 && len(recs) > 0 && size > maxBytes) {
				return recs, true, nil
			}
			recs = append(recs, r)
		}
		k, v = c.Seek(keyBound(r.Key)) // skip older versions
	}
	return recs, false, nil
}

// Applied returns the last applied raft index and the shard's newest HLC.
func (s *ShardTx) Applied() (index, maxHLC uint64) {
	if s.state == nil {
		return 0, 0
	}
	return s.stateUint64(stateApply), s.stateUint64(stateMaxHLC)
}

// SetApplied records the last applied raft index and the newest HLC.
func (s *ShardTx) SetApplied(index, maxHLC uint64) error {
	if err := s.putStateUint64(stateApply, index); err != nil {
		return err
	}
	return s.putStateUint64(stateMaxHLC, maxHLC)
}

// Progress is how far a shard replica has applied the writes of one other
// site (an origin): the sequence number of the last one (an origin numbers
// its writes to each shard from 1, without gaps) and the highest HLC it
// covers (the last write's, or a closed timestamp the origin sent after
// it). Every write of the origin to the shard with an HLC up to HLC is
// applied.
type Progress struct {
	HLC, Seq uint64
}

// Origins returns the progress of every origin that replicated writes to
// the shard.
func (s *ShardTx) Origins() (map[string]Progress, error) {
	out := map[string]Progress{}
	if s.state == nil {
		return out, nil
	}
	return out, s.progressRecords(stateOrigin, "origin progress", out)
}

// SetOrigin records the progress of origin.
func (s *ShardTx) SetOrigin(origin string, p Progress) error {
	if origin == "" {
		return fmt.Errorf("%w: empty origin", ErrBadEncoding)
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 16), p.HLC)
	return s.putState(append(bytes.Clone(stateOrigin), origin...), binary.BigEndian.AppendUint64(v, p.Seq))
}

// Collect garbage-collects versions: a version is removed when a newer
// version of its key has hlc <= cutoff (it has been shadowed for the whole
// retention window), and a newest version that is a tombstone with hlc <=
// cutoff is removed too. Request ids recorded at hlc <= reqCutoff are
// forgotten. It visits at most maxKeys keys starting at start and returns
// the key to resume from (nil when the shard was covered) and the number of
// versions removed.
func (s *ShardTx) Collect(cutoff, reqCutoff uint64, start []byte, maxKeys int) (next []byte, removed int, err error) {
	return s.collect(cutoff, reqCutoff, start, maxKeys, false)
}

// HasGarbage reports whether a full Collect pass with these cutoffs would
// remove anything (a version or a request id). It only reads: a shard
// leader asks it before it proposes a pass, so an idle shard with nothing
// to collect writes nothing (docs/adr/020, step 19).
func (s *ShardTx) HasGarbage(cutoff, reqCutoff uint64) (bool, error) {
	if s.data == nil || s.reqs == nil {
		return false, nil // never written
	}
	_, found, err := s.collect(cutoff, reqCutoff, nil, -1, true)
	return found > 0, err
}

// collect is Collect; dry, it removes nothing and returns removed 1 at the
// first item Collect would remove (maxKeys < 0: no limit).
func (s *ShardTx) collect(cutoff, reqCutoff uint64, start []byte, maxKeys int, dry bool) (next []byte, removed int, err error) {
	if start == nil {
		// Request ids are swept once per full pass, at its beginning.
		found, err := s.collectRequests(reqCutoff, dry)
		if err != nil || (found && dry) {
			return nil, boolInt(found), err
		}
	}
	c := s.data.Cursor()
	k, v := c.Seek(keyPrefix(start))
	for visited := 0; k != nil; visited++ {
		key, ver, err := decodeVersionKey(k)
		if err != nil {
			return nil, 0, err
		}
		if visited == maxKeys {
			return key, removed, nil
		}
		// The newest version: drop it only if it is an old tombstone. Age
		// is by stamp (when this site applied the version), so that a
		// snapshot read at a stamp above the cutoff finds what it needs.
		dropAll := len(v) > 0 && v[0]&flagTomb != 0 && stampOf(ver, v) <= cutoff
		shadowed := stampOf(ver, v) <= cutoff
		if dropAll {
			if dry {
				return nil, 1, nil
			}
			if k, v, err = deleteAt(c, k); err != nil {
				return nil, 0, err
			}
			removed++
		} else {
			k, v = c.Next()
		}
		prefix := keyPrefix(key)
		for k != nil && bytes.HasPrefix(k, prefix) {
			_, older, err := decodeVersionKey(k)
			if err != nil {
				return nil, 0, err
			}
			if dropAll || shadowed {
				if dry {
					return nil, 1, nil
				}
				if k, v, err = deleteAt(c, k); err != nil {
					return nil, 0, err
				}
				removed++
				continue
			}
			shadowed = stampOf(older, v) <= cutoff
			k, v = c.Next()
		}
	}
	return nil, removed, nil
}

// stampOf returns the stamp of a stored version (its HLC if it has none).
func stampOf(ver causal.Version, v []byte) uint64 {
	if st := valueStamp(v); st != 0 {
		return st
	}
	return ver.HLC
}

// deleteAt deletes the cursor's current item and moves to the next one.
// (bbolt cursors skip an item when Next follows Delete.)
func deleteAt(c *bolt.Cursor, k []byte) ([]byte, []byte, error) {
	k = bytes.Clone(k)
	if err := c.Delete(); err != nil {
		return nil, nil, err
	}
	nk, nv := c.Seek(k)
	return nk, nv, nil
}

// DropShard deletes every bucket of shard id (its versions, state and
// request ids). Used when the replica moves off this node.
func (tx *Tx) DropShard(id ShardID) error {
	if tx.db != nil {
		tx.db.reqIdx.drop(id)
	}
	if err := tx.btx.DeleteBucket(id.bucket()); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	return nil
}

// ForEachShard calls fn for every shard replica stored in the database.
func (tx *Tx) ForEachShard(fn func(*ShardTx)) {
	_ = tx.btx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if len(name) > len(prefixShard) && string(name[:len(prefixShard)]) == prefixShard {
			fn(&ShardTx{data: b.Bucket(bucketData), state: b.Bucket(bucketState), reqs: b.Bucket(bucketRequests), out: b.Bucket(bucketOutbound), writable: tx.btx.Writable()})
		}
		return nil
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
