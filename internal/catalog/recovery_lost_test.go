package catalog

import (
	"errors"
	"slices"
	"testing"
)

// TestRecoveryLost: the survivor of a group of at most two voters goes on
// alone, giving up the other replicas of the map and of its own
// configuration, unless its configuration has more voters or a replica
// that answered holds a configuration with a voter the survivor's lacks
// (docs/adr/023). Guard recovery-config-check turns that last check off
// and makes this test fail.
func TestRecoveryLost(t *testing.T) {
	st := func(voters, learners []string) ReplicaStatus {
		return ReplicaStatus{Hosted: true, Voters: voters, Learners: learners}
	}
	for _, tc := range []struct {
		name    string
		sv      ReplicaStatus
		mapped  []string
		others  map[string]ReplicaStatus
		want    []string
		refused bool
	}{
		{"two voters (ADR 013)", st([]string{"a", "b"}, nil), []string{"b"}, nil, []string{"b"}, false},
		{"two voters and a learner that holds the same configuration", st([]string{"a", "b"}, []string{"c"}), []string{"b", "c"},
			map[string]ReplicaStatus{"c": st([]string{"a", "b"}, []string{"c"})}, []string{"b", "c"}, false},
		{"a learner that holds an older configuration", st([]string{"a", "b"}, []string{"c"}), []string{"b", "c"},
			map[string]ReplicaStatus{"c": st([]string{"a"}, []string{"b", "c"})}, []string{"b", "c"}, false},
		{"already alone", st([]string{"a"}, nil), []string{"b"}, nil, []string{"b"}, false},
		{"a server of the configuration the map no longer holds", st([]string{"a", "b"}, []string{"d"}), []string{"b"}, nil, []string{"b", "d"}, false},
		{"a learner promoted by a configuration the survivor lacks", st([]string{"a", "b"}, []string{"c"}), []string{"b", "c"},
			map[string]ReplicaStatus{"c": st([]string{"a", "b", "c"}, nil)}, nil, true},
		{"a learner that has not opened its replica", st([]string{"a", "b"}, []string{"c"}), []string{"b", "c"},
			map[string]ReplicaStatus{"c": {}}, nil, true},
		{"three voters", st([]string{"a", "b", "c"}, nil), []string{"b", "c"}, nil, nil, true},
		{"the survivor a learner", st([]string{"b", "c"}, []string{"a"}), []string{"b", "c"}, nil, nil, true},
		{"the survivor holds no replica", ReplicaStatus{}, []string{"b"}, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := recoveryLost("a", tc.sv, tc.mapped, tc.others)
			if tc.refused {
				if !errors.Is(err, ErrUnsafeRecovery) {
					t.Fatalf("recoveryLost = %v, %v; want ErrUnsafeRecovery", got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("recoveryLost = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
