package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/causeway-db/causeway/internal/placement"
)

// CommandFormat is the command format this build writes and accepts.
const CommandFormat = 1

// MaxShards bounds a keyspace's shard count.
const MaxShards = 4096

// Refusals decided by the configuration's state machine, and the errors of
// changing it.
var (
	// ErrExists: the keyspace exists already.
	ErrExists = errors.New("cluster: already exists")
	// ErrNotFound: no such keyspace.
	ErrNotFound = errors.New("cluster: not found")
	// ErrInvalid: a bad name, shard count or site list, or an unknown site.
	ErrInvalid = errors.New("cluster: invalid change")
	// ErrNoLeader: the configuration group has no leader this node can
	// reach (a site cut off from the majority of sites).
	ErrNoLeader = errors.New("cluster: no configuration leader")
	// ErrSiteRemoved: the node's site was removed from the cluster for
	// good.
	ErrSiteRemoved = errors.New("cluster: site removed")
	// ErrUnknownCommand: a committed command this build cannot interpret.
	ErrUnknownCommand = errors.New("cluster: unknown command")
	// ErrJoinRefused: the cluster refused to register a joining node (its
	// site is in the cluster as another incarnation, or its addresses are
	// invalid); nothing of it was registered, and no retry changes it.
	ErrJoinRefused = errors.New("cluster: join refused")
)

// The operations of Command.
const (
	OpAddNode          = "add_node"
	OpCreateKeyspace   = "create_keyspace"
	OpSetKeyspaceSites = "set_keyspace_sites"
	OpRemoveSite       = "remove_site"
)

// Command is one change of the configuration, as replicated (JSON).
type Command struct {
	Format int    `json:"format"`
	Op     string `json:"op"`
	// Node registers (or updates the addresses of) a node: OpAddNode.
	Node *Node `json:"node,omitempty"`
	// DefaultShards is the default keyspace's shard count if the
	// configuration has none yet (the cluster's first node): OpAddNode.
	DefaultShards uint32 `json:"default_shards,omitempty"`
	// ClusterID becomes the cluster's id if the configuration has none
	// yet (OpAddNode; see Config.ID).
	ClusterID uint64 `json:"cluster_id,omitempty"`
	// Incarnation is the node's site incarnation, 0 if it knows none yet
	// (OpAddNode; see Site.Incarnation).
	Incarnation uint64 `json:"incarnation,omitempty"`
	// Replaces lists the nodes of Node's site that Node replaces: nodes
	// registered at its peer address under other ids, decided by the
	// leader that proposes the command (Replaced). Each leaves the
	// configuration if it is still at that address (OpAddNode).
	Replaces []string `json:"replaces,omitempty"`
	// Keyspace: OpCreateKeyspace (all fields), OpSetKeyspaceSites (name
	// and sites).
	Keyspace *Keyspace `json:"keyspace,omitempty"`
	// Site is the site to remove: OpRemoveSite.
	Site string `json:"site,omitempty"`
}

func encodeCommand(cmd Command) ([]byte, error) {
	cmd.Format = CommandFormat
	return json.Marshal(cmd)
}

func decodeCommand(b []byte) (Command, error) {
	var cmd Command
	if err := json.Unmarshal(b, &cmd); err != nil {
		return Command{}, fmt.Errorf("%w: %v", ErrUnknownCommand, err)
	}
	if cmd.Format != CommandFormat {
		return Command{}, fmt.Errorf("%w: format %d", ErrUnknownCommand, cmd.Format)
	}
	return cmd, nil
}

