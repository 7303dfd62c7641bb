package causal

import (
	"cmp"
	"errors"
	"slices"
	"strings"
)

// MaxSessionKeys bounds the per-key floors a session keeps. When a session
// holds more, the oldest quarter is folded into the floors of their shards
// (see Session), so trimming is amortized over many observations.
const MaxSessionKeys = 64

// MaxShardFloors bounds the per-shard floors a session keeps (across all
// keyspaces). Beyond it, the oldest are folded into the session's fallback
// floor (see Session.Fallback).
const MaxShardFloors = 1024

// MaxTokenBytes is the largest session token accepted.
const MaxTokenBytes = 64 << 10

// UnknownShard marks a key floor whose shard is not known (a floor from a
// format-1 token, or observed by a client that has not learned it yet).
const UnknownShard = ^uint32(0)

// ErrMalformedToken is returned for a session token that cannot be decoded.
var ErrMalformedToken = errors.New("causal: malformed session token")

// Session is a client's causal context. It holds:
//
//   - per-key floors: the newest version the session observed of each
//     recently accessed key, with the shard the key belongs to;
//   - per-shard floors: for each (keyspace, shard), the largest HLC of a
//     version of that shard the session observed but no longer keeps a key
//     floor for. Versions of one shard grow strictly with its raft log, so a
//     replica that applied a version with HLC h applied every earlier
//     version of the shard: one HLC per shard covers any number of keys;
//   - Fallback: the largest shard floor dropped because the session held
//     more than MaxShardFloors. A shard without a floor of its own must have
//     applied Fallback, or be read on its leader after a read barrier;
//   - MaxHLC: the largest HLC observed, which every later write exceeds.
//
// The floor of a key k of shard s is max(key floor of k, floor of s); it
// never decreases (see Floor). The zero Session is empty and ready to use;
// Session is not safe for concurrent use.
type Session struct {
	// MaxHLC is the largest HLC the session observed (read or written).
	MaxHLC uint64
	// Fallback is the floor of every shard that has no floor of its own
	// (zero: none).
	Fallback uint64
	// Partial marks a session narrowed to what one request needs (see
	// ForRead, ForScan, ForWrite). A server answers a partial session with
	// only what the request observed, for the client to merge; it answers a
	// full session with the whole updated session.
	Partial bool

	keys   map[string]keyFloor
	shards map[ShardRef]uint64

	scratch []trimEntry // reused by trim

	shardGen uint64 // counts changes of shards
}

// ShardRef names one shard of a keyspace.
type ShardRef struct {
	Keyspace string
	Shard    uint32
}

type keyFloor struct {
	v     Version
	shard uint32
}

type trimEntry struct {
	k string
	f keyFloor
}

// FloorKey qualifies a key with its keyspace; it is the map key of a key
// floor. Keyspace names never contain a NUL byte.
func FloorKey(keyspace string, key []byte) string {
	return keyspace + "\x00" + string(key)
}

// splitFloorKey undoes FloorKey.
func splitFloorKey(fk string) (keyspace, key string) {
	ks, k, _ := strings.Cut(fk, "\x00")
	return ks, k
}

// Len returns the number of key floors and shard floors held.
func (s *Session) Len() (keys, shards int) { return len(s.keys), len(s.shards) }

// IsEmpty reports whether the session holds no floor.
func (s *Session) IsEmpty() bool {
	return s == nil || (s.MaxHLC == 0 && s.Fallback == 0 && len(s.keys) == 0 && len(s.shards) == 0)
}

// Observe records that the session saw version v of key, whose shard is
// unknown to the caller. Prefer ObserveShard.
func (s *Session) Observe(keyspace string, key []byte, v Version) {
	s.ObserveShard(keyspace, key, UnknownShard, v)
}

// ObserveShard records that the session saw version v of key, which
// belongs to shard.
func (s *Session) ObserveShard(keyspace string, key []byte, shard uint32, v Version) {
	if v.IsZero() {
		return
	}
	s.observeHLC(v.HLC)
	s.putKey(FloorKey(keyspace, key), keyspace, shard, v)
	s.trim()
}

// ObserveShardHLC records that the session saw a version with HLC hlc of
// some key of the shard, without keeping a key floor for it (for example
// the items of a scan).
func (s *Session) ObserveShardHLC(keyspace string, shard uint32, hlc uint64) {
	if hlc == 0 {
		return
	}
	s.observeHLC(hlc)
	s.raiseShard(ShardRef{keyspace, shard}, hlc)
	s.trimShards()
}

// ObserveHLC raises MaxHLC to hlc.
func (s *Session) ObserveHLC(hlc uint64) { s.observeHLC(hlc) }

func (s *Session) observeHLC(hlc uint64) {
	if hlc > s.MaxHLC {
		s.MaxHLC = hlc
	}
}

