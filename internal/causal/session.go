package causal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// MaxSessionKeys bounds the per-key floors a session token carries. When a
// session touches more keys, the oldest floors are folded into the session's
// global floor (MaxHLC), which is always safe: it only makes reads wait for
// more, never less.
const MaxSessionKeys = 64

// MaxTokenBytes is the largest session token accepted.
const MaxTokenBytes = 64 << 10

// ErrMalformedToken is returned for a session token that cannot be decoded.
var ErrMalformedToken = errors.New("causal: malformed session token")

// Session is a client's causal context: the newest version it has seen of
// each recently accessed key, and the largest HLC it has observed anywhere.
// A replica may serve the session's read of a key once it has applied that
// key's floor. The zero Session is empty and ready to use; Session is not
// safe for concurrent use.
type Session struct {
	// MaxHLC is the largest HLC the session observed (read or written).
	MaxHLC uint64
	// Keys maps keyspace-qualified keys (see FloorKey) to the newest version
	// the session observed of them.
	Keys map[string]Version
}

// FloorKey qualifies a key with its keyspace for Session.Keys.
func FloorKey(keyspace string, key []byte) string {
	return keyspace + "\x00" + string(key)
}

// Observe records that the session saw version v of key.
func (s *Session) Observe(keyspace string, key []byte, v Version) {
	if v.IsZero() {
		return
	}
	if v.HLC > s.MaxHLC {
		s.MaxHLC = v.HLC
	}
	if s.Keys == nil {
		s.Keys = make(map[string]Version)
	}
	fk := FloorKey(keyspace, key)
	if cur, ok := s.Keys[fk]; !ok || cur.Less(v) {
		s.Keys[fk] = v
	}
	s.trim()
}

// Floor returns the version a replica must have applied of key before it
// may answer this session's read, and whether the session has one.
func (s *Session) Floor(keyspace string, key []byte) (Version, bool) {
	v, ok := s.Keys[FloorKey(keyspace, key)]
	return v, ok
}

// Merge folds another session into s (for example the tokens returned to
// concurrent calls of one client).
func (s *Session) Merge(o *Session) {
	if o == nil {
		return
	}
	if o.MaxHLC > s.MaxHLC {
		s.MaxHLC = o.MaxHLC
	}
	for k, v := range o.Keys {
		if s.Keys == nil {
			s.Keys = make(map[string]Version, len(o.Keys))
		}
		if cur, ok := s.Keys[k]; !ok || cur.Less(v) {
			s.Keys[k] = v
		}
	}
	s.trim()
}

// trim keeps the MaxSessionKeys newest floors.
func (s *Session) trim() {
	if len(s.Keys) <= MaxSessionKeys {
		return
	}
	type kv struct {
		k string
		v Version
	}
	all := make([]kv, 0, len(s.Keys))
	for k, v := range s.Keys {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if c := all[i].v.Compare(all[j].v); c != 0 {
			return c > 0
		}
		return all[i].k < all[j].k
	})
	for _, e := range all[MaxSessionKeys:] {
		delete(s.Keys, e.k)
	}
}

// Clone returns a deep copy of s.
func (s *Session) Clone() *Session {
	c := &Session{MaxHLC: s.MaxHLC}
	if len(s.Keys) > 0 {
		c.Keys = make(map[string]Version, len(s.Keys))
		for k, v := range s.Keys {
			c.Keys[k] = v
		}
	}
	return c
}

// Token layout (all integers unsigned varints unless noted):
//
//	magic 'C' 'S' | format (1 byte) | maxHLC | n | n × (key len, key, hlc, site len, site) | crc32c (4 bytes BE) of everything before
const (
	tokenMagic0  = 'C'
	tokenMagic1  = 'S'
	tokenFormat  = 1
	maxSiteBytes = 255
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode serialises s to an opaque token. The empty session encodes to nil.
func (s *Session) Encode() []byte {
	if s == nil || (s.MaxHLC == 0 && len(s.Keys) == 0) {
		return nil
	}
	keys := make([]string, 0, len(s.Keys))
	for k := range s.Keys {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic tokens
	b := []byte{tokenMagic0, tokenMagic1, tokenFormat}
	b = binary.AppendUvarint(b, s.MaxHLC)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		v := s.Keys[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, v.HLC)
		b = binary.AppendUvarint(b, uint64(len(v.Site)))
		b = append(b, v.Site...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeSession parses a token produced by Encode. An empty token is an
// empty session. Any other malformed input returns an error wrapping
// ErrMalformedToken.
func DecodeSession(tok []byte) (*Session, error) {
	s := &Session{}
	if len(tok) == 0 {
		return s, nil
	}
	if len(tok) > MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformedToken, len(tok), MaxTokenBytes)
	}
	if len(tok) < 3+4 || tok[0] != tokenMagic0 || tok[1] != tokenMagic1 {
		return nil, fmt.Errorf("%w: not a session token", ErrMalformedToken)
	}
	if tok[2] != tokenFormat {
		return nil, fmt.Errorf("%w: unsupported format %d", ErrMalformedToken, tok[2])
	}
	body, sum := tok[:len(tok)-4], binary.BigEndian.Uint32(tok[len(tok)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrMalformedToken)
	}
	r := reader{b: body[3:]}
	s.MaxHLC = r.uvarint()
	n := r.uvarint()
	if n > MaxSessionKeys {
		return nil, fmt.Errorf("%w: %d keys exceeds %d", ErrMalformedToken, n, MaxSessionKeys)
	}
	if n > 0 {
		s.Keys = make(map[string]Version, n)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := r.bytes(MaxTokenBytes)
		hlc := r.uvarint()
		site := r.bytes(maxSiteBytes)
		s.Keys[string(k)] = Version{HLC: hlc, Site: string(site)}
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedToken, r.err)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformedToken, len(r.b))
	}
	return s, nil
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
		r.err = errors.New("truncated varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(max uint64) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > max || n > uint64(len(r.b)) {
		r.err = fmt.Errorf("length %d out of range", n)
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
