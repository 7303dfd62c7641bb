package clustertest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/geo"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// SitesOptions configures NewSites.
type SitesOptions struct {
	// Sites names the sites, in join order (the first creates the
	// cluster).
	Sites []string
	// NodesPerSite is the number of nodes of each site (at least 1).
	NodesPerSite int
	// Shards is the default keyspace's shard count (0: Config's).
	Shards uint32
	// Mutate, if set, changes every node's configuration.
	Mutate func(site string, cfg *server.Config)
}

// Sites is a test cluster of several sites on one shared fault network:
// the first node of the first site creates the cluster, the first node of
// every other site joins it through that node (--join-cluster), and later
// nodes join their own site (--join).
type Sites struct {
	t     testing.TB
	Net   *faultnet.Net
	Order []string
	sites map[string]*Cluster
}

// NewSites starts the sites, waits until every site has settled and every
// node knows every site.
func NewSites(t testing.TB, opts SitesOptions) *Sites {
	t.Helper()
	if opts.NodesPerSite < 1 {
		opts.NodesPerSite = 1
	}
	// The nodes stop before their directories are removed (cleanups run
	// last first).
	_ = t.TempDir()
	s := &Sites{t: t, Net: faultnet.New(faultnet.DefaultConfig(11)), Order: append([]string(nil), opts.Sites...), sites: map[string]*Cluster{}}
	var seed string
	for _, name := range opts.Sites {
		c := &Cluster{t: t, Net: s.Net}
		joinCluster := seed
		c.Mutate = func(cfg *server.Config) {
			cfg.Site = name
			if opts.Shards > 0 {
				cfg.Shards = opts.Shards
			}
			cfg.Geo = geo.Config{HeartbeatEvery: 100 * time.Millisecond, SkipAfter: time.Second, CallTimeout: time.Second,
				PingEvery: 200 * time.Millisecond, AntiEntropyEvery: -1, CloseEvery: 500 * time.Millisecond}
			if len(cfg.Join) == 0 && joinCluster != "" {
				cfg.JoinCluster = []string{joinCluster}
			}
			if opts.Mutate != nil {
				opts.Mutate(name, cfg)
			}
		}
		t.Cleanup(c.Close)
		s.sites[name] = c
		for i := 0; i < opts.NodesPerSite; i++ {
			c.Add()
		}
		if seed == "" {
			seed = c.Nodes[0].Srv.PeerAddr()
		}
	}
	for _, name := range s.Order {
		s.sites[name].WaitSettled(60 * time.Second)
	}
	s.WaitConfig(60*time.Second, func(cfg cluster.Config) error {
		if len(cfg.Sites) != len(s.Order) {
			return fmt.Errorf("knows sites %v", cfg.SiteNames())
		}
		for _, name := range s.Order {
			if got := len(cfg.Sites[name].Nodes); got != len(s.sites[name].Nodes) {
				return fmt.Errorf("knows %d nodes of %s, want %d", got, name, len(s.sites[name].Nodes))
			}
		}
		return nil
	})
	return s
}

// Site returns the site called name.
func (s *Sites) Site(name string) *Cluster { return s.sites[name] }

// Nodes returns the live nodes of every site.
func (s *Sites) Nodes() []*Node {
	var out []*Node
	for _, name := range s.Order {
		out = append(out, s.sites[name].Live()...)
	}
	return out
}

// WaitConfig polls until every live node's copy of the cluster
// configuration satisfies ok, or d passes.
func (s *Sites) WaitConfig(d time.Duration, ok func(cluster.Config) error) {
	s.t.Helper()
	poll.Every(20*time.Millisecond).Until(s.t, d, "every node's cluster configuration", func() error {
		for _, n := range s.Nodes() {
			cfg, _ := n.Srv.Cluster().Config()
			if err := ok(cfg); err != nil {
				return fmt.Errorf("%s/%s: %w", n.Cfg.Site, n.ID, err)
			}
		}
		return nil
	})
}

// Cut partitions the nodes of site from the nodes of every other site,
// both ways (clients still reach every node).
func (s *Sites) Cut(site string) {
	var others []*Node
	for _, name := range s.Order {
		if name != site {
			others = append(others, s.sites[name].nodes()...)
		}
	}
	s.sites[site].Partition(s.sites[site].nodes(), others)
}

// Heal clears every fault of the shared network.
func (s *Sites) Heal() { s.Net.Heal() }

// SiteNames lists the sites, sorted.
func (s *Sites) SiteNames() []string {
	out := append([]string(nil), s.Order...)
	sort.Strings(out)
	return out
}
