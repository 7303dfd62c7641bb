package rpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// Validation errors. All map to codes.InvalidArgument.
var (
	ErrEmptyKey        = errors.New("rpc: key is empty")
	ErrKeyTooLarge     = errors.New("rpc: key too large")
	ErrValueTooLarge   = errors.New("rpc: value too large")
	ErrBadRequest      = errors.New("rpc: invalid request")
	ErrBadContinuation = errors.New("rpc: malformed continuation token")
)

// Limits bounds request sizes.
type Limits struct {
	// MaxKeyBytes is the largest key accepted, in bytes.
	MaxKeyBytes int
	// MaxValueBytes is the largest value accepted, in bytes.
	MaxValueBytes int
	// MaxBatchKeys is the most keys one BatchGet may name.
	MaxBatchKeys int
	// MaxScanLimit is the largest page a Scan may ask for.
	MaxScanLimit int
	// DefaultScanLimit is the page size when a Scan does not set one.
	DefaultScanLimit int
	// MaxHistory is the most versions one History call may ask for.
	MaxHistory int
	// MaxReplyBytes bounds the keys and values one BatchGet or GetTxn
	// returns, and the values one History returns: 1,000 keys of 1 MiB values made replies of a gigabyte,
	// beyond what clients accept, and a few such calls at once took the
	// node's memory.
	MaxReplyBytes int
}

// DefaultLimits returns the default request limits.
func DefaultLimits() Limits {
	return Limits{
		MaxKeyBytes:      4 << 10,
		MaxValueBytes:    1 << 20,
		MaxBatchKeys:     1000,
		MaxScanLimit:     10000,
		DefaultScanLimit: 1000,
		MaxHistory:       1000,
		MaxReplyBytes:    64 << 20,
	}
}

// Reply checks that a reply of n items holding size bytes of keys and
// values stays within MaxReplyBytes; one item always may (a value may be
// as large as MaxValueBytes).
func (l Limits) Reply(n, size int) error {
	if n > 1 && l.MaxReplyBytes > 0 && size > l.MaxReplyBytes {
		return fmt.Errorf("%w: the values asked for add up to more than the reply limit of %d MiB: ask for fewer keys or versions per call", ErrBadRequest, l.MaxReplyBytes>>20)
	}
	return nil
}

// Key validates a key.
func (l Limits) Key(key []byte) error {
	if len(key) == 0 {
		return ErrEmptyKey
	}
	if len(key) > l.MaxKeyBytes {
		return fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrKeyTooLarge, len(key), l.MaxKeyBytes)
	}
	return nil
}

// Value validates a value.
func (l Limits) Value(v []byte) error {
	if len(v) > l.MaxValueBytes {
		return fmt.Errorf("%w: %d bytes exceeds the limit of %d", ErrValueTooLarge, len(v), l.MaxValueBytes)
	}
	return nil
}

// maxClientIDBytes bounds RequestID.client_id.
const maxClientIDBytes = 256

// WriteOptions validates a mutation's options, against the keyspace's site
// count if it is known (sites > 0; the router checks it otherwise).
func (l Limits) WriteOptions(o *kvv1.WriteOptions, sites int) error {
	if o == nil {
		return nil
	}
	switch o.Durability {
	case kvv1.Durability_DURABILITY_UNSPECIFIED, kvv1.Durability_DURABILITY_LOCAL, kvv1.Durability_DURABILITY_ALL:
	case kvv1.Durability_DURABILITY_SITES:
		if o.MinSites < 1 {
			return fmt.Errorf("%w: durability SITES(%d): at least 1 site is required", ErrBadRequest, o.MinSites)
		}
		if sites > 0 && int(o.MinSites) > sites {
			return fmt.Errorf("%w: durability SITES(%d): the keyspace has %d site(s)", ErrBadRequest, o.MinSites, sites)
		}
	default:
		return fmt.Errorf("%w: unknown durability %d", ErrBadRequest, o.Durability)
	}
	if id := o.RequestId; id != nil {
		if id.ClientId == "" || len(id.ClientId) > maxClientIDBytes {
			return fmt.Errorf("%w: request_id.client_id must be 1 to %d bytes", ErrBadRequest, maxClientIDBytes)
		}
	}
	return nil
}

