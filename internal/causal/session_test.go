package causal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// encodeV1 builds a format-1 token (the format of earlier releases).
func encodeV1(maxHLC uint64, keys map[string]Version) []byte {
	b := []byte{'C', 'S', 1}
	b = binary.AppendUvarint(b, maxHLC)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := keys[k]
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, v.HLC)
		b = binary.AppendUvarint(b, uint64(len(v.Site)))
		b = append(b, v.Site...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestTrimFoldsIntoShardFloors: dropping a key floor raises its shard's
// floor to it, so the key's read floor stays at least what was seen.
func TestTrimFoldsIntoShardFloors(t *testing.T) {
	var s Session
	const n = 3 * MaxSessionKeys
	for i := 0; i < n; i++ {
		s.ObserveShard("ks", []byte(fmt.Sprint("k", i)), uint32(i%4), Version{uint64(i + 1), "s"})
		if keys, _ := s.Len(); keys > MaxSessionKeys {
			t.Fatalf("after %d keys: %d key floors kept", i+1, keys)
		}
	}
	keys, shards := s.Len()
	if keys < MaxSessionKeys*3/4 || shards != 4 {
		t.Fatalf("kept %d key floors and %d shard floors", keys, shards)
	}
	for i := 0; i < n; i++ {
		key := []byte(fmt.Sprint("k", i))
		hlc, fallback := s.ReadFloor("ks", key, uint32(i%4))
		if hlc < uint64(i+1) || fallback {
			t.Fatalf("k%d: read floor %d (fallback %v), saw version %d", i, hlc, fallback, i+1)
		}
	}
	// The newest floors are kept precisely: the shard floors lie below them.
	if v, ok := s.Floor("ks", []byte(fmt.Sprint("k", n-1))); !ok || v.HLC != n {
		t.Fatalf("newest floor %v %v", v, ok)
	}
	// A key floor that its shard's floor covers is not kept.
	sf, _ := s.ReadFloor("ks", []byte("fresh"), 0)
	s.ObserveShard("ks", []byte("fresh"), 0, Version{1, "s"})
	if _, ok := s.Floor("ks", []byte("fresh")); ok {
		t.Fatalf("kept a key floor below its shard floor %d", sf)
	}
	// Unplaced keys fold into the fallback floor.
	var u Session
	for i := 0; i <= MaxSessionKeys; i++ {
		u.Observe("ks", []byte(fmt.Sprint("k", i)), Version{uint64(i + 1), "s"})
	}
	if hlc, fallback := u.ReadFloor("ks", []byte("k0"), 9); hlc < 1 || !fallback {
		t.Fatalf("unplaced trimmed key: floor %d fallback %v", hlc, fallback)
	}
}

// TestFloorNeverGoesBack: random observations, merges (including stale
// ones, as concurrent replies arrive out of order) and token round trips;
// every key's read floor stays at or above every version the session saw
// of it, and never decreases.
func TestFloorNeverGoesBack(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const nkeys, nshards = 200, 8
	shardOf := func(i int) uint32 { return uint32(i % nshards) }
	seen := make([]uint64, nkeys)
	last := make([]uint64, nkeys)
	var s Session
	for step := 0; step < 5000; step++ {
		i := rng.IntN(nkeys)
		v := Version{HLC: uint64(rng.IntN(10000) + 1), Site: "s"}
		key := []byte(fmt.Sprint("k", i))
		switch rng.IntN(5) {
		case 0: // a reply merged as a token
			var o Session
			o.ObserveShard("ks", key, shardOf(i), v)
			if rng.IntN(2) == 0 {
				o.ObserveShardHLC("ks", uint32(rng.IntN(nshards)), uint64(rng.IntN(100)))
			}
			s.Merge(&o)
		case 1: // export and import
			d, err := DecodeSession(s.Encode())
			if err != nil {
				t.Fatal(err)
			}
			s = *d
			continue
		case 2: // a narrowed request merged back (what a server echoes)
			s.Merge(s.ForRead("ks", [][]byte{key}, nil))
			continue
		default:
			s.ObserveShard("ks", key, shardOf(i), v)
		}
		seen[i] = max(seen[i], v.HLC)
		for j := range nkeys {
			f, _ := s.ReadFloor("ks", []byte(fmt.Sprint("k", j)), shardOf(j))
			if f < seen[j] || f < last[j] {
				t.Fatalf("step %d key %d: floor %d, saw %d, floor was %d", step, j, f, seen[j], last[j])
			}
			last[j] = f
		}
	}
}

func TestTokenRoundTripAndNarrowing(t *testing.T) {
	var s Session
	for i := 0; i < 2*MaxSessionKeys; i++ {
		s.ObserveShard(fmt.Sprint("ks", i%3), []byte(fmt.Sprint("key/", i)), uint32(i%16), Version{uint64(1000 + i), "site1"})
	}
	s.Observe("ks0", []byte("unplaced"), Version{5000, "site1"})
	tok := s.Encode()
	got, err := DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(), tok) {
		t.Fatal("round trip changed the token")
	}
	if a, b := s.Len(); func() bool { c, d := got.Len(); return a != c || b != d }() {
		t.Fatal("round trip changed the floors")
	}
	if got.MaxHLC != 5000 {
		t.Fatalf("MaxHLC %d", got.MaxHLC)
	}
	// A read of one key sends its floor and its shard's floor only.
	const last = 2*MaxSessionKeys - 1
	key, ks, sh := []byte(fmt.Sprint("key/", last)), fmt.Sprint("ks", last%3), uint32(last%16)
	part := s.ForRead(ks, [][]byte{key}, nil)
	if k, sh := part.Len(); k != 1 || sh > 1 {
		t.Fatalf("narrowed read carries %d key and %d shard floors", k, sh)
	}
	want, _ := s.ReadFloor(ks, key, sh)
	if f, _ := part.ReadFloor(ks, key, sh); f != want {
		t.Fatalf("narrowed floor %d, want %d", f, want)
	}
	// Of a key without a floor, with an unknown shard count: every shard
	// floor of the keyspace.
	part = s.ForRead("ks1", [][]byte{[]byte("other")}, nil)
	if k, sh := part.Len(); k != 0 || sh == 0 || sh > 16 {
		t.Fatalf("narrowed read carries %d key and %d shard floors", k, sh)
	}
	if len(part.Encode()) > 200 || len(tok) < 1000 {
		t.Fatalf("narrowed token %d bytes, full %d", len(part.Encode()), len(tok))
	}
	// With the shard known, one shard floor.
	part = s.ForRead("ks1", [][]byte{[]byte("other")}, func([]byte) (uint32, bool) { return 4, true })
	if k, sh := part.Len(); k != 0 || sh != 1 {
		t.Fatalf("narrowed read carries %d key and %d shard floors", k, sh)
	}
	// A write carries MaxHLC and the dependencies: one per (keyspace,
	// shard, origin) read since the last write, here 2 keyspaces × 16
	// shards, and one for all of ks0 (the unplaced key, newer than every
	// other version of ks0), none of the floors.
	if w := s.ForWrite(); w.MaxHLC != s.MaxHLC || len(w.Deps(nil)) != 33 || len(w.Encode()) > 33*16 {
		t.Fatalf("write token %d bytes, %d dependencies", len(w.Encode()), len(w.Deps(nil)))
	}
}

