package rpc

import (
	"fmt"
	"slices"

	"context"
	"sort"
	"strings"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
)

// ClusterConfig is the cluster-wide configuration as the Geo service
// needs it (internal/cluster).
type ClusterConfig interface {
	// Config returns the node's copy and a channel closed on its change.
	Config() (cluster.Config, <-chan struct{})
	// CreateKeyspace and SetKeyspaceSites change the configuration through
	// its leader and return the configuration after the change.
	CreateKeyspace(ctx context.Context, ks cluster.Keyspace) (cluster.Config, error)
	SetKeyspaceSites(ctx context.Context, name string, sites []string) (cluster.Config, error)
	// RemoveSite removes a site from the cluster for good through the
	// leader and returns the configuration after the change.
	RemoveSite(ctx context.Context, site string) (cluster.Config, error)
}

// Sites implements adminv1.GeoServer.
func (g *Geo) Sites(context.Context, *adminv1.SitesRequest) (*adminv1.SitesResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	cfg, _ := g.deps.Cluster.Config()
	resp := &adminv1.SitesResponse{LocalSite: g.deps.Site, ConfigVersion: cfg.Version}
	if l, ok := g.deps.Cluster.(interface{ Leader() (string, string) }); ok {
		resp.ConfigLeader, _ = l.Leader()
	}
	for _, name := range cfg.SiteNames() {
		info := &adminv1.SiteInfo{Name: name, State: "local"}
		var lag SiteLag
		if name != g.deps.Site {
			lag = SiteLag{State: "unknown"}
			if g.deps.Chain != nil {
				lag = g.deps.Chain.Lag(name)
			}
			info.State = lag.State
		}
		info.RttSeconds, info.LagSeconds, info.LagEntries = lag.RTTSeconds, lag.LagSeconds, lag.LagEntries
		for _, n := range cfg.Nodes(name) {
			if n.Voter {
				info.Voter = true
			}
			alive := name == g.deps.Site || lag.State == "up"
			info.Nodes = append(info.Nodes, &adminv1.SiteNode{Id: n.ID, PeerAddr: n.PeerAddr, ClientAddr: n.ClientAddr, Alive: alive})
		}
		resp.Sites = append(resp.Sites, info)
	}
	return resp, nil
}

// CreateKeyspace implements adminv1.GeoServer.
func (g *Geo) CreateKeyspace(ctx context.Context, req *adminv1.CreateKeyspaceRequest) (*adminv1.KeyspaceResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	cfg, err := g.deps.Cluster.CreateKeyspace(ctx, cluster.Keyspace{Name: req.Name, Shards: req.Shards, Sites: req.Sites})
	if err != nil {
		return nil, toStatus(err)
	}
	return g.keyspaceResponse(ctx, cfg, req.Name)
}

// ListKeyspaces implements adminv1.GeoServer.
func (g *Geo) ListKeyspaces(ctx context.Context, _ *adminv1.ListKeyspacesRequest) (*adminv1.ListKeyspacesResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	cfg, _ := g.deps.Cluster.Config()
	names := make([]string, 0, len(cfg.Keyspaces))
	for name := range cfg.Keyspaces {
		names = append(names, name)
	}
	sort.Strings(names)
	resp := &adminv1.ListKeyspacesResponse{ConfigVersion: cfg.Version}
	for _, name := range names {
		ks, _ := cfg.Keyspace(name)
		resp.Keyspaces = append(resp.Keyspaces, g.keyspaceProto(ctx, ks))
	}
	return resp, nil
}

// GetKeyspace implements adminv1.GeoServer.
func (g *Geo) GetKeyspace(ctx context.Context, req *adminv1.GetKeyspaceRequest) (*adminv1.KeyspaceResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	cfg, _ := g.deps.Cluster.Config()
	if _, ok := cfg.Keyspace(req.Name); !ok && g.deps.Unheard != nil {
		if why := g.deps.Unheard(); why != "" {
			// A keyspace created at another site since the node last heard
			// from the cluster is unknown here until it does.
			return nil, adminStatus(fmt.Errorf("%w: %s: site %s may not know every keyspace (%s); if it was created at another site, retry once this site reaches the others, or ask a node of another site", ErrNoKeyspace, placement.QuoteKeyspace(req.Name), g.deps.Site, why))
		}
	}
	return g.keyspaceResponse(ctx, cfg, req.Name)
}

// SetKeyspaceSites implements adminv1.GeoServer.
func (g *Geo) SetKeyspaceSites(ctx context.Context, req *adminv1.SetKeyspaceSitesRequest) (*adminv1.KeyspaceResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	if !req.Force && !guards.Off(guards.RemoveSiteCheck) {
		if err := g.checkRemovedSitesReachable(req.Name, req.Sites); err != nil {
			return nil, adminStatus(err)
		}
	}
	cfg, err := g.deps.Cluster.SetKeyspaceSites(ctx, req.Name, req.Sites)
	if err != nil {
		return nil, toStatus(err)
	}
	return g.keyspaceResponse(ctx, cfg, req.Name)
}

