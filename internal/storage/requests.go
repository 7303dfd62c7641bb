package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/causeway-db/causeway/internal/guards"
)

// Request ids (docs/adr/022-request-ids-in-commit-order.md).
//
// A shard remembers the outcome of every write that carried a request id
// (client id, sequence number) for Config.RequestRetention, so that a retry
// is answered with the first outcome instead of being applied twice. The
// records are keyed in commit order:
//
//	hlc (8 bytes BE) ‖ client id ‖ 0x00 ‖ seq (8 bytes BE) → outcome
//
// where hlc is the version the write got at apply (it grows with the
// shard's log). New records therefore all land in the bucket's last leaf:
// a commit dirties one leaf of request ids per shard, whatever the number
// of clients, and garbage collection deletes a prefix. Lookups by (client,
// seq) go through an in-memory index per shard replica, built from the
// bucket by the first read-write transaction that needs it (after Open,
// after a snapshot install or a dropped replica) and kept in step by every
// write to the bucket.
//
// The index is exact for the bucket as every apply sees it, so that every
// replica decides alike whether a write is a retry:
//   - an entry whose record is not in the transaction's view (added by a
//     transaction that then failed) is ignored: lookups check the record;
//   - an entry is removed only by the apply that deletes its record
//     (garbage collection, a newer outcome for the same id);
//   - a read-write transaction that fails drops every index (they are
//     rebuilt from what was committed), and so does replacing or dropping
//     a shard's buckets;
//   - read-only transactions never build an index: one that began before
//     the newest commit could miss its records. Without an index they scan.

// requestKey encodes a request record's key.
func requestKey(hlc uint64, clientID string, seq uint64) []byte {
	b := make([]byte, 0, 8+len(clientID)+9)
	b = binary.BigEndian.AppendUint64(b, hlc)
	b = append(b, clientID...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

// decodeRequestKey splits a request record's key; client aliases k.
func decodeRequestKey(k []byte) (hlc uint64, client []byte, seq uint64, err error) {
	if len(k) < 8+1+8 || k[len(k)-9] != 0 {
		return 0, nil, 0, fmt.Errorf("%w: request key of %d bytes", ErrBadEncoding, len(k))
	}
	return binary.BigEndian.Uint64(k), k[8 : len(k)-9], binary.BigEndian.Uint64(k[len(k)-8:]), nil
}

// reqIndex maps the request ids of one shard replica to the hlc of their
// records: client id → seq → hlc (about 40 bytes of memory per id).
type reqIndex struct {
	mu  sync.Mutex
	ids map[string]map[uint64]uint64
	n   int
}

func newReqIndex() *reqIndex { return &reqIndex{ids: map[string]map[uint64]uint64{}} }

func (x *reqIndex) get(client string, seq uint64) (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	h, ok := x.ids[client][seq]
	return h, ok
}

// put records id at hlc and returns the hlc it had, if any.
func (x *reqIndex) put(client []byte, seq, hlc uint64) (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	seqs := x.ids[string(client)]
	if seqs == nil {
		seqs = map[uint64]uint64{}
		x.ids[string(client)] = seqs
	}
	prev, had := seqs[seq]
	seqs[seq] = hlc
	if !had {
		x.n++
	}
	return prev, had
}

// remove forgets id if it is at hlc.
func (x *reqIndex) remove(client []byte, seq, hlc uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	seqs := x.ids[string(client)]
	if h, ok := seqs[seq]; ok && h == hlc {
		delete(seqs, seq)
		x.n--
		if len(seqs) == 0 {
			delete(x.ids, string(client))
		}
	}
}

func (x *reqIndex) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.n
}

// reqIndexes holds the request-id index of every shard replica.
type reqIndexes struct {
	mu sync.Mutex
	m  map[ShardID]*reqIndex
}

// lookup returns shard id's index, or nil if it has none.
func (r *reqIndexes) lookup(id ShardID) *reqIndex {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

// build returns shard id's index, building it from reqs (a bucket seen by
// a read-write transaction) if it has none.
func (r *reqIndexes) build(id ShardID, reqs *bolt.Bucket) (*reqIndex, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x := r.m[id]; x != nil {
		return x, nil
	}
	x := newReqIndex()
	c := reqs.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		hlc, client, seq, err := decodeRequestKey(k)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", id, err)
		}
		x.put(client, seq, hlc)
	}
	if r.m == nil {
		r.m = map[ShardID]*reqIndex{}
	}
	r.m[id] = x
	return x, nil
}

