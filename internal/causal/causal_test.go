package causal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

func TestVersionOrder(t *testing.T) {
	cases := []struct {
		a, b Version
		want int
	}{
		{Version{1, "a"}, Version{2, "a"}, -1},
		{Version{2, "a"}, Version{1, "z"}, 1},
		{Version{5, "a"}, Version{5, "b"}, -1},
		{Version{5, "b"}, Version{5, "b"}, 0},
		{Version{}, Version{1, ""}, -1},
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.Compare(c.a); got != -c.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
	if !(Version{}).IsZero() || (Version{HLC: 1}).IsZero() {
		t.Fatal("IsZero")
	}
}

func TestClockMonotonicAndObserve(t *testing.T) {
	wall := uint64(1000)
	c := NewClock(func() uint64 { return wall })
	a := c.Now()
	b := c.Now()
	if b <= a {
		t.Fatalf("not increasing: %d then %d", a, b)
	}
	if w, l := SplitHLC(b); w != 1000 || l != 1 {
		t.Fatalf("split = %d,%d", w, l)
	}
	// Physical clock going backwards never makes readings decrease.
	wall = 10
	if d := c.Now(); d <= b {
		t.Fatalf("clock went backwards: %d after %d", d, b)
	}
	// A remote timestamp far ahead is observed.
	remote := MakeHLC(5000, 7)
	c.Observe(remote)
	if e := c.Now(); e <= remote {
		t.Fatalf("Now %d not after observed %d", e, remote)
	}
	// Physical time catching up resets the logical counter.
	wall = 6000
	if w, l := SplitHLC(c.Now()); w != 6000 || l != 0 {
		t.Fatalf("got %d.%d, want 6000.0", w, l)
	}
}

func TestSessionRoundTripAndMerge(t *testing.T) {
	var s Session
	if s.Encode() != nil {
		t.Fatal("empty session must encode to nil")
	}
	s.Observe("default", []byte("a"), Version{10, "s1"})
	s.Observe("default", []byte("a"), Version{5, "s1"}) // older: ignored
	s.Observe("other", []byte("a\x00b"), Version{20, "s2"})
	tok := s.Encode()
	got, err := DecodeSession(tok)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := got.Len(); got.MaxHLC != 20 || n != 2 {
		t.Fatalf("decoded %+v", got)
	}
	if v, ok := got.Floor("default", []byte("a")); !ok || v != (Version{10, "s1"}) {
		t.Fatalf("floor = %v %v", v, ok)
	}
	if !bytes.Equal(got.Encode(), tok) {
		t.Fatal("encoding is not deterministic")
	}
	o := &Session{}
	o.Observe("default", []byte("a"), Version{30, "s1"})
	got.Merge(o)
	if v, _ := got.Floor("default", []byte("a")); v.HLC != 30 || got.MaxHLC != 30 {
		t.Fatalf("merge: %+v", got)
	}
}

func TestSessionBounded(t *testing.T) {
	var s Session
	for i := 0; i < 3*MaxSessionKeys; i++ {
		s.Observe("ks", []byte(fmt.Sprint("k", i)), Version{uint64(i + 1), "s"})
	}
	if n, _ := s.Len(); n > MaxSessionKeys {
		t.Fatalf("%d keys kept", n)
	}
	// The newest floors survive and MaxHLC still covers the dropped ones.
	if _, ok := s.Floor("ks", []byte(fmt.Sprint("k", 3*MaxSessionKeys-1))); !ok {
		t.Fatal("newest floor dropped")
	}
	if s.MaxHLC != 3*MaxSessionKeys {
		t.Fatalf("MaxHLC = %d", s.MaxHLC)
	}
	if _, err := DecodeSession(s.Encode()); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeSessionRejects(t *testing.T) {
	var s Session
	s.Observe("default", []byte("k"), Version{10, "s1"})
	good := s.Encode()
	flipped := append([]byte(nil), good...)
	flipped[5] ^= 0xff
	for name, tok := range map[string][]byte{
		"garbage":           []byte("hello world"),
		"short":             {'C', 'S'},
		"format":            append([]byte{'C', 'S', 9}, good[3:]...),
		"format 1 checksum": {'C', 'S', 1, 0, 0, 0, 0, 0},
		"checksum":          flipped,
		"truncated":         good[:len(good)-5],
		"huge":              make([]byte, MaxTokenBytes+1),
	} {
		if _, err := DecodeSession(tok); !errors.Is(err, ErrMalformedToken) {
			t.Errorf("%s: err = %v, want ErrMalformedToken", name, err)
		}
	}
}

// TestSessionCarriesItsCluster: the cluster id travels in the token, in
// every narrowed part, and through a merge; a zero id is refused.
func TestSessionCarriesItsCluster(t *testing.T) {
	var s Session
	s.ObserveShard("default", []byte("k"), 1, Version{HLC: 10, Site: "s1"})
	s.Site, s.Cluster = "s1", 42
	back, err := DecodeSession(s.Encode())
	if err != nil || back.Cluster != 42 || back.Site != "s1" {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for name, part := range map[string]*Session{
		"read":  s.ForRead("default", [][]byte{[]byte("k")}, nil),
		"scan":  s.ForScan("default", nil, nil),
		"write": s.ForWrite(),
		"clone": s.Clone(),
	} {
		if got, err := DecodeSession(part.Encode()); err != nil || got.Cluster != 42 {
			t.Errorf("%s part: cluster %d, %v", name, got.Cluster, err)
		}
	}
	var fresh Session
	fresh.Merge(&Session{Cluster: 7})
	fresh.Merge(&Session{})
	if fresh.Cluster != 7 {
		t.Fatalf("merged cluster %d, want 7", fresh.Cluster)
	}
	tok := s.Encode()
	// The id's 8 bytes follow the site; zero them and fix the checksum.
	i := bytes.Index(tok, []byte("s1")) + 2
	bad := append([]byte(nil), tok[:len(tok)-4]...)
	copy(bad[i:i+8], make([]byte, 8))
	bad = binary.BigEndian.AppendUint32(bad, crc32.Checksum(bad, castagnoli))
	if _, err := DecodeSession(bad); !errors.Is(err, ErrMalformedToken) {
		t.Fatalf("zero cluster id: %v", err)
	}
}

func FuzzDecodeSession(f *testing.F) {
	var s Session
	s.ObserveShard("default", []byte("k"), 3, Version{10, "s1"})
	s.ObserveShardHLC("other", 7, 12)
	s.Observe("default", []byte("unplaced"), Version{11, "s1"})
	f.Add(s.Encode())
	f.Add(encodeV1(5, map[string]Version{"default\x00k": {5, "s1"}}))
	f.Add(encodeV2(700, 50, "default", map[uint32]uint64{2: 600}, "k", 2, Version{HLC: 650, Site: "s1"}))
	var geo Session
	geo.ObserveShard("default", []byte("r"), 1, Version{HLC: 40, Site: "s2"})
	geo.ObserveWrite("default", []byte("w"), 2, Version{HLC: 90, Site: "s1"})
	for i := 0; i <= MaxShardFloors; i++ {
		geo.ObserveShardVersion("big", uint32(i), Version{HLC: uint64(i + 1), Site: []string{"s2", "s3"}[i%2]})
	}
	f.Add(geo.Encode())
	geo.Site, geo.Cluster = "s1", 0x1234567890abcdef
	f.Add(geo.Encode())
	f.Add([]byte{})
	f.Add([]byte("CS\x01"))
	f.Add([]byte("CS\x02"))
	f.Fuzz(func(t *testing.T, tok []byte) {
		got, err := DecodeSession(tok)
		if err != nil {
			if !errors.Is(err, ErrMalformedToken) {
				t.Fatalf("unexpected error type: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes (in the current format) to a token
		// that decodes to the same session and encodes identically.
		enc := got.Encode()
		again, err := DecodeSession(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(again.Encode(), enc) {
			t.Fatalf("round trip changed session: %+v vs %+v", got, again)
		}
		// Narrowing and merging never panic on decoded input.
		part := got.ForRead("default", [][]byte{[]byte("k")}, nil)
		part.Merge(got)
		_ = got.ForScan("default", nil, nil)
	})
}
