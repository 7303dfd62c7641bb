package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/guards"
)

// Top-level buckets.
var (
	// bucketMeta holds the node identity: format, site, node id.
	bucketMeta = []byte("meta")
	// Raft groups: "raft/" + group name, with sub-buckets log and stable.
	prefixRaft = "raft/"
	// Shard replicas: "shard/" + keyspace + "/" + shard number, with
	// sub-buckets data, state and requests.
	prefixShard = "shard/"
)

// Sub-buckets.
var (
	bucketLog      = []byte("log")
	bucketStable   = []byte("stable")
	bucketData     = []byte("data")
	bucketState    = []byte("state")
	bucketRequests = []byte("requests")
	// bucketOutbound is the shard's outbound log (docs/adr/018): origin ‖
	// 0x00 ‖ seq (8 bytes big endian) → an encoded remote write.
	bucketOutbound = []byte("outbound")
)

// Keys in bucketMeta and bucketState.
var (
	metaFormat = []byte("format")
	metaSite   = []byte("site")
	metaNodeID = []byte("node_id")
	// metaRaftLogs (raft.db) is "wal" once the raft logs live in the
	// write-ahead log rather than in the log sub-buckets.
	metaRaftLogs = []byte("raft_logs")
	// metaIncarnation (raft.db) is the site's incarnation, 8 bytes big
	// endian (docs/adr/029).
	metaIncarnation = []byte("site_incarnation")
	stateApply      = []byte("applied_index")
	stateMaxHLC     = []byte("max_hlc")
	// stateOrigin + site: the progress of that origin's replicated
	// writes (Progress: hlc, seq; 8 bytes big endian each).
	stateOrigin = []byte("origin/")
	// stateStable + site: every site of the chain applied that origin's
	// writes up to this progress (hlc, seq).
	stateStable = []byte("stable/")
	// stateChain: the encoded chain of sites and outbound log cap.
	stateChain = []byte("chain")
	// stateLocalSeq: the sequence number of this site's last write to the
	// shard that entered the outbound log.
	stateLocalSeq = []byte("local_seq")
	// stateOutBytes: the outbound log's size in bytes (keys and values).
	stateOutBytes = []byte("outbound_bytes")
	// stateJoin + site: that site completed its join repair of the shard
	// for this site's join of the keyspace at this configuration version
	// (8 bytes big endian; docs/adr/019).
	stateJoin = []byte("join/")
)

// formatVersion is the on-disk format this build writes and reads (the
// raft database): format 3 seals raft's stable values (current term, vote)
// and the site incarnation like the state database's records (sealed.go).
// Formats 1 (request records keyed by client id) and 2 (stable values
// without seals) are migrated at Open.
const formatVersion = 3

// derivedFormatVersion is the format of a Derived database (the state
// database): format 2 with a checksum on every stored version (format 3)
// and on every state, request and outbound record (format 4, sealed.go).
// A Derived database of an earlier format is rebuilt (ErrStale).
const derivedFormatVersion = 4

// MVCC data keys, one per version:
//
//	escape(key) ‖ 0x00 0x01 ‖ ^hlc (8 bytes, big endian) ‖ invert(site) ‖ 0xFF
//
// escape replaces each 0x00 of the user key by 0x00 0xFF, so the encoded key
// ends at the first 0x00 0x01, encoded keys sort exactly like user keys, and
// one key's versions are contiguous. Within a key, ^hlc sorts the newest
// version first; invert(site) (every byte complemented, then 0xFF) sorts the
// larger site first at equal hlc, so the first entry of a key is always its
// winning version. Site names never contain 0x00 (see ValidSiteName), so an
// inverted site byte is never 0xFF.
//
// Data values: 1 flag byte (bit 0: tombstone; bit 1: a stamp follows;
// bit 2: a checksum ends the value), then, with bit 1, the version's stamp
// (8 bytes, big endian), then the value, then, with bit 2, a CRC-32C (4
// bytes, big endian) of the encoded data key followed by every byte of the
// value before it. The stamp is the local HLC at which this replica's site
// applied a version written at another site (see Record.Stamp); a version
// written here has none (its HLC is its stamp). Every stored version
// carries the checksum (the state database's format 3; a state database
// of an earlier format is rebuilt at Open, ErrStale). bbolt checks its
// page headers but not what the pages hold: the checksum turns a changed
// byte of a key or value into ErrDamaged instead of a wrong answer (ADR
// 021).

