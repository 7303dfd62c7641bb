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
//   - per-shard floors, per origin: for each (keyspace, shard, origin site),
//     the largest HLC of a version of that shard written at that origin the
//     session observed but no longer keeps a key floor for. The versions one
//     origin writes to a shard are applied in the origin's order with
//     growing HLCs (remote writes arrive with older HLCs than local ones, so
//     HLCs of different origins interleave): a replica whose progress for
//     the origin reached h applied every earlier version of that origin in
//     the shard, and one HLC per (shard, origin) covers any number of keys;
//   - fallbacks, per origin: the largest shard floor of each origin dropped
//     because the session held more than MaxShardFloors. A shard without a
//     floor of its own for an origin must have applied that origin's
//     fallback, or be read on its leader after a read barrier;
//   - MaxHLC: the largest HLC observed, which every later write exceeds;
//   - PastHLC: the largest HLC of a version the session read. Every write
//     in the causal past of what it read, on any shard, has an HLC at or
//     below it, so it is the session's floor on every shard of the serving
//     site (see router). The session's own writes raise MaxHLC only: their
//     causal past on other shards is what the session had read before;
//   - dependencies: what the session's next write depends on, per
//     (keyspace, shard, origin): the newest version of each it saw since
//     its last write, and that write (nearest dependencies). A write
//     carries them, so that another site applies it only after them. A
//     dependency with shard UnknownShard covers every shard of its
//     keyspace (what MaxShardFloors dependencies fold into).
//
// The floor of a key k of shard s is, for each origin o, the max of k's
// floor (if its version is o's) and s's floor for o; it never decreases
// (see Floor). Origin "" stands for the site serving the read: floors of
// format-1 and format-2 tokens, written before sites had origins, have it. The zero Session is empty and ready to use;
// Session is not safe for concurrent use.
type Session struct {
	// MaxHLC is the largest HLC the session observed (read or written).
	MaxHLC uint64
	// PastHLC is the largest HLC of a version the session read (see
	// Session).
	PastHLC uint64
	// Site is the site that served the session last. A session that
	// arrives at another site (it moved) waits there until that site
	// applied its causal past (router.Arrive). Empty: unknown (a new
	// session, or a token from before sites), taken as the serving site.
	Site string
	// Cluster is the id of the cluster whose servers answered the session
	// (0: unknown, a new session or a token of an earlier release). A
	// server of another cluster refuses the session (router.Arrive): its
	// floors name versions that cluster never held.
	Cluster uint64
	// Partial marks a session narrowed to what one request needs (see
	// ForRead, ForScan, ForWrite). A server answers a partial session with
	// only what the request observed, for the client to merge; it answers a
	// full session with the whole updated session.
	Partial bool

	keys     map[string]keyFloor
	shards   map[ShardRef]uint64
	fallback map[string]uint64 // origin → floor of shards without one of their own
	deps     map[ShardRef]uint64

	scratch []trimEntry // reused by trim

	shardGen uint64 // counts changes of shards and fallbacks
}

// ShardRef names one origin's writes to one shard of a keyspace: the unit
// a shard floor covers.
type ShardRef struct {
	Keyspace string
	Shard    uint32
	Origin   string
}

// Floor is what a replica must have applied of one origin's writes to a
// shard before it serves a read: every version of that origin with an HLC
// up to HLC. Fallback marks a floor the shard may never reach (the
// origin's newest version there can be older): a replica that has not
// applied it leaves the read to the shard leader, which serves it after a
// read barrier. Origin "" is the site serving the read.
type Floor struct {
	Origin   string
	HLC      uint64
	Fallback bool
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
	return s == nil || (s.MaxHLC == 0 && s.PastHLC == 0 && len(s.fallback) == 0 && len(s.keys) == 0 && len(s.shards) == 0 && len(s.deps) == 0)
}

// Dependency is one entry of a session's dependencies: the next write
// depends on every write of Origin to (Keyspace, Shard) up to HLC.
type Dependency struct {
	Ref ShardRef
	HLC uint64
}

// Deps appends the session's dependencies to dst, in a stable order.
func (s *Session) Deps(dst []Dependency) []Dependency {
	start := len(dst)
	for r, h := range s.deps {
		dst = append(dst, Dependency{r, h})
	}
	slices.SortFunc(dst[start:], func(a, b Dependency) int { return compareRefs(a.Ref, b.Ref) })
	return dst
}

