package placement

import (
	"fmt"
	"testing"
)

func TestPreferredLeadersBalanced(t *testing.T) {
	for nodes := 1; nodes <= 9; nodes++ {
		var ids []NodeID
		for i := 0; i < nodes; i++ {
			ids = append(ids, NodeID(fmt.Sprintf("n%d", i+1)))
		}
		var shards []Shard
		for i := uint32(0); i < 16; i++ {
			shards = append(shards, Shard{Keyspace: "default", ID: i})
		}
		m := NewMap(Assign(shards, ids, 3))
		leaders := PreferredLeaders(m)
		if len(leaders) != len(shards) {
			t.Fatalf("%d nodes: %d leaders for %d shards", nodes, len(leaders), len(shards))
		}
		count := map[NodeID]int{}
		for s, l := range leaders {
			voter := false
			for _, r := range m.Shards[s] {
				voter = voter || (r.Node == l && r.Voter)
			}
			if !voter {
				t.Fatalf("leader %s of %s is not a voter", l, s)
			}
			count[l]++
		}
		lo, hi := 1<<30, 0
		for _, id := range ids {
			lo, hi = min(lo, count[id]), max(hi, count[id])
		}
		// Each shard can only be led by its own voters, so allow one extra.
		if want := (16 + nodes - 1) / nodes; hi > want+1 || (nodes <= 16 && lo == 0) {
			t.Fatalf("%d nodes: leaders per node %v (min %d max %d)", nodes, count, lo, hi)
		}
		again := PreferredLeaders(m.Clone())
		for s, l := range leaders {
			if again[s] != l {
				t.Fatalf("not deterministic for %s", s)
			}
		}
	}
}
