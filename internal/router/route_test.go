package router

import (
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
)

// TestReadFloors: this site's floors (origin "" from older tokens, or the
// site's name) merge into one, raised to the session's MaxHLC as a
// fallback floor; other sites' floors stay per origin.
func TestReadFloors(t *testing.T) {
	r := New(Config{Site: "s1", NodeID: "n1"}, map[string]uint32{"default": 4}, nil, nil, nil, nil, nil, nil)
	sh, err := r.Shard("default", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	sess := &causal.Session{}
	sess.ObserveShard("default", []byte("k"), sh.ID, causal.Version{HLC: 50, Site: "s1"})
	sess.ObserveShardVersion("default", sh.ID, causal.Version{HLC: 40, Site: "s2"})
	sess.ObserveShardHLC("default", sh.ID, 45) // origin "": a format-2 floor
	c := &Call{Keyspace: "default", Session: sess}

	got := map[string]causal.Floor{}
	for _, f := range r.readFloors(c, sh, []byte("k"), nil, nil) {
		got[f.Origin] = f
	}
	if len(got) != 2 || got[""] != (causal.Floor{HLC: 50}) || got["s2"] != (causal.Floor{Origin: "s2", HLC: 40}) {
		t.Fatalf("floors %+v", got)
	}
	// A newer version seen elsewhere raises this site's floor on every
	// shard, as a fallback floor.
	other := placement.Shard{Keyspace: "default", ID: (sh.ID + 1) % 4}
	sess.ObserveShard("default", []byte("elsewhere"), other.ID, causal.Version{HLC: 90, Site: "s1"})
	got = map[string]causal.Floor{}
	for _, f := range r.readFloors(c, sh, []byte("k"), nil, nil) {
		got[f.Origin] = f
	}
	if got[""] != (causal.Floor{HLC: 90, Fallback: true}) || got["s2"].HLC != 40 {
		t.Fatalf("floors after a newer version elsewhere: %+v", got)
	}
	// A scan of the shard gets the same.
	scan := r.readFloors(c, sh, nil, nil, nil)
	if len(scan) != 2 {
		t.Fatalf("scan floors %+v", scan)
	}
}