// raiseDep raises the dependency on r to hlc.
func (s *Session) raiseDep(r ShardRef, hlc uint64) {
	if hlc == 0 || hlc <= s.deps[r] || hlc <= s.deps[ShardRef{r.Keyspace, UnknownShard, r.Origin}] {
		return
	}
	if s.deps == nil {
		s.deps = make(map[ShardRef]uint64)
	}
	s.deps[r] = hlc
	if r.Shard == UnknownShard {
		// It covers the keyspace's dependencies on the same origin below it.
		for d, h := range s.deps {
			if d != r && d.Keyspace == r.Keyspace && d.Origin == r.Origin && h <= hlc {
				delete(s.deps, d)
			}
		}
	}
	if len(s.deps) > MaxShardFloors {
		// Fold every dependency of the largest keyspace and origin into one
		// covering all its shards.
		counts := map[ShardRef]int{}
		var top ShardRef
		for d := range s.deps {
			k := ShardRef{d.Keyspace, UnknownShard, d.Origin}
			if counts[k]++; counts[k] > counts[top] {
				top = k
			}
		}
		for d, h := range s.deps {
			if d.Keyspace == top.Keyspace && d.Origin == top.Origin {
				delete(s.deps, d)
				s.deps[top] = max(s.deps[top], h)
			}
		}
	}
}

// ClearDeps forgets the dependencies.
func (s *Session) ClearDeps() { clear(s.deps) }

// DropDeps removes the dependencies that sent (the part of the session a
// write carried) covers: the write depends on them, and the session now
// depends on the write instead. Dependencies raised since are kept.
func (s *Session) DropDeps(sent *Session) {
	for r, h := range sent.deps {
		if s.deps[r] <= h {
			delete(s.deps, r)
		}
	}
}

// ObserveWrite records that the session wrote version v of key (in
// shard): MaxHLC and a floor, but not PastHLC (the write's causal past on
// other shards is what the session had read), and, for a whole session
// (not a narrowed one, whose client drops what the write carried itself,
// see DropDeps), dependencies reduced to that write.
func (s *Session) ObserveWrite(keyspace string, key []byte, shard uint32, v Version) {
	if v.IsZero() {
		return
	}
	if !s.Partial {
		clear(s.deps)
	}
	s.observeHLC(v.HLC)
	s.observeKey(keyspace, key, shard, v)
}

// Fallback returns the fallback floor of origin (zero: none).
func (s *Session) Fallback(origin string) uint64 { return s.fallback[origin] }

// raiseFallback raises origin's fallback floor to hlc.
func (s *Session) raiseFallback(origin string, hlc uint64) {
	if hlc == 0 || hlc <= s.fallback[origin] {
		return
	}
	if s.fallback == nil {
		s.fallback = make(map[string]uint64)
	}
	s.fallback[origin] = hlc
	s.shardGen++
}

// Observe records that the session saw version v of key, whose shard is
// unknown to the caller. Prefer ObserveShard.
func (s *Session) Observe(keyspace string, key []byte, v Version) {
	s.ObserveShard(keyspace, key, UnknownShard, v)
}

// ObserveShard records that the session saw version v of key, which
// belongs to shard. PastHLC rises to v unless the session already holds
// exactly v as key's floor (see HoldsKeyVersion).
func (s *Session) ObserveShard(keyspace string, key []byte, shard uint32, v Version) {
	if !v.IsZero() && !s.HoldsKeyVersion(keyspace, key, v) {
		s.PastHLC = max(s.PastHLC, v.HLC)
	}
	s.ObserveKnown(keyspace, key, shard, v)
}

// ObserveKnown records that the session saw version v of key, which
// belongs to shard, when the session the read carried held exactly v as
// key's floor (HoldsKeyVersion): a floor and a dependency, like
// ObserveShard, but PastHLC stays. A reply's delta records a re-read
// this way.
func (s *Session) ObserveKnown(keyspace string, key []byte, shard uint32, v Version) {
	if v.IsZero() {
		return
	}
	s.observeHLC(v.HLC)
	s.observeKey(keyspace, key, shard, v)
}

