package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/rpc"
)

// wanRefresh is how often the node re-reads the cluster configuration
// for the fault layer even without a change notice.
const wanRefresh = 3 * time.Second

// wanState is the node's fault layer when it runs with --simulate-wan or
// --debug-faults (test and demo only).
type wanState struct {
	// own: the node made its Net itself (no shared Net from a test), so
	// it registers the cluster's nodes in it.
	own bool
	// host is the node's Host of Config.Faults; nil without a fault layer.
	host *faultnet.Host
}

// initFaults gives the node a process-local fault layer when it runs
// with --simulate-wan or --debug-faults and was given none, and applies
// the simulated WAN.
func (s *Server) initFaults() error {
	if s.cfg.SimulateWAN == "" && !s.cfg.DebugFaults {
		return nil
	}
	if s.cfg.Faults == nil {
		s.cfg.Faults = faultnet.New(faultnet.DefaultConfig(uint64(time.Now().UnixNano())))
		s.wan.own = true
	}
	if s.cfg.SimulateWAN != "" {
		w, err := faultnet.ParseWAN(s.cfg.SimulateWAN)
		if err != nil {
			return fmt.Errorf("simulate wan: %w", err)
		}
		s.cfg.Faults.SetWAN(w)
		s.log.Warn("simulating a wide-area network between sites (test and demo only)", "wan", w.String())
	}
	if s.cfg.DebugFaults {
		s.log.Warn("debug partitions enabled (test and demo only)")
	}
	return nil
}

// startWAN registers every node of the cluster configuration in the
// node's own fault layer, so that its rules apply to them, and keeps
// doing so as the configuration changes, until the node stops.
func (s *Server) startWAN() {
	if !s.wan.own || s.wan.host == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(wanRefresh)
		defer t.Stop()
		for {
			cfg, changed := s.clusterConfig()
			registerNodes(s.cfg.Faults, cfg)
			select {
			case <-s.stopping:
				return
			case <-changed:
			case <-t.C:
			}
		}
	}()
}

// registerNodes maps every address of every node of cfg to its endpoint.
func registerNodes(n *faultnet.Net, cfg cluster.Config) {
	for site, st := range cfg.Sites {
		for id, node := range st.Nodes {
			ep := faultnet.Endpoint{Site: site, Node: id}
			for _, addr := range []string{node.PeerAddr, node.ClientAddr, node.GossipAddr} {
				if addr != "" {
					n.Register(addr, ep)
				}
			}
		}
	}
}

// siteFaults returns the debug partitions of the Geo admin service: nil
// unless the node runs with --debug-faults or on a test's shared Net.
func (s *Server) siteFaults() rpc.SiteFaults {
	if s.wan.host == nil || (s.wan.own && !s.cfg.DebugFaults) {
		return nil
	}
	return siteFaults{s: s, h: s.wan.host}
}

// siteFaults cuts the node off from whole sites.
type siteFaults struct {
	s *Server
	h *faultnet.Host
}

// PartitionSite implements rpc.SiteFaults.
func (f siteFaults) PartitionSite(site string) ([]string, error) {
	if site == f.s.cfg.Site {
		return nil, fmt.Errorf("site %q is this node's own site", site)
	}
	cfg, _ := f.s.clusterConfig()
	if _, ok := cfg.Sites[site]; !ok {
		return nil, fmt.Errorf("unknown site %q (the cluster's sites: %s)", site, strings.Join(cfg.SiteNames(), ", "))
	}
	f.h.IsolateFromSite(site)
	sites := f.h.IsolatedSites()
	f.s.log.Warn("debug partition: dropping all traffic to and from a site (test and demo only)", "cut_site", site, "cut_sites", sites)
	return sites, nil
}

// Heal implements rpc.SiteFaults.
func (f siteFaults) Heal() {
	f.h.HealIsolation()
	f.s.log.Warn("debug partition healed")
}