// Apply returns the configuration after cmd, or the refusal of cmd (c is
// not modified). The caller sets the version.
func Apply(c Config, cmd Command) (Config, error) {
	next := c.Clone()
	switch cmd.Op {
	case OpAddNode:
		if cmd.Node == nil {
			return c, fmt.Errorf("%w: add node: no node", ErrInvalid)
		}
		if next.ID == 0 {
			next.ID = cmd.ClusterID
		}
		return next, next.addNode(*cmd.Node, cmd.DefaultShards, cmd.Incarnation, cmd.Replaces)
	case OpCreateKeyspace:
		if cmd.Keyspace == nil {
			return c, fmt.Errorf("%w: create keyspace: no keyspace", ErrInvalid)
		}
		return next, next.createKeyspace(*cmd.Keyspace)
	case OpSetKeyspaceSites:
		if cmd.Keyspace == nil {
			return c, fmt.Errorf("%w: set keyspace sites: no keyspace", ErrInvalid)
		}
		return next, next.setKeyspaceSites(cmd.Keyspace.Name, cmd.Keyspace.Sites)
	case OpRemoveSite:
		return next, next.removeSite(cmd.Site)
	}
	return c, fmt.Errorf("%w: %q", ErrUnknownCommand, cmd.Op)
}

// Clone returns a deep copy of c.
func (c Config) Clone() Config {
	out := Config{Version: c.Version, ID: c.ID, Sites: make(map[string]Site, len(c.Sites)), Keyspaces: make(map[string]Keyspace, len(c.Keyspaces))}
	for name, s := range c.Sites {
		nodes := make(map[string]Node, len(s.Nodes))
		for id, n := range s.Nodes {
			nodes[id] = n
		}
		s.Nodes = nodes
		out.Sites[name] = s
	}
	for name, ks := range c.Keyspaces {
		ks.Sites = append([]string(nil), ks.Sites...)
		ks.Joined = maps.Clone(ks.Joined)
		out.Keyspaces[name] = ks
	}
	if len(c.Removed) > 0 {
		out.Removed = maps.Clone(c.Removed)
	}
	return out
}

// addNode registers n; the first node of a new site holds the site's vote.
func (c *Config) addNode(n Node, defaultShards uint32, incarnation uint64, replaces []string) error {
	if !ValidName(n.Site) || !ValidName(n.ID) {
		return fmt.Errorf("%w: node %q of site %q: use 1-63 lowercase letters, digits or '-'", ErrInvalid, n.ID, n.Site)
	}
	if n.PeerAddr == "" {
		return fmt.Errorf("%w: node %s/%s has no peer address", ErrInvalid, n.Site, n.ID)
	}
	if _, ok := c.Keyspaces[DefaultKeyspace]; !ok {
		if defaultShards < 1 || defaultShards > MaxShards {
			return fmt.Errorf("%w: default keyspace: %d shards (1 to %d)", ErrInvalid, defaultShards, MaxShards)
		}
		c.Keyspaces[DefaultKeyspace] = Keyspace{Name: DefaultKeyspace, Shards: defaultShards}
	}
	if r, ok := c.Removed[n.Site]; ok {
		return fmt.Errorf("%w: site %s was removed from the cluster for good (configuration version %d, kvctl site remove), and its name is not taken back: node %s cannot join under it. Stop this kvd; to use the machine again, wipe its data directory and start it as a node of another site (a new site needs a name of its own)",
			ErrExists, n.Site, r.Version, n.ID)
	}
	s, ok := c.Sites[n.Site]
	if !ok {
		s = Site{Name: n.Site, Order: len(c.Sites), Nodes: map[string]Node{}}
	}
	switch {
	case incarnation != 0 && s.Incarnation != 0 && incarnation != s.Incarnation:
		return fmt.Errorf("%w: site %s is in the cluster already, as another incarnation (nodes %s): node %s bootstrapped a new site of that name on a new data directory. To add a node to site %s, start it on an empty data directory with --join naming the gossip address of one of the site's nodes (not --join-cluster); a new site needs a name of its own",
			ErrExists, n.Site, strings.Join(slices.Sorted(maps.Keys(s.Nodes)), ", "), n.ID, n.Site)
	case incarnation != 0:
		s.Incarnation = incarnation
	}
	// A node n replaces (a machine started again on its host and ports
	// under a new id, after it lost its data) can never answer at that
	// address again, and the group's raft membership cannot hold two
	// servers at one address: it leaves, and its vote in the group, if it
	// held the site's, passes to n. Only the command decides, so that a
	// log written before this rule replays as it applied.
	for _, id := range replaces {
		if o, ok := s.Nodes[id]; ok && id != n.ID && o.PeerAddr == n.PeerAddr {
			delete(s.Nodes, id)
		}
	}
	hasVoter := false
	for _, o := range s.Nodes {
		if o.Voter && o.ID != n.ID {
			hasVoter = true
		}
	}
	if cur, ok := s.Nodes[n.ID]; ok {
		n.Voter = cur.Voter
	} else {
		n.Voter = !hasVoter
	}
	s.Nodes[n.ID] = n
	c.Sites[n.Site] = s
	return nil
}

