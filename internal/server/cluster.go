package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/membership"
)

// clusterFile keeps the last cluster configuration the node knew
// (docs/adr/017): the data path runs on it while the configuration group
// is out of reach.
const clusterFile = "cluster.json"

// openCluster opens the node's replica of the cluster configuration group
// and serves the peer Cluster service. With JoinCluster, a node that is
// not in the cluster yet joins it first, so that its site starts with the
// cluster's keyspaces; the first node of the first site (no Join, no
// JoinCluster) creates the cluster. It returns the keyspaces the site
// holds as far as the node knows.
func (s *Server) openCluster(peerAddr, clientAddr string) (map[string]uint32, error) {
	trans, err := s.network.TransportAt(cluster.GroupName, peerAddr)
	if err != nil {
		return nil, err
	}
	opts := cluster.DefaultOptions()
	opts.Self = cluster.Node{ID: s.cfg.NodeID, Site: s.cfg.Site, PeerAddr: peerAddr, ClientAddr: clientAddr, GossipAddr: s.members.Local().GossipAddr}
	opts.Incarnation = func() uint64 {
		v, _ := s.logDB.SiteIncarnation()
		return v
	}
	opts.DefaultShards = s.cfg.Shards
	opts.SnapshotDir, opts.FS = s.cfg.Shard.SnapshotDir, s.cfg.FS
	opts.StatePath = filepath.Join(s.cfg.DataDir, clusterFile)
	if s.cfg.Shard.HeartbeatTimeout < time.Second {
		// Fast timings (tests): as fast as the shard groups'.
		opts.HeartbeatTimeout, opts.ElectionTimeout, opts.LeaderLeaseTimeout = s.cfg.Shard.HeartbeatTimeout, s.cfg.Shard.ElectionTimeout, s.cfg.Shard.LeaderLeaseTimeout
		opts.CommitTimeout, opts.LeaderHeartbeatTimeout = s.cfg.Shard.CommitTimeout, 0
		opts.LeaderEvery = 100 * time.Millisecond
	}
	bootstrap := len(s.cfg.Join) == 0 && len(s.cfg.JoinCluster) == 0
	if s.cluster, err = cluster.Open(opts, cluster.Deps{LogDB: s.logs, Transport: trans, Conns: s.pool, Logger: s.log}, bootstrap); err != nil {
		return nil, err
	}
	peerv1.RegisterClusterServer(s.peer, cluster.NewService(s.cluster))
	if len(s.cfg.JoinCluster) > 0 && !s.cluster.Joined() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := s.cluster.Join(ctx, s.cfg.JoinCluster); err != nil {
			return nil, fmt.Errorf("join cluster %v: %w", s.cfg.JoinCluster, err)
		}
	}
	cfg, _ := s.clusterConfig()
	held, _ := s.siteKeyspaces(cfg)
	return held, nil
}

// Cluster returns the node's replica of the cluster configuration group.
func (s *Server) Cluster() *cluster.Cluster { return s.cluster }

// localConfig is the configuration of a node that has none yet: its own
// site alone, with the default keyspace.
func (s *Server) localConfig() cluster.Config {
	return cluster.Config{
		Sites: map[string]cluster.Site{s.cfg.Site: {Name: s.cfg.Site}},
		Keyspaces: map[string]cluster.Keyspace{
			cluster.DefaultKeyspace: {Name: cluster.DefaultKeyspace, Shards: s.cfg.Shards},
		},
	}
}

// siteKeyspaces returns the shard counts of the keyspaces the node's site
// holds in cfg and, for the others, the sites that hold them.
func (s *Server) siteKeyspaces(cfg cluster.Config) (map[string]uint32, map[string][]string) {
	if _, ok := cfg.Sites[s.cfg.Site]; !ok {
		cfg = s.localConfig()
	}
	return cfg.Held(s.cfg.Site)
}

// checkShardsFlag warns when the node's --shards, given on the command
// line, differs from the shard count of the cluster's default keyspace,
// which was fixed when the cluster was created: the value changes nothing.
// It reports whether the node knew its cluster's configuration to check.
func (s *Server) checkShardsFlag() bool {
	cfg, _ := s.cluster.Config()
	if _, ok := cfg.Sites[s.cfg.Site]; !ok {
		return false // not registered yet: the configuration is not the cluster's
	}
	ks, ok := cfg.Keyspaces[cluster.DefaultKeyspace]
	if !ok {
		return true
	}
	if ks.Shards != s.cfg.Shards {
		s.log.Warn(fmt.Sprintf("--shards %d is ignored: the cluster's default keyspace has %d shards, fixed when the cluster was created (kvctl keyspace list shows every keyspace's count); "+
			"drop --shards, or give kvctl keyspace create --shards N for a new keyspace", s.cfg.Shards, ks.Shards),
			"shards", s.cfg.Shards, "default_keyspace_shards", ks.Shards)
	}
	return true
}

