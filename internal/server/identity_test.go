package server

import (
	"testing"

	"github.com/causeway-db/causeway/internal/placement"
)

func TestKnownTo(t *testing.T) {
	a, b := placement.Shard{Keyspace: "default", ID: 0}, placement.Shard{Keyspace: "default", ID: 1}
	m := placement.Map{Epoch: 3, Shards: map[placement.Shard][]placement.Replica{
		a: {{Node: "n1", Voter: true}, {Node: "n3", Voter: true}},
		b: {{Node: "n1", Voter: true}, {Node: "n3", Voter: false}},
	}}
	for _, tc := range []struct {
		id      string
		voters  []string
		catalog bool
		shards  int
	}{
		{"n3", []string{"n1", "n2", "n3"}, true, 1}, // a learner of b counts for nothing
		{"n3", []string{"n1", "n2"}, false, 1},
		{"n2", []string{"n1", "n2"}, true, 0},
		{"n4", []string{"n1", "n2", "n3"}, false, 0}, // a new node
	} {
		catalog, shards := knownTo(m, tc.voters, tc.id)
		if catalog != tc.catalog || shards != tc.shards {
			t.Errorf("knownTo(%s, %v) = %v, %d; want %v, %d", tc.id, tc.voters, catalog, shards, tc.catalog, tc.shards)
		}
	}
}
