package causal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// floorsOf returns the floors of key as origin → floor, for comparison.
func floorsOf(s *Session, ks string, key string, shard uint32) map[string]Floor {
	out := map[string]Floor{}
	for _, f := range s.ReadFloors(nil, ks, []byte(key), shard) {
		if _, dup := out[f.Origin]; dup {
			panic("two floors for one origin")
		}
		out[f.Origin] = f
	}
	return out
}

// TestFloorsPerOrigin: versions of different origins in one shard keep
// separate floors, through key floors, trimming into shard floors and
// fallbacks, merging and the token, so that a replica checks each against
// its own progress for that origin.
func TestFloorsPerOrigin(t *testing.T) {
	var s Session
	s.ObserveShard("ks", []byte("a"), 3, Version{HLC: 900, Site: "s1"})
	s.ObserveShard("ks", []byte("b"), 3, Version{HLC: 400, Site: "s2"})
	s.ObserveShardVersion("ks", 3, Version{HLC: 300, Site: "s3"})
	got := floorsOf(&s, "ks", "b", 3)
	want := map[string]Floor{"s2": {Origin: "s2", HLC: 400}, "s3": {Origin: "s3", HLC: 300}}
	if len(got) != 2 || got["s2"] != want["s2"] || got["s3"] != want["s3"] {
		t.Fatalf("floors of b: %+v, want %+v (a's floor is a key floor of another key)", got, want)
	}
	// Trimming folds each key floor into its own origin's shard floor.
	for i := 0; i < 2*MaxSessionKeys; i++ {
		s.ObserveShard("ks", []byte{'k', byte(i)}, 3, Version{HLC: uint64(i + 1), Site: "s1"})
	}
	got = floorsOf(&s, "ks", "b", 3)
	if got["s2"].HLC != 400 || got["s1"].HLC == 0 || got["s1"].HLC >= 400 || got["s3"].HLC != 300 {
		t.Fatalf("after trimming: %+v (s1's shard floor must hold the dropped s1 keys only)", got)
	}
	if a := floorsOf(&s, "ks", "a", 3); a["s1"].HLC != 900 || a["s2"].HLC != 0 {
		t.Fatalf("floors of a: %+v", a)
	}
	// The token keeps the origins.
	tok := s.Encode()
	if tok[2] != tokenFormat {
		t.Fatalf("format %d", tok[2])
	}
	back, err := DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Encode(), tok) {
		t.Fatal("round trip changed the token")
	}
	if g := floorsOf(back, "ks", "b", 3); g["s2"] != got["s2"] || g["s1"] != got["s1"] || g["s3"] != got["s3"] {
		t.Fatalf("decoded floors %+v, want %+v", g, got)
	}
	// A narrowed read carries every origin's floor of the key's shard.
	part := back.ForRead("ks", [][]byte{[]byte("b")}, func([]byte) (uint32, bool) { return 3, true })
	if g := floorsOf(part, "ks", "b", 3); len(g) != len(got) {
		t.Fatalf("narrowed floors %+v, want %+v", g, got)
	}
	// Shard floors beyond the bound fold into per-origin fallbacks.
	var u Session
	for i := 0; i < 2*MaxShardFloors; i++ {
		origin := []string{"s1", "s2"}[i%2]
		u.ObserveShardVersion("big", uint32(i), Version{HLC: uint64(10 + i), Site: origin})
	}
	if u.Fallback("s1") == 0 || u.Fallback("s2") == 0 || u.Fallback("") != 0 {
		t.Fatalf("fallbacks s1 %d s2 %d", u.Fallback("s1"), u.Fallback("s2"))
	}
	fs := floorsOf(&u, "big", "x", 0) // shard 0 was dropped: both fallbacks apply
	if !fs["s1"].Fallback || !fs["s2"].Fallback {
		t.Fatalf("dropped shard floors: %+v", fs)
	}
	var m Session
	m.Merge(&u)
	if m.Fallback("s1") != u.Fallback("s1") || m.Fallback("s2") != u.Fallback("s2") {
		t.Fatal("merge lost a fallback")
	}
}