// putKey raises the floor of fk. A version its shard floor already covers
// needs no key floor of its own.
func (s *Session) putKey(fk, keyspace string, shard uint32, v Version) {
	cur, ok := s.keys[fk]
	if ok {
		if cur.shard == UnknownShard {
			cur.shard = shard
		}
		if cur.v.Less(v) {
			cur.v = v
		}
		s.keys[fk] = cur
		return
	}
	if shard != UnknownShard && v.HLC <= s.shardFloor(ShardRef{keyspace, shard}) {
		return
	}
	if s.keys == nil {
		s.keys = make(map[string]keyFloor)
	}
	s.keys[fk] = keyFloor{v: v, shard: shard}
}

func (s *Session) raiseShard(r ShardRef, hlc uint64) {
	if hlc <= s.shards[r] {
		return
	}
	if s.shards == nil {
		s.shards = make(map[ShardRef]uint64)
	}
	s.shards[r] = hlc
	s.shardGen++
}

// ShardGeneration changes whenever a shard floor is raised or dropped. With
// MaxHLC and Fallback it identifies the part ForRead returns for keys
// without a key floor, so callers may cache its encoding.
func (s *Session) ShardGeneration() uint64 { return s.shardGen }

// HasKeyFloor reports whether the session holds a floor of its own for key.
func (s *Session) HasKeyFloor(keyspace string, key []byte) bool {
	_, ok := s.keys[FloorKey(keyspace, key)]
	return ok
}

// shardFloor is the floor of shard r: its own, or Fallback.
func (s *Session) shardFloor(r ShardRef) uint64 {
	if f, ok := s.shards[r]; ok {
		return max(f, s.Fallback)
	}
	return s.Fallback
}

// Floor returns the version a replica must have applied of key before it
// may answer this session's read, and whether the session has one. The
// returned version is the key's own floor, or, when the shard's floor
// (or Fallback) is larger, a version carrying that HLC and no site. Floor
// never decreases as the session observes more.
func (s *Session) Floor(keyspace string, key []byte) (Version, bool) {
	kf, ok := s.keys[FloorKey(keyspace, key)]
	if !ok {
		return Version{}, false
	}
	if kf.shard != UnknownShard {
		if sf := s.shardFloor(ShardRef{keyspace, kf.shard}); sf > kf.v.HLC {
			return Version{HLC: sf}, true
		}
	}
	return kf.v, true
}

// KeyShard returns the shard recorded with key's floor.
func (s *Session) KeyShard(keyspace string, key []byte) (uint32, bool) {
	kf, ok := s.keys[FloorKey(keyspace, key)]
	if !ok || kf.shard == UnknownShard {
		return 0, false
	}
	return kf.shard, true
}

// ReadFloor returns the HLC a replica of shard (the shard of key) must have
// applied before it serves this session's read of key: the larger of the
// key's floor and the shard's floor, zero for none. fallback reports that
// the floor is the session's Fallback, which the shard may never reach
// (its newest version can be older): a replica that has not applied it
// must leave the read to the shard leader, which serves it after a read
// barrier.
func (s *Session) ReadFloor(keyspace string, key []byte, shard uint32) (hlc uint64, fallback bool) {
	r := ShardRef{keyspace, shard}
	sf, own := s.shards[r]
	hlc = sf
	if kf, ok := s.keys[FloorKey(keyspace, key)]; ok && kf.v.HLC > hlc {
		hlc = kf.v.HLC
	}
	if !own && s.Fallback > hlc {
		return s.Fallback, true
	}
	return hlc, false
}

// ShardReadFloor is ReadFloor for a read of a whole shard (a scan): the
// shard floor, raised by the floors of the keys of the shard in
// [start, end) (an empty end is unbounded).
func (s *Session) ShardReadFloor(keyspace string, shard uint32, start, end []byte, shardOf func(key []byte) uint32) (hlc uint64, fallback bool) {
	sf, own := s.shards[ShardRef{keyspace, shard}]
	hlc = sf
	for fk, kf := range s.keys {
		ks, key := splitFloorKey(fk)
		if ks != keyspace || kf.v.HLC <= hlc || key < string(start) || (len(end) > 0 && key >= string(end)) {
			continue
		}
		if kf.shard == shard || (kf.shard == UnknownShard && shardOf([]byte(key)) == shard) {
			hlc = kf.v.HLC
		}
	}
	if !own && s.Fallback > hlc {
		return s.Fallback, true
	}
	return hlc, false
}

// Merge folds another session into s (for example the reply of a call, or
// the token of a concurrent client).
func (s *Session) Merge(o *Session) {
	if o == nil {
		return
	}
	s.observeHLC(o.MaxHLC)
	if o.Fallback > s.Fallback {
		s.Fallback = o.Fallback
	}
	for r, f := range o.shards {
		s.raiseShard(r, f)
	}
	for fk, kf := range o.keys {
		ks, _ := splitFloorKey(fk)
		s.putKey(fk, ks, kf.shard, kf.v)
	}
	s.trimShards()
	s.trim()
}

