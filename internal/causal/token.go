package causal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// Token layout, format 3 (integers are unsigned varints unless noted):
//
//	magic 'C' 'S' | format 3 | flags (1 byte; bit 0: partial, bit 1: site, bit 2: cluster) | maxHLC | pastHLC |
//	[site len, site (with flag bit 1)] | [cluster id (8 bytes BE, with flag bit 2)] |
//	f = fallbacks, f × (origin len, origin, hlc) |
//	d = dependencies, d × (keyspace len, keyspace, shard+1 or 0 for every shard, origin len, origin, hlc) |
//	k = number of keyspaces |
//	k × ( keyspace len, keyspace |
//	      n = shard floors, n × (shard, origin len, origin, hlc) |
//	      m = key floors, m × (key len, key, shard+1 or 0 if unknown, hlc, site len, site) ) |
//	crc32c (4 bytes BE) of everything before
//
// Origins, keyspaces, shards and keys appear in ascending order, so equal
// sessions encode to equal tokens. Format 2 (one fallback and shard
// floors without an origin) and format 1 (maxHLC, then keyspace-qualified
// key floors without shards) are still decoded; their fallback and shard
// floors get origin "" (the site serving the read).
const (
	tokenMagic0   = 'C'
	tokenMagic1   = 'S'
	tokenFormat1  = 1
	tokenFormat2  = 2
	tokenFormat   = 3
	maxSiteBytes  = 255
	maxKeyspaceNm = 255

	flagPartial = 1 << 0
	flagSite    = 1 << 1
	flagCluster = 1 << 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode serialises s to an opaque token. The empty session encodes to
// nil, partial or not: a server answers an empty token with what the
// request observed, which is what a partial one asks for.
func (s *Session) Encode() []byte {
	if s.IsEmpty() {
		return nil
	}
	return s.AppendEncode(nil)
}

// AppendEncode appends the token of s to b.
func (s *Session) AppendEncode(b []byte) []byte {
	keys := make([]string, 0, len(s.keys))
	for k := range s.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys) // by keyspace, then key
	shards := make([]ShardRef, 0, len(s.shards))
	for r := range s.shards {
		shards = append(shards, r)
	}
	slices.SortFunc(shards, compareRefs)
	// The keyspaces, in order.
	var kss []string
	for _, r := range shards {
		if len(kss) == 0 || kss[len(kss)-1] != r.Keyspace {
			kss = append(kss, r.Keyspace)
		}
	}
	for _, fk := range keys {
		ks, _ := splitFloorKey(fk)
		if i, found := slices.BinarySearch(kss, ks); !found {
			kss = slices.Insert(kss, i, ks)
		}
	}

	start := len(b)
	var flags byte
	if s.Partial {
		flags |= flagPartial
	}
	if s.Site != "" {
		flags |= flagSite
	}
	if s.Cluster != 0 {
		flags |= flagCluster
	}
	b = append(b, tokenMagic0, tokenMagic1, tokenFormat, flags)
	b = binary.AppendUvarint(b, s.MaxHLC)
	b = binary.AppendUvarint(b, s.PastHLC)
	if s.Site != "" {
		b = appendString(b, s.Site)
	}
	if s.Cluster != 0 {
		b = binary.BigEndian.AppendUint64(b, s.Cluster)
	}
	origins := make([]string, 0, len(s.fallback))
	for o := range s.fallback {
		origins = append(origins, o)
	}
	slices.Sort(origins)
	b = binary.AppendUvarint(b, uint64(len(origins)))
	for _, o := range origins {
		b = appendString(b, o)
		b = binary.AppendUvarint(b, s.fallback[o])
	}
	deps := s.Deps(nil)
	b = binary.AppendUvarint(b, uint64(len(deps)))
	for _, d := range deps {
		b = appendString(b, d.Ref.Keyspace)
		if d.Ref.Shard == UnknownShard {
			b = append(b, 0)
		} else {
			b = binary.AppendUvarint(b, uint64(d.Ref.Shard)+1)
		}
		b = appendString(b, d.Ref.Origin)
		b = binary.AppendUvarint(b, d.HLC)
	}
	b = binary.AppendUvarint(b, uint64(len(kss)))
	for _, ks := range kss {
		b = appendString(b, ks)
		n := 0
		for n < len(shards) && shards[n].Keyspace == ks {
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		for _, r := range shards[:n] {
			b = binary.AppendUvarint(b, uint64(r.Shard))
			b = appendString(b, r.Origin)
			b = binary.AppendUvarint(b, s.shards[r])
		}
		shards = shards[n:]
		m := 0
		for m < len(keys) && strings.HasPrefix(keys[m], ks+"\x00") {
			m++
		}
		b = binary.AppendUvarint(b, uint64(m))
		for _, fk := range keys[:m] {
			kf := s.keys[fk]
			b = appendString(b, fk[len(ks)+1:])
			if kf.shard == UnknownShard {
				b = append(b, 0)
			} else {
				b = binary.AppendUvarint(b, uint64(kf.shard)+1)
			}
			b = binary.AppendUvarint(b, kf.v.HLC)
			b = appendString(b, kf.v.Site)
		}
		keys = keys[m:]
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeSession parses a token produced by Encode (format 3, or formats 2
// and 1 of earlier releases). An empty token is an empty session. Any other
// malformed input returns an error wrapping ErrMalformedToken.
//
// A format-1 token's key floors have no shard. Such a token with
// MaxSessionKeys floors may have dropped older ones, which that format
// only accounted for in MaxHLC; its MaxHLC becomes the session's Fallback.
func DecodeSession(tok []byte) (*Session, error) {
	return DecodeSessionFor(tok, nil)
}

// ShardFilter names the one shard of a keyspace whose shard floors a
// server needs to serve a request (a read of keys of that shard).
type ShardFilter struct {
	Keyspace string
	Shard    uint32
}

// DecodeSessionFor is DecodeSession for a request about the keys of one
// shard: of a partial token (see Session.Partial), which the server
// answers with only what the request observed, it keeps only that
// shard's floors of the keyspace and drops the others (a client sends
// every shard floor of the keyspace so that it can reuse one encoding for
// its reads; building them all into the session on every read was a
// large part of a read's CPU). A full token, or a nil filter, is decoded
// whole: the server answers a full token with the whole updated session.
func DecodeSessionFor(tok []byte, filter *ShardFilter) (*Session, error) {
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
	format := tok[2]
	if format != tokenFormat && format != tokenFormat2 && format != tokenFormat1 {
		return nil, fmt.Errorf("%w: unsupported format %d", ErrMalformedToken, format)
	}
	body, sum := tok[:len(tok)-4], binary.BigEndian.Uint32(tok[len(tok)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrMalformedToken)
	}
	r := reader{b: body[3:]}
	var err error
	if format == tokenFormat1 {
		err = s.decodeV1(&r)
	} else {
		err = s.decodeV2(&r, format, filter)
	}
	if err == nil {
		err = r.err
	}
	if err == nil && len(r.b) != 0 {
		err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedToken, err)
	}
	return s, nil
}

func (s *Session) decodeV1(r *reader) error {
	s.MaxHLC = r.uvarint()
	s.PastHLC = s.MaxHLC
	n := r.uvarint()
	if n > MaxSessionKeys {
		return fmt.Errorf("%d keys exceeds %d", n, MaxSessionKeys)
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		fk := r.bytes(MaxTokenBytes)
		hlc := r.uvarint()
		site := r.bytes(maxSiteBytes)
		if r.err != nil {
			break
		}
		ks, _, ok := strings.Cut(string(fk), "\x00")
		if !ok || len(ks) > maxKeyspaceNm {
			return errors.New("key floor without a keyspace")
		}
		s.setKey(string(fk), keyFloor{v: Version{HLC: hlc, Site: string(site)}, shard: UnknownShard})
	}
	if n == MaxSessionKeys {
		s.raiseFallback("", s.MaxHLC)
	}
	return nil
}

// decodeV2 decodes formats 2 and 3; filter, if set, drops the shard
// floors of a partial token that it does not name.
func (s *Session) decodeV2(r *reader, format byte, filter *ShardFilter) error {
	if len(r.b) == 0 {
		return errors.New("truncated flags")
	}
	flags := r.b[0]
	r.b = r.b[1:]
	if flags&^(flagPartial|flagSite|flagCluster) != 0 || (format != tokenFormat && flags&(flagSite|flagCluster) != 0) {
		return fmt.Errorf("unknown flags %#x", flags)
	}
	s.Partial = flags&flagPartial != 0
	s.MaxHLC = r.uvarint()
	if format == tokenFormat2 {
		s.PastHLC = s.MaxHLC
		s.raiseFallback("", r.uvarint())
	} else {
		s.PastHLC = r.uvarint()
		if flags&flagSite != 0 {
			s.Site = string(r.bytes(maxSiteBytes))
			if r.err == nil && s.Site == "" {
				return errors.New("empty site")
			}
		}
		if flags&flagCluster != 0 {
			s.Cluster = r.uint64BE()
			if r.err == nil && s.Cluster == 0 {
				return errors.New("zero cluster id")
			}
		}
		nf := r.uvarint()
		if nf > MaxShardFloors {
			return fmt.Errorf("%d fallbacks exceeds %d", nf, MaxShardFloors)
		}
		for i := uint64(0); i < nf && r.err == nil; i++ {
			origin := string(r.bytes(maxSiteBytes))
			s.raiseFallback(origin, r.uvarint())
		}
		nd := r.uvarint()
		if nd > MaxShardFloors+1 {
			return fmt.Errorf("%d dependencies exceeds %d", nd, MaxShardFloors)
		}
		for i := uint64(0); i < nd && r.err == nil; i++ {
			ks := string(r.bytes(maxKeyspaceNm))
			sh := r.uvarint()
			origin := string(r.bytes(maxSiteBytes))
			hlc := r.uvarint()
			if sh > uint64(UnknownShard) {
				return fmt.Errorf("dependency shard %d out of range", sh-1)
			}
			shard := UnknownShard
			if sh > 0 {
				shard = uint32(sh - 1)
			}
			if strings.IndexByte(ks, 0) >= 0 {
				return errors.New("keyspace contains NUL")
			}
			if r.err == nil {
				s.raiseDep(ShardRef{ks, shard, origin}, hlc)
			}
		}
	}
	nks := r.uvarint()
	var nKeys, nShards uint64
	for i := uint64(0); i < nks && r.err == nil; i++ {
		ks := string(r.bytes(maxKeyspaceNm))
		if strings.IndexByte(ks, 0) >= 0 {
			return errors.New("keyspace contains NUL")
		}
		n := r.uvarint()
		if nShards += n; nShards > MaxShardFloors {
			return fmt.Errorf("more than %d shard floors", MaxShardFloors)
		}
		// Of a filtered partial token, keep the named shard's floors of
		// the keyspace (and every floor of other keyspaces, rare).
		only, onlyShard := false, uint32(0)
		if filter != nil && s.Partial && ks == filter.Keyspace {
			only, onlyShard = true, filter.Shard
		}
		for j := uint64(0); j < n && r.err == nil; j++ {
			sh := r.uvarint()
			var origin string
			if format != tokenFormat2 {
				origin = string(r.bytes(maxSiteBytes))
			}
			hlc := r.uvarint()
			if sh >= uint64(UnknownShard) {
				return fmt.Errorf("shard %d out of range", sh)
			}
			if only && uint32(sh) != onlyShard {
				continue
			}
			s.raiseShard(ShardRef{ks, uint32(sh), origin}, hlc)
		}
		m := r.uvarint()
		if nKeys += m; nKeys > MaxSessionKeys {
			return fmt.Errorf("more than %d keys", MaxSessionKeys)
		}
		for j := uint64(0); j < m && r.err == nil; j++ {
			key := r.bytes(MaxTokenBytes)
			sh := r.uvarint()
			hlc := r.uvarint()
			site := r.bytes(maxSiteBytes)
			if sh > uint64(UnknownShard) {
				return fmt.Errorf("shard %d out of range", sh-1)
			}
			shard := UnknownShard
			if sh > 0 {
				shard = uint32(sh - 1)
			}
			if r.err == nil {
				s.setKey(FloorKey(ks, key), keyFloor{v: Version{HLC: hlc, Site: string(site)}, shard: shard})
			}
		}
	}
	return nil
}

// setKey stores a decoded key floor as is (the newer one if repeated).
func (s *Session) setKey(fk string, kf keyFloor) {
	if s.keys == nil {
		s.keys = make(map[string]keyFloor)
	}
	if cur, ok := s.keys[fk]; ok && !cur.v.Less(kf.v) {
		return
	}
	s.keys[fk] = kf
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

func (r *reader) uint64BE() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = errors.New("truncated cluster id")
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}
