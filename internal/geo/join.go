package geo

import (
	"context"
	"fmt"
	"maps"
	"slices"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
)

// A site added to a keyspace after its creation (set-sites) gets what the
// keyspace's other sites held from their join repairs, shard by shard,
// each on its own. Until every shard has them, the site could serve a
// version whose dependency on another shard has not arrived yet, so it
// serves no read of the keyspace (docs/adr/019). Each sender marks its
// join repair of a shard done in the repair's last command
// (RepairRecords.join_from, join_version); the shard keeps the marks in
// its replicated state (fsm.Geo.JoinMarks), so that neither a restart nor
// a new leader loses them.

// joinSenders returns the configuration version of site's join of ks (0:
// site held ks from its creation, or does not hold it: nothing to wait
// for) and the sites whose join repair it needs: the other sites of ks
// that held it before site joined. A site added by the same change or a
// later one has nothing of the keyspace's past to send; a site that left
// the keyspace is no longer waited for.
func joinSenders(ks cluster.Keyspace, site string) (uint64, []string) {
	v := ks.Joined[site]
	if v == 0 || !ks.Holds(site) {
		return 0, nil
	}
	var senders []string
	for _, o := range ks.Sites {
		if o != site && ks.Joined[o] < v {
			senders = append(senders, o)
		}
	}
	return v, senders
}

// joinMarkFor returns the configuration version of site's join of ks that
// sender's join repair towards site must mark (0: none; site did not join
// ks, or needs nothing from sender).
func joinMarkFor(ks cluster.Keyspace, site, sender string) uint64 {
	v, senders := joinSenders(ks, site)
	if v == 0 || !slices.Contains(senders, sender) {
		return 0
	}
	return v
}

// missingMark returns the first of senders whose mark in marks is older
// than the join at version v ("" if every one is there).
func missingMark(marks map[string]uint64, v uint64, senders []string) string {
	for _, o := range senders {
		if marks[o] < v {
			return o
		}
	}
	return ""
}

// joined is a keyspace's or a shard's join found complete: for the join
// at version, with the replicas' newest HLC then.
type joined struct {
	version, stamp uint64
}

// JoinProgress is the state of this site's join of a keyspace.
type JoinProgress struct {
	// Version is the configuration version of the join (0: this site
	// held the keyspace from its creation).
	Version uint64
	// Complete: every shard has the join repair of every site it needs.
	Complete bool
	// Done and Shards count the shards complete and in all (Done is
	// counted only by JoinProgress; Joined stops at the first shard that
	// waits).
	Done, Shards uint32
	// Waiting says what the first shard that is not complete waits for.
	Waiting string
	// Stamp is the newest HLC of the replicas the marks were found on.
	Stamp uint64
}

// Joined implements router.Durability.
func (s *Service) Joined(ctx context.Context, keyspace string) (uint64, error) {
	jp := s.joinProgress(ctx, keyspace, false)
	if jp.Complete {
		return jp.Stamp, nil
	}
	return 0, fmt.Errorf("%w: keyspace %s is joining this site (%s, added at configuration version %d): %s; until every shard has what the keyspace's other sites held, its reads are refused here (retry later, or read at another site of the keyspace)",
		router.ErrJoining, placement.QuoteKeyspace(keyspace), s.cfg.Site, jp.Version, jp.Waiting)
}

// JoinStatus reports this site's join of keyspace, counting every shard
// (for operators: kvctl keyspace show).
func (s *Service) JoinStatus(ctx context.Context, keyspace string) JoinProgress {
	return s.joinProgress(ctx, keyspace, true)
}

// joinProgress checks the shards of keyspace for the join marks this
// site needs, stopping at the first that lacks one unless all is set.
// Shards found complete, and then the keyspace, are remembered (for that
// join's version: the senders it needs only ever shrink).
func (s *Service) joinProgress(ctx context.Context, keyspace string, all bool) JoinProgress {
	cfg, _ := s.configs()
	ks, ok := cfg.Keyspaces[keyspace]
	if !ok {
		return JoinProgress{Complete: true}
	}
	v, senders := joinSenders(ks, s.cfg.Site)
	jp := JoinProgress{Version: v, Shards: ks.Shards}
	if v == 0 {
		jp.Complete, jp.Done = true, ks.Shards
		return jp
	}
	s.mu.Lock()
	j, ok := s.joinedKS[keyspace]
	s.mu.Unlock()
	if ok && j.version >= v {
		jp.Complete, jp.Done, jp.Stamp = true, ks.Shards, j.stamp
		return jp
	}
	for id := uint32(0); id < ks.Shards; id++ {
		sh := placement.Shard{Keyspace: keyspace, ID: id}
		s.mu.Lock()
		js, ok := s.joinedShards[sh]
		s.mu.Unlock()
		if ok && js.version >= v {
			jp.Done++
			jp.Stamp = max(jp.Stamp, js.stamp)
			continue
		}
		marks, stamp, err := s.shardJoinMarks(ctx, sh)
		waiting := ""
		switch {
		case err != nil:
			waiting = fmt.Sprintf("shard %d: its join marks could not be read (%v)", id, err)
		default:
			if o := missingMark(marks, v, senders); o != "" {
				waiting = fmt.Sprintf("shard %d waits for site %s", id, o)
			}
		}
		if waiting != "" {
			if jp.Waiting == "" {
				jp.Waiting = waiting
			}
			if !all {
				return jp
			}
			continue
		}
		jp.Done++
		jp.Stamp = max(jp.Stamp, stamp)
		s.mu.Lock()
		s.joinedShards[sh] = joined{version: v, stamp: stamp}
		s.mu.Unlock()
	}
	if jp.Done < ks.Shards {
		return jp
	}
	jp.Complete = true
	s.mu.Lock()
	_, logged := s.joinedKS[keyspace]
	s.joinedKS[keyspace] = joined{version: v, stamp: jp.Stamp}
	s.mu.Unlock()
	if !logged {
		s.log.Info("keyspace joined: every shard has the join repair of every site it needs; serving its reads",
			"keyspace", keyspace, "config_version", v, "from_sites", senders, "shards", ks.Shards)
	}
	return jp
}