func TestDecodeFormat1(t *testing.T) {
	keys := map[string]Version{FloorKey("default", []byte("a")): {10, "s1"}}
	s, err := DecodeSession(encodeV1(30, keys))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Floor("default", []byte("a")); !ok || v != (Version{10, "s1"}) || s.MaxHLC != 30 || s.Fallback("") != 0 {
		t.Fatalf("decoded %+v", s)
	}
	if hlc, fb := s.ReadFloor("default", []byte("a"), 3); hlc != 10 || fb {
		t.Fatalf("read floor %d %v", hlc, fb)
	}
	// A full format-1 token may have dropped floors: its MaxHLC becomes
	// the fallback floor.
	for i := 0; len(keys) < MaxSessionKeys; i++ {
		keys[FloorKey("default", []byte(fmt.Sprint("k", i)))] = Version{uint64(20 + i), "s1"}
	}
	s, err = DecodeSession(encodeV1(500, keys))
	if err != nil {
		t.Fatal(err)
	}
	if hlc, fb := s.ReadFloor("default", []byte("dropped"), 3); hlc != 500 || !fb {
		t.Fatalf("full format-1 token: read floor %d fallback %v", hlc, fb)
	}
	// A key floor without a keyspace is malformed.
	if _, err := DecodeSession(encodeV1(1, map[string]Version{"nokeyspace": {1, "s"}})); err == nil {
		t.Fatal("accepted a format-1 floor without a keyspace")
	}
}

