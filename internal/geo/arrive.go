package geo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
)

// HasSite implements router.Durability. Before this node has loaded a
// cluster configuration it knows no site to refuse, and reports true.
func (s *Service) HasSite(site string) bool {
	cfg, _ := s.configs()
	if len(cfg.Sites) == 0 {
		return true
	}
	_, ok := cfg.Sites[site]
	return ok
}

// WaitSiteApplied implements router.Durability: it waits until a replica
// of every shard this site holds, of every keyspace other sites hold too,
// applied the other sites' writes up to hlc (their progress for each
// origin reached it: their own writes or closed timestamps), and returns
// the largest newest HLC of those replicas. A session that moved here
// waits for it (router.Arrive).
func (s *Service) WaitSiteApplied(ctx context.Context, hlc uint64) (uint64, error) {
	cfg, _ := s.configs()
	var stamp uint64
	for _, name := range slices.Sorted(maps.Keys(cfg.Keyspaces)) {
		ks, ok := cfg.Keyspace(name)
		if !ok || !ks.Holds(s.cfg.Site) || len(ks.Sites) < 2 {
			continue
		}
		origins := slices.DeleteFunc(slices.Clone(ks.Sites), func(o string) bool { return o == s.cfg.Site })
		for id := uint32(0); id < ks.Shards; id++ {
			m, err := s.waitShardApplied(ctx, placement.Shard{Keyspace: name, ID: id}, hlc, origins)
			if err != nil {
				return 0, err
			}
			stamp = max(stamp, m)
		}
	}
	return stamp, nil
}

// WaitObserved implements router.Durability: it waits until this site
// applied every version of another site the session observed (by shard
// and origin; an unknown shard or keyspace stands for all of them, of
// the origins each keyspace lists), and returns the largest newest HLC of
// the replicas it checked.
func (s *Service) WaitObserved(ctx context.Context, observed []causal.Dependency) (uint64, error) {
	cfg, _ := s.configs()
	var stamp uint64
	for _, d := range observed {
		if d.Ref.Origin == "" || d.Ref.Origin == s.cfg.Site || d.HLC == 0 {
			continue // this site's own writes are here
		}
		names := []string{d.Ref.Keyspace}
		if d.Ref.Keyspace == "" {
			names = slices.Sorted(maps.Keys(cfg.Keyspaces))
		}
		for _, name := range names {
			ks, ok := cfg.Keyspace(name)
			if !ok || !ks.Holds(s.cfg.Site) {
				continue // no such writes reach this site
			}
			if !ks.Holds(d.Ref.Origin) && (d.Ref.Keyspace == "" || d.Ref.Shard == causal.UnknownShard) {
				// An origin that left the keyspace (set-sites, or removed
				// from the cluster) ships nothing more; the versions of it
				// the session saw on a named shard are waited for below
				// (the comparison with the remaining sites, or a join
				// repair, brings them), but a fallback or an unknown shard
				// stands for shards it may never have written to, whose
				// progress for it would never get there.
				continue
			}
			ids := []uint32{d.Ref.Shard}
			if d.Ref.Shard == causal.UnknownShard {
				ids = ids[:0]
				for id := uint32(0); id < ks.Shards; id++ {
					ids = append(ids, id)
				}
			} else if d.Ref.Shard >= ks.Shards {
				continue
			}
			for _, id := range ids {
				m, err := s.waitShardApplied(ctx, placement.Shard{Keyspace: name, ID: id}, d.HLC, []string{d.Ref.Origin})
				if err != nil {
					return 0, err
				}
				stamp = max(stamp, m)
			}
		}
	}
	return stamp, nil
}

// waitShardApplied waits until a replica of sh at this site applied every
// origin's writes up to hlc: this node's, or the leader's (on another
// node, asked through WaitApplied).
func (s *Service) waitShardApplied(ctx context.Context, sh placement.Shard, hlc uint64, origins []string) (uint64, error) {
	if g := s.host.Group(sh); g != nil {
		return waitGroupApplied(ctx, g, sh, hlc, origins)
	}
	for {
		g, fwd, fctx, err := s.leader(ctx, sh)
		if err != nil {
			return 0, err
		}
		if fwd == nil {
			// This node leads now: its replica opened meanwhile.
			return waitGroupApplied(ctx, g, sh, hlc, origins)
		}
		resp, err := fwd.WaitApplied(fctx, &peerv1.WaitAppliedRequest{Keyspace: sh.Keyspace, Shard: sh.ID, Hlc: hlc, Origins: origins})
		switch {
		case err == nil && resp.Applied:
			return resp.MaxHlc, nil
		case err == nil:
			if ctx.Err() != nil {
				return 0, fmt.Errorf("%s has applied site %s's writes up to HLC %s only", sh, resp.WaitingFor, causal.FormatHLC(resp.ProgressHlc))
			}
		case ctx.Err() != nil:
			return 0, fmt.Errorf("%s: %w", sh, ctx.Err())
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// waitGroupApplied waits until g applied every origin's writes up to hlc.
func waitGroupApplied(ctx context.Context, g *shard.Group, sh placement.Shard, hlc uint64, origins []string) (uint64, error) {
	for _, o := range origins {
		if err := g.WaitOrigin(ctx, o, hlc); err != nil {
			return 0, fmt.Errorf("%s has applied site %s's writes up to HLC %s only (%v)", sh, o, causal.FormatHLC(g.Geo().Origins[o].HLC), err)
		}
	}
	return g.MaxHLC(), nil
}

// WaitApplied implements peerv1.ChainServer.
func (s *Service) WaitApplied(ctx context.Context, req *peerv1.WaitAppliedRequest) (*peerv1.WaitAppliedResponse, error) {
	sh := placement.Shard{Keyspace: req.Keyspace, ID: req.Shard}
	g := s.host.Group(sh)
	if g == nil {
		_, lg, fwd, fctx, err := s.heldLeader(ctx, req.Keyspace, req.Shard)
		if err != nil {
			return nil, err
		}
		if fwd != nil {
			return fwd.WaitApplied(fctx, req)
		}
		g = lg
	}
	// Answer before the caller's deadline, so that it learns why.
	wctx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Until(d)*9/10)
		defer cancel()
	}
	for _, o := range req.Origins {
		if err := g.WaitOrigin(wctx, o, req.Hlc); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err() // gRPC answers DEADLINE_EXCEEDED or CANCELED
			}
			return &peerv1.WaitAppliedResponse{WaitingFor: o, ProgressHlc: g.Geo().Origins[o].HLC, MaxHlc: g.MaxHLC()}, nil
		}
	}
	return &peerv1.WaitAppliedResponse{Applied: true, MaxHlc: g.MaxHLC()}, nil
}

var _ router.Durability = (*Service)(nil)

// ClusterID implements router.Durability: the id of the cluster
// configuration this node holds (0 before it has loaded one).
func (s *Service) ClusterID() uint64 {
	cfg, _ := s.configs()
	return cfg.ID
}