// HoldsKeyVersion reports whether v is key's floor in s. Reading v again
// then needs no higher PastHLC: a key floor enters a session when the
// session writes that version (whose causal past on other shards is what
// the session had read before, under PastHLC already, and its own earlier
// writes, under its floors) or reads it (which raised PastHLC to it), or
// with another session merged into s (whose PastHLC s takes). So the
// causal past of v is already under s's floors, and the read of one's own
// write does not send the session's next reads on every other shard to a
// replica that applied it, or to the leader (ADR 015).
func (s *Session) HoldsKeyVersion(keyspace string, key []byte, v Version) bool {
	kf, ok := s.keys[FloorKey(keyspace, key)]
	return ok && kf.v == v
}

func (s *Session) observeKey(keyspace string, key []byte, shard uint32, v Version) {
	s.putKey(FloorKey(keyspace, key), keyspace, shard, v)
	s.raiseDep(ShardRef{keyspace, shard, v.Site}, v.HLC)
	s.trim()
}

// ObserveShardVersion records that the session saw version v of some key
// of the shard, without keeping a key floor for it (for example the items
// of a scan).
func (s *Session) ObserveShardVersion(keyspace string, shard uint32, v Version) {
	if v.HLC == 0 {
		return
	}
	s.observeHLC(v.HLC)
	s.PastHLC = max(s.PastHLC, v.HLC)
	s.raiseShard(ShardRef{keyspace, shard, v.Site}, v.HLC)
	s.raiseDep(ShardRef{keyspace, shard, v.Site}, v.HLC)
	s.trimShards()
}

// ObserveShardHLC is ObserveShardVersion for a version of origin "" (the
// site serving the reads).
func (s *Session) ObserveShardHLC(keyspace string, shard uint32, hlc uint64) {
	s.ObserveShardVersion(keyspace, shard, Version{HLC: hlc})
}

