package placement

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// reps builds replicas from "a" (voter) and "a~" (learner) notation.
func reps(spec ...string) []Replica {
	var out []Replica
	for _, s := range spec {
		if n, ok := strings.CutSuffix(s, "~"); ok {
			out = append(out, Replica{Node: NodeID(n)})
		} else {
			out = append(out, Replica{Node: NodeID(s), Voter: true})
		}
	}
	return out
}

// repsString renders replicas in the notation of reps.
func repsString(rs []Replica) string {
	out := "["
	for i, r := range rs {
		if i > 0 {
			out += " "
		}
		out += string(r.Node)
		if !r.Voter {
			out += "~"
		}
	}
	return out + "]"
}

func TestApply(t *testing.T) {
	s := Shard{"ks", 1}
	for _, tc := range []struct {
		name  string
		start []Replica
		step  Step
		want  []Replica
		err   error
	}{
		{"add learner", reps("a", "c"), Step{s, StepAddLearner, "b"}, reps("a", "b~", "c"), nil},
		{"add existing", reps("a", "b~"), Step{s, StepAddLearner, "b"}, nil, ErrReplicaExists},
		{"promote", reps("a", "b~"), Step{s, StepPromote, "b"}, reps("a", "b"), nil},
		{"promote voter", reps("a", "b"), Step{s, StepPromote, "b"}, nil, ErrAlreadyVoter},
		{"promote missing", reps("a"), Step{s, StepPromote, "b"}, nil, ErrNoSuchReplica},
		{"remove voter", reps("a", "b"), Step{s, StepRemove, "a"}, reps("b"), nil},
		{"remove learner", reps("a", "b~"), Step{s, StepRemove, "b"}, reps("a"), nil},
		{"remove last voter", reps("a", "b~"), Step{s, StepRemove, "a"}, nil, ErrLastVoter},
		{"remove missing", reps("a"), Step{s, StepRemove, "b"}, nil, ErrNoSuchReplica},
		{"unknown shard", reps("a"), Step{Shard{"ks", 2}, StepAddLearner, "b"}, nil, ErrUnknownShard},
		{"zero kind", reps("a"), Step{s, 0, "b"}, nil, ErrInvalidStep},
		{"unknown kind", reps("a"), Step{s, 9, "b"}, nil, ErrInvalidStep},
		{"empty node", reps("a"), Step{s, StepAddLearner, ""}, nil, ErrInvalidStep},
		{"recover two voters", reps("a", "b"), Step{s, StepRecover, "a"}, reps("a"), nil},
		{"recover two voters and a learner", reps("a", "b", "c~"), Step{s, StepRecover, "a"}, reps("a"), nil},
		{"recover a voter whose promotion was cut short", reps("a", "b~"), Step{s, StepRecover, "a"}, reps("a"), nil},
		{"recover from a learner", reps("a", "b~"), Step{s, StepRecover, "b"}, nil, ErrInvalidStep},
		{"recover three voters", reps("a", "b", "c"), Step{s, StepRecover, "a"}, nil, ErrInvalidStep},
		{"force-recover a voter of three", reps("a", "b", "c"), Step{s, StepForceRecover, "b"}, reps("b"), nil},
		{"force-recover a learner", reps("a", "b", "c~"), Step{s, StepForceRecover, "c"}, reps("c"), nil},
		{"force-recover the only voter", reps("a"), Step{s, StepForceRecover, "a"}, reps("a"), nil},
		{"force-recover a stranger", reps("a", "b", "c"), Step{s, StepForceRecover, "d"}, nil, ErrNoSuchReplica},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := tc.start
			m := Map{Epoch: 4, Shards: map[Shard][]Replica{s: start}}
			before := m.Clone()
			err := m.Apply(tc.step)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Apply(%v) = %v, want %v", tc.step, err, tc.err)
			}
			if !reflect.DeepEqual(start, before.Shards[s]) {
				t.Fatalf("Apply modified the old slice: %v, was %v", start, before.Shards[s])
			}
			if err != nil {
				if !reflect.DeepEqual(m, before) {
					t.Fatalf("failed Apply changed the map: %+v", m)
				}
				return
			}
			if m.Epoch != 5 {
				t.Errorf("epoch %d, want 5", m.Epoch)
			}
			if got := repsString(m.Shards[s]); got != repsString(tc.want) {
				t.Errorf("replicas %s, want %s", got, repsString(tc.want))
			}
			wantGen := uint64(0)
			if tc.step.Kind == StepRecover || tc.step.Kind == StepForceRecover {
				wantGen = 1
			}
			if g := m.Generation(s); g != wantGen {
				t.Errorf("generation %d, want %d", g, wantGen)
			}
		})
	}
}

