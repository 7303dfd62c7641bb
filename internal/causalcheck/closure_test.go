package causalcheck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// TestCheckAgainstClosure compares Check with a direct reading of the model
// on random small histories, most of them inconsistent: the causal past of
// every op is computed as a set (program order and reads-from, transitively),
// and an op is offending when it contradicts a write in it. Both must flag
// the same ops.
func TestCheckAgainstClosure(t *testing.T) {
	for seed := range uint64(3000) {
		h := randomHistory(rand.New(rand.NewPCG(seed, 2)))
		c := newChecker(h)
		c.attribute()
		want := closureOffenders(c)
		res, err := Check(h, nil)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var got []int
		for _, v := range res.Violations {
			switch v.Kind {
			case ReadYourWrites, MonotonicReads, MonotonicWrites, WritesFollowReads, Causal, FracturedRead:
				got = append(got, v.Ops[len(v.Ops)-1])
				if !causalChain(c, v.Ops) {
					t.Fatalf("seed %d: %s is not a chain of program order and reads-from", seed, v)
				}
			case Cycle:
				t.Fatalf("seed %d: a history read only from earlier ops has a cycle:\n%s", seed, res)
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, want) {
			var b []byte
			for i, o := range h {
				b = fmt.Appendf(b, "#%d %s\n", i, o)
			}
			t.Fatalf("seed %d: Check flags %v, the closure %v\n%s%s", seed, got, want, b, res)
		}
	}
}

// causalChain reports whether each op of ops is causally before the next:
// an earlier op of its session, or a write that the next returned.
func causalChain(c *checker, ops []int) bool {
	for i := 1; i < len(ops); i++ {
		a, b := ops[i-1], ops[i]
		po := c.h[a].Session == c.h[b].Session && a < b
		rf := slices.ContainsFunc(c.results(int32(b)), func(r result) bool { return r.src == int32(a) })
		if !po && !rf {
			return false
		}
	}
	return true
}

// randomHistory returns a few sessions' ops on a few keys, where every read
// returns a random earlier write of its key (or nothing): unique values,
// versions in random or write order, all outcomes.
func randomHistory(rng *rand.Rand) []Op {
	sessions, keys, n := 2+rng.IntN(3), 1+rng.IntN(3), 5+rng.IntN(25)
	hlcs := rng.Perm(n)
	if rng.IntN(2) == 0 {
		slices.Sort(hlcs) // writes in version order: fewer violations of the writer's session
	}
	var h []Op
	writes := make([][]int, keys) // key -> writes so far
	for i := range n {
		s := fmt.Sprintf("s%d", rng.IntN(sessions))
		k := rng.IntN(keys)
		readOf := func(k int) Read {
			r := Read{Key: keyName(k)}
			if ws := writes[k]; len(ws) > 0 && rng.IntN(5) > 0 {
				j := ws[rng.IntN(len(ws))]
				r.Value, r.Version = h[j].Value, h[j].Version
				if r.Version.IsZero() { // unknown or failed: the version it got
					r.Version = causal.Version{HLC: uint64(n + j), Site: "z"}
				}
			}
			return r
		}
		op := Op{Session: s, Site: "a", Outcome: OK}
		switch p := rng.IntN(10); {
		case p < 4:
			op.Kind, op.Key, op.Value = Put, keyName(k), fmt.Sprintf("v%d", i)
			if rng.IntN(4) == 0 {
				op.Kind, op.Value = Delete, ""
			}
			op.Version = causal.Version{HLC: uint64(1 + hlcs[i]), Site: "a"}
			switch rng.IntN(8) {
			case 0:
				op.Outcome = Unknown
				if rng.IntN(2) == 0 {
					op.Version = causal.Version{}
				}
			case 1:
				op.Outcome = Failed
			}
			writes[k] = append(writes[k], i)
		case p < 8:
			r := readOf(k)
			op.Kind, op.Key, op.Value, op.Version = Get, r.Key, r.Value, r.Version
		default:
			op.Kind = GetTxn
			for k := range keys {
				if rng.IntN(2) == 0 {
					op.Reads = append(op.Reads, readOf(k))
				}
			}
		}
		h = append(h, op)
	}
	return h
}

// closureOffenders returns the ops that contradict their causal past,
// computed as sets.
func closureOffenders(c *checker) []int {
	n := len(c.h)
	inPast := func(w int32) bool { return c.definite(w) || c.side(w) }
	// past[i] holds the ops whose effects are in the causal past of op i.
	past := make([]map[int32]bool, n)
	for i := range n {
		p := make(map[int32]bool)
		o := c.h[i]
		// Program order: the session's earlier ops, but not its writes of
		// unknown outcome, which only reads carry.
		for j := range i {
			if c.h[j].Session != o.Session {
				continue
			}
			if !(c.h[j].Kind.isWrite() && c.h[j].Outcome == Unknown) {
				p[int32(j)] = true
			}
			for x := range past[j] {
				p[x] = true
			}
			// What a read returned is in the past of what follows it.
			for _, r := range c.results(int32(j)) {
				if r.src >= 0 {
					p[r.src] = true
					for x := range past[r.src] {
						p[x] = true
					}
				}
			}
		}
		past[i] = p
	}
	newest := func(p map[int32]bool, k int32) (causal.Version, bool) {
		var best causal.Version
		found := false
		for w := range p {
			if c.h[w].Kind.isWrite() && c.keyOf[w] == k && inPast(w) && (!found || best.Less(c.ver[w])) {
				best, found = c.ver[w], true
			}
		}
		return best, found
	}
	readBefore := func(i int, k int32) (causal.Version, bool) {
		var best causal.Version
		found := false
		for j := range i {
			if c.h[j].Session != c.h[i].Session {
				continue
			}
			for _, r := range c.results(int32(j)) {
				if r.key == k && (!found || best.Less(r.ver)) {
					best, found = r.ver, true
				}
			}
		}
		return best, found
	}
	var bad []int
	for i := range n {
		i32 := int32(i)
		o := c.h[i]
		offending := false
		if o.Kind.isWrite() && inPast(i32) {
			k, v := c.keyOf[i], c.ver[i]
			if m, ok := newest(past[i], k); ok && v.Less(m) {
				offending = true
			}
			if m, ok := readBefore(i, k); ok && v.Less(m) {
				offending = true
			}
		}
		rs := c.results(i32)
		for a, r := range rs {
			if m, ok := newest(past[i], r.key); ok && r.ver.Less(m) {
				offending = true
			}
			if m, ok := readBefore(i, r.key); ok && r.ver.Less(m) {
				offending = true
			}
			for b, s := range rs {
				if a == b || s.src < 0 {
					continue
				}
				if m, ok := newest(past[s.src], r.key); ok && r.ver.Less(m) {
					offending = true
				}
			}
		}
		if offending {
			bad = append(bad, i)
		}
	}
	return bad
}
