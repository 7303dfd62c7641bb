package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/causeway-db/causeway/internal/guards"
)

// Every record of a shard's state, requests and outbound buckets is
// stored sealed: its value followed by a CRC-32C (4 bytes, big endian) of
// its key and value. A stored version carries the same checksum inside
// its value (checkValue). bbolt checks its page headers, not what the
// pages hold: without the seal a changed byte of an applied index, an
// origin's progress or a request's outcome would be taken for what was
// written (docs/adr/021). The seals are checked where the records are
// read, and all of them when the file opens (verifyFile).

// seal returns v as it is stored under key k.
func seal(k, v []byte) []byte {
	out := make([]byte, len(v), len(v)+sumLen)
	copy(out, v)
	return binary.BigEndian.AppendUint32(out, valueSum(k, v))
}

// unseal verifies the record v stored under key k and returns its value;
// what names the record in the error.
func unseal(what string, k, v []byte) ([]byte, error) {
	if len(v) < sumLen {
		if guards.Off(guards.StateChecksum) {
			return v, nil
		}
		return nil, fmt.Errorf("%w: the %s under key %q has no checksum", ErrDamaged, what, k)
	}
	body := v[: len(v)-sumLen : len(v)-sumLen]
	if got, want := valueSum(k, body), binary.BigEndian.Uint32(v[len(body):]); got != want && !guards.Off(guards.StateChecksum) {
		return nil, fmt.Errorf("%w: the %s under key %q fails its checksum (%08x, stored %08x)", ErrDamaged, what, k, got, want)
	}
	return body, nil
}

// sealedBucket reports whether the records of a shard's sub-bucket named
// name are sealed, and what they are called in errors.
func sealedBucket(name []byte) (what string, ok bool) {
	switch {
	case bytes.Equal(name, bucketState):
		return "state record", true
	case bytes.Equal(name, bucketRequests):
		return "request record", true
	case bytes.Equal(name, bucketOutbound):
		return "outbound entry", true
	}
	return "", false
}

// getState returns the state record under k (nil if there is none); a
// record that fails its seal marks the database damaged (DB.Damaged).
func (s *ShardTx) getState(k []byte) ([]byte, error) {
	v := s.state.Get(k)
	if v == nil {
		return nil, nil
	}
	body, err := unseal("state record", k, v)
	if err != nil {
		return nil, s.db.noteDamage(err)
	}
	return body, nil
}

// putState stores the state record v under k, sealed.
func (s *ShardTx) putState(k, v []byte) error { return s.state.Put(k, seal(k, v)) }

// getStateUint64 returns the number stored under k (0 if none).
func (s *ShardTx) getStateUint64(k []byte) (uint64, error) {
	v, err := s.getState(k)
	switch {
	case err != nil:
		return 0, err
	case v == nil:
		return 0, nil
	case len(v) != 8:
		return 0, s.db.noteDamage(fmt.Errorf("%w: the state record under key %q is %d bytes, not 8", ErrDamaged, k, len(v)))
	}
	return binary.BigEndian.Uint64(v), nil
}

// stateUint64 is getStateUint64 for callers that cannot fail: a damaged
// record reads as 0, and the database is marked damaged, which stops the
// node (its next start rebuilds the file).
func (s *ShardTx) stateUint64(k []byte) uint64 {
	n, _ := s.getStateUint64(k)
	return n
}

func (s *ShardTx) putStateUint64(k []byte, n uint64) error {
	return s.putState(k, binary.BigEndian.AppendUint64(make([]byte, 0, 8), n))
}

// progressRecords adds the progress records under prefix (origin or
// stable) to out, by site.
func (s *ShardTx) progressRecords(prefix []byte, what string, out map[string]Progress) error {
	c := s.state.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		body, err := unseal("state record", k, v)
		if err != nil {
			return s.db.noteDamage(err)
		}
		if len(body) != 16 {
			return s.db.noteDamage(fmt.Errorf("%w: %s %q is %d bytes", ErrDamaged, what, k, len(body)))
		}
		out[string(k[len(prefix):])] = Progress{HLC: binary.BigEndian.Uint64(body), Seq: binary.BigEndian.Uint64(body[8:])}
	}
	return nil
}
