package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/geo"
	"github.com/causeway-db/causeway/internal/membership"
	"github.com/causeway-db/causeway/internal/rpc"
)

// clusterConfig returns the node's copy of the cluster configuration.
func (s *Server) clusterConfig() (cluster.Config, <-chan struct{}) {
	if s.cfg.FixedCluster != nil {
		return s.cfg.FixedCluster()
	}
	if s.cluster == nil {
		return s.localConfig(), nil
	}
	cfg, changed := s.cluster.Config()
	if _, ok := cfg.Sites[s.cfg.Site]; !ok {
		// Not registered yet: this site alone until the node has joined.
		return s.localConfig(), changed
	}
	return cfg, changed
}

// unheard says why the node may not know every keyspace of the cluster
// (router.Config.Unheard): the other sites it has not reached lately, or
// no leader of the cluster configuration to follow. A keyspace created
// at another site since reaches this site's copy of the configuration
// only through that leader.
func (s *Server) unheard() string {
	var why []string
	cfg, _ := s.clusterConfig()
	if s.geo != nil {
		var cut []string
		for _, site := range cfg.SiteNames() {
			if site == s.cfg.Site {
				continue
			}
			if _, ok := s.geo.RTT(site); !ok {
				cut = append(cut, site)
			}
		}
		if len(cut) > 0 {
			why = append(why, "it has not reached site(s) "+strings.Join(cut, ", ")+" lately")
		}
	}
	if s.cfg.FixedCluster == nil && s.cluster != nil {
		if id, _ := s.cluster.Leader(); id == "" {
			why = append(why, "its node has no leader of the cluster configuration")
		}
	}
	return strings.Join(why, ", and ")
}

// recentKeyspace implements router.Config.Recent: whether keyspace, which
// the router does not know, exists: this node's copy of the cluster
// configuration has it (the router follows the copy a moment later: on
// the leader of the configuration, which applied the keyspace's creation
// and answered it, a request that came at once found the router without
// it), or the leader has it and this node's copy lacks it (a keyspace
// created moments ago). It asks the leader, within a second, and adopts
// its configuration; calls that come while one asks share its answer, so
// that requests naming an unknown keyspace send the leader one request at
// a time.
func (s *Server) recentKeyspace(keyspace string) bool {
	if s.cfg.FixedCluster != nil || s.cluster == nil {
		return false
	}
	if own, _ := s.cluster.Config(); own.Keyspaces[keyspace].Name != "" {
		return true
	}
	if s.cluster.IsLeader() {
		return false
	}
	start := time.Now()
	s.refresh.Lock()
	defer s.refresh.Unlock()
	if s.refresh.started.Before(start) {
		s.refresh.started = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cfg, err := s.cluster.Refresh(ctx)
		cancel()
		if err != nil {
			cfg = cluster.Config{}
		}
		s.refresh.cfg = cfg
	}
	_, ok := s.refresh.cfg.Keyspaces[keyspace]
	return ok
}

// siteRemoved stops the node when a node of another site answers that its
// cluster configuration removed this node's site from the cluster for
// good (kvctl site remove, docs/adr/035): the site came back after it was
// given up, and must not serve clients or take writes that no other site
// will ever take.
func (s *Server) siteRemoved(by string, version uint64) {
	s.fail(fmt.Errorf("%w: site %s was removed from the cluster for good (configuration version %d; told by %s): the other sites no longer take its writes, and its name is not taken back. "+
		"Stop this kvd and wipe its data directory (%s); to use the machine again, start it on the empty directory as a node of a site of another name; see \"Removing a site from the cluster\" in docs/operations.md",
		cluster.ErrSiteRemoved, s.cfg.Site, version, by, s.cfg.DataDir))
}

// startGeo starts the chains of sites and registers their services: the
// peer Chain service, the admin Geo service, and the durability waits of
// SITES(n) and ALL writes.
func (s *Server) startGeo(m *rpc.Metrics) {
	gcfg := s.cfg.Geo
	gcfg.Site, gcfg.NodeID = s.cfg.Site, s.cfg.NodeID
	s.geo = geo.New(gcfg, s.host, s.router, s.clusterConfig, s.pool, s.log.With("component", "geo"), geo.NewMetrics(s.reg))
	s.router.SetDurability(s.geo)
	s.geo.OnReach(func(n int) {
		s.updateMeta("the unreachable site count", func(m *membership.Meta) { m.Unreachable = uint8(min(n, 255)) })
	})
	s.geo.OnRemoved(func(bySite, byNode string, version uint64) {
		s.siteRemoved(fmt.Sprintf("node %s of site %s", byNode, bySite), version)
	})
	peerv1.RegisterChainServer(s.peer, s.geo)
	adminv1.RegisterGeoServer(s.malformed.Registrar(s.grpc), rpc.NewGeo(rpc.GeoDeps{Site: s.cfg.Site, Cluster: clusterDeps{s}, Chain: geo.Status{S: s.geo}, Faults: s.siteFaults(), Unheard: s.unheard}, m))
	ctx, cancel := context.WithCancel(context.Background())
	s.geoStop, s.geoDone = cancel, make(chan struct{})
	go func() {
		defer close(s.geoDone)
		s.geo.Run(ctx)
	}()
}

// stopGeo stops the chains' loops.
func (s *Server) stopGeo() {
	if s.geoStop != nil {
		s.geoStop()
		<-s.geoDone
	}
}