func TestShardFloorsBounded(t *testing.T) {
	var s Session
	for i := 0; i < 2*MaxShardFloors; i++ {
		s.ObserveShardHLC(fmt.Sprint("ks", i/16), uint32(i%16), uint64(i+1))
	}
	if _, n := s.Len(); n > MaxShardFloors {
		t.Fatalf("%d shard floors", n)
	}
	// A dropped shard's reads need the fallback floor.
	if hlc, fb := s.ReadFloor("ks0", []byte("k"), 0); hlc < 1 || !fb {
		t.Fatalf("dropped shard: floor %d fallback %v", hlc, fb)
	}
	if _, err := DecodeSession(s.Encode()); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkObserveTrim(b *testing.B) {
	var s Session
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprint("user", i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var o Session
		o.ObserveShard("default", keys[i%len(keys)], uint32(i%16), Version{uint64(i + 1), "s1"})
		s.Merge(&o)
		_ = s.ForRead("default", keys[i%len(keys):i%len(keys)+1], nil).Encode()
	}
}

// TestSessionSite: the site that served a session last travels in every
// token, full or narrowed, and a merged reply moves it.
func TestSessionSite(t *testing.T) {
	s := &Session{}
	s.ObserveHLC(10)
	s.Merge(&Session{Site: "s1", Partial: true})
	if s.Site != "s1" {
		t.Fatalf("site %q after merge", s.Site)
	}
	for name, tok := range map[string]*Session{"full": s, "read": s.ForRead("default", [][]byte{[]byte("k")}, nil), "scan": s.ForScan("default", nil, nil), "write": s.ForWrite(), "clone": s.Clone()} {
		d, err := DecodeSession(tok.Encode())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Site != "s1" {
			t.Fatalf("%s token: site %q", name, d.Site)
		}
	}
	s.Merge(&Session{Partial: true}) // a reply without a site keeps it
	if s.Site != "s1" {
		t.Fatalf("site %q after a merge without site", s.Site)
	}
}

// TestRereadKeepsPastHLC: reading a version the session already holds as
// the key's floor (its own write, or a version it read before) leaves
// PastHLC; reading a newer version raises it.
func TestRereadKeepsPastHLC(t *testing.T) {
	var s Session
	own := Version{HLC: MakeHLC(100, 0)}
	s.ObserveWrite("ks", []byte("k"), 1, own)
	if s.PastHLC != 0 || s.MaxHLC != own.HLC {
		t.Fatalf("after a write: PastHLC %d MaxHLC %d, want 0 and %d", s.PastHLC, s.MaxHLC, own.HLC)
	}
	if !s.HoldsKeyVersion("ks", []byte("k"), own) {
		t.Fatal("the session does not hold its own write as the key's floor")
	}
	s.ObserveShard("ks", []byte("k"), 1, own)
	if s.PastHLC != 0 {
		t.Fatalf("re-reading its own write raised PastHLC to %d", s.PastHLC)
	}
	var delta Session
	delta.ObserveKnown("ks", []byte("k"), 1, own)
	if delta.PastHLC != 0 || !delta.HoldsKeyVersion("ks", []byte("k"), own) {
		t.Fatalf("ObserveKnown: PastHLC %d, holds %v", delta.PastHLC, delta.HoldsKeyVersion("ks", []byte("k"), own))
	}
	other := Version{HLC: MakeHLC(200, 0)}
	s.ObserveShard("ks", []byte("k"), 1, other)
	if s.PastHLC != other.HLC {
		t.Fatalf("reading a newer version: PastHLC %d, want %d", s.PastHLC, other.HLC)
	}
	// Another key at the same HLC from another site is not the held floor.
	s.ObserveShard("ks", []byte("j"), 2, Version{HLC: MakeHLC(300, 0), Site: "b"})
	if s.PastHLC != MakeHLC(300, 0) {
		t.Fatalf("reading another key: PastHLC %d", s.PastHLC)
	}
}

// TestDecodeSessionFor: of a partial token, a server serving a read of one
// shard decodes that shard's floors (every origin's) and no other shard
// floor of the keyspace, with the same read floors for the shard's keys;
// a full token is decoded whole.
func TestDecodeSessionFor(t *testing.T) {
	var s Session
	for i := range 64 {
		origin := []string{"", "s2"}[(i/16)%2]
		s.ObserveShardVersion("ks", uint32(i%16), Version{uint64(1000 + i), origin})
		s.ObserveShardVersion("other", uint32(i%4), Version{uint64(2000 + i), origin})
	}
	s.ObserveShard("ks", []byte("k"), 3, Version{3000, ""})
	// "x" has no floor of its own: the part carries every shard floor of ks.
	part := s.ForRead("ks", [][]byte{[]byte("k"), []byte("x")}, nil)
	part.Partial = true
	decode := func(tok []byte, filter *ShardFilter) *Session {
		t.Helper()
		s, err := DecodeSessionFor(tok, filter)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	only3 := &ShardFilter{Keyspace: "ks", Shard: 3}
	tok := part.Encode()
	whole, got := decode(tok, nil), decode(tok, only3)
	for r := range whole.shards {
		_, kept := got.shards[r]
		if want := r.Keyspace != "ks" || r.Shard == 3; kept != want {
			t.Errorf("shard floor %+v kept %v, want %v", r, kept, want)
		}
	}
	if _, n := got.Len(); n != 2 {
		t.Errorf("%d shard floors kept, want 2 (shard 3, two origins)", n)
	}
	for _, key := range []string{"k", "x"} {
		// The same floors, in any order (one per origin).
		byOrigin := func(a, b Floor) int { return strings.Compare(a.Origin, b.Origin) }
		w := slices.SortedFunc(slices.Values(whole.ReadFloors(nil, "ks", []byte(key), 3)), byOrigin)
		g := slices.SortedFunc(slices.Values(got.ReadFloors(nil, "ks", []byte(key), 3)), byOrigin)
		if !slices.Equal(w, g) {
			t.Errorf("read floors of %s: %+v, want %+v", key, g, w)
		}
	}
	if got.MaxHLC != whole.MaxHLC || got.PastHLC != whole.PastHLC || !got.Partial {
		t.Errorf("decoded %+v, want MaxHLC %d PastHLC %d partial", got, whole.MaxHLC, whole.PastHLC)
	}

	full := s.Clone()
	full.Partial = false
	ftok := full.Encode()
	if !bytes.Equal(decode(ftok, nil).Encode(), decode(ftok, only3).Encode()) {
		t.Error("a full token lost floors to the filter")
	}
}
