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
	if got := leaderTargets(m, all); len(got) != len(shards) {
		t.Fatalf("every node alive: %d targets for %d shards", len(got), len(shards))
	}

	alive := map[string]bool{"n1": true, "n3": true, "n4": true} // n2 died
	got := leaderTargets(m, alive)
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