// ObserveHLC raises MaxHLC and PastHLC to hlc.
func (s *Session) ObserveHLC(hlc uint64) {
	s.observeHLC(hlc)
	s.PastHLC = max(s.PastHLC, hlc)
}

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
	if shard != UnknownShard && v.HLC <= s.shardFloor(ShardRef{keyspace, shard, v.Site}) {
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

// ShardGeneration changes whenever a shard floor or a fallback is raised
// or dropped. With MaxHLC it identifies the part ForRead returns for keys
// without a key floor, so callers may cache its encoding.
func (s *Session) ShardGeneration() uint64 { return s.shardGen }

// HasKeyFloor reports whether the session holds a floor of its own for key.
func (s *Session) HasKeyFloor(keyspace string, key []byte) bool {
	_, ok := s.keys[FloorKey(keyspace, key)]
	return ok
}

// shardFloor is the floor of shard r: its own, or its origin's fallback.
func (s *Session) shardFloor(r ShardRef) uint64 {
	fb := s.fallback[r.Origin]
	if f, ok := s.shards[r]; ok {
		return max(f, fb)
	}
	return fb
}

// Floor returns the version a replica must have applied of key before it
// may answer this session's read, and whether the session has one. The
// returned version is the key's own floor, or, when the floor of the
// key's shard for the same origin (or that origin's fallback) is larger, a
// version of that origin carrying that HLC. Floor never decreases as the
// session observes more.
func (s *Session) Floor(keyspace string, key []byte) (Version, bool) {
	kf, ok := s.keys[FloorKey(keyspace, key)]
	if !ok {
		return Version{}, false
	}
	if kf.shard != UnknownShard {
		if sf := s.shardFloor(ShardRef{keyspace, kf.shard, kf.v.Site}); sf > kf.v.HLC {
			return Version{HLC: sf, Site: kf.v.Site}, true
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

// ReadFloors appends to dst the floors a replica of shard (the shard of
// key) must have applied before it serves this session's read of key, at
// most one per origin: for each origin, the larger of the key's floor (for
// the origin of its version) and the shard's floor for that origin, or
// that origin's fallback when the shard has no floor of its own for it.
// MaxHLC is not included (see router: it is a floor of the serving site).
func (s *Session) ReadFloors(dst []Floor, keyspace string, key []byte, shard uint32) []Floor {
	start := len(dst)
	for r, f := range s.shards {
		if r.Shard == shard && r.Keyspace == keyspace {
			dst = raiseFloor(dst, start, Floor{Origin: r.Origin, HLC: f})
		}
	}
	if kf, ok := s.keys[FloorKey(keyspace, key)]; ok {
		dst = raiseFloor(dst, start, Floor{Origin: kf.v.Site, HLC: kf.v.HLC})
	}
	return s.addFallbacks(dst, start, keyspace, shard)
}

// ShardReadFloors is ReadFloors for a read of a whole shard (a scan): the
// shard's floors, raised by the floors of the keys of the shard in
// [start, end) (an empty end is unbounded).
func (s *Session) ShardReadFloors(dst []Floor, keyspace string, shard uint32, start, end []byte, shardOf func(key []byte) uint32) []Floor {
	first := len(dst)
	for r, f := range s.shards {
		if r.Shard == shard && r.Keyspace == keyspace {
			dst = raiseFloor(dst, first, Floor{Origin: r.Origin, HLC: f})
		}
	}
	for fk, kf := range s.keys {
		ks, key := splitFloorKey(fk)
		if ks != keyspace || key < string(start) || (len(end) > 0 && key >= string(end)) {
			continue
		}
		if kf.shard == shard || (kf.shard == UnknownShard && shardOf([]byte(key)) == shard) {
			dst = raiseFloor(dst, first, Floor{Origin: kf.v.Site, HLC: kf.v.HLC})
		}
	}
	return s.addFallbacks(dst, first, keyspace, shard)
}

// addFallbacks raises, in dst[start:], the floor of each origin that has
// a fallback and no shard floor of its own on (keyspace, shard).
func (s *Session) addFallbacks(dst []Floor, start int, keyspace string, shard uint32) []Floor {
	for origin, fb := range s.fallback {
		if _, own := s.shards[ShardRef{keyspace, shard, origin}]; own {
			continue
		}
		dst = raiseFloor(dst, start, Floor{Origin: origin, HLC: fb, Fallback: true})
	}
	return dst
}

// raiseFloor raises the floor of f.Origin in dst[start:] to f, adding it
// when absent. A floor raised by a fallback is a fallback floor.
func raiseFloor(dst []Floor, start int, f Floor) []Floor {
	for i := start; i < len(dst); i++ {
		if dst[i].Origin == f.Origin {
			if f.HLC > dst[i].HLC {
				dst[i] = f
			}
			return dst
		}
	}
	return append(dst, f)
}

// ReadFloor returns the largest of ReadFloors' floors and whether it is a
// fallback floor: the whole floor of a session whose versions all come
// from one origin.
func (s *Session) ReadFloor(keyspace string, key []byte, shard uint32) (hlc uint64, fallback bool) {
	var buf [4]Floor
	return largest(s.ReadFloors(buf[:0], keyspace, key, shard))
}

// ShardReadFloor is ReadFloor for a scan (see ShardReadFloors).
func (s *Session) ShardReadFloor(keyspace string, shard uint32, start, end []byte, shardOf func(key []byte) uint32) (hlc uint64, fallback bool) {
	var buf [4]Floor
	return largest(s.ShardReadFloors(buf[:0], keyspace, shard, start, end, shardOf))
}

func largest(fs []Floor) (hlc uint64, fallback bool) {
	for _, f := range fs {
		if f.HLC > hlc {
			hlc, fallback = f.HLC, f.Fallback
		}
	}
	return hlc, fallback
}

// Merge folds another session into s (for example the reply of a call, or
// the token of a concurrent client).
func (s *Session) Merge(o *Session) {
	if o == nil {
		return
	}
	s.observeHLC(o.MaxHLC)
	s.PastHLC = max(s.PastHLC, o.PastHLC)
	if o.Site != "" {
		s.Site = o.Site
	}
	if o.Cluster != 0 {
		s.Cluster = o.Cluster
	}
	for origin, fb := range o.fallback {
		s.raiseFallback(origin, fb)
	}
	for r, h := range o.deps {
		s.raiseDep(r, h)
	}
	// What o saw is a dependency too (a reply's delta carries floors, not
	// dependencies).
	for r, f := range o.shards {
		s.raiseDep(r, f)
	}
	for fk, kf := range o.keys {
		if kf.shard != UnknownShard {
			ks, _ := splitFloorKey(fk)
			s.raiseDep(ShardRef{ks, kf.shard, kf.v.Site}, kf.v.HLC)
		}
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
			s.raiseFallback(e.f.v.Site, e.f.v.HLC)
			continue
		}
		ks, _ := splitFloorKey(e.k)
		s.raiseShard(ShardRef{ks, e.f.shard, e.f.v.Site}, e.f.v.HLC)
	}
	clear(all)
	s.scratch = all[:0]
	s.trimShards()
}

// trimShards keeps the session within MaxShardFloors shard floors by
// folding the oldest quarter into their origins' fallbacks.
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
		s.raiseFallback(x.r.Origin, x.f)
	}
}

// Clone returns a deep copy of s.
func (s *Session) Clone() *Session {
	c := &Session{MaxHLC: s.MaxHLC, PastHLC: s.PastHLC, Site: s.Site, Cluster: s.Cluster, Partial: s.Partial}
	c.copyFallbacks(s)
	for r, h := range s.deps {
		c.raiseDep(r, h)
	}
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
// keyspace (a Get, BatchGet or History): MaxHLC, the fallbacks, the floors
// of those keys, and the floors of their shards (every origin's). shardOf
// maps a key to its shard when the caller knows the keyspace's shard
// count; with a nil shardOf, or for a key it cannot place, every shard
// floor of the keyspace is included.
func (s *Session) ForRead(keyspace string, keys [][]byte, shardOf func(key []byte) (uint32, bool)) *Session {
	out := &Session{MaxHLC: s.MaxHLC, PastHLC: s.PastHLC, Site: s.Site, Cluster: s.Cluster, Partial: true}
	out.copyFallbacks(s)
	allShards := false
	var want [8]uint32
	shards := want[:0]
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
		if !slices.Contains(shards, sh) {
			shards = append(shards, sh)
		}
	}
	if allShards {
		s.copyShards(out, keyspace)
		return out
	}
	if len(shards) > 0 {
		for r, f := range s.shards {
			if r.Keyspace == keyspace && slices.Contains(shards, r.Shard) {
				out.raiseShard(r, f)
			}
		}
	}
	return out
}

// ForScan returns the part of s a server needs to serve a scan of
// [start, end) of keyspace: MaxHLC, the fallbacks, the key floors in the
// range and every shard floor of the keyspace.
func (s *Session) ForScan(keyspace string, start, end []byte) *Session {
	out := &Session{MaxHLC: s.MaxHLC, PastHLC: s.PastHLC, Site: s.Site, Cluster: s.Cluster, Partial: true}
	out.copyFallbacks(s)
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

// ForWrite returns the part of s a server needs to serve a write: MaxHLC
// and the dependencies.
func (s *Session) ForWrite() *Session {
	out := &Session{MaxHLC: s.MaxHLC, Site: s.Site, Cluster: s.Cluster, Partial: true}
	for r, h := range s.deps {
		out.raiseDep(r, h)
	}
	return out
}

func (s *Session) copyShards(out *Session, keyspace string) {
	for r, f := range s.shards {
		if r.Keyspace == keyspace {
			out.raiseShard(r, f)
		}
	}
}

func (s *Session) copyFallbacks(from *Session) {
	for origin, fb := range from.fallback {
		s.raiseFallback(origin, fb)
	}
}

// compareRefs orders shard refs by keyspace, shard and origin.
func compareRefs(a, b ShardRef) int {
	if c := strings.Compare(a.Keyspace, b.Keyspace); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Shard, b.Shard); c != 0 {
		return c
	}
	return strings.Compare(a.Origin, b.Origin)
}

// Observed lists, per (keyspace, shard, origin), the newest HLC of the
// versions the session observed: its key floors, shard floors,
// dependencies and fallbacks. Shard UnknownShard stands for every shard of
// the keyspace, keyspace "" (a fallback) for every keyspace. A site that
// applied all of them holds the session's whole causal past: it applied
// every other site's write only after the writes it depends on
// (router.Arrive).
func (s *Session) Observed() []Dependency {
	m := map[ShardRef]uint64{}
	raise := func(r ShardRef, h uint64) {
		if h > m[r] {
			m[r] = h
		}
	}
	for fk, kf := range s.keys {
		ks, _ := splitFloorKey(fk)
		raise(ShardRef{ks, kf.shard, kf.v.Site}, kf.v.HLC)
	}
	for r, h := range s.shards {
		raise(r, h)
	}
	for r, h := range s.deps {
		raise(r, h)
	}
	for o, h := range s.fallback {
		raise(ShardRef{"", UnknownShard, o}, h)
	}
	out := make([]Dependency, 0, len(m))
	for r, h := range m {
		out = append(out, Dependency{Ref: r, HLC: h})
	}
	slices.SortFunc(out, func(a, b Dependency) int { return compareRefs(a.Ref, b.Ref) })
	return out
}