// followCluster keeps the router and the site catalog on the node's copy
// of the cluster configuration, and registers a node that has not joined
// the cluster yet (a later node of a site, started with --join only)
// through the nodes gossip knows.
func (s *Server) followCluster() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		shardsChecked := !s.cfg.ShardsGiven
		for {
			if !shardsChecked {
				shardsChecked = s.checkShardsFlag()
			}
			if own, _ := s.cluster.Config(); own.Removed != nil {
				if r, ok := own.Removed[s.cfg.Site]; ok {
					s.siteRemoved("the cluster configuration", r.Version)
				}
			}
			cfg, changed := s.clusterConfig()
			held, elsewhere := s.siteKeyspaces(cfg)
			s.router.SetKeyspaces(held, elsewhere)
			s.catalog.SetKeyspaces(held)
			select {
			case <-changed:
			case <-s.stopping:
				return
			}
		}
	}()
	if s.cluster.Current() {
		return
	}
	// A node that joined its site through gossip registers with the
	// cluster; one that is registered at other addresses (it restarted on
	// its data with other ports) registers again, so that the other sites
	// reach it and its site finds its gossip after a restart.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for !s.cluster.Current() {
			if targets := s.joinTargets(); len(targets) > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				go func() {
					select {
					case <-s.stopping:
						cancel()
					case <-ctx.Done():
					}
				}()
				if _, err := s.cluster.Join(ctx, targets); err != nil {
					s.log.Debug("joining the cluster", "err", err)
				}
				cancel()
			}
			select {
			case <-t.C:
			case <-s.stopping:
				return
			}
		}
	}()
}

// joinTargets lists the peer addresses of the other nodes gossip knows
// alive, then those of the other nodes the node's copy of the cluster
// configuration records (other sites' nodes, which gossip does not show).
func (s *Server) joinTargets() []string {
	var out []string
	for _, m := range s.members.Members() {
		if m.State == membership.StateAlive && m.PeerAddr != "" && !(m.Site == s.cfg.Site && m.NodeID == s.cfg.NodeID) {
			out = append(out, m.PeerAddr)
		}
	}
	cfg, _ := s.cluster.Config()
	for _, site := range cfg.SiteNames() {
		for _, n := range cfg.Nodes(site) {
			if n.PeerAddr != "" && !(site == s.cfg.Site && n.ID == s.cfg.NodeID) && !slices.Contains(out, n.PeerAddr) {
				out = append(out, n.PeerAddr)
			}
		}
	}
	return out
}

// clusterDeps gives the Geo admin service the cluster configuration: the
// node's copy (or the fixed one of tests) and changes through the group.
type clusterDeps struct{ s *Server }

func (d clusterDeps) Config() (cluster.Config, <-chan struct{}) { return d.s.clusterConfig() }

func (d clusterDeps) CreateKeyspace(ctx context.Context, ks cluster.Keyspace) (cluster.Config, error) {
	if d.s.cfg.FixedCluster != nil {
		return cluster.Config{}, fmt.Errorf("%w: the node runs on a fixed cluster configuration", cluster.ErrInvalid)
	}
	return d.s.cluster.CreateKeyspace(ctx, ks)
}

func (d clusterDeps) SetKeyspaceSites(ctx context.Context, name string, sites []string) (cluster.Config, error) {
	if d.s.cfg.FixedCluster != nil {
		return cluster.Config{}, fmt.Errorf("%w: the node runs on a fixed cluster configuration", cluster.ErrInvalid)
	}
	return d.s.cluster.SetKeyspaceSites(ctx, name, sites)
}

func (d clusterDeps) RemoveSite(ctx context.Context, site string) (cluster.Config, error) {
	if d.s.cfg.FixedCluster != nil {
		return cluster.Config{}, fmt.Errorf("%w: the node runs on a fixed cluster configuration", cluster.ErrInvalid)
	}
	return d.s.cluster.RemoveSite(ctx, site)
}

// Leader returns the configuration group's leader (site/node) and its
// peer address.
func (d clusterDeps) Leader() (string, string) {
	if d.s.cluster == nil {
		return "", ""
	}
	return d.s.cluster.Leader()
}
