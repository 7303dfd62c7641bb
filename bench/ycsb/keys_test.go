package ycsb

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"
	"testing"
)

func TestKeyNameMatchesYCSB(t *testing.T) {
	// Keys YCSB itself writes with insertorder=hashed.
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "user6284781860667377211"},
		{1, "user8517097267634966620"},
	} {
		if got := KeyName(tc.n); got != tc.want {
			t.Errorf("KeyName(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// FNV64 is FNV-1a over the little-endian bytes, made non-negative.
func TestFNV64IsFNV1a(t *testing.T) {
	r := testRand(testSeed(t, 1))
	for i := range 10000 {
		n := int64(r.Uint64())
		if i < 3 {
			n = []int64{0, -1, math.MaxInt64}[i]
		}
		h := fnv.New64a()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h.Write(b[:])
		want := int64(h.Sum64())
		if want < 0 {
			want = -want
		}
		if got := FNV64(n); got != want {
			t.Fatalf("FNV64(%d) = %d, want %d", n, got, want)
		}
		if got, want := KeyName(n), "user"+strconv.FormatInt(want, 10); got != want {
			t.Fatalf("KeyName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLoadKeys(t *testing.T) {
	const n = 100_000
	seen := make(map[string]bool, n)
	var next int64
	for i, k := range LoadKeys(n) {
		if i != next || k != KeyName(i) {
			t.Fatalf("LoadKeys yielded (%d, %q), want (%d, %q)", i, k, next, KeyName(next))
		}
		if seen[k] {
			t.Fatalf("LoadKeys: duplicate key %q at %d", k, i)
		}
		seen[k] = true
		next++
	}
	if next != n {
		t.Fatalf("LoadKeys yielded %d keys, want %d", next, n)
	}
	var m int
	for range LoadKeys(n) {
		if m++; m == 3 {
			break
		}
	}
	if m != 3 {
		t.Fatalf("LoadKeys after break: %d keys", m)
	}
}

func BenchmarkKeyName(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		_ = KeyName(int64(i))
	}
}
