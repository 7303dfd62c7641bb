package cluster

import (
	"sort"
)

// DefaultKeyspace lives on every site of the cluster.
const DefaultKeyspace = "default"

// Node is one registered node of a site.
type Node struct {
	ID         string `json:"id"`
	Site       string `json:"site"`
	PeerAddr   string `json:"peer_addr"`
	ClientAddr string `json:"client_addr"`
	GossipAddr string `json:"gossip_addr,omitempty"`
	// Voter: the node holds its site's vote in the configuration group.
	Voter bool `json:"voter,omitempty"`
}

// Site is one site of the cluster.
type Site struct {
	Name string `json:"name"`
	// Order is the position in which the site joined (from 0); the default
	// keyspace's chain lists sites in this order.
	Order int             `json:"order"`
	Nodes map[string]Node `json:"nodes"`
	// Incarnation is the site's incarnation (docs/adr/029), recorded by
	// the first node that registers with one; 0 until then. A node of
	// another incarnation is refused: it bootstrapped a new site under
	// this site's name.
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// Keyspace is one keyspace: its shard count (the same at every site) and
// the sites that hold it, in chain order.
type Keyspace struct {
	Name   string   `json:"name"`
	Shards uint32   `json:"shards"`
	Sites  []string `json:"sites"`
	// Joined records, for each site added to the keyspace after its
	// creation (set-sites), the configuration version of the change that
	// added it. Such a site serves no read of the keyspace until every
	// shard has the join repair of every site it needs (docs/adr/019). A
	// site that leaves the keyspace leaves it.
	Joined map[string]uint64 `json:"joined,omitempty"`
}

// Config is the cluster-wide configuration. Every node holds a copy; the
// data path runs on the last copy it has.
type Config struct {
	// Version grows with every change.
	Version uint64 `json:"version"`
	// ID names the cluster: a random non-zero number drawn by the node
	// whose registration created the configuration (0 in a configuration
	// of an earlier release until the next node registers). Session tokens
	// carry it, so that a cluster refuses another's sessions.
	ID        uint64              `json:"id,omitempty"`
	Sites     map[string]Site     `json:"sites"`
	Keyspaces map[string]Keyspace `json:"keyspaces"`
	// Removed lists the sites removed from the cluster for good (kvctl
	// site remove), by name, with the incarnation they had. Their names
	// are never taken back: a site's writes are known by its name, and
	// the removed site's may still be held, on its own disks or in
	// flight.
	Removed map[string]RemovedSite `json:"removed_sites,omitempty"`
}

// RemovedSite records a site removed from the cluster.
type RemovedSite struct {
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Version is the configuration version that removed it.
	Version uint64 `json:"version"`
}

// SiteNames lists the sites in join order.
func (c Config) SiteNames() []string {
	out := make([]string, 0, len(c.Sites))
	for n := range c.Sites {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := c.Sites[out[i]], c.Sites[out[j]]
		if a.Order != b.Order {
			return a.Order < b.Order
		}
		return a.Name < b.Name
	})
	return out
}

// Keyspace returns a keyspace. The default keyspace's sites are every
// site of the cluster, in join order.
func (c Config) Keyspace(name string) (Keyspace, bool) {
	ks, ok := c.Keyspaces[name]
	if !ok {
		return Keyspace{}, false
	}
	if name == DefaultKeyspace {
		ks.Sites = c.SiteNames()
	}
	return ks, true
}

// Holds reports whether site holds keyspace name.
func (ks Keyspace) Holds(site string) bool {
	for _, s := range ks.Sites {
		if s == site {
			return true
		}
	}
	return false
}

// Chain returns the chain of sites of an origin's updates: the site list
// rotated to start at origin (nil if origin does not hold the keyspace).
func (ks Keyspace) Chain(origin string) []string {
	for i, s := range ks.Sites {
		if s == origin {
			out := make([]string, 0, len(ks.Sites))
			out = append(out, ks.Sites[i:]...)
			return append(out, ks.Sites[:i]...)
		}
	}
	return nil
}

// Nodes lists the nodes of site, sorted by id.
func (c Config) Nodes(site string) []Node {
	s := c.Sites[site]
	out := make([]Node, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// NodeByAddr finds the node that listens on addr (peer, client or gossip
// address).
func (c Config) NodeByAddr(addr string) (Node, bool) {
	for _, s := range c.Sites {
		for _, n := range s.Nodes {
			if n.PeerAddr == addr || n.ClientAddr == addr || n.GossipAddr == addr {
				return n, true
			}
		}
	}
	return Node{}, false
}
