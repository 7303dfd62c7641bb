package placement

import (
	"cmp"
	"slices"
	"strconv"
)

// NodeID identifies a node inside a site.
type NodeID string

// Shard names one shard of a keyspace.
type Shard struct {
	Keyspace string
	ID       uint32
}

// String returns "keyspace/id", for example "default/3".
func (s Shard) String() string {
	return s.Keyspace + "/" + strconv.FormatUint(uint64(s.ID), 10)
}

// compareShards orders shards by keyspace, then id.
func compareShards(a, b Shard) int {
	if c := cmp.Compare(a.Keyspace, b.Keyspace); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Load bounds of the repair pass, as fractions of the mean load: a node is
// asked to hold between loMargin and hiMargin times the mean number of
// replicas, narrowed until hi <= 1.5*lo (see bounds).
const (
	loMarginNum, loMarginDen = 4, 5 // 0.8
	hiMarginNum, hiMarginDen = 5, 4 // 1.25
)

// Assign places every shard on min(r, len(nodes)) distinct nodes (r < 1 is
// treated as 1). The result has an entry for every shard; its nodes are
// listed in rendezvous preference order, highest score first. Duplicate
// shards and nodes are ignored, as are empty node ids.
//
// The result depends only on the sets of shards and nodes, never on their
// order, and is the same in every process and release: see the package
// documentation for the algorithm (rendezvous hashing followed by a
// bounded-load repair pass) and its balance and stability guarantees.
func Assign(shards []Shard, nodes []NodeID, r int) map[Shard][]NodeID {
	ss := uniqueShards(shards)
	ns := uniqueNodes(nodes)
	k := replicaCount(r, len(ns))
	out := make(map[Shard][]NodeID, len(ss))
	if k == 0 {
		for _, s := range ss {
			out[s] = nil
		}
		return out
	}
	lo, hi := bounds(len(ss)*k, len(ns), len(ss))
	a := newAssigner(ss, ns, k)
	a.shed(hi)
	a.fill(lo)
	for si, s := range ss {
		out[s] = a.placed(si)
	}
	return out
}

// replicaCount is min(max(r, 1), n).
func replicaCount(r, n int) int {
	return min(max(r, 1), n)
}

// uniqueShards returns the shards sorted and without duplicates.
func uniqueShards(shards []Shard) []Shard {
	ss := slices.Clone(shards)
	slices.SortFunc(ss, compareShards)
	return slices.Compact(ss)
}

// uniqueNodes returns the non-empty node ids sorted and without duplicates.
func uniqueNodes(nodes []NodeID) []NodeID {
	ns := make([]NodeID, 0, len(nodes))
	for _, n := range nodes {
		if n != "" {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// bounds returns the per-node load bounds [lo, hi] for total replicas on n
// nodes, where a node holds at most one replica of each of shards shards.
// They always satisfy lo <= floor(total/n) and hi >= ceil(total/n), so a
// placement within them exists; they are as wide as the margins allow
// (fewer repair moves, more stability) but narrowed, from the side farther
// from the mean, until hi <= 1.5*lo, or down to [floor, ceil] of the mean
// when integer loads allow nothing better.
func bounds(total, n, shards int) (lo, hi int) {
	floorAvg := total / n
	ceilAvg := (total + n - 1) / n
	lo = total * loMarginNum / (loMarginDen * n)
	hi = (total*hiMarginNum + hiMarginDen*n - 1) / (hiMarginDen * n)
	if floorAvg >= 1 {
		lo = max(lo, 1)
	}
	// With lo == 0 (fewer replicas than nodes) no ratio holds: use [0, 1].
	for (lo == 0 || 2*hi > 3*lo) && (hi > ceilAvg || lo < floorAvg) {
		// Compare hi-avg with avg-lo, scaled by n.
		if lo >= floorAvg || (hi > ceilAvg && hi*n-total >= total-lo*n) {
			hi--
		} else {
			lo++
		}
	}
	return lo, min(hi, shards)
}

// assigner holds the working state of one Assign call. Shards and nodes are
// addressed by their index in the sorted, deduplicated inputs, so every
// tie is broken the same way whatever the callers' order.
type assigner struct {
	shards []Shard
	nodes  []NodeID
	score  [][]uint64 // score[shard][node]: the rendezvous weight
	on     [][]bool   // on[shard][node]: the node holds a replica
	load   []int      // load[node]: replicas held
}

// newAssigner places every shard on its k highest-scoring nodes.
func newAssigner(shards []Shard, nodes []NodeID, k int) *assigner {
	a := &assigner{
		shards: shards,
		nodes:  nodes,
		score:  make([][]uint64, len(shards)),
		on:     make([][]bool, len(shards)),
		load:   make([]int, len(nodes)),
	}
	order := make([]int, len(nodes))
	for si, s := range shards {
		a.score[si] = make([]uint64, len(nodes))
		a.on[si] = make([]bool, len(nodes))
		prefix := shardHash(s)
		for ni, n := range nodes {
			a.score[si][ni] = score(prefix, n)
			order[ni] = ni
		}
		a.sortByScore(si, order)
		for _, ni := range order[:k] {
			a.on[si][ni] = true
			a.load[ni]++
		}
	}
	return a
}

// sortByScore sorts node indexes by descending score for shard si.
func (a *assigner) sortByScore(si int, order []int) {
	slices.SortFunc(order, func(x, y int) int {
		if c := cmp.Compare(a.score[si][y], a.score[si][x]); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
}

// placed returns the nodes holding shard si, in descending score order.
func (a *assigner) placed(si int) []NodeID {
	var order []int
	for ni, on := range a.on[si] {
		if on {
			order = append(order, ni)
		}
	}
	a.sortByScore(si, order)
	out := make([]NodeID, len(order))
	for i, ni := range order {
		out[i] = a.nodes[ni]
	}
	return out
}

// move is one replica moving from node from to node to.
type move struct {
	shard, from, to int
	cost            int64
}

// cost is how much rendezvous weight moving shard si from node u to node v
// gives up. Scores are halved so the difference fits an int64.
func (a *assigner) cost(si, u, v int) int64 {
	return int64(a.score[si][u]>>1) - int64(a.score[si][v]>>1)
}

// apply performs m.
func (a *assigner) apply(m move) {
	a.on[m.shard][m.from] = false
	a.on[m.shard][m.to] = true
	a.load[m.from]--
	a.load[m.to]++
}

// shed moves replicas off nodes holding more than hi until none does,
// always taking the cheapest move (least rendezvous weight lost) from any
// overloaded node to any node below hi. Such a move always exists: an
// overloaded node holds more replicas than some node below the mean, so it
// holds a shard that node lacks.
func (a *assigner) shed(hi int) {
	for {
		best := move{shard: -1}
		for si := range a.shards {
			for u, onU := range a.on[si] {
				if !onU || a.load[u] <= hi {
					continue
				}
				for v, onV := range a.on[si] {
					if onV || a.load[v] >= hi {
						continue
					}
					if c := a.cost(si, u, v); best.shard < 0 || c < best.cost {
						best = move{shard: si, from: u, to: v, cost: c}
					}
				}
			}
		}
		if best.shard < 0 {
			return
		}
		a.apply(best)
	}
}

// fill moves replicas onto nodes holding fewer than lo until none does,
// always taking the cheapest move from any node above lo. It never pushes a
// node above hi (the receiver is below lo) nor below lo (the giver is above
// it). A move always exists: a node below lo <= floor(mean) implies a node
// above the mean, which holds a shard the underloaded node lacks.
func (a *assigner) fill(lo int) {
	for {
		best := move{shard: -1}
		for si := range a.shards {
			for v, onV := range a.on[si] {
				if onV || a.load[v] >= lo {
					continue
				}
				for u, onU := range a.on[si] {
					if !onU || a.load[u] <= lo {
						continue
					}
					if c := a.cost(si, u, v); best.shard < 0 || c < best.cost {
						best = move{shard: si, from: u, to: v, cost: c}
					}
				}
			}
		}
		if best.shard < 0 {
			return
		}
		a.apply(best)
	}
}

// FNV-1a (64 bit) parameters.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// shardHash is the FNV-1a state after hashing the shard's identity:
// uvarint(len(keyspace)) ‖ keyspace ‖ big-endian uint32 id. The length
// prefix keeps ("ab", node "c") and ("a", node "bc") apart.
func shardHash(s Shard) uint64 {
	h := fnvOffset
	for l := uint64(len(s.Keyspace)); ; l >>= 7 {
		if l < 0x80 {
			h = (h ^ l) * fnvPrime
			break
		}
		h = (h ^ (l&0x7f | 0x80)) * fnvPrime
	}
	for i := 0; i < len(s.Keyspace); i++ {
		h = (h ^ uint64(s.Keyspace[i])) * fnvPrime
	}
	for shift := 24; shift >= 0; shift -= 8 {
		h = (h ^ uint64(byte(s.ID>>shift))) * fnvPrime
	}
	return h
}

// score is the rendezvous weight of node for the shard whose shardHash is
// prefix: FNV-1a continued over the node id, then the splitmix64 finalizer
// so that every input bit affects every output bit. Changing it would move
// replicas on upgrade, and nodes of different releases would disagree on
// the target: TestAssignPinned pins it.
func score(prefix uint64, node NodeID) uint64 {
	h := prefix
	for i := 0; i < len(node); i++ {
		h = (h ^ uint64(node[i])) * fnvPrime
	}
	h = (h ^ h>>30) * 0xbf58476d1ce4e5b9
	h = (h ^ h>>27) * 0x94d049bb133111eb
	return h ^ h>>31
}