// drop forgets shard id's index: its bucket is replaced or deleted.
func (r *reqIndexes) drop(id ShardID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// dropAll forgets every index: a read-write transaction failed, so they
// may hold changes that were rolled back.
func (r *reqIndexes) dropAll() {
	if guards.Off(guards.RequestIndexRollback) {
		// Off: an index keeps what a failed transaction did to it (a
		// record it removed is still stored, but lookups miss it).
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.m)
}

// size returns the number of request ids indexed in memory.
func (r *reqIndexes) size() int {
	r.mu.Lock()
	xs := make([]*reqIndex, 0, len(r.m))
	for _, x := range r.m {
		xs = append(xs, x)
	}
	r.mu.Unlock()
	n := 0
	for _, x := range xs {
		n += x.len()
	}
	return n
}

// index returns the shard's request-id index for a lookup or a write: in a
// read-write transaction it is built if missing; in a read-only one it may
// be nil.
func (s *ShardTx) index() (*reqIndex, error) {
	if s.db == nil {
		return nil, nil
	}
	if !s.writable {
		return s.db.reqIdx.lookup(s.id), nil
	}
	return s.db.reqIdx.build(s.id, s.reqs)
}

// Request returns the outcome recorded for a request id. A record that
// fails its seal is an error (and marks the database damaged): taking it
// for no record would apply the request twice.
func (s *ShardTx) Request(clientID string, seq uint64) ([]byte, bool, error) {
	if s.reqs == nil {
		return nil, false, nil
	}
	x, err := s.index()
	if err != nil || x == nil {
		// No index (a read-only transaction): scan for the id.
		c := s.reqs.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if _, client, sq, err := decodeRequestKey(k); err == nil && sq == seq && string(client) == clientID {
				return s.requestOutcome(k, v)
			}
		}
		return nil, false, nil
	}
	hlc, ok := x.get(clientID, seq)
	if !ok {
		return nil, false, nil
	}
	k := requestKey(hlc, clientID, seq)
	v := s.reqs.Get(k)
	if v == nil {
		return nil, false, nil
	}
	return s.requestOutcome(k, v)
}

func (s *ShardTx) requestOutcome(k, v []byte) ([]byte, bool, error) {
	out, err := unseal("request record", k, v)
	if err != nil {
		return nil, false, s.db.noteDamage(err)
	}
	return bytes.Clone(out), true, nil
}

// PutRequest records the outcome of a request id applied at hlc. A record
// of the same id at another hlc is replaced.
func (s *ShardTx) PutRequest(clientID string, seq, hlc uint64, outcome []byte) error {
	x, err := s.index()
	if err != nil {
		return err
	}
	k := requestKey(hlc, clientID, seq)
	if err := s.reqs.Put(k, seal(k, outcome)); err != nil {
		return err
	}
	if x == nil {
		return nil
	}
	if prev, had := x.put([]byte(clientID), seq, hlc); had && prev != hlc {
		return s.reqs.Delete(requestKey(prev, clientID, seq))
	}
	return nil
}

// collectRequests deletes the request records with hlc <= cutoff (a prefix
// of the bucket); dry, it only reports whether there is one.
func (s *ShardTx) collectRequests(cutoff uint64, dry bool) (bool, error) {
	c := s.reqs.Cursor()
	k, _ := c.First()
	if len(k) < 8 || binary.BigEndian.Uint64(k) > cutoff {
		return false, nil
	}
	if dry {
		return true, nil
	}
	x, err := s.index()
	if err != nil {
		return false, err
	}
	for len(k) >= 8 && binary.BigEndian.Uint64(k) <= cutoff {
		hlc, client, seq, err := decodeRequestKey(k)
		if err != nil {
			return false, err
		}
		if x != nil {
			x.remove(client, seq, hlc)
		}
		if k, _, err = deleteAt(c, k); err != nil {
			return false, err
		}
	}
	return true, nil
}

// migrateRequestsV1 rewrites the request records of every shard from
// format 1 (client id ‖ 0x00 ‖ seq → hlc ‖ outcome) to the commit-order
// keys of format 2.
func migrateRequestsV1(btx *bolt.Tx) error {
	return btx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if !bytes.HasPrefix(name, []byte(prefixShard)) {
			return nil
		}
		old := b.Bucket(bucketRequests)
		if old == nil {
			return nil
		}
		type rec struct{ k, v []byte }
		var recs []rec
		err := old.ForEach(func(k, v []byte) error {
			if len(v) < 8 {
				return fmt.Errorf("%w: %s: request record %q has a %d-byte value", ErrBadEncoding, name, k, len(v))
			}
			nk := append(bytes.Clone(v[:8]), k...)
			recs = append(recs, rec{nk, bytes.Clone(v[8:])})
			return nil
		})
		if err != nil {
			return err
		}
		if err := b.DeleteBucket(bucketRequests); err != nil {
			return err
		}
		nb, err := b.CreateBucket(bucketRequests)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := nb.Put(r.k, seal(r.k, r.v)); err != nil {
				return err
			}
		}
		return nil
	})
}
