package router

import (
	"testing"

	"github.com/causeway-db/causeway/internal/catalog"
)

// TestPickReplicaSkipsUnanswered: a node that does not hold a shard
// forwards to a replica; one that just failed a forwarded request (a dead
// node the catalog still lists first) is asked only when all failed.
func TestPickReplicaSkipsUnanswered(t *testing.T) {
	r := New(Config{}, map[string]uint32{"default": 1}, nil, nil, nil, nil, nil, nil)
	reps := []catalog.Node{{ID: "n2", PeerAddr: "a:2"}, {ID: "n3", PeerAddr: "a:3"}}
	if got := r.pickReplica(reps, 0); got != "a:2" {
		t.Fatalf("picked %s, want the first replica", got)
	}
	r.markUnanswered("a:2", ErrPeerUnavailable)
	if got := r.pickReplica(reps, 0); got != "a:3" {
		t.Fatalf("picked %s after a:2 failed, want a:3", got)
	}
	r.markUnanswered("a:3", ErrPeerUnavailable)
	if got := r.pickReplica(reps, 0); got != "a:2" {
		t.Fatalf("picked %s with every replica failing, want the first", got)
	}
}
