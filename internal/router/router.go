// Package router maps a (keyspace, key) to the shard replica that serves it.
// On a single-node site every shard is local; multi-node sites add
// forwarding here.
package router

import (
	"errors"
	"fmt"
	"sort"

	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

// ErrUnknownKeyspace is returned for a keyspace this site does not hold.
var ErrUnknownKeyspace = errors.New("router: unknown keyspace")

// Router routes requests to shard groups. It is immutable and safe for
// concurrent use.
type Router struct {
	keyspaces map[string][]*shard.Group
}

// New returns a router over the given keyspaces; groups[i] must replicate
// shard i.
func New(keyspaces map[string][]*shard.Group) *Router {
	return &Router{keyspaces: keyspaces}
}

// Route returns the group of key's shard.
func (r *Router) Route(keyspace string, key []byte) (*shard.Group, error) {
	groups, err := r.Shards(keyspace)
	if err != nil {
		return nil, err
	}
	return groups[placement.ShardOf(key, uint32(len(groups)))], nil
}

// Shards returns every shard group of keyspace, in shard order.
func (r *Router) Shards(keyspace string) ([]*shard.Group, error) {
	groups, ok := r.keyspaces[keyspace]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKeyspace, keyspace)
	}
	return groups, nil
}

// Keyspaces lists the keyspaces, sorted.
func (r *Router) Keyspaces() []string {
	out := make([]string, 0, len(r.keyspaces))
	for k := range r.keyspaces {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// All returns every group, keyspace by keyspace.
func (r *Router) All() []*shard.Group {
	var out []*shard.Group
	for _, ks := range r.Keyspaces() {
		out = append(out, r.keyspaces[ks]...)
	}
	return out
}