// encodeV2 builds a format-2 token (one fallback, shard floors without an
// origin).
func encodeV2(maxHLC, fallback uint64, ks string, shardFloors map[uint32]uint64, key string, keyShard uint32, v Version) []byte {
	b := []byte{'C', 'S', 2, 0}
	b = binary.AppendUvarint(b, maxHLC)
	b = binary.AppendUvarint(b, fallback)
	b = binary.AppendUvarint(b, 1)
	b = appendString(b, ks)
	shards := make([]uint32, 0, len(shardFloors))
	for sh := range shardFloors {
		shards = append(shards, sh)
	}
	slices.Sort(shards)
	b = binary.AppendUvarint(b, uint64(len(shards)))
	for _, sh := range shards {
		b = binary.AppendUvarint(b, uint64(sh))
		b = binary.AppendUvarint(b, shardFloors[sh])
	}
	b = binary.AppendUvarint(b, 1)
	b = appendString(b, key)
	b = binary.AppendUvarint(b, uint64(keyShard)+1)
	b = binary.AppendUvarint(b, v.HLC)
	b = appendString(b, v.Site)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestDecodeFormat2: a format-2 token's shard floors and fallback become
// floors of origin "" (the site serving the read); its key floors keep
// their versions' sites.
func TestDecodeFormat2(t *testing.T) {
	s, err := DecodeSession(encodeV2(700, 50, "default", map[uint32]uint64{2: 600, 5: 80}, "k", 2, Version{HLC: 650, Site: "s1"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxHLC != 700 || s.Fallback("") != 50 {
		t.Fatalf("MaxHLC %d fallback %d", s.MaxHLC, s.Fallback(""))
	}
	got := floorsOf(s, "default", "k", 2)
	if got[""].HLC != 600 || got["s1"].HLC != 650 || got[""].Fallback {
		t.Fatalf("floors of k: %+v", got)
	}
	if got := floorsOf(s, "default", "other", 9); got[""] != (Floor{HLC: 50, Fallback: true}) {
		t.Fatalf("floor of a shard without one: %+v", got)
	}
	// Re-encoded, it is a format-3 token with the same floors.
	back, err := DecodeSession(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if g := floorsOf(back, "default", "k", 2); g[""] != got[""] || g["s1"] != got["s1"] {
		t.Fatalf("re-encoded floors %+v", g)
	}
}

// TestDependencies: reads add dependencies per (keyspace, shard, origin);
// a write on a whole session reduces them to the write; on a narrowed one
// the client drops what the write carried (DropDeps), keeping what was
// read meanwhile; they survive the token and fold into one per keyspace
// and origin beyond MaxShardFloors.
func TestDependencies(t *testing.T) {
	var s Session
	s.ObserveShard("ks", []byte("a"), 1, Version{HLC: 10, Site: "s1"})
	s.ObserveShard("ks", []byte("b"), 1, Version{HLC: 12, Site: "s1"})
	s.ObserveShard("ks", []byte("c"), 2, Version{HLC: 5, Site: "s2"})
	deps := s.Deps(nil)
	want := []Dependency{{ShardRef{"ks", 1, "s1"}, 12}, {ShardRef{"ks", 2, "s2"}, 5}}
	if !slices.Equal(deps, want) {
		t.Fatalf("deps %v, want %v", deps, want)
	}
	back, err := DecodeSession(s.Encode())
	if err != nil || !slices.Equal(back.Deps(nil), want) {
		t.Fatalf("decoded deps %v (%v)", back.Deps(nil), err)
	}
	// A narrowed write carries them; a read completes meanwhile; the
	// write's reply adds the write; DropDeps keeps the read and the write.
	sent := s.ForWrite()
	if !slices.Equal(sent.Deps(nil), want) || len(sent.keys) != 0 {
		t.Fatalf("write part: %v", sent.Deps(nil))
	}
	s.ObserveShard("ks", []byte("d"), 3, Version{HLC: 20, Site: "s3"})
	var reply Session
	reply.ObserveShard("ks", []byte("w"), 1, Version{HLC: 30, Site: "s1"})
	s.Merge(&reply)
	s.DropDeps(sent)
	want = []Dependency{{ShardRef{"ks", 1, "s1"}, 30}, {ShardRef{"ks", 3, "s3"}, 20}}
	if got := s.Deps(nil); !slices.Equal(got, want) {
		t.Fatalf("after the write: %v, want %v", got, want)
	}
	// A whole session (kvctl's) is reduced to the write by the server.
	full := back.Clone()
	full.ObserveWrite("ks", []byte("w"), 4, Version{HLC: 40, Site: "s1"})
	if got := full.Deps(nil); !slices.Equal(got, []Dependency{{ShardRef{"ks", 4, "s1"}, 40}}) {
		t.Fatalf("whole session after a write: %v", got)
	}
	// Bounded: beyond MaxShardFloors, one dependency covers the keyspace.
	var big Session
	for i := 0; i <= MaxShardFloors; i++ {
		big.ObserveShardVersion("big", uint32(i), Version{HLC: uint64(i + 1), Site: "s2"})
	}
	if got := big.Deps(nil); len(got) != 1 || got[0] != (Dependency{ShardRef{"big", UnknownShard, "s2"}, MaxShardFloors + 1}) {
		t.Fatalf("folded deps: %d entries, first %v", len(got), got[0])
	}
}

// TestPastHLC: reads raise PastHLC, the session's own writes raise MaxHLC
// only (their causal past on other shards is what was read before);
// tokens of older formats, which did not tell them apart, get PastHLC =
// MaxHLC.
func TestPastHLC(t *testing.T) {
	var s Session
	s.ObserveShard("ks", []byte("r"), 1, Version{HLC: 40, Site: "s1"})
	s.ObserveWrite("ks", []byte("w"), 2, Version{HLC: 90, Site: "s1"})
	if s.MaxHLC != 90 || s.PastHLC != 40 {
		t.Fatalf("MaxHLC %d PastHLC %d, want 90 and 40", s.MaxHLC, s.PastHLC)
	}
	if v, ok := s.Floor("ks", []byte("w")); !ok || v.HLC != 90 {
		t.Fatalf("the own write has no key floor: %v", v)
	}
	back, err := DecodeSession(s.Encode())
	if err != nil || back.PastHLC != 40 || back.MaxHLC != 90 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if r := s.ForRead("ks", [][]byte{[]byte("x")}, nil); r.PastHLC != 40 {
		t.Fatalf("a narrowed read carries PastHLC %d", r.PastHLC)
	}
	var reply Session
	reply.ObserveWrite("ks", []byte("w2"), 3, Version{HLC: 120, Site: "s1"})
	s.Merge(&reply)
	if s.MaxHLC != 120 || s.PastHLC != 40 {
		t.Fatalf("after merging a write's reply: MaxHLC %d PastHLC %d", s.MaxHLC, s.PastHLC)
	}
	old, err := DecodeSession(encodeV2(700, 0, "ks", nil, "k", 1, Version{HLC: 650, Site: "s1"}))
	if err != nil || old.PastHLC != 700 {
		t.Fatalf("format 2: PastHLC %d (%v)", old.PastHLC, err)
	}
}
