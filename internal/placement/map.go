package placement

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

var (
	// ErrUnknownShard is returned by Apply for a shard the map does not hold.
	ErrUnknownShard = errors.New("placement: unknown shard")
	// ErrReplicaExists is returned by Apply when adding a replica on a node
	// that already holds one of the shard.
	ErrReplicaExists = errors.New("placement: replica exists")
	// ErrNoSuchReplica is returned by Apply when promoting or removing a
	// replica the shard does not have.
	ErrNoSuchReplica = errors.New("placement: no such replica")
	// ErrAlreadyVoter is returned by Apply when promoting a voter.
	ErrAlreadyVoter = errors.New("placement: replica is already a voter")
	// ErrLastVoter is returned by Apply when removing the only voter of a
	// shard: the group would lose its data and could never elect a leader.
	ErrLastVoter = errors.New("placement: cannot remove the last voter")
	// ErrInvalidStep is returned by Apply for a step with an unknown kind or
	// an empty node id.
	ErrInvalidStep = errors.New("placement: invalid step")
)

// Replica is one member of a shard's replica group.
type Replica struct {
	Node NodeID
	// Voter is false for a learner: a non-voting member that receives the
	// log while it catches up and does not count towards quorum.
	Voter bool
}

// Map is the authoritative placement of a site: the replica group of every
// shard. It is kept in the site's catalog group and changed only through
// Apply, one Step at a time.
type Map struct {
	// Epoch increases by one on every change. Zero is the empty map.
	Epoch uint64
	// Shards holds the members of every shard's group. Apply and NewMap
	// keep each slice sorted by node id and never modify a slice in place,
	// so a slice read from the map may be kept.
	Shards map[Shard][]Replica
	// Generations holds, for every shard that went through a recovery
	// (StepRecover, StepForceRecover), how many it went through; absent
	// means 0. A recovery gives replicas up, and a replica that was given
	// up must never again exchange raft traffic with the group nor rejoin
	// it with its old state: replicas carry the generation they belong to,
	// and those of an older one are refused and deleted (docs/adr/014).
	Generations map[Shard]uint64
}

// Generation returns the generation of shard s (0 until its first
// recovery).
func (m Map) Generation(s Shard) uint64 { return m.Generations[s] }

// NewMap returns the map, at epoch 1, in which every shard of assignment is
// replicated by voters on its assigned nodes: the initial map of a site,
// usually built from Assign once the site has a node (a shard without a
// voter is never planned). Duplicate nodes of a shard are kept once.
func NewMap(assignment map[Shard][]NodeID) Map {
	m := Map{Epoch: 1, Shards: make(map[Shard][]Replica, len(assignment))}
	for s, nodes := range assignment {
		var reps []Replica
		for _, n := range nodes {
			reps = append(reps, Replica{Node: n, Voter: true})
		}
		m.Shards[s] = normalize(reps)
	}
	return m
}

// Clone returns a deep copy of m.
func (m Map) Clone() Map {
	c := Map{Epoch: m.Epoch}
	if m.Shards != nil {
		c.Shards = make(map[Shard][]Replica, len(m.Shards))
		for s, reps := range m.Shards {
			c.Shards[s] = slices.Clone(reps)
		}
	}
	if len(m.Generations) > 0 {
		c.Generations = maps.Clone(m.Generations)
	}
	return c
}

// SortedShards returns the shards of m, sorted by keyspace, then id.
func (m Map) SortedShards() []Shard {
	return slices.SortedFunc(maps.Keys(m.Shards), compareShards)
}

// LostQuorum returns, sorted, the shards of m whose voters on live nodes are
// not a majority of their voters (including shards with no voter at all).
// Such a group can commit nothing, membership changes included: Plan leaves
// it alone and an operator has to recover it.
func (m Map) LostQuorum(live []NodeID) []Shard {
	isLive := setOf(live)
	var out []Shard
	for _, s := range m.SortedShards() {
		if !hasQuorum(m.Shards[s], isLive) {
			out = append(out, s)
		}
	}
	return out
}

// StepKind is the kind of a membership change.
type StepKind int

const (
	// StepAddLearner adds the node to the shard's group as a learner.
	StepAddLearner StepKind = iota + 1
	// StepPromote turns the node's learner into a voter.
	StepPromote
	// StepRemove removes the node's replica, voter or learner.
	StepRemove
	// StepRecover makes the node's voter the only replica of a two-voter
	// group whose other voter is dead: every committed entry needed both
	// voters, so the survivor holds them all (docs/adr/013).
	StepRecover
	// StepForceRecover makes the node's replica, voter or learner, the
	// only voter of a group that lost its quorum for good, whatever the
	// group was. Entries committed without the node are lost. Only an
	// operator asks for it (docs/adr/014); Plan never proposes it.
	StepForceRecover
)

