package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// testShards returns keyspaces ks0..ks<k-1> of n shards each.
func testShards(keyspaces, n int) []Shard {
	var out []Shard
	for k := 0; k < keyspaces; k++ {
		for i := 0; i < n; i++ {
			out = append(out, Shard{Keyspace: fmt.Sprintf("ks%d", k), ID: uint32(i)})
		}
	}
	return out
}

// testNodes returns n random node ids drawn from rng.
func testNodes(rng *rand.Rand, n int) []NodeID {
	out := make([]NodeID, n)
	for i := range out {
		out[i] = NodeID(fmt.Sprintf("node-%08x", rng.Uint32()))
	}
	return out
}

// loads counts the replicas of each node (every node of nodes included).
func loads(a map[Shard][]NodeID, nodes []NodeID) map[NodeID]int {
	l := make(map[NodeID]int, len(nodes))
	for _, n := range nodes {
		l[n] = 0
	}
	for _, ns := range a {
		for _, n := range ns {
			l[n]++
		}
	}
	return l
}

func minMax(l map[NodeID]int) (lo, hi int) {
	lo = -1
	for _, c := range l {
		if lo < 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return lo, hi
}

// moved counts placements of b that a does not have.
func moved(a, b map[Shard][]NodeID) int {
	n := 0
	for s, ns := range b {
		for _, x := range ns {
			if !slices.Contains(a[s], x) {
				n++
			}
		}
	}
	return n
}

func TestShardString(t *testing.T) {
	for _, tc := range []struct {
		s    Shard
		want string
	}{
		{Shard{"ks", 3}, "ks/3"},
		{Shard{"default", 0}, "default/0"},
		{Shard{"", 4294967295}, "/4294967295"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestAssignEdgeCases(t *testing.T) {
	s0, s1 := Shard{"a", 0}, Shard{"a", 1}
	for _, tc := range []struct {
		name   string
		shards []Shard
		nodes  []NodeID
		r      int
		want   int // replicas per shard
	}{
		{"no nodes", []Shard{s0, s1}, nil, 3, 0},
		{"no shards", nil, []NodeID{"a", "b"}, 3, 0},
		{"one node", []Shard{s0, s1}, []NodeID{"a"}, 3, 1},
		{"r above nodes", []Shard{s0, s1}, []NodeID{"a", "b"}, 5, 2},
		{"r zero counts as one", []Shard{s0, s1}, []NodeID{"a", "b"}, 0, 1},
		{"r negative counts as one", []Shard{s0, s1}, []NodeID{"a", "b"}, -2, 1},
		{"duplicates", []Shard{s0, s0, s1}, []NodeID{"a", "b", "a", "c"}, 3, 3},
		{"empty node ignored", []Shard{s0, s1}, []NodeID{"", "a", "b"}, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Assign(tc.shards, tc.nodes, tc.r)
			if want := len(uniqueShards(tc.shards)); len(got) != want {
				t.Fatalf("got %d shards, want %d: %v", len(got), want, got)
			}
			for _, s := range tc.shards {
				ns, ok := got[s]
				if !ok {
					t.Fatalf("shard %v missing", s)
				}
				if len(ns) != tc.want {
					t.Errorf("shard %v on %v, want %d nodes", s, ns, tc.want)
				}
				if slices.Contains(ns, "") {
					t.Errorf("shard %v on empty node: %v", s, ns)
				}
			}
		})
	}
}

// TestAssignPinned pins a small assignment: the weights are part of the
// cluster's behaviour (a change would move replicas on upgrade).
func TestAssignPinned(t *testing.T) {
	got := Assign(testShards(1, 4), []NodeID{"n1", "n2", "n3", "n4", "n5"}, 3)
	pinned := map[string]string{
		"ks0/0": "[n2 n5 n3]",
		"ks0/1": "[n1 n4 n5]",
		"ks0/2": "[n4 n1 n3]",
		"ks0/3": "[n5 n1 n2]",
	}
	for s, ns := range got {
		if w := pinned[s.String()]; fmt.Sprint(ns) != w {
			t.Errorf("Assign %v = %v, pinned %v", s, ns, w)
		}
	}
}

// TestAssignProperties checks placement count, distinctness, balance and
// order independence over random node sets.
func TestAssignProperties(t *testing.T) {
	const seeds = 100
	for _, keyspaces := range []int{1, 4} {
		for r := 1; r <= 5; r++ {
			worst := map[int]float64{}
			for n := 3; n <= 9; n++ {
				for seed := uint64(1); seed <= seeds; seed++ {
					rng := rand.New(rand.NewPCG(seed, uint64(n)))
					shards := testShards(keyspaces, 16)
					nodes := testNodes(rng, n)
					ctx := fmt.Sprintf("seed=%d keyspaces=%d r=%d n=%d", seed, keyspaces, r, n)
					a := Assign(shards, nodes, r)
					k := min(r, n)
					for _, s := range shards {
						ns := a[s]
						if len(ns) != k || len(uniqueNodes(ns)) != k {
							t.Fatalf("%s: shard %v on %v, want %d distinct nodes", ctx, s, ns, k)
						}
						for _, x := range ns {
							if !slices.Contains(nodes, x) {
								t.Fatalf("%s: shard %v on unknown node %v", ctx, s, x)
							}
						}
					}

					lo, hi := minMax(loads(a, nodes))
					total := len(shards) * k
					floorAvg, ceilAvg := total/n, (total+n-1)/n
					if lo <= 0 {
						t.Fatalf("%s: a node holds no replica (min %d, max %d)", ctx, lo, hi)
					}
					if 2*ceilAvg <= 3*floorAvg {
						if 2*hi > 3*lo {
							t.Fatalf("%s: max/min = %d/%d > 1.5", ctx, hi, lo)
						}
					} else if hi-lo > 1 {
						// Integer loads forbid 1.5 (16 on 9 nodes): as even as possible.
						t.Fatalf("%s: loads %d..%d, want within one", ctx, lo, hi)
					}
					worst[n] = max(worst[n], float64(hi)/float64(lo))

					shuffled := slices.Clone(nodes)
					rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					shuffledShards := slices.Clone(shards)
					rng.Shuffle(len(shuffledShards), func(i, j int) {
						shuffledShards[i], shuffledShards[j] = shuffledShards[j], shuffledShards[i]
					})
					b := Assign(shuffledShards, append(shuffled, shuffled[0]), r)
					if fmt.Sprint(a) != fmt.Sprint(b) {
						t.Fatalf("%s: input order changed the result:\n%v\n%v", ctx, a, b)
					}
				}
			}
			t.Logf("keyspaces=%d r=%d worst max/min by nodes: %v", keyspaces, r, worst)
		}
	}
}

// TestAssignGrowthMoves checks that adding one node moves about 1/n of the
// placements: at most 1.5 times the unavoidable share plus a small slack.
func TestAssignGrowthMoves(t *testing.T) {
	const seeds = 200
	for _, tc := range []struct {
		keyspaces, r, from, slack int
	}{
		{1, 3, 3, 1},
		{1, 3, 5, 1},
		{4, 3, 3, 1},
		{4, 3, 5, 1},
		{1, 2, 3, 1},
		{1, 3, 4, 1},
		{4, 3, 8, 1},
	} {
		shards := testShards(tc.keyspaces, 16)
		total := len(shards) * min(tc.r, tc.from+1)
		ideal := float64(total) / float64(tc.from+1)
		bound := int(ideal*1.5) + tc.slack
		worst, sum := 0, 0
		for seed := uint64(1); seed <= seeds; seed++ {
			nodes := testNodes(rand.New(rand.NewPCG(seed, 42)), tc.from+1)
			before := Assign(shards, nodes[:tc.from], tc.r)
			after := Assign(shards, nodes, tc.r)
			m := moved(before, after)
			if m > bound {
				t.Errorf("seed=%d keyspaces=%d r=%d %d->%d nodes: %d placements moved, bound %d",
					seed, tc.keyspaces, tc.r, tc.from, tc.from+1, m, bound)
			}
			worst = max(worst, m)
			sum += m
		}
		t.Logf("keyspaces=%d r=%d %d->%d nodes: moved mean %.1f worst %d of %d (ideal %.1f, bound %d)",
			tc.keyspaces, tc.r, tc.from, tc.from+1, float64(sum)/seeds, worst, total, ideal, bound)
	}
}

// TestAssignRemovalMoves checks that removing a node moves its replicas
// and only a bounded number of others.
func TestAssignRemovalMoves(t *testing.T) {
	const seeds = 200
	for _, keyspaces := range []int{1, 4} {
		for n := 4; n <= 9; n++ {
			shards := testShards(keyspaces, 16)
			const r = 3
			// Extra moves are repair noise: with few replicas per node a few,
			// growing slowly with a node's share.
			slack := 6 + len(shards)*r/n/4
			worst := 0
			for seed := uint64(1); seed <= seeds; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				nodes := testNodes(rng, n)
				gone := rng.IntN(n)
				rest := slices.Delete(slices.Clone(nodes), gone, gone+1)
				before := Assign(shards, nodes, r)
				after := Assign(shards, rest, r)
				onGone := loads(before, nodes)[nodes[gone]]
				m := moved(before, after)
				if m < onGone || m > onGone+slack {
					t.Errorf("seed=%d keyspaces=%d n=%d: removing %v (%d replicas) moved %d placements, want %d..%d",
						seed, keyspaces, n, nodes[gone], onGone, m, onGone, onGone+slack)
				}
				worst = max(worst, m-onGone)
			}
			t.Logf("keyspaces=%d r=%d remove 1 of %d: worst extra moves %d (slack %d)", keyspaces, r, n, worst, slack)
		}
	}
}

// TestAssignSpread checks that plain rendezvous weights spread first
// choices evenly (the weight function has no bias towards some nodes).
func TestAssignSpread(t *testing.T) {
	shards := testShards(100, 100) // 10,000 shards
	nodes := []NodeID{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
	counts := map[NodeID]int{}
	for _, s := range shards {
		best, bestScore := NodeID(""), uint64(0)
		prefix := shardHash(s)
		for _, n := range nodes {
			if sc := score(prefix, n); best == "" || sc > bestScore {
				best, bestScore = n, sc
			}
		}
		counts[best]++
	}
	want := len(shards) / len(nodes)
	for n, c := range counts {
		if c < want*9/10 || c > want*11/10 {
			t.Errorf("node %v first for %d shards, want about %d", n, c, want)
		}
	}
}

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		total, n, shards, lo, hi int
	}{
		{48, 9, 16, 4, 6},
		{48, 4, 16, 10, 14},
		{16, 9, 16, 1, 2},
		{16, 20, 16, 0, 1},
		{16, 18, 16, 0, 1}, // not [0, 2]
		{16, 16, 16, 1, 1},
		{48, 3, 16, 13, 16}, // hi capped at one replica per shard
		{192, 7, 64, 22, 33},
	} {
		lo, hi := bounds(tc.total, tc.n, tc.shards)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("bounds(%d, %d, %d) = %d, %d, want %d, %d", tc.total, tc.n, tc.shards, lo, hi, tc.lo, tc.hi)
		}
	}
}

func BenchmarkAssign(b *testing.B) {
	shards := testShards(64, 16)
	nodes := testNodes(rand.New(rand.NewPCG(1, 1)), 12)
	for b.Loop() {
		Assign(shards, nodes, 3)
	}
}