// Consistency validates a read consistency level.
func Consistency(c kvv1.Consistency) error {
	switch c {
	case kvv1.Consistency_CONSISTENCY_UNSPECIFIED, kvv1.Consistency_CONSISTENCY_CAUSAL, kvv1.Consistency_CONSISTENCY_STRONG:
		return nil
	}
	return fmt.Errorf("%w: unknown consistency %d", ErrBadRequest, c)
}

// scanRange is a validated scan: keys in [start, end), end nil = unbounded.
type scanRange struct {
	start, end []byte
	limit      int
}

// Scan validates a scan request and resolves its range and continuation.
func (l Limits) Scan(r *kvv1.ScanRequest) (scanRange, error) {
	var sr scanRange
	if err := Consistency(r.Consistency); err != nil {
		return sr, err
	}
	for name, k := range map[string][]byte{"prefix": r.Prefix, "start": r.Start, "end": r.End} {
		if len(k) > l.MaxKeyBytes {
			return sr, fmt.Errorf("%w: scan %s is %d bytes, the key limit is %d", ErrKeyTooLarge, name, len(k), l.MaxKeyBytes)
		}
	}
	switch {
	case len(r.Prefix) > 0 && (len(r.Start) > 0 || len(r.End) > 0):
		return sr, fmt.Errorf("%w: scan takes a prefix or a start/end range, not both", ErrBadRequest)
	case len(r.Prefix) > 0:
		sr.start, sr.end = r.Prefix, PrefixEnd(r.Prefix)
	default:
		sr.start, sr.end = r.Start, r.End
		if len(sr.end) > 0 && bytes.Compare(sr.start, sr.end) >= 0 {
			return sr, fmt.Errorf("%w: scan end must be greater than start", ErrBadRequest)
		}
	}
	switch {
	case r.Limit == 0:
		sr.limit = l.DefaultScanLimit
	case int(r.Limit) > l.MaxScanLimit:
		return sr, fmt.Errorf("%w: scan limit %d exceeds %d", ErrBadRequest, r.Limit, l.MaxScanLimit)
	default:
		sr.limit = int(r.Limit)
	}
	if len(r.Continuation) > 0 {
		last, err := DecodeContinuation(r.Continuation)
		if err != nil {
			return sr, err
		}
		if len(last) > l.MaxKeyBytes {
			// No page ends at such a key: the token was not issued.
			return sr, fmt.Errorf("%w: its key is %d bytes, the key limit is %d", ErrBadContinuation, len(last), l.MaxKeyBytes)
		}
		if bytes.Compare(last, sr.start) < 0 || (len(sr.end) > 0 && bytes.Compare(last, sr.end) >= 0) {
			return sr, fmt.Errorf("%w: it does not belong to this scan's range", ErrBadContinuation)
		}
		sr.start = append(bytes.Clone(last), 0) // the smallest key after last
	}
	return sr, nil
}

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil when there is none (p is all 0xFF).
func PrefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Continuation token: 'S' 'C' format(1) | last key | crc32c (4 bytes BE).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeContinuation returns the token that resumes a scan after last.
func EncodeContinuation(last []byte) []byte {
	b := append([]byte{'S', 'C', 1}, last...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeContinuation returns the last key of the page a token resumes.
func DecodeContinuation(tok []byte) ([]byte, error) {
	if len(tok) < 7 || tok[0] != 'S' || tok[1] != 'C' || tok[2] != 1 {
		return nil, ErrBadContinuation
	}
	body := tok[:len(tok)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(tok[len(tok)-4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadContinuation)
	}
	return bytes.Clone(body[3:]), nil
}