const (
	escByte   = 0x00
	escEscape = 0xFF
	escTerm   = 0x01
	flagTomb  = 0x01
	flagStamp = 0x02
	flagSum   = 0x04
	sumLen    = 4
)

// ErrBadEncoding is returned when stored bytes do not decode; it means the
// database is corrupt.
var ErrBadEncoding = errors.New("storage: bad encoding")

func appendEscaped(b, key []byte) []byte {
	for _, c := range key {
		if c == escByte {
			b = append(b, escByte, escEscape)
		} else {
			b = append(b, c)
		}
	}
	return b
}

// keyPrefix returns the prefix shared by every version of key.
func keyPrefix(key []byte) []byte {
	b := make([]byte, 0, len(key)+2+8+8)
	b = appendEscaped(b, key)
	return append(b, escByte, escTerm)
}

// keyBound returns the smallest encoded key that sorts after every version
// of key (and before the next user key).
func keyBound(key []byte) []byte {
	b := appendEscaped(make([]byte, 0, len(key)+2), key)
	return append(b, escByte, escTerm+1)
}

// encodeVersionKey encodes one version of key.
func encodeVersionKey(key []byte, v causal.Version) []byte {
	b := keyPrefix(key)
	b = binary.BigEndian.AppendUint64(b, ^v.HLC)
	for i := 0; i < len(v.Site); i++ {
		b = append(b, ^v.Site[i])
	}
	return append(b, 0xFF)
}

// decodeVersionKey splits an encoded data key into the user key and version.
func decodeVersionKey(enc []byte) ([]byte, causal.Version, error) {
	key := make([]byte, 0, len(enc))
	i := 0
	for {
		if i >= len(enc) {
			return nil, causal.Version{}, fmt.Errorf("%w: unterminated key", ErrBadEncoding)
		}
		c := enc[i]
		if c != escByte {
			key = append(key, c)
			i++
			continue
		}
		if i+1 >= len(enc) {
			return nil, causal.Version{}, fmt.Errorf("%w: dangling escape", ErrBadEncoding)
		}
		switch enc[i+1] {
		case escEscape:
			key = append(key, escByte)
			i += 2
			continue
		case escTerm:
			i += 2
		default:
			return nil, causal.Version{}, fmt.Errorf("%w: bad escape 0x%02x", ErrBadEncoding, enc[i+1])
		}
		break
	}
	rest := enc[i:]
	if len(rest) < 9 || rest[len(rest)-1] != 0xFF {
		return nil, causal.Version{}, fmt.Errorf("%w: bad version suffix", ErrBadEncoding)
	}
	hlc := ^binary.BigEndian.Uint64(rest[:8])
	site := make([]byte, len(rest)-9)
	for j := range site {
		site[j] = ^rest[8+j]
	}
	return key, causal.Version{HLC: hlc, Site: string(site)}, nil
}

// valueSum is the checksum of a stored version: encKey, its data key, then
// body, the encoded value up to the checksum.
func valueSum(encKey, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(encKey, castagnoli), castagnoli, body)
}

// encodeValue encodes a version stored under the data key encKey.
func encodeValue(encKey, value []byte, tombstone bool, stamp uint64) []byte {
	n := 1 + sumLen
	if stamp != 0 {
		n += 8
	}
	if !tombstone {
		n += len(value)
	}
	b := make([]byte, 1, n)
	b[0] = flagSum
	if tombstone {
		b[0] |= flagTomb
	}
	if stamp != 0 {
		b[0] |= flagStamp
		b = binary.BigEndian.AppendUint64(b, stamp)
	}
	if !tombstone {
		b = append(b, value...)
	}
	return binary.BigEndian.AppendUint32(b, valueSum(encKey, b))
}

