// Package router maps a (keyspace, key) to the shard that owns it and to
// where that shard can be served: this node's replica, or another node of
// the site found through the placement map. It decides; the rpc layer does
// the forwarding.
package router

import (
	"errors"
	"fmt"
	"sort"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

// ErrUnknownKeyspace is returned for a keyspace this site does not hold.
var ErrUnknownKeyspace = errors.New("router: unknown keyspace")

// Local gives access to this node's replicas.
type Local interface {
	Group(s placement.Shard) *shard.Group
	Groups() []*shard.Group
}

// Catalog gives the site's placement and nodes.
type Catalog interface {
	State() (catalog.State, <-chan struct{})
}

// Router is safe for concurrent use.
type Router struct {
	self      string
	keyspaces map[string]uint32
	local     Local
	catalog   Catalog
}

// New returns a router for node self over the given keyspaces (name →
// shard count).
func New(self string, keyspaces map[string]uint32, local Local, cat Catalog) *Router {
	return &Router{self: self, keyspaces: keyspaces, local: local, catalog: cat}
}

// Shard returns the shard of key.
func (r *Router) Shard(keyspace string, key []byte) (placement.Shard, error) {
	n, ok := r.keyspaces[keyspace]
	if !ok {
		return placement.Shard{}, fmt.Errorf("%w %q", ErrUnknownKeyspace, keyspace)
	}
	return placement.Shard{Keyspace: keyspace, ID: placement.ShardOf(key, n)}, nil
}

// Shards returns every shard of keyspace, in order.
func (r *Router) Shards(keyspace string) ([]placement.Shard, error) {
	n, ok := r.keyspaces[keyspace]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKeyspace, keyspace)
	}
	out := make([]placement.Shard, n)
	for i := range out {
		out[i] = placement.Shard{Keyspace: keyspace, ID: uint32(i)}
	}
	return out, nil
}

// Local returns this node's replica of s, or nil.
func (r *Router) Local(s placement.Shard) *shard.Group { return r.local.Group(s) }

// Groups returns every local replica.
func (r *Router) Groups() []*shard.Group { return r.local.Groups() }

// Replicas returns the other nodes holding s, voters first, and the
// placement epoch they were read at.
func (r *Router) Replicas(s placement.Shard) ([]catalog.Node, uint64) {
	st, _ := r.catalog.State()
	reps := append([]placement.Replica(nil), st.Map.Shards[s]...)
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].Voter && !reps[j].Voter })
	var out []catalog.Node
	for _, rep := range reps {
		if string(rep.Node) == r.self {
			continue
		}
		if n, ok := st.Nodes[string(rep.Node)]; ok && n.PeerAddr != "" {
			out = append(out, n)
		}
	}
	return out, st.Map.Epoch
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
