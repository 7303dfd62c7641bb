package router

import (
	"errors"
	"strings"
	"testing"
)

// TestRecentKeyspaceSaysRetry: a keyspace this node has not heard of but
// the leader of the cluster configuration has (created moments ago) is
// refused saying to retry, not as a keyspace that does not exist; one the
// leader lacks too is plainly unknown.
func TestRecentKeyspaceSaysRetry(t *testing.T) {
	r := New(Config{Site: "s2", NodeID: "b1", Recent: func(ks string) bool { return ks == "orders" }}, map[string]uint32{"default": 4}, nil, nil, nil, nil, nil, nil)
	_, err := r.Shard("orders", []byte("k"))
	if !errors.Is(err, ErrUnknownKeyspace) || !strings.Contains(err.Error(), "retry in a moment") || !strings.Contains(err.Error(), "created moments ago") {
		t.Fatalf("a keyspace the node has not heard of yet: %v, want one that says to retry", err)
	}
	_, err = r.Shard("nope", []byte("k"))
	if !errors.Is(err, ErrUnknownKeyspace) || strings.Contains(err.Error(), "retry") {
		t.Fatalf("a keyspace no one has: %v", err)
	}
}
