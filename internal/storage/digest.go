package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/cespare/xxhash/v2"
	bolt "go.etcd.io/bbolt"
)

// DigestSlots is the number of slots of a shard digest. Every key belongs
// to one slot (SlotOf), and each slot has a hash of its own, so two digests
// that differ narrow the difference down to the keys of the slots whose
// hashes differ (Digest.DiffSlots) without a second pass over the data.
const DigestSlots = 64

// Digest is a fingerprint of one shard replica's state, computed from one
// read transaction (see docs/storage.md, "Digests"). Two replicas that
// applied the same raft log up to the same index have equal digests; any
// difference in a stored byte makes them differ. Digests are comparable
// with ==.
type Digest struct {
	// Index is the raft index the replica had applied in the transaction
	// the digest was computed from.
	Index uint64
	// MaxHLC is the shard's newest HLC recorded with Index (ShardTx.Digest
	// only).
	MaxHLC uint64
	// Entries counts the versions hashed.
	Entries uint64
	// Slots[i] hashes, in key order, the versions hashed of the keys of
	// slot i.
	Slots [DigestSlots]uint64
	// Requests hashes the request-id table (ShardTx.Digest only).
	Requests uint64
	// Origins hashes the progress of every origin, the chain, the stable
	// progress and the local outbound sequence (ShardTx.Digest only).
	Origins uint64
	// Outbound hashes the outbound log (ShardTx.Digest only).
	Outbound uint64
}

// Sum folds the whole digest into one number, for logs and quick
// comparisons.
func (d Digest) Sum() uint64 {
	b := make([]byte, 0, 8*(DigestSlots+4))
	b = binary.BigEndian.AppendUint64(b, d.Index)
	b = binary.BigEndian.AppendUint64(b, d.MaxHLC)
	b = binary.BigEndian.AppendUint64(b, d.Entries)
	for _, s := range d.Slots {
		b = binary.BigEndian.AppendUint64(b, s)
	}
	b = binary.BigEndian.AppendUint64(b, d.Requests)
	b = binary.BigEndian.AppendUint64(b, d.Origins)
	b = binary.BigEndian.AppendUint64(b, d.Outbound)
	return xxhash.Sum64(b)
}

// String is a short form for logs: the sum and the entry count.
func (d Digest) String() string {
	return fmt.Sprintf("%016x/%d", d.Sum(), d.Entries)
}

// DiffSlots returns the slots whose hashes differ between d and o, in
// order.
func (d Digest) DiffSlots(o Digest) []int {
	var out []int
	for i := range d.Slots {
		if d.Slots[i] != o.Slots[i] {
			out = append(out, i)
		}
	}
	return out
}

// SlotOf returns the digest slot of a user key. The slot depends on the key
// alone (not on the shard count or the site), so every replica of a
// keyspace, in every site, puts a key in the same slot.
func SlotOf(key []byte) int {
	return slotOfPrefix(keyPrefix(key))
}

// slotOfPrefix returns the slot of an encoded key prefix (escape(key) ‖
// 0x00 0x01). The top bits of a 64-bit hash, so that the slot does not
// follow the low bits that placement uses to choose the shard.
func slotOfPrefix(prefix []byte) int {
	return int(xxhash.Sum64(prefix) >> (64 - bits.Len(DigestSlots-1)))
}

// keyTerm ends the escaped user key inside an encoded data key.
var keyTerm = []byte{escByte, escTerm}

// Digest fingerprints everything the replicas of a shard group must agree
// on at one applied index: every stored version (values and tombstones,
// as stored bytes), the request-id table, the shard's newest HLC and the
// progress of every origin.
// Garbage collection is a replicated command, so it removes the same
// versions on every replica. The data is hashed as stored, without
// decoding: a damaged entry changes the digest instead of failing it.
func (s *ShardTx) Digest() (Digest, error) {
	var d Digest
	if s.state != nil {
		d.Index, d.MaxHLC = s.Applied()
	}
	if s.data != nil {
		var h slotHashes
		c := s.data.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			prefix := k
			if i := bytes.Index(k, keyTerm); i >= 0 {
				prefix = k[:i+len(keyTerm)]
			}
			h.add(slotOfPrefix(prefix), k, storedValue(v))
			d.Entries++
		}
		d.Slots = h.sums()
	}
	if s.reqs != nil {
		d.Requests = hashRequests(s.reqs)
	}
	if s.state != nil {
		h := xxhash.New()
		c := s.state.Cursor()
		for _, prefix := range [][]byte{stateOrigin, stateStable, stateOutBytes, stateJoin} {
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				writeEntry(h, k, unsealedOrRaw(k, v))
			}
		}
		for _, k := range [][]byte{stateChain, stateLocalSeq} {
			if v := s.state.Get(k); v != nil {
				writeEntry(h, k, unsealedOrRaw(k, v))
			}
		}
		d.Origins = h.Sum64()
	}
	if s.out != nil {
		d.Outbound = hashBucket(s.out)
	}
	return d, nil
}

