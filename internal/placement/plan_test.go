package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func nodeRange(prefix string, from, to int) []NodeID {
	var out []NodeID
	for i := from; i <= to; i++ {
		out = append(out, NodeID(fmt.Sprintf("%s%d", prefix, i)))
	}
	return out
}

func TestPlanSingleShard(t *testing.T) {
	s := Shard{"ks", 0}
	abc := []NodeID{"a", "b", "c"}
	for _, tc := range []struct {
		name     string
		current  []Replica
		live     []NodeID
		draining []NodeID
		r        int
		want     string // the step, or "" for none
	}{
		{"in place", reps("a", "b", "c"), abc, nil, 3, ""},
		{"promote learner", reps("a", "b", "c~"), abc, nil, 3, "ks/0 promote c"},
		{"promote before removing a dead voter", reps("a", "b", "c~", "d"), abc, nil, 3, "ks/0 promote c"},
		{"learner on dead node", reps("a", "b", "c", "d~"), abc, nil, 3, "ks/0 remove d"},
		{"learner on draining node", reps("a", "b", "c", "d~"), []NodeID{"a", "b", "c", "d"}, []NodeID{"d"}, 3, "ks/0 remove d"},
		{"learner removed before another is promoted", reps("a", "b", "c~", "d~"), abc, nil, 3, "ks/0 remove d"},
		{"make before break", reps("a", "b", "c"), []NodeID{"a", "b", "c", "d"}, []NodeID{"a"}, 3, "ks/0 add-learner d"},
		{"break after make", reps("a", "b", "c", "d"), []NodeID{"a", "b", "c", "d"}, []NodeID{"a"}, 3, "ks/0 remove a"},
		{"dead voter replaced first", reps("a", "b", "c"), []NodeID{"b", "c", "d"}, nil, 3, "ks/0 add-learner d"},
		{"dead voter removed after", reps("a", "b", "c", "d"), []NodeID{"b", "c", "d"}, nil, 3, "ks/0 remove a"},
		{"dead voter removed before a live surplus", reps("a", "b", "c", "d", "e"), []NodeID{"b", "c", "d", "e"}, []NodeID{"b"}, 3, "ks/0 remove a"},
		{"dead voter without replacement", reps("a", "b", "c"), []NodeID{"a", "b"}, nil, 3, "ks/0 remove c"},
		{"grow to r", reps("a"), abc, nil, 3, "ks/0 add-learner"},
		{"second learner before a promotion to two voters", reps("a", "b~"), abc, nil, 3, "ks/0 add-learner c"},
		{"both learners caught up: promote", reps("a", "b~", "c~"), abc, nil, 3, "ks/0 promote b"},
		{"second of two promotions", reps("a", "b", "c~"), abc, nil, 3, "ks/0 promote c"},
		{"two voters when the site has two nodes", reps("a", "b~"), []NodeID{"a", "b"}, nil, 3, "ks/0 promote b"},
		{"shrink to r", reps("a", "b", "c"), abc, nil, 2, "ks/0 remove"},
		{"last voter kept until replaced", reps("a"), []NodeID{"a", "b"}, []NodeID{"a"}, 1, "ks/0 add-learner b"},
		{"lost quorum", reps("a", "b", "c"), []NodeID{"a", "d"}, nil, 3, ""},
		{"two voters, one dead: the survivor goes on alone", reps("a", "b"), []NodeID{"a", "c"}, nil, 3, "ks/0 recover a"},
		{"two voters, one dead, a live learner: the survivor goes on alone", reps("a", "b", "c~"), []NodeID{"a", "c"}, nil, 3, "ks/0 recover a"},
		{"two voters, one dead, a dead learner: left to the operator", reps("a", "b", "c~"), []NodeID{"a", "d"}, nil, 3, ""},
		{"three voters, two dead: left to the operator", reps("a", "b", "c"), []NodeID{"a", "d"}, nil, 3, ""},
		{"two voters, both dead", reps("a", "b"), []NodeID{"c"}, nil, 3, ""},
		{"no voter", reps("a~"), abc, nil, 3, ""},
		{"no eligible node", reps("a", "b", "c"), abc, abc, 3, ""},
		{"dead and draining", reps("a", "b", "c", "d"), []NodeID{"b", "c", "d"}, []NodeID{"a", "b"}, 3, "ks/0 remove a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Map{Epoch: 1, Shards: map[Shard][]Replica{s: tc.current}}
			steps := Plan(m, []Shard{s}, tc.live, tc.draining, tc.r, 4)
			got := ""
			if len(steps) > 1 {
				t.Fatalf("Plan = %v, want at most one step", steps)
			}
			if len(steps) == 1 {
				got = steps[0].String()
			}
			if !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Fatalf("Plan = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlanGrowsOneVoterToThreeWithoutTwo: growing a group from one voter
// to three, the planner never leaves it with two voters and no caught-up
// learner to promote next.
func TestPlanGrowsOneVoterToThreeWithoutTwo(t *testing.T) {
	s := Shard{"ks", 0}
	m := Map{Epoch: 1, Shards: map[Shard][]Replica{s: reps("a")}}
	live := []NodeID{"a", "b", "c"}
	var seq []string
	for i := 0; i < 10; i++ {
		steps := Plan(m, []Shard{s}, live, nil, 3, 1)
		if len(steps) == 0 {
			break
		}
		seq = append(seq, steps[0].String())
		if err := m.Apply(steps[0]); err != nil {
			t.Fatal(err)
		}
		voters, learners := 0, 0
		for _, r := range m.Shards[s] {
			if r.Voter {
				voters++
			} else {
				learners++
			}
		}
		if voters == 2 && learners == 0 {
			t.Fatalf("after %v: two voters and no learner to promote", seq)
		}
	}
	if got := len(m.Shards[s]); got != 3 {
		t.Fatalf("after %v: %d replicas", seq, got)
	}
	t.Logf("steps: %v", seq)
}

func TestPlanIgnoresOtherShards(t *testing.T) {
	listed, unlisted, absent := Shard{"ks", 0}, Shard{"ks", 1}, Shard{"ks", 2}
	m := Map{Epoch: 1, Shards: map[Shard][]Replica{
		listed:   reps("a"),
		unlisted: reps("a"),
	}}
	steps := Plan(m, []Shard{listed, absent}, []NodeID{"a", "b"}, nil, 2, 10)
	if got := fmt.Sprint(steps); got != "[ks/0 add-learner b]" {
		t.Fatalf("Plan = %s, want only ks/0 add-learner b", got)
	}
}

// TestPlanPriorities checks that maxConcurrent keeps the most urgent steps:
// dropping learners, promotions, dead voters, under-replicated shards, then
// surplus voters, then moves.
func TestPlanPriorities(t *testing.T) {
	live := []NodeID{"a", "b", "c", "d"}
	draining := []NodeID{"d"}
	m := Map{Epoch: 1, Shards: map[Shard][]Replica{
		{"k", 0}: reps("a", "b", "c", "d"),      // surplus voter on d
		{"k", 1}: reps("a", "b"),                // under-replicated
		{"k", 2}: reps("a", "b", "c", "e"),      // dead voter e
		{"k", 3}: reps("a", "b", "c~"),          // promote c
		{"k", 4}: reps("a", "b", "c", "d~"),     // learner on draining d
		{"k", 5}: reps("a", "b", "c", "d", "e"), // dead first, then d
		{"k", 6}: reps("a", "b", "c"),           // in place
	}}
	shards := m.SortedShards()
	want := []string{
		"k/4 remove d",
		"k/3 promote c",
		"k/2 remove e",
		"k/5 remove e",
		"k/1 add-learner c",
		"k/0 remove d",
	}
	for limit := 0; limit <= len(want)+1; limit++ {
		var got []string
		for _, s := range Plan(m, shards, live, draining, 3, limit) {
			got = append(got, s.String())
		}
		n := min(max(limit, 1), len(want))
		if !slices.Equal(got, want[:n]) {
			t.Errorf("maxConcurrent=%d: Plan = %q, want %q", limit, got, want[:n])
		}
	}
}

// runPlan repeats "plan, apply every step" from m until Plan returns
// nothing, checking the invariants of every step and of every map on the
// way and that the end is the target. It returns the final map and the
// number of steps applied.
func runPlan(m Map, shards []Shard, live, draining []NodeID, r, maxConcurrent int) (Map, int, error) {
	isLive, isDraining := setOf(live), setOf(draining)
	var eligible []NodeID
	for _, n := range live {
		if !isDraining[n] {
			eligible = append(eligible, n)
		}
	}
	target := Assign(shards, eligible, r)
	listed := setOfShards(shards)

	start := m.Clone()
	m = m.Clone()
	// What each shard may never drop below, and the steps it may take.
	floor := map[Shard]int{}
	healthy := map[Shard]bool{}
	bound := 0
	for s, rs := range start.Shards {
		k := len(target[s])
		floor[s] = min(voters(rs), k)
		recoverable := recoverableAlone(normalize(rs), isLive)
		healthy[s] = listed[s] && k > 0 && (hasQuorum(rs, isLive) || recoverable)
		if healthy[s] && recoverable {
			floor[s] = 1 // the survivor goes on alone, then grows back
			bound += 1 + 1 + 2*k
		} else if healthy[s] {
			bound += len(rs) + 2*k // learners + voters + 2 per target node
		}
	}

	total := 0
	for round := 0; ; round++ {
		steps := Plan(m, shards, live, draining, r, maxConcurrent)
		if len(steps) == 0 {
			break
		}
		if len(steps) > max(maxConcurrent, 1) {
			return m, total, fmt.Errorf("round %d: %d steps, maxConcurrent %d", round, len(steps), maxConcurrent)
		}
		seen := map[Shard]bool{}
		for _, st := range steps {
			if seen[st.Shard] {
				return m, total, fmt.Errorf("round %d: two steps for %v: %v", round, st.Shard, steps)
			}
			seen[st.Shard] = true
			if !healthy[st.Shard] {
				return m, total, fmt.Errorf("round %d: step %v for a shard Plan must leave alone", round, st)
			}
			if st.Kind != StepRemove && st.Kind != StepRecover && (!isLive[st.Node] || isDraining[st.Node]) {
				return m, total, fmt.Errorf("round %d: step %v on a node that is not eligible", round, st)
			}
			epoch := m.Epoch
			if err := m.Apply(st); err != nil {
				return m, total, fmt.Errorf("round %d: %w", round, err)
			}
			if m.Epoch != epoch+1 {
				return m, total, fmt.Errorf("round %d: epoch %d after %d", round, m.Epoch, epoch)
			}
			total++
			rs := m.Shards[st.Shard]
			if v := voters(rs); v < floor[st.Shard] || v < 1 {
				return m, total, fmt.Errorf("round %d: after %v %d voters, floor %d", round, st, v, floor[st.Shard])
			}
			if !hasQuorum(rs, isLive) {
				return m, total, fmt.Errorf("round %d: after %v no live majority: %s", round, st, repsString(rs))
			}
		}
		if total > bound {
			return m, total, fmt.Errorf("round %d: %d steps, bound %d", round, total, bound)
		}
	}

	for s, rs := range m.Shards {
		if !healthy[s] {
			if repsString(rs) != repsString(start.Shards[s]) {
				return m, total, fmt.Errorf("shard %v changed from %s to %s", s, repsString(start.Shards[s]), repsString(rs))
			}
			continue
		}
		want := slices.Clone(target[s])
		slices.Sort(want)
		var got []NodeID
		for _, x := range rs {
			if !x.Voter {
				return m, total, fmt.Errorf("shard %v ends with a learner: %s", s, repsString(rs))
			}
			got = append(got, x.Node)
		}
		if !slices.Equal(got, want) {
			return m, total, fmt.Errorf("shard %v ends on %v, target %v", s, got, want)
		}
	}
	return m, total, nil
}

// recoverableAlone is rule 0's shape: exactly two voters, one of them
// dead, and only live learners.
func recoverableAlone(rs []Replica, isLive map[NodeID]bool) bool {
	v, deadVoters, deadLearners := 0, 0, 0
	for _, r := range rs {
		switch {
		case r.Voter:
			v++
			if !isLive[r.Node] {
				deadVoters++
			}
		case !isLive[r.Node]:
			deadLearners++
		}
	}
	return v == 2 && deadVoters == 1 && deadLearners == 0
}

func setOfShards(shards []Shard) map[Shard]bool {
	out := make(map[Shard]bool, len(shards))
	for _, s := range shards {
		out[s] = true
	}
	return out
}

// TestPlanSimulation drives whole rebalancings to the end.
func TestPlanSimulation(t *testing.T) {
	n := nodeRange("n", 1, 9)
	for _, tc := range []struct {
		name           string
		start          []NodeID // the map starts as Assign on these
		live, draining []NodeID
		wantEmpty      []NodeID // nodes that must end with no replica
	}{
		{name: "grow 3 to 5", start: n[:3], live: n[:5]},
		{name: "shrink 5 to 3 by draining", start: n[:5], live: n[:5], draining: n[3:5], wantEmpty: n[3:5]},
		{name: "dead node of 5", start: n[:5], live: n[:4], wantEmpty: n[4:5]},
		{name: "dead node of 3", start: n[:3], live: n[:2], wantEmpty: n[2:3]},
		{name: "grow and drain at once", start: n[:3], live: n[:5], draining: n[:1], wantEmpty: n[:1]},
		{name: "dead, draining and new", start: n[:5], live: append(slices.Clone(n[1:4]), n[5:7]...), draining: n[3:4], wantEmpty: []NodeID{"n1", "n4", "n5"}},
		{name: "drain to one node", start: n[:3], live: n[:3], draining: n[1:3], wantEmpty: n[1:3]},
		{name: "nothing to do", start: n[:4], live: n[:4]},
	} {
		for _, keyspaces := range []int{1, 4} {
			for _, r := range []int{1, 3, 5} {
				for _, maxConcurrent := range []int{1, 3, 1000} {
					name := fmt.Sprintf("%s/keyspaces=%d/r=%d/max=%d", tc.name, keyspaces, r, maxConcurrent)
					t.Run(name, func(t *testing.T) {
						shards := testShards(keyspaces, 16)
						m := NewMap(Assign(shards, tc.start, r))
						// A group with a majority on dead nodes is left alone; with
						// one dead node, that only happens to single-replica groups.
						stuck := setOfShards(m.LostQuorum(tc.live))
						dead := 0
						for _, x := range tc.start {
							if !slices.Contains(tc.live, x) {
								dead++
							}
						}
						if (dead == 0 || dead == 1 && r >= 3) && len(stuck) > 0 {
							t.Fatalf("%d dead nodes, r=%d: shards without quorum: %v", dead, r, stuck)
						}
						end, steps, err := runPlan(m, shards, tc.live, tc.draining, r, maxConcurrent)
						if err != nil {
							t.Fatal(err)
						}
						for s, rs := range end.Shards {
							for _, x := range rs {
								if slices.Contains(tc.wantEmpty, x.Node) && !stuck[s] {
									t.Fatalf("%v still holds a replica of %v", x.Node, s)
								}
							}
						}
						if keyspaces == 1 && r == 3 && maxConcurrent == 1000 {
							t.Logf("%d steps, epoch %d -> %d, %d shards left without quorum", steps, m.Epoch, end.Epoch, len(stuck))
						}
					})
				}
			}
		}
	}
}

// TestPlanSimulationRandom drives random rebalancings: random start maps
// from Assign, then random joins, drains and deaths, several in a row.
func TestPlanSimulationRandom(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		pool := testNodes(rng, 8)
		r := 1 + rng.IntN(4)
		shards := testShards(1+rng.IntN(3), 4+rng.IntN(12))
		live := slices.Clone(pool[:1+rng.IntN(len(pool))])
		m := NewMap(Assign(shards, live, r))
		for change := 0; change < 4; change++ {
			var next, draining []NodeID
			for _, x := range pool {
				switch p := rng.IntN(10); {
				case p < 6 && slices.Contains(live, x):
					next = append(next, x)
				case p < 8:
					next = append(next, x)
					if p == 7 {
						draining = append(draining, x)
					}
				}
			}
			if len(next) == 0 {
				next = pool[:1]
			}
			end, _, err := runPlan(m, shards, next, draining, r, 1+rng.IntN(8))
			if err != nil {
				t.Fatalf("seed=%d change=%d r=%d live=%v draining=%v from %v: %v", seed, change, r, next, draining, live, err)
			}
			m, live = end, next
		}
	}
}

// FuzzPlan checks the invariants of runPlan on arbitrary small maps: any
// mix of voters and learners on live, dead and draining nodes.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{3, 0x07, 0x00, 3, 2, 3, 0x15, 0x15, 0x15})
	f.Add([]byte{5, 0x1f, 0x10, 3, 1, 4, 0x55, 0x99, 0x26, 0x41})
	f.Add([]byte{4, 0x0e, 0x02, 2, 0, 2, 0x95, 0x25})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		nodes := nodeRange("n", 0, int(next()%6))
		liveMask, drainMask := next(), next()
		r := int(next() % 6)
		maxConcurrent := int(next() % 5)
		var live, draining []NodeID
		for i, x := range nodes {
			if liveMask&(1<<i) != 0 {
				live = append(live, x)
			}
			if drainMask&(1<<i) != 0 {
				draining = append(draining, x)
			}
		}
		m := Map{Epoch: uint64(next()), Shards: map[Shard][]Replica{}}
		var shards []Shard
		for id, count := uint32(0), next()%6; id <= uint32(count); id++ {
			s := Shard{Keyspace: "ks", ID: id}
			flags := next()
			if flags&1 == 0 {
				shards = append(shards, s)
			}
			if flags&2 != 0 {
				continue // listed but absent from the map
			}
			var rs []Replica
			bits := uint16(next()) | uint16(next())<<8
			for i, x := range nodes {
				switch (bits >> (2 * i)) & 3 {
				case 1:
					rs = append(rs, Replica{Node: x, Voter: true})
				case 2:
					rs = append(rs, Replica{Node: x})
				}
			}
			m.Shards[s] = rs
		}
		desc := fmt.Sprintf("nodes=%v live=%v draining=%v r=%d max=%d shards=%v map=%v", nodes, live, draining, r, maxConcurrent, shards, m.Shards)
		if _, _, err := runPlan(m, shards, live, draining, r, maxConcurrent); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		// A node listed twice in a shard is one replica (a voter if either
		// entry is): Plan must not panic and must plan the same.
		dup := m.Clone()
		for s, rs := range dup.Shards {
			if len(rs) > 0 {
				dup.Shards[s] = append(rs, Replica{Node: rs[0].Node, Voter: !rs[0].Voter})
				dup.Shards[s][0].Voter = true
				m.Shards[s][0].Voter = true
			}
		}
		want := fmt.Sprint(Plan(m, shards, live, draining, r, maxConcurrent))
		if got := fmt.Sprint(Plan(dup, shards, live, draining, r, maxConcurrent)); got != want {
			t.Fatalf("%s: with duplicate replicas Plan = %s, want %s", desc, got, want)
		}
	})
}

