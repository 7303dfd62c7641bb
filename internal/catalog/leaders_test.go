package catalog

import (
	"testing"

	"github.com/causeway-db/causeway/internal/placement"
)

// TestLeaderTargetsAreAlive: after a node dies, its replicas stay in the
// placement map for the DeadGrace, and it stays the preferred leader of
// the shards it led; leader balancing must not move their leadership to
// it (each try blocks the shard's writes: TestLeaderKillUnderLoad). The
// other shards keep their targets. Guard leader-to-alive turns the check
// off and makes this test fail.
func TestLeaderTargetsAreAlive(t *testing.T) {
	nodes := []placement.NodeID{"n1", "n2", "n3", "n4"}
	var shards []placement.Shard
	for i := uint32(0); i < 16; i++ {
		shards = append(shards, placement.Shard{Keyspace: "default", ID: i})
	}
	m := placement.NewMap(placement.Assign(shards, nodes, 3))
	preferred := placement.PreferredLeaders(m)

	all := map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true}
	if got := leaderTargets(m, all, nil); len(got) != len(shards) {
		t.Fatalf("every node alive: %d targets for %d shards", len(got), len(shards))
	}

	alive := map[string]bool{"n1": true, "n3": true, "n4": true} // n2 died
	got := leaderTargets(m, alive, nil)
	dead := 0
	for _, n := range preferred {
		if n == "n2" {
			dead++
		}
	}
	if dead == 0 {
		t.Fatalf("n2 is the preferred leader of no shard: the test shows nothing (%v)", preferred)
	}
	for _, s := range shards {
		want, ok := preferred[s]
		if !ok {
			t.Fatalf("no preferred leader for %s", s)
		}
		target, has := got[s]
		switch {
		case want == "n2" && has:
			t.Errorf("%s: leadership would move to %s, which is dead", s, target)
		case want == "n2":
		case !has || target != want:
			t.Errorf("%s: target %q (%v), want %s", s, target, has, want)
		}
	}
}

// TestLeaderTargetsReachTheOtherSites: a preferred leader that cannot
// reach a site its shard's other voters reach gives its shards to them,
// spread over them; when every node misses the same site (the whole site
// is cut off) nothing moves.
func TestLeaderTargetsReachTheOtherSites(t *testing.T) {
	nodes := []placement.NodeID{"n1", "n2", "n3"}
	var shards []placement.Shard
	for i := uint32(0); i < 12; i++ {
		shards = append(shards, placement.Shard{Keyspace: "default", ID: i})
	}
	m := placement.NewMap(placement.Assign(shards, nodes, 3))
	preferred := placement.PreferredLeaders(m)
	alive := map[string]bool{"n1": true, "n2": true, "n3": true}
	got := leaderTargets(m, alive, map[string]int{"n2": 1})
	led := map[placement.NodeID]int{}
	moved := 0
	for _, s := range shards {
		led[got[s]]++
		if preferred[s] == "n2" {
			moved++
		} else if got[s] != preferred[s] {
			t.Errorf("%s: target %s, want its preferred leader %s", s, got[s], preferred[s])
		}
	}
	if moved == 0 || led["n2"] != 0 {
		t.Fatalf("n2, cut off from a site, still leads %d shards (preferred for %d)", led["n2"], moved)
	}
	if led["n1"] != 6 || led["n3"] != 6 {
		t.Errorf("leaders spread %v, want 6 and 6", led)
	}
	same := leaderTargets(m, alive, map[string]int{"n1": 1, "n2": 1, "n3": 1})
	for _, s := range shards {
		if same[s] != preferred[s] {
			t.Errorf("%s: every node misses a site, yet the target moved to %s", s, same[s])
		}
	}
}