// String returns "add-learner", "promote", "remove", "recover" or
// "force-recover".
func (k StepKind) String() string {
	switch k {
	case StepAddLearner:
		return "add-learner"
	case StepPromote:
		return "promote"
	case StepRemove:
		return "remove"
	case StepRecover:
		return "recover"
	case StepForceRecover:
		return "force-recover"
	default:
		return fmt.Sprintf("StepKind(%d)", int(k))
	}
}

// Step is one membership change of one shard's group.
type Step struct {
	Shard Shard
	Kind  StepKind
	Node  NodeID
}

// String returns for example "default/3 add-learner n4".
func (s Step) String() string {
	return s.Shard.String() + " " + s.Kind.String() + " " + string(s.Node)
}

// Apply applies the step to m and increments the epoch; the recovery steps
// also increment the shard's generation. It fails, leaving m unchanged, if
// the step does not fit m: see the Err* values. The slice of the changed
// shard is replaced, never modified in place.
func (m *Map) Apply(s Step) error {
	if s.Node == "" {
		return fmt.Errorf("%w: %v: empty node", ErrInvalidStep, s)
	}
	reps, ok := m.Shards[s.Shard]
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnknownShard, s)
	}
	i := slices.IndexFunc(reps, func(r Replica) bool { return r.Node == s.Node })
	var next []Replica
	switch s.Kind {
	case StepAddLearner:
		if i >= 0 {
			return fmt.Errorf("%w: %v", ErrReplicaExists, s)
		}
		next = append(slices.Clone(reps), Replica{Node: s.Node})
		slices.SortFunc(next, compareReplicas)
	case StepPromote:
		if i < 0 {
			return fmt.Errorf("%w: %v", ErrNoSuchReplica, s)
		}
		if reps[i].Voter {
			return fmt.Errorf("%w: %v", ErrAlreadyVoter, s)
		}
		next = slices.Clone(reps)
		next[i].Voter = true
	case StepRemove:
		if i < 0 {
			return fmt.Errorf("%w: %v", ErrNoSuchReplica, s)
		}
		if reps[i].Voter && voters(reps) == 1 {
			return fmt.Errorf("%w: %v", ErrLastVoter, s)
		}
		next = slices.Delete(slices.Clone(reps), i, i+1)
		if len(next) == 0 {
			next = nil
		}
	case StepRecover:
		// Two voters, or one whose promotion of a learner was cut short
		// (docs/adr/023); learners go with the lost voter: the survivor
		// goes on alone in a new generation.
		if i < 0 || !reps[i].Voter || voters(reps) > 2 {
			return fmt.Errorf("%w: %v: recovery needs at most two voters, the node one of them", ErrInvalidStep, s)
		}
		next = []Replica{reps[i]}
	case StepForceRecover:
		if i < 0 {
			return fmt.Errorf("%w: %v", ErrNoSuchReplica, s)
		}
		next = []Replica{{Node: s.Node, Voter: true}}
	default:
		return fmt.Errorf("%w: %v", ErrInvalidStep, s)
	}
	m.Shards[s.Shard] = next
	m.Epoch++
	if s.Kind == StepRecover || s.Kind == StepForceRecover {
		if m.Generations == nil {
			m.Generations = map[Shard]uint64{}
		}
		m.Generations[s.Shard]++
	}
	return nil
}

// compareReplicas orders replicas by node id.
func compareReplicas(a, b Replica) int {
	return cmp.Compare(a.Node, b.Node)
}

// normalize sorts replicas by node and merges duplicates (a node listed as
// a voter anywhere is a voter). It returns nil for no replicas.
func normalize(reps []Replica) []Replica {
	if len(reps) == 0 {
		return nil
	}
	out := slices.Clone(reps)
	slices.SortStableFunc(out, compareReplicas)
	j := 0
	for _, r := range out[1:] {
		if r.Node == out[j].Node {
			out[j].Voter = out[j].Voter || r.Voter
			continue
		}
		j++
		out[j] = r
	}
	return out[:j+1]
}

// voters counts the voters of reps.
func voters(reps []Replica) int {
	n := 0
	for _, r := range reps {
		if r.Voter {
			n++
		}
	}
	return n
}

// hasQuorum reports whether the live voters of reps are a majority of its
// voters; false when there is no voter.
func hasQuorum(reps []Replica, live map[NodeID]bool) bool {
	v, lv := 0, 0
	for _, r := range normalize(reps) {
		if r.Voter {
			v++
			if live[r.Node] {
				lv++
			}
		}
	}
	return v > 0 && lv >= v/2+1
}

// setOf returns the set of nodes.
func setOf(nodes []NodeID) map[NodeID]bool {
	s := make(map[NodeID]bool, len(nodes))
	for _, n := range nodes {
		s[n] = true
	}
	return s
}
