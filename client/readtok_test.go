package client

import (
	"bytes"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// TestReadHeaderCache: the cached read token of floorless keys is reused
// only while the session's shard floors, fallbacks, MaxHLC and PastHLC
// are unchanged, and always equals what ForRead would encode.
func TestReadHeaderCache(t *testing.T) {
	_, addr := startFake(t)
	c := newTestClient(t, addr)
	want := func() []byte {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.mu.session.ForRead("default", [][]byte{[]byte("x")}, nil).Encode()
	}
	check := func(step string) []byte {
		t.Helper()
		got := c.readHeader("default", dest{}, []byte("x")).Session
		if w := want(); !bytes.Equal(got, w) {
			t.Fatalf("%s: read token %x, want %x", step, got, w)
		}
		return got
	}
	first := check("empty session")
	// An own write raises MaxHLC only; a read of an older version then
	// raises PastHLC alone, and the cached token must follow it.
	c.mu.Lock()
	c.mu.session.ObserveWrite("default", []byte("w"), 2, causal.Version{HLC: 500, Site: "s"})
	c.mu.Unlock()
	check("after an own write")
	c.mu.Lock()
	c.mu.session.ObserveShard("default", []byte("r"), 2, causal.Version{HLC: 50, Site: "s"})
	c.mu.Unlock()
	if got := check("after reading an older version"); bytes.Equal(got, first) {
		t.Fatal("PastHLC rose but the read token did not change")
	}
	c.mu.Lock()
	c.mu.session.ObserveShard("default", []byte("a"), 3, causal.Version{HLC: 100, Site: "s"})
	c.mu.Unlock()
	check("after a key floor elsewhere")

	// Fold key floors into shard floors: the shard floors change, so the
	// cached token must too.
	before := check("before trim")
	c.mu.Lock()
	for i := range causal.MaxSessionKeys + 1 {
		c.mu.session.ObserveShard("default", []byte{byte(i), 'k'}, uint32(i%4), causal.Version{HLC: uint64(200 + i), Site: "s"})
	}
	c.mu.Unlock()
	after := check("after trim")
	if bytes.Equal(before, after) {
		t.Fatal("shard floors were raised but the read token did not change")
	}
	if bytes.Equal(first, after) {
		t.Fatal("read token equals the empty session's")
	}
	// The session moves to another site, and learns its cluster: the
	// cached token must carry both.
	c.mu.Lock()
	c.mu.session.Merge(&causal.Session{Site: "s2"})
	c.mu.Unlock()
	check("after a move")
	c.mu.Lock()
	c.mu.session.Merge(&causal.Session{Cluster: 9})
	c.mu.Unlock()
	check("after learning the cluster")
	// A key with its own floor gets a token with that floor, not the cache.
	c.mu.Lock()
	c.mu.session.ObserveShard("default", []byte("x"), 1, causal.Version{HLC: 10_000, Site: "s"})
	c.mu.Unlock()
	own := c.readHeader("default", dest{}, []byte("x")).Session
	c.mu.Lock()
	w := c.mu.session.ForRead("default", [][]byte{[]byte("x")}, nil).Encode()
	c.mu.Unlock()
	if !bytes.Equal(own, w) || bytes.Equal(own, after) {
		t.Fatal("a key with a floor of its own did not get its own token")
	}
}