// checkValue verifies the checksum of the value v stored under the data
// key k, if it has one, and returns v without it.
func checkValue(k, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0]&flagSum == 0 || len(v) < 1+sumLen {
		if guards.Off(guards.StateChecksum) {
			return v, nil
		}
		return nil, fmt.Errorf("%w: the version stored under data key %x has no checksum", ErrDamaged, k)
	}
	body := v[:len(v)-sumLen]
	if got, want := valueSum(k, body), binary.BigEndian.Uint32(v[len(body):]); got != want && !guards.Off(guards.StateChecksum) {
		return nil, fmt.Errorf("%w: the version stored under data key %x fails its checksum (%08x, stored %08x)", ErrDamaged, k, got, want)
	}
	return body[:len(body):len(body)], nil
}

// sealValue returns the value v of a snapshot (stored without its
// checksum, storedValue) as it is stored under the data key k.
func sealValue(k, v []byte) ([]byte, error) {
	if len(v) == 0 || v[0]&flagSum != 0 {
		return nil, fmt.Errorf("%w: a snapshot's version under data key %x is not a value without checksum", ErrBadEncoding, k)
	}
	out := make([]byte, len(v), len(v)+sumLen)
	copy(out, v)
	out[0] |= flagSum
	return binary.BigEndian.AppendUint32(out, valueSum(k, out)), nil
}

// decodeValue decodes the value v stored under the data key k, verifying
// its checksum.
func decodeValue(k, v []byte, keysOnly bool) (value []byte, tombstone bool, stamp uint64, err error) {
	b, err := checkValue(k, v)
	if err != nil {
		return nil, false, 0, err
	}
	if len(b) == 0 {
		return nil, false, 0, fmt.Errorf("%w: empty value", ErrBadEncoding)
	}
	flags := b[0]
	if flags&^(flagTomb|flagStamp|flagSum) != 0 {
		return nil, false, 0, fmt.Errorf("%w: value flags %#x", ErrBadEncoding, flags)
	}
	b = b[1:]
	if flags&flagStamp != 0 {
		if len(b) < 8 {
			return nil, false, 0, fmt.Errorf("%w: truncated stamp", ErrBadEncoding)
		}
		stamp, b = binary.BigEndian.Uint64(b), b[8:]
	}
	if flags&flagTomb != 0 {
		return nil, true, stamp, nil
	}
	if keysOnly {
		return nil, false, stamp, nil
	}
	return bytes.Clone(b), false, stamp, nil
}

// valueStamp returns the stamp of an encoded value, or 0 if it has none
// (or does not decode).
func valueStamp(v []byte) uint64 {
	if len(v) >= 9 && v[0]&flagStamp != 0 {
		return binary.BigEndian.Uint64(v[1:9])
	}
	return 0
}

// storedValue returns an encoded value without its checksum: what every
// replica of a site holds alike for the same version, whichever build
// stored it (replica digests compare it).
func storedValue(v []byte) []byte {
	if len(v) >= 1+sumLen && v[0]&flagSum != 0 {
		out := make([]byte, 0, len(v)-sumLen)
		out = append(out, v[0]&^flagSum)
		return append(out, v[1:len(v)-sumLen]...)
	}
	return v
}

// canonicalValue returns an encoded value without its stamp and checksum:
// what every site holds alike for the same version (digests compare it).
func canonicalValue(v []byte) []byte {
	v = storedValue(v)
	if len(v) >= 9 && v[0]&flagStamp != 0 {
		out := make([]byte, 0, len(v)-8)
		out = append(out, v[0]&^flagStamp)
		return append(out, v[9:]...)
	}
	return v
}

// ValidSiteName reports whether s may name a site: 1 to 63 characters of
// lowercase letters, digits and '-'.
func ValidSiteName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