// Replaced returns the nodes of n's site that cfg lists at n's peer
// address under another id: the nodes n replaces when it registers
// (Command.Replaces).
func Replaced(cfg Config, n Node) []string {
	var out []string
	for _, o := range cfg.Nodes(n.Site) {
		if o.ID != n.ID && o.PeerAddr == n.PeerAddr {
			out = append(out, o.ID)
		}
	}
	return out
}

func (c *Config) createKeyspace(ks Keyspace) error {
	if !ValidName(ks.Name) {
		return fmt.Errorf("%w: keyspace name %s: use 1-63 lowercase letters, digits or '-'", ErrInvalid, placement.QuoteKeyspace(ks.Name))
	}
	if _, ok := c.Keyspaces[ks.Name]; ok {
		return fmt.Errorf("%w: keyspace %q", ErrExists, ks.Name)
	}
	if ks.Shards < 1 || ks.Shards > MaxShards {
		return fmt.Errorf("%w: keyspace %q: %d shards (1 to %d)", ErrInvalid, ks.Name, ks.Shards, MaxShards)
	}
	if err := c.checkSites(ks.Name, ks.Sites); err != nil {
		return err
	}
	c.Keyspaces[ks.Name] = Keyspace{Name: ks.Name, Shards: ks.Shards, Sites: append([]string(nil), ks.Sites...)}
	return nil
}

func (c *Config) setKeyspaceSites(name string, sites []string) error {
	ks, ok := c.Keyspaces[name]
	if !ok {
		return fmt.Errorf("%w: keyspace %s", ErrNotFound, placement.QuoteKeyspace(name))
	}
	if name == DefaultKeyspace {
		return fmt.Errorf("%w: the default keyspace lives on every site of the cluster: only keyspaces created with kvctl keyspace create can drop a site; a site gone for good leaves the cluster, and the default keyspace with it, by kvctl site remove (see \"Removing a site from the cluster\" in docs/operations.md)", ErrInvalid)
	}
	if err := c.checkSites(name, sites); err != nil {
		return err
	}
	// A site added now joins a keyspace that holds data elsewhere: it is
	// recorded, with version 0 until the caller stamps the change's
	// version (stampJoins). A site that leaves forgets its join.
	for site := range ks.Joined {
		if !slices.Contains(sites, site) {
			delete(ks.Joined, site)
		}
	}
	for _, site := range sites {
		if !slices.Contains(ks.Sites, site) {
			if ks.Joined == nil {
				ks.Joined = map[string]uint64{}
			}
			ks.Joined[site] = 0
		}
	}
	if len(ks.Joined) == 0 {
		ks.Joined = nil
	}
	ks.Sites = append([]string(nil), sites...)
	c.Keyspaces[name] = ks
	return nil
}

// stampJoins gives the joins a change of keyspace name's sites recorded
// (version 0) the configuration version of that change.
func (c *Config) stampJoins(name string, version uint64) {
	for site, v := range c.Keyspaces[name].Joined {
		if v == 0 {
			c.Keyspaces[name].Joined[site] = version
		}
	}
}

