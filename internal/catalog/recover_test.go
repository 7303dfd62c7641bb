package catalog

import (
	"errors"
	"strings"
	"testing"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

func replica(node string, voter, alive bool, st ReplicaStatus) RecoveryReplica {
	return RecoveryReplica{Node: node, Voter: voter, Alive: alive, Reachable: st.Hosted || st.State != "", Status: st}
}

// TestNothingToRecover: a group with a leader, or with a live majority of
// its voters (those of the survivor's configuration, else the map's), is
// not lost.
func TestNothingToRecover(t *testing.T) {
	s := placement.Shard{Keyspace: "ks", ID: 1}
	cand := ReplicaStatus{Hosted: true, State: "Candidate", Voters: []string{"n1", "n2", "n3"}}
	for _, tc := range []struct {
		name  string
		reps  []RecoveryReplica
		alive []string
		want  string // "" when there is something to recover
	}{
		{"two of three lost", []RecoveryReplica{replica("n1", true, true, cand), replica("n2", true, false, ReplicaStatus{}), replica("n3", true, false, ReplicaStatus{})}, []string{"n1"}, ""},
		{"a leader elsewhere", []RecoveryReplica{replica("n1", true, true, cand), replica("n2", true, true, ReplicaStatus{Hosted: true, State: "Leader"})}, []string{"n1"}, "has a leader, n2"},
		{"the survivor knows a leader", []RecoveryReplica{replica("n1", true, true, ReplicaStatus{Hosted: true, State: "Follower", Leader: "n3", Voters: cand.Voters})}, []string{"n1"}, "has a leader, n3, as n1 sees it"},
		{"a live majority", []RecoveryReplica{replica("n1", true, true, cand), replica("n2", true, true, ReplicaStatus{}), replica("n3", true, false, ReplicaStatus{})}, []string{"n1", "n2"}, "live quorum (n1, n2 of voters n1, n2, n3"},
		{"two of four is no majority", []RecoveryReplica{replica("n1", true, true, ReplicaStatus{Hosted: true, State: "Candidate", Voters: []string{"n1", "n2", "n3", "n4"}})}, []string{"n1", "n2"}, ""},
		{"the map's voters without a configuration", []RecoveryReplica{replica("n1", true, true, ReplicaStatus{Hosted: true, State: "Candidate"}), replica("n2", true, true, ReplicaStatus{}), replica("n3", false, false, ReplicaStatus{})}, []string{"n1", "n2"}, "live quorum (n1, n2 of voters n1, n2 are alive)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alive := map[string]bool{}
			for _, a := range tc.alive {
				alive[a] = true
			}
			rec := Recovery{Shard: s, Node: "n1", Replicas: tc.reps, Voters: tc.reps[0].Status.Voters}
			err := nothingToRecover(s, rec, alive)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("nothingToRecover = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNothingToRecover) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("nothingToRecover = %v, want ErrNothingToRecover with %q", err, tc.want)
			}
		})
	}
}

func TestRecoveryWarnings(t *testing.T) {
	sv := ReplicaStatus{Hosted: true, State: "Candidate", LastIndex: 50, LastLogTerm: 4, Voters: []string{"n1", "n2", "n3"}}
	rec := Recovery{Node: "n1", Replicas: []RecoveryReplica{
		replica("n1", true, true, sv),
		replica("n2", true, true, ReplicaStatus{Hosted: true, State: "Candidate", LastIndex: 51, LastLogTerm: 4}),
		replica("n3", false, false, ReplicaStatus{}),
	}}
	got := strings.Join(recoveryWarnings(rec, ""), "\n")
	for _, want := range []string{
		"n2 holds a longer log (last index 51, term 4, against 50, term 4): recovering on n2 gives up less",
		"n2 is alive: its replica is given up too",
		"the site catalog has no leader",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "learner") {
		t.Errorf("a voter survivor warned as a learner:\n%s", got)
	}
	rec.Replicas[0].Voter = false
	rec.Replicas[0].Status.Voters = []string{"n2", "n3"}
	rec.Replicas[1].Status.LastLogTerm = 3 // an older term: not longer
	got = strings.Join(recoveryWarnings(rec, "n1"), "\n")
	if !strings.Contains(got, "n1 is a learner") || strings.Contains(got, "longer log") || strings.Contains(got, "no leader") {
		t.Errorf("warnings:\n%s", got)
	}
}

// TestRecoveryStepGenerations: the state machine applies a recovery step
// only if it starts the shard's next generation (or names none).
func TestRecoveryStepGenerations(t *testing.T) {
	f := newFuzzFSM(t)
	step := func(kind placement.StepKind, node string, gen uint64) error {
		return f.applyLocked(&peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{
			Shard: &peerv1.ShardRef{Keyspace: "default", Shard: 1}, Kind: int32(kind), NodeId: node, Generation: gen,
		}}})
	}
	if err := step(placement.StepForceRecover, "n2", 2); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("a step skipping a generation = %v, want ErrStaleGeneration", err)
	}
	if err := step(placement.StepForceRecover, "n2", 1); err != nil {
		t.Fatal(err)
	}
	if err := step(placement.StepForceRecover, "n2", 1); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("a repeated step = %v, want ErrStaleGeneration", err)
	}
	sh := placement.Shard{Keyspace: "default", ID: 1}
	if m := f.state.Map; m.Generation(sh) != 1 || len(m.Shards[sh]) != 1 || m.Shards[sh][0] != (placement.Replica{Node: "n2", Voter: true}) {
		t.Fatalf("after the recovery: %v, generation %d", m.Shards[sh], m.Generation(sh))
	}
	if err := step(placement.StepAddLearner, "n3", 7); err != nil {
		t.Fatalf("a step that is not a recovery ignores the generation: %v", err)
	}
}