// DigestAt fingerprints what a reader sees at atHLC: for every key, its
// newest version at or below atHLC, unless that version is a tombstone
// (a deleted key and a key whose tombstone was collected look the same).
// Older versions, the request ids and the newest HLC are left out: they
// depend on when garbage collection ran and on which requests reached this
// replica, which differ between sites whose data agrees. Index is set;
// MaxHLC and Requests are zero.
func (s *ShardTx) DigestAt(atHLC uint64) (Digest, error) {
	return s.digestAt(atHLC, false)
}

// DigestNewest fingerprints every key's newest version, tombstones
// included: two sites compare it before anti-entropy, so that a delete one
// of them lacks is found too. (A tombstone that one site has collected
// and the other not yet differs as well; sending it again is harmless.)
func (s *ShardTx) DigestNewest() (Digest, error) {
	return s.digestAt(math.MaxUint64, true)
}

func (s *ShardTx) digestAt(atHLC uint64, tombstones bool) (Digest, error) {
	var d Digest
	if s.state != nil {
		d.Index, _ = s.Applied()
	}
	if s.data == nil {
		return d, nil
	}
	var h slotHashes
	var key []byte // encoded prefix of the key being visited
	seen := false  // whether key's version at atHLC was found
	c := s.data.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		i := bytes.Index(k, keyTerm)
		if i < 0 || len(k) < i+len(keyTerm)+8 {
			return Digest{}, fmt.Errorf("%w: data key %x", ErrBadEncoding, k)
		}
		if p := k[:i+len(keyTerm)]; !bytes.Equal(p, key) {
			key, seen = append(key[:0], p...), false
		}
		// Versions are newest first: the first one at or below atHLC is
		// the one a reader sees.
		if seen || ^binary.BigEndian.Uint64(k[i+len(keyTerm):]) > atHLC {
			continue
		}
		seen = true
		if len(v) > 0 && (tombstones || v[0]&flagTomb == 0) {
			h.add(slotOfPrefix(key), k, canonicalValue(v))
			d.Entries++
		}
	}
	d.Slots = h.sums()
	return d, nil
}

// slotHashes streams entries into one hash per slot.
type slotHashes struct {
	h [DigestSlots]*xxhash.Digest
}

func (s *slotHashes) add(slot int, k, v []byte) {
	h := s.h[slot]
	if h == nil {
		h = xxhash.New()
		s.h[slot] = h
	}
	writeEntry(h, k, v)
}

func (s *slotHashes) sums() [DigestSlots]uint64 {
	var out [DigestSlots]uint64
	for i, h := range s.h {
		if h != nil {
			out[i] = h.Sum64()
		}
	}
	return out
}

// writeEntry feeds one key and value, each length-prefixed so that the
// boundary between them is part of what is hashed.
func writeEntry(h *xxhash.Digest, k, v []byte) {
	var n [binary.MaxVarintLen64]byte
	_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
	_, _ = h.Write(k)
	_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
	_, _ = h.Write(v)
}

// hashBucket hashes every entry of b in key order.
func hashBucket(b *bolt.Bucket) uint64 {
	h := xxhash.New()
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		writeEntry(h, k, v)
	}
	return h.Sum64()
}

// hashRequests hashes the request records as format 1 stored them, in
// their order: client id ‖ 0x00 ‖ seq → hlc ‖ outcome. The digest is thus
// the same whatever the layout, and replicas of two versions compare alike
// during a rolling upgrade (docs/adr/022). A record that does not decode
// is hashed as stored, so it changes the digest instead of failing it.
func hashRequests(b *bolt.Bucket) uint64 {
	type entry struct{ k, v []byte }
	var es []entry
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		hlc, client, seq, err := decodeRequestKey(k)
		if err != nil {
			es = append(es, entry{bytes.Clone(k), bytes.Clone(v)})
			continue
		}
		// The outcome without its seal: what replicas hold alike
		// whichever build stored it.
		if body, err := unseal("request record", k, v); err == nil {
			v = body
		}
		ok := append(append(make([]byte, 0, len(client)+9), client...), 0)
		ov := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(v)), hlc)
		es = append(es, entry{binary.BigEndian.AppendUint64(ok, seq), append(ov, v...)})
	}
	slices.SortFunc(es, func(a, b entry) int { return bytes.Compare(a.k, b.k) })
	h := xxhash.New()
	for _, e := range es {
		writeEntry(h, e.k, e.v)
	}
	return h.Sum64()
}

// NewestInSlots calls fn with the newest version of every key (tombstones
// included) whose digest slot is in slots, in key order (anti-entropy
// sends them to a site whose digest differs in those slots).
func (s *ShardTx) NewestInSlots(slots map[int]bool, fn func(Record) error) error {
	if s.data == nil {
		return nil
	}
	c := s.data.Cursor()
	k, v := c.First()
	for k != nil {
		r, _, err := s.record(k, v, false)
		if err != nil {
			return err
		}
		if slots[SlotOf(r.Key)] {
			if err := fn(r); err != nil {
				return err
			}
		}
		k, v = c.Seek(keyBound(r.Key)) // skip older versions
	}
	return nil
}

// unsealedOrRaw returns a state record's value without its seal, or the
// stored bytes if the seal does not check: a damaged record changes the
// digest instead of failing it.
func unsealedOrRaw(k, v []byte) []byte {
	if body, err := unseal("state record", k, v); err == nil {
		return body
	}
	return v
}
