package server

import (
	"context"

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
	peerv1.RegisterChainServer(s.peer, s.geo)
	adminv1.RegisterGeoServer(s.grpc, rpc.NewGeo(rpc.GeoDeps{Site: s.cfg.Site, Cluster: clusterDeps{s}, Chain: geo.Status{S: s.geo}, Faults: s.siteFaults()}, m))
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