// removeSite removes site from the cluster for good: from the sites, from
// every keyspace's site list (the default keyspace's is every site), and
// its name is recorded so that it is never taken back. A keyspace that
// only site holds keeps it: removing the site would leave the keyspace
// on no site.
func (c *Config) removeSite(site string) error {
	if r, ok := c.Removed[site]; ok {
		return fmt.Errorf("%w: site %s was removed already (configuration version %d)", ErrNotFound, site, r.Version)
	}
	s, ok := c.Sites[site]
	if !ok {
		return fmt.Errorf("%w: site %q (the cluster has %s)", ErrNotFound, site, strings.Join(c.SiteNames(), ", "))
	}
	if len(c.Sites) == 1 {
		return fmt.Errorf("%w: site %s is the cluster's only site", ErrInvalid, site)
	}
	var only []string
	for _, name := range slices.Sorted(maps.Keys(c.Keyspaces)) {
		if ks := c.Keyspaces[name]; name != DefaultKeyspace && slices.Equal(ks.Sites, []string{site}) {
			only = append(only, name)
		}
	}
	if len(only) > 0 {
		return fmt.Errorf("%w: site %s is the only site of keyspace(s) %s: add another site to them first (kvctl keyspace set-sites NAME --sites ...)", ErrInvalid, site, strings.Join(only, ", "))
	}
	for name, ks := range c.Keyspaces {
		if i := slices.Index(ks.Sites, site); i >= 0 {
			ks.Sites = slices.Delete(slices.Clone(ks.Sites), i, i+1)
			delete(ks.Joined, site)
			if len(ks.Joined) == 0 {
				ks.Joined = nil
			}
			c.Keyspaces[name] = ks
		}
	}
	delete(c.Sites, site)
	if c.Removed == nil {
		c.Removed = map[string]RemovedSite{}
	}
	// The version is the one this change will get: the caller sets it
	// after Apply (fsm.Apply: the entry's index).
	c.Removed[site] = RemovedSite{Incarnation: s.Incarnation}
	return nil
}

// checkSites checks a keyspace's site list: not empty, known sites, each
// once.
func (c *Config) checkSites(keyspace string, sites []string) error {
	if len(sites) == 0 {
		return fmt.Errorf("%w: keyspace %q: no sites", ErrInvalid, keyspace)
	}
	seen := map[string]bool{}
	var unknown []string
	for _, s := range sites {
		if seen[s] {
			return fmt.Errorf("%w: keyspace %q: site %q listed twice", ErrInvalid, keyspace, s)
		}
		seen[s] = true
		if r, ok := c.Removed[s]; ok {
			return fmt.Errorf("%w: keyspace %q: site %s was removed from the cluster (configuration version %d)", ErrInvalid, keyspace, s, r.Version)
		}
		if _, ok := c.Sites[s]; !ok {
			unknown = append(unknown, s)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%w: keyspace %q: unknown site(s) %s (the cluster has %s)", ErrInvalid, keyspace,
			strings.Join(unknown, ", "), strings.Join(c.SiteNames(), ", "))
	}
	return nil
}

// ValidName reports whether s may name a site, node or keyspace: 1 to 63
// lowercase letters, digits and '-'.
func ValidName(s string) bool {
	if len(s) < 1 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Held returns, for site, the shard counts of the keyspaces it holds and,
// for every other keyspace, the sites that hold it.
func (c Config) Held(site string) (held map[string]uint32, elsewhere map[string][]string) {
	held, elsewhere = map[string]uint32{}, map[string][]string{}
	for name := range c.Keyspaces {
		ks, _ := c.Keyspace(name)
		if ks.Holds(site) {
			held[name] = ks.Shards
		} else {
			elsewhere[name] = ks.Sites
		}
	}
	return held, elsewhere
}
