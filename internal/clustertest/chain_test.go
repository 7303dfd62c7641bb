package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/geo"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// fixedSites starts sites sharing one fault network, with a fixed cluster
// configuration naming them all (default keyspace on every site).
type fixedSites struct {
	t     *testing.T
	Net   *faultnet.Net
	Sites map[string]*Cluster
	Order []string
	mu    sync.Mutex
	cfg   cluster.Config
}

// fixedOptions shape startFixedSites' sites.
type fixedOptions struct {
	Shards uint32
	// Nodes per site (default 1).
	Nodes int
	// Mutate changes a node's configuration (after the defaults).
	Mutate func(site string, cfg *server.Config)
}

// geoTestConfig is the chains' test tuning: quick heartbeats and skips, no
// periodic anti-entropy.
func geoTestConfig() geo.Config {
	return geo.Config{HeartbeatEvery: 100 * time.Millisecond, SkipAfter: time.Second, CallTimeout: time.Second,
		PingEvery: 200 * time.Millisecond, AntiEntropyEvery: -1, CloseEvery: 500 * time.Millisecond}
}

func startFixedSites(t *testing.T, names []string, o fixedOptions) *fixedSites {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.Shards == 0 {
		o.Shards = 2
	}
	_ = t.TempDir() // before the Close cleanups: the nodes stop before their directories are removed
	fs := &fixedSites{t: t, Net: faultnet.New(faultnet.DefaultConfig(7)), Sites: map[string]*Cluster{}, Order: names}
	fs.cfg = cluster.Config{Version: 1, Sites: map[string]cluster.Site{}, Keyspaces: map[string]cluster.Keyspace{
		cluster.DefaultKeyspace: {Name: cluster.DefaultKeyspace, Shards: o.Shards},
	}}
	for i, name := range names {
		fs.cfg.Sites[name] = cluster.Site{Name: name, Order: i, Nodes: map[string]cluster.Node{}}
	}
	for _, name := range names {
		c := &Cluster{t: t, Net: fs.Net, Mutate: func(cfg *server.Config) {
			cfg.Site = name
			cfg.Shards = o.Shards
			cfg.Geo = geoTestConfig()
			cfg.FixedCluster = fs.config
			if o.Mutate != nil {
				o.Mutate(name, cfg)
			}
		}}
		t.Cleanup(c.Close)
		fs.Sites[name] = c
		for range o.Nodes {
			n := c.Add()
			// Copy on write: nodes read the configuration they were given.
			fs.mu.Lock()
			next := fs.cfg.Clone()
			next.Sites[name].Nodes[n.ID] = cluster.Node{ID: n.ID, Site: name, PeerAddr: n.Srv.PeerAddr(), ClientAddr: n.Srv.ClientAddr()}
			fs.cfg = next
			fs.mu.Unlock()
		}
	}
	for _, c := range fs.Sites {
		c.WaitSettled(60 * time.Second)
		if o.Nodes > 1 {
			// No leadership transfer of the balancer under way when the
			// test starts: a test that pins a replica's role (holds its
			// applies, cuts its links) would see it move.
			c.WaitLeadersPreferred(60 * time.Second)
		}
	}
	return fs
}

func (fs *fixedSites) config() (cluster.Config, <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.cfg, nil
}

// kv returns the KV client of site's first node.
func (fs *fixedSites) kv(site string) kvv1.KVClient { return fs.Sites[site].Nodes[0].KV }

// TestChainReplicatesToEverySite: a write at any site reaches every other
// site down its chain.
func TestChainReplicatesToEverySite(t *testing.T) {
	fs := startFixedSites(t, []string{"s1", "s2", "s3"}, fixedOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, site := range fs.Order {
		for j := 0; j < 5; j++ {
			key := fmt.Sprintf("k-%s-%d", site, j)
			if _, err := fs.kv(site).Put(ctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatalf("put at %s: %v", site, err)
			}
		}
	}
	for _, reader := range fs.Order {
		for _, site := range fs.Order {
			for j := 0; j < 5; j++ {
				key := fmt.Sprintf("k-%s-%d", site, j)
				poll.Every(20*time.Millisecond).Until(t, 30*time.Second, fmt.Sprintf("%s at %s", key, reader), func() error {
					r, err := fs.kv(reader).Get(ctx, &kvv1.GetRequest{Key: []byte(key)})
					if err != nil {
						return err
					}
					if !r.Found {
						return fmt.Errorf("not found")
					}
					return nil
				})
			}
		}
	}
}