// trim keeps the session within MaxSessionKeys key floors. Once over the
// bound it drops the oldest floors down to three quarters of it, folding
// each into its shard's floor (or into Fallback when its shard is
// unknown), so a read of a dropped key still waits for a version at least
// as new as the one the session saw. The sort is paid once per
// MaxSessionKeys/4 new keys.
func (s *Session) trim() {
	if len(s.keys) <= MaxSessionKeys {
		return
	}
	all := s.scratch[:0]
	for k, f := range s.keys {
		all = append(all, trimEntry{k, f})
	}
	slices.SortFunc(all, func(a, b trimEntry) int {
		if c := a.f.v.Compare(b.f.v); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	drop := len(all) - MaxSessionKeys*3/4
	for _, e := range all[:drop] {
		delete(s.keys, e.k)
		if e.f.shard == UnknownShard {
			if e.f.v.HLC > s.Fallback {
				s.Fallback = e.f.v.HLC
			}
			continue
		}
		ks, _ := splitFloorKey(e.k)
		s.raiseShard(ShardRef{ks, e.f.shard}, e.f.v.HLC)
	}
	clear(all)
	s.scratch = all[:0]
	s.trimShards()
}

// trimShards keeps the session within MaxShardFloors shard floors by
// folding the oldest quarter into Fallback.
func (s *Session) trimShards() {
	if len(s.shards) <= MaxShardFloors {
		return
	}
	type e struct {
		r ShardRef
		f uint64
	}
	all := make([]e, 0, len(s.shards))
	for r, f := range s.shards {
		all = append(all, e{r, f})
	}
	slices.SortFunc(all, func(a, b e) int { return cmp.Compare(a.f, b.f) })
	for _, x := range all[:len(all)-MaxShardFloors*3/4] {
		delete(s.shards, x.r)
		s.shardGen++
		if x.f > s.Fallback {
			s.Fallback = x.f
		}
	}
}

// Clone returns a deep copy of s.
func (s *Session) Clone() *Session {
	c := &Session{MaxHLC: s.MaxHLC, Fallback: s.Fallback, Partial: s.Partial}
	if len(s.keys) > 0 {
		c.keys = make(map[string]keyFloor, len(s.keys))
		for k, v := range s.keys {
			c.keys[k] = v
		}
	}
	if len(s.shards) > 0 {
		c.shards = make(map[ShardRef]uint64, len(s.shards))
		for k, v := range s.shards {
			c.shards[k] = v
		}
	}
	return c
}

// ForRead returns the part of s a server needs to serve a read of keys of
// keyspace (a Get, BatchGet or History): MaxHLC, Fallback, the floors of
// those keys, and the floors of their shards. shardOf maps a key to its
// shard when the caller knows the keyspace's shard count; with a nil
// shardOf, or for a key it cannot place, every shard floor of the keyspace
// is included.
func (s *Session) ForRead(keyspace string, keys [][]byte, shardOf func(key []byte) (uint32, bool)) *Session {
	out := &Session{MaxHLC: s.MaxHLC, Fallback: s.Fallback, Partial: true}
	allShards := false
	for _, k := range keys {
		fk := FloorKey(keyspace, k)
		kf, hasKey := s.keys[fk]
		if hasKey {
			if out.keys == nil {
				out.keys = make(map[string]keyFloor, len(keys))
			}
			out.keys[fk] = kf
		}
		sh, known := UnknownShard, false
		if hasKey && kf.shard != UnknownShard {
			sh, known = kf.shard, true
		} else if shardOf != nil {
			sh, known = shardOf(k)
		}
		if !known {
			allShards = true
			continue
		}
		r := ShardRef{keyspace, sh}
		if f, ok := s.shards[r]; ok {
			out.raiseShard(r, f)
		}
	}
	if allShards {
		s.copyShards(out, keyspace)
	}
	return out
}

// ForScan returns the part of s a server needs to serve a scan of
// [start, end) of keyspace: MaxHLC, Fallback, the key floors in the range
// and every shard floor of the keyspace.
func (s *Session) ForScan(keyspace string, start, end []byte) *Session {
	out := &Session{MaxHLC: s.MaxHLC, Fallback: s.Fallback, Partial: true}
	for fk, kf := range s.keys {
		ks, key := splitFloorKey(fk)
		if ks != keyspace || key < string(start) || (len(end) > 0 && key >= string(end)) {
			continue
		}
		if out.keys == nil {
			out.keys = make(map[string]keyFloor)
		}
		out.keys[fk] = kf
	}
	s.copyShards(out, keyspace)
	return out
}

// ForWrite returns the part of s a server needs to serve a write: MaxHLC.
func (s *Session) ForWrite() *Session { return &Session{MaxHLC: s.MaxHLC, Partial: true} }

func (s *Session) copyShards(out *Session, keyspace string) {
	for r, f := range s.shards {
		if r.Keyspace == keyspace {
			out.raiseShard(r, f)
		}
	}
}