func BenchmarkPlan(b *testing.B) {
	shards := testShards(64, 16)
	nodes := testNodes(rand.New(rand.NewPCG(1, 1)), 12)
	m := NewMap(Assign(shards, nodes[:9], 3))
	for b.Loop() {
		Plan(m, shards, nodes, nodes[:1], 3, 8)
	}
}

// TestPlanKeepsAReachableQuorum: node c died moments ago (inside its
// DeadGrace it is still live for placement, but gossip no longer reports
// it) and b is drained. Removing b would leave {a, c}, whose quorum needs
// the dead c: the shard would have no leader until c returned. The step
// waits; once c's grace ran out, c is removed instead. The bite of guard
// remove-reachable: with it off, b is removed.
func TestPlanKeepsAReachableQuorum(t *testing.T) {
	s := Shard{"ks", 0}
	m := Map{Epoch: 1, Shards: map[Shard][]Replica{s: reps("a", "b", "c")}}
	abc := []NodeID{"a", "b", "c"}
	if steps := PlanReachable(m, []Shard{s}, abc, []NodeID{"a", "b"}, []NodeID{"b"}, 3, 4); len(steps) != 0 {
		t.Fatalf("drain of b with c unreachable: %v, want no step (a and the dead c would be the voters)", steps)
	}
	// With every voter reachable the drain goes on.
	if got := fmt.Sprint(PlanReachable(m, []Shard{s}, abc, abc, []NodeID{"b"}, 3, 4)); got != "[ks/0 remove b]" {
		t.Fatalf("drain of b, all reachable: %s", got)
	}
	// After c's grace it is dead: c goes first, b stays a voter for now.
	if got := fmt.Sprint(PlanReachable(m, []Shard{s}, []NodeID{"a", "b"}, []NodeID{"a", "b"}, []NodeID{"b"}, 3, 4)); got != "[ks/0 remove c]" {
		t.Fatalf("drain of b after c's grace: %s", got)
	}
}