// TestGenerationCountsRecoveries: every recovery of a shard starts a new
// generation of it, and only of it; the other steps keep it.
func TestGenerationCountsRecoveries(t *testing.T) {
	s, other := Shard{"ks", 1}, Shard{"ks", 2}
	m := Map{Epoch: 1, Shards: map[Shard][]Replica{s: reps("a", "b", "c"), other: reps("a")}}
	for i, st := range []Step{
		{s, StepForceRecover, "a"},
		{s, StepAddLearner, "b"},
		{s, StepPromote, "b"},
		{s, StepRecover, "b"},
		{s, StepAddLearner, "c"},
	} {
		if err := m.Apply(st); err != nil {
			t.Fatalf("step %d %v: %v", i, st, err)
		}
	}
	if m.Generation(s) != 2 || m.Generation(other) != 0 {
		t.Fatalf("generations %v, want 2 for %v and none for %v", m.Generations, s, other)
	}
	c := m.Clone()
	c.Generations[s] = 9
	if m.Generation(s) != 2 {
		t.Fatal("changing the clone's generations changed the original")
	}
}

func TestCloneIsDeep(t *testing.T) {
	s := Shard{"ks", 0}
	m := NewMap(map[Shard][]NodeID{s: {"b", "a", "b"}})
	if got := repsString(m.Shards[s]); got != "[a b]" || m.Epoch != 1 {
		t.Fatalf("NewMap = epoch %d %s, want epoch 1 [a b]", m.Epoch, got)
	}
	c := m.Clone()
	c.Shards[s][0].Voter = false
	c.Shards[Shard{"ks", 1}] = nil
	c.Epoch++
	if got := repsString(m.Shards[s]); got != "[a b]" || len(m.Shards) != 1 || m.Epoch != 1 {
		t.Fatalf("changing the clone changed the original: epoch %d %v", m.Epoch, m.Shards)
	}
	if (Map{}).Clone().Shards != nil {
		t.Fatal("clone of the zero map has shards")
	}
}

func TestLostQuorum(t *testing.T) {
	m := Map{Shards: map[Shard][]Replica{
		{"a", 0}: reps("n1", "n2", "n3"),       // 2 of 3 live
		{"a", 1}: reps("n1", "n3", "n4"),       // 1 of 3 live
		{"a", 2}: reps("n1", "n3", "n4", "n5"), // 1 of 4 live
		{"a", 3}: reps("n1", "n2", "n3", "n4"), // 2 of 4 live: not a majority
		{"a", 4}: reps("n3~"),                  // no voter
		{"a", 5}: reps("n1", "n4~", "n5~"),     // learners do not count
	}}
	got := fmt.Sprint(m.LostQuorum([]NodeID{"n1", "n2"}))
	if want := "[a/1 a/2 a/3 a/4]"; got != want {
		t.Errorf("LostQuorum = %s, want %s", got, want)
	}
}

func TestStepString(t *testing.T) {
	for _, tc := range []struct {
		step Step
		want string
	}{
		{Step{Shard{"ks", 3}, StepAddLearner, "n4"}, "ks/3 add-learner n4"},
		{Step{Shard{"ks", 3}, StepPromote, "n4"}, "ks/3 promote n4"},
		{Step{Shard{"ks", 3}, StepRemove, "n4"}, "ks/3 remove n4"},
		{Step{Shard{"ks", 3}, StepForceRecover, "n4"}, "ks/3 force-recover n4"},
		{Step{Shard{"ks", 3}, 0, "n4"}, "ks/3 StepKind(0) n4"},
	} {
		if got := tc.step.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