// checkRemovedSitesReachable refuses a change of keyspace name's sites to
// sites that removes a site this node cannot reach: such a site may hold
// writes it acknowledged and has not shipped, and once it is no longer a
// site of the keyspace it ships them nowhere (they reach the others only
// if it is added back).
func (g *Geo) checkRemovedSitesReachable(name string, sites []string) error {
	cfg, _ := g.deps.Cluster.Config()
	ks, ok := cfg.Keyspace(name)
	if !ok || name == cluster.DefaultKeyspace {
		// The configuration answers: no such keyspace, or the default
		// one, whose sites no change removes (advising --force would
		// only lead to that refusal).
		return nil
	}
	for _, site := range ks.Sites {
		if site == g.deps.Site || slices.Contains(sites, site) {
			continue
		}
		state := "unknown"
		if g.deps.Chain != nil {
			state = g.deps.Chain.Lag(site).State
		}
		if state == "unreachable" || state == "unknown" {
			return fmt.Errorf("%w: site %s is %s from here: writes it acknowledged and has not shipped would stay on it, reaching the keyspace's other sites only if it is added back; heal the partition first, or force the removal (kvctl keyspace set-sites --force)", ErrSiteUnreachable, site, state)
		}
	}
	return nil
}

// RemoveSite implements adminv1.GeoServer.
func (g *Geo) RemoveSite(ctx context.Context, req *adminv1.RemoveSiteRequest) (*adminv1.RemoveSiteResponse, error) {
	if g.deps.Cluster == nil {
		return nil, adminStatus(ErrNoClusterConfig)
	}
	if req.Site == "" {
		return nil, adminStatus(fmt.Errorf("%w: name the site to remove", ErrSiteRequired))
	}
	cfg, _ := g.deps.Cluster.Config()
	if r, ok := cfg.Removed[req.Site]; ok {
		return nil, adminStatus(fmt.Errorf("%w: site %s was removed already (configuration version %d)", ErrNoSite, req.Site, r.Version))
	}
	if _, ok := cfg.Sites[req.Site]; !ok {
		return nil, adminStatus(fmt.Errorf("%w: %q (the cluster's sites: %s)", ErrNoSite, req.Site, strings.Join(cfg.SiteNames(), ", ")))
	}
	if req.Site == g.deps.Site {
		return nil, adminStatus(fmt.Errorf("%w: site %s is this node's own site: a site that answers is not removed; ask a node of another site once its nodes are gone", ErrSiteReachable, req.Site))
	}
	if !guards.Off(guards.SiteGone) {
		var gone time.Duration
		if g.deps.Chain != nil {
			gone = g.deps.Chain.Unreached(req.Site)
		}
		if gone == 0 {
			return nil, adminStatus(fmt.Errorf("%w: site %s answers this node, or did within the last few seconds: only a site gone for good is removed (its nodes would go on serving clients, their writes taken by no other site). To retire a running site, take it out of every keyspace (kvctl keyspace set-sites), stop its nodes, then remove it", ErrSiteReachable, req.Site))
		}
	}
	next, err := g.deps.Cluster.RemoveSite(ctx, req.Site)
	if err != nil {
		return nil, toStatus(err)
	}
	return &adminv1.RemoveSiteResponse{ConfigVersion: next.Version, Sites: next.SiteNames()}, nil
}

func (g *Geo) keyspaceResponse(ctx context.Context, cfg cluster.Config, name string) (*adminv1.KeyspaceResponse, error) {
	ks, ok := cfg.Keyspace(name)
	if !ok {
		return nil, adminStatus(fmt.Errorf("%w: %s", ErrNoKeyspace, placement.QuoteKeyspace(name)))
	}
	return &adminv1.KeyspaceResponse{Keyspace: g.keyspaceProto(ctx, ks), ConfigVersion: cfg.Version}, nil
}

// JoinProgress is the state of the serving node's site's join of a
// keyspace (docs/adr/019).
type JoinProgress struct {
	// Complete: every shard has the join repair of every site it needs.
	Complete bool
	// Done and Shards count the shards complete and in all.
	Done, Shards uint32
	// Waiting says what the first shard not complete waits for.
	Waiting string
}

// JoinStatus is what a ChainStatus that knows the joins of keyspaces
// (internal/geo) also implements.
type JoinStatus interface {
	// Join reports this site's join of keyspace.
	Join(ctx context.Context, keyspace string) JoinProgress
}

// keyspaceProto describes ks; a join of the serving node's site comes
// with its progress.
func (g *Geo) keyspaceProto(ctx context.Context, ks cluster.Keyspace) *adminv1.Keyspace {
	out := &adminv1.Keyspace{Name: ks.Name, Shards: ks.Shards, Sites: append([]string(nil), ks.Sites...)}
	for _, site := range ks.Sites {
		v, ok := ks.Joined[site]
		if !ok {
			continue
		}
		j := &adminv1.KeyspaceJoin{Site: site, ConfigVersion: v}
		if js, ok := g.deps.Chain.(JoinStatus); ok && site == g.deps.Site {
			p := js.Join(ctx, ks.Name)
			j.Known, j.Complete, j.ShardsComplete, j.Shards, j.Waiting = true, p.Complete, p.Done, p.Shards, p.Waiting
		}
		out.Joins = append(out.Joins, j)
	}
	return out
}