// shardJoinMarks returns the join marks of a replica of sh at this site
// (this node's, or the leader's) and that replica's newest HLC, read after
// the marks.
func (s *Service) shardJoinMarks(ctx context.Context, sh placement.Shard) (map[string]uint64, uint64, error) {
	if g := s.host.Group(sh); g != nil {
		return g.Geo().JoinMarks, g.MaxHLC(), nil
	}
	g, fwd, fctx, err := s.leader(ctx, sh)
	if err != nil {
		return nil, 0, err
	}
	if fwd == nil {
		return g.Geo().JoinMarks, g.MaxHLC(), nil
	}
	resp, err := fwd.JoinMarks(fctx, &peerv1.JoinMarksRequest{Keyspace: sh.Keyspace, Shard: sh.ID})
	if err != nil {
		return nil, 0, err
	}
	return resp.Marks, resp.MaxHlc, nil
}

// JoinMarks implements peerv1.ChainServer: the join marks of this node's
// replica of the shard, or of the site's leader of it.
func (s *Service) JoinMarks(ctx context.Context, req *peerv1.JoinMarksRequest) (*peerv1.JoinMarksResponse, error) {
	g := s.host.Group(placement.Shard{Keyspace: req.Keyspace, ID: req.Shard})
	if g == nil {
		_, lg, fwd, fctx, err := s.heldLeader(ctx, req.Keyspace, req.Shard)
		if err != nil {
			return nil, err
		}
		if fwd != nil {
			return fwd.JoinMarks(fctx, req)
		}
		g = lg
	}
	marks := g.Geo().JoinMarks
	return &peerv1.JoinMarksResponse{Marks: maps.Clone(marks), MaxHlc: g.MaxHLC()}, nil
}

// joinMarkedThere reports whether site's replica of sh already holds this
// site's mark for its join of the keyspace at version v (a repair done
// before this node led the shard, or before it restarted): the join
// repair need not run again.
func (s *Service) joinMarkedThere(ctx context.Context, sh placement.Shard, site string, v uint64) bool {
	var marks map[string]uint64
	err := s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
		resp, err := c.JoinMarks(ctx, &peerv1.JoinMarksRequest{Keyspace: sh.Keyspace, Shard: sh.ID})
		if err == nil {
			marks = resp.Marks
		}
		return err
	})
	if err != nil || marks[s.cfg.Site] < v {
		return false
	}
	s.noteJoinMarked(repairKey{sh, site}, v)
	return true
}

// noteJoinMarked records that site holds this site's join mark of sh for
// the join at version v.
func (s *Service) noteJoinMarked(rk repairKey, v uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joinMarked[rk] = max(s.joinMarked[rk], v)
}

// maybeJoinRepairs starts the join repair of sh (g leads it) towards
// every site that joined ks and needs this site's, unless this node knows
// it was marked done there. The one the chain change starts
// (chainChanged) may not have run to its end: this node took the
// leadership over or restarted since, the SetChain committed after its
// proposal timed out, or another repair of the shard towards the site
// was running then.
func (s *Service) maybeJoinRepairs(g *shard.Group, sh placement.Shard, ks cluster.Keyspace) {
	for _, site := range ks.Sites {
		v := joinMarkFor(ks, site, s.cfg.Site)
		if v == 0 {
			continue
		}
		rk := repairKey{sh, site}
		s.mu.Lock()
		skip := s.joinMarked[rk] >= v || s.aeBusy[rk]
		s.mu.Unlock()
		if !skip {
			s.launchRepairUntilSent(s.detached, g, sh, site, fmt.Sprintf("join of site %s (configuration version %d)", site, v))
		}
	}
}

// joiningShard reports whether g, a replica of a shard of ks, still waits
// for the join repair of a site that site's join of ks needs.
func joiningShard(g *shard.Group, ks cluster.Keyspace, site string) bool {
	v, senders := joinSenders(ks, site)
	return v > 0 && missingMark(g.Geo().JoinMarks, v, senders) != ""
}
