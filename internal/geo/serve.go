package geo

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// leader returns this node's replica of sh if it leads, or a Chain client
// of the node that does (and the forwarded context).
func (s *Service) leader(ctx context.Context, sh placement.Shard) (*shard.Group, peerv1.ChainClient, context.Context, error) {
	g, addr, err := s.leaders.LeaderTarget(ctx, sh)
	if err != nil {
		return nil, nil, nil, status.Errorf(codes.Unavailable, "%s: %v", sh, err)
	}
	if addr == "" {
		return g, nil, nil, nil
	}
	conn, err := s.conns.Conn(addr)
	if err != nil {
		return nil, nil, nil, status.Errorf(codes.Unavailable, "%s: %v", sh, err)
	}
	return nil, peerv1.NewChainClient(conn), router.ForwardCtx(ctx), nil
}

// heldLeader is leader for a shard this site must hold.
func (s *Service) heldLeader(ctx context.Context, keyspace string, id uint32) (placement.Shard, *shard.Group, peerv1.ChainClient, context.Context, error) {
	_, sh, ok := s.held(keyspace, id)
	if !ok {
		return sh, nil, nil, nil, status.Errorf(codes.FailedPrecondition, "site %s does not hold shard %d of keyspace %q", s.cfg.Site, id, keyspace)
	}
	g, fwd, fctx, err := s.leader(ctx, sh)
	return sh, g, fwd, fctx, err
}

// held checks a request's shard against the configuration.
func (s *Service) held(keyspace string, id uint32) (cluster.Keyspace, placement.Shard, bool) {
	sh := placement.Shard{Keyspace: keyspace, ID: id}
	ks, ok := s.keyspace(sh)
	return ks, sh, ok
}

// Ship implements peerv1.ChainServer.
func (s *Service) Ship(ctx context.Context, req *peerv1.ShipRequest) (*peerv1.ShipResponse, error) {
	u := req.GetUpdates()
	if u == nil || u.Origin == "" || req.FromSite == "" {
		return nil, status.Error(codes.InvalidArgument, "ship: no updates, origin or sending site")
	}
	if u.Origin == s.cfg.Site {
		return nil, status.Errorf(codes.InvalidArgument, "ship: site %s received its own updates", s.cfg.Site)
	}
	ks, sh, ok := s.held(req.Keyspace, req.Shard)
	if !ok || !ks.Holds(u.Origin) {
		return &peerv1.ShipResponse{NotHeld: true}, nil
	}
	g, fwd, fctx, err := s.leader(ctx, sh)
	if err != nil {
		return nil, err
	}
	if fwd != nil {
		return fwd.Ship(fctx, req)
	}
	k := streamKey{sh, u.Origin}
	st := s.stream(k)
	st.serveChange(1, 0)
	defer st.serveChange(-1, 0)
	if req.StableSeq > 0 || req.StableHlc > 0 {
		st.mu.Lock()
		st.stable = maxProgress(st.stable, storage.Progress{Seq: req.StableSeq, HLC: req.StableHlc})
		st.mu.Unlock()
	}
	if len(g.Geo().Chain) < 2 {
		// The configuration reached the sender first: set the chain
		// before applying, so that what must be passed on is logged.
		if err := s.EnsureChain(ctx, sh, g); err != nil {
			return nil, status.Errorf(codes.Unavailable, "%v", err)
		}
	}
	resp := &peerv1.ShipResponse{}
	p := g.Geo().Origins[u.Origin]
	if u.Origin == req.FromSite && len(u.Writes) > 0 {
		// A replica that lost its data numbers new writes with sequence
		// numbers this site applied already: the batch's last write is
		// then newer (by HLC) than the newest applied. A batch of old
		// writes is only late (it crossed a partition while this site got
		// them through another site of the chain): its sequence is stale.
		last := u.Writes[len(u.Writes)-1]
		reused := (last.Seq <= p.Seq && last.Hlc > p.HLC) || guards.Off(guards.LateBatch)
		for _, kp := range req.Known {
			if kp.GetSite() == u.Origin && kp.Seq < p.Seq && reused {
				// The origin numbered fewer writes than this site applied
				// from it: its replica lost its data. Send it back what
				// this site holds. Only a request with writes tells: it
				// was built after every batch before it, while a request
				// without (a progress probe) may have been built before a
				// batch this site already applied, and its sequence is
				// then stale, not lost; taking it for a rebuilt replica
				// sent versions ahead of their dependencies.
				s.m.rebuilt.WithLabelValues(u.Origin).Inc()
				s.repairDetached(g, sh, u.Origin, repairAll, fmt.Sprintf("%s's sequence %d is behind this site's progress %d for it (rebuilt replica)", u.Origin, kp.Seq, p.Seq))
			}
		}
	}
	writes := u.Writes
	for len(writes) > 0 && writes[0].Seq <= p.Seq {
		writes = writes[1:] // applied already
	}
	deadline := time.Now().Add(s.cfg.DepWait)
	if d, ok := ctx.Deadline(); ok {
		// Answer well inside the sender's deadline: a reply that applied
		// part of the batch is progress, a timed-out call is not.
		if half := time.Now().Add(time.Until(d) / 2); half.Before(deadline) {
			deadline = half
		}
	}
	if len(writes) > 0 && writes[0].Seq > p.Seq+1 {
		// The sender has several batches of the stream in flight
		// (Config.InFlight) and this one overtook an earlier one: wait
		// for it, as for a dependency. If it does not come, nothing of
		// this batch is applied and the sender resends from the progress
		// in the answer.
		p = s.waitEarlier(ctx, g, st, u.Origin, writes[0].Seq-1, deadline)
		for len(writes) > 0 && writes[0].Seq <= p.Seq {
			writes = writes[1:]
		}
		if len(writes) > 0 && writes[0].Seq > p.Seq+1 {
			resp.Error = fmt.Sprintf("update %d of %s waits for update %d (an earlier batch did not arrive)", writes[0].Seq, u.Origin, p.Seq+1)
			writes = nil                            // the loop below applies nothing
			u = &peerv1.Replicate{Origin: u.Origin} // nor its close
		}
	}
	// Apply the ready part of the batch, then wait for the first blocked
	// update's dependencies (they usually arrive meanwhile in another
	// shard's stream, which may itself wait for the part just applied) and
	// go on, until the batch is applied or the wait times out.
	for {
		n, why := s.depsReady(ctx, g, sh, u.Origin, writes, deadline)
		cmd := &peerv1.Replicate{Origin: u.Origin, Writes: writes[:n], LocalHlc: stampNow(g, writes[:n])}
		if n == len(writes) {
			cmd.ClosedHlc, cmd.ClosedSeq = u.ClosedHlc, u.ClosedSeq
		} else {
			resp.Error = why
		}
		p := g.Geo().Origins[u.Origin]
		if len(cmd.Writes) > 0 || (cmd.ClosedHlc > p.HLC && cmd.ClosedSeq == p.Seq) {
			res, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Replicate{Replicate: cmd}})
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "%s: %v", sh, err)
			}
			if res.Err != nil {
				resp.Error = res.Err.Error()
				break
			}
			s.m.applied.WithLabelValues(u.Origin).Add(float64(res.Applied))
			s.m.superseded.Add(float64(res.Superseded))
		}
		writes = writes[n:]
		if n == 0 || len(writes) == 0 || time.Now().After(deadline) {
			break
		}
		resp.Error = ""
	}
	self := g.Geo().Origins[u.Origin]
	resp.NextSeq = self.Seq + 1
	st.mu.Lock()
	st.known[s.cfg.Site] = self
	resp.Known = progressList(st.known, ks.Chain(u.Origin))
	st.mu.Unlock()
	// A site that ships nothing on (the last of the chain) still trims and
	// collects by the stable progress it receives.
	s.proposeStable(context.WithoutCancel(ctx), g, k, st)
	return resp, nil
}

// earlierGrace is how long a batch that overtook an earlier one of its
// stream waits for that batch's call to reach this node before it counts
// it lost (the sender sent it first, on the same connection).
const earlierGrace = 100 * time.Millisecond

// waitEarlier waits until g applied origin's updates up to seq (an
// earlier batch of the stream, in flight from the same sender), or
// deadline passes, and returns origin's progress. It stops waiting once
// no call of the stream that could apply the earlier updates is being
// handled here (after earlierGrace for one to arrive): every other call
// under way waits for an earlier batch too, so the earlier batch ended
// short of seq (its dependencies were late) or was lost, and only the
// sender can send the gap again. Waiting on to the deadline held the
// sender's whole window of batches, and every stream whose writes depend
// on this one's with it (docs/adr/018, "Batches in flight").
func (s *Service) waitEarlier(ctx context.Context, g *shard.Group, st *stream, origin string, seq uint64, deadline time.Time) storage.Progress {
	st.serveChange(0, 1)
	defer st.serveChange(0, -1)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	grace := time.NewTimer(earlierGrace)
	defer grace.Stop()
	graced := false
	for {
		geo := g.Geo()
		p := geo.Origins[origin]
		if p.Seq >= seq {
			return p
		}
		st.mu.Lock()
		filling, served := st.serving-st.gapWaits, st.served
		st.mu.Unlock()
		if filling <= 0 && graced {
			return p
		}
		select {
		case <-ctx.Done():
			return p
		case <-t.C:
			return p
		case <-geo.Changed:
		case <-served:
		case <-grace.C:
			graced = true
		}
	}
}

// depsReady returns how many of writes have their dependencies applied at
// this site, waiting up to DepWait for the first that does not (and why
// it stopped there).
//
// The node's clock observes the newest HLC of every replica it checked, so
// that the stamp of the writes (stampNow) exceeds their dependencies'
// stamps here: a reader whose floor covers a write's stamp on one shard
// then finds its dependencies on the others (docs/adr/019).
func (s *Service) depsReady(ctx context.Context, g *shard.Group, own placement.Shard, origin string, writes []*peerv1.RemoteWrite, deadline time.Time) (int, string) {
	keyspace := own.Keyspace
	if guards.Off(guards.DependencyWait) {
		return len(writes), ""
	}
	for i, w := range writes {
		for _, d := range w.Deps {
			if d.Origin == "" || d.Origin == s.cfg.Site {
				continue // this site's own writes are applied here
			}
			shards := []placement.Shard{{Keyspace: d.Keyspace, ID: d.Shard}}
			if d.AllShards {
				ks, ok := s.keyspaceOf(d.Keyspace)
				if !ok {
					continue
				}
				shards = shards[:0]
				for id := uint32(0); id < ks.Shards; id++ {
					shards = append(shards, placement.Shard{Keyspace: d.Keyspace, ID: id})
				}
			}
			for _, sh := range shards {
				if sh == own && d.Origin == origin && d.Hlc < w.Hlc {
					// An earlier write of the same stream: applied before
					// w, in order.
					continue
				}
				dg := s.host.Group(sh)
				if dg == nil {
					if _, ok := s.keyspaceOf(sh.Keyspace); !ok {
						continue
					}
					// Another node of this site holds the shard: ask it.
					s.m.depsRemote.Inc()
					start := time.Now()
					wctx, cancel := context.WithDeadline(ctx, deadline)
					m, err := s.waitShardApplied(wctx, sh, d.Hlc, []string{d.Origin})
					cancel()
					s.m.depWaitSec.Observe(time.Since(start).Seconds())
					if err != nil {
						return i, fmt.Sprintf("update %d of %s waits for %s to apply HLC %s of %s (%v)", w.Seq, keyspace, sh, causal.FormatHLC(d.Hlc), d.Origin, err)
					}
					g.Clock().Observe(m)
					continue
				}
				if dg.HasApplied(d.Origin, d.Hlc) {
					g.Clock().Observe(dg.MaxHLC())
					continue
				}
				if i > 0 {
					// Apply what is ready first: the dependency may wait,
					// in its own stream, for an update of this batch.
					return i, fmt.Sprintf("update %d of %s waits for %s to apply HLC %s of %s", w.Seq, keyspace, sh, causal.FormatHLC(d.Hlc), d.Origin)
				}
				start := time.Now()
				wctx, cancel := context.WithDeadline(ctx, deadline)
				err := dg.WaitOrigin(wctx, d.Origin, d.Hlc)
				cancel()
				s.m.depWaitSec.Observe(time.Since(start).Seconds())
				if err != nil {
					return i, fmt.Sprintf("update %d of %s waits for %s to apply HLC %s of %s", w.Seq, keyspace, sh, causal.FormatHLC(d.Hlc), d.Origin)
				}
				g.Clock().Observe(dg.MaxHLC())
			}
		}
	}
	return len(writes), ""
}

// stampNow returns the local HLC to stamp writes of another site with,
// after the node's clock observed their HLCs (a write that depends on one
// of this site's versions has a larger HLC than it).
func stampNow(g *shard.Group, writes []*peerv1.RemoteWrite) uint64 {
	if len(writes) == 0 {
		return 0
	}
	c := g.Clock()
	c.Observe(writes[len(writes)-1].Hlc)
	return c.Now()
}

// keyspaceOf returns a keyspace this site holds.
func (s *Service) keyspaceOf(name string) (cluster.Keyspace, bool) {
	cfg, _ := s.configs()
	ks, ok := cfg.Keyspace(name)
	return ks, ok && ks.Holds(s.cfg.Site)
}

// SiteDigest implements peerv1.ChainServer.
func (s *Service) SiteDigest(ctx context.Context, req *peerv1.SiteDigestRequest) (*peerv1.SiteDigestResponse, error) {
	sh, g, fwd, fctx, err := s.heldLeader(ctx, req.Keyspace, req.Shard)
	if err != nil {
		return nil, err
	}
	if fwd != nil {
		return fwd.SiteDigest(fctx, req)
	}
	var d storage.Digest
	if err := g.ReadLong(func(tx *storage.ShardTx) error {
		var err error
		d, err = tx.DigestNewest()
		return err
	}); err != nil {
		return nil, status.Errorf(codes.Unavailable, "%s: %v", sh, err)
	}
	resp := &peerv1.SiteDigestResponse{Slots: d.Slots[:], Entries: d.Entries}
	for o, p := range g.Geo().Origins {
		resp.Origins = append(resp.Origins, &peerv1.OriginProgress{Site: o, Seq: p.Seq, Hlc: p.HLC})
	}
	return resp, nil
}

// Repair implements peerv1.ChainServer: it applies another site's newest
// versions through this site's raft group.
func (s *Service) Repair(ctx context.Context, req *peerv1.RepairShardRequest) (*peerv1.RepairShardResponse, error) {
	if req.GetRepair() == nil || req.FromSite == "" {
		return nil, status.Error(codes.InvalidArgument, "repair: no records or sending site")
	}
	if r := req.Repair; r.JoinVersion > 0 && r.JoinFrom != req.FromSite {
		return nil, status.Errorf(codes.InvalidArgument, "repair: join mark of site %q sent by site %q", r.JoinFrom, req.FromSite)
	}
	sh, g, fwd, fctx, err := s.heldLeader(ctx, req.Keyspace, req.Shard)
	if err != nil {
		return nil, err
	}
	if fwd != nil {
		return fwd.Repair(fctx, req)
	}
	for _, r := range req.Repair.Records {
		g.Clock().Observe(r.Hlc)
	}
	req.Repair.LocalHlc = g.Clock().Now()
	res, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Repair{Repair: req.Repair}})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "%s: %v", sh, err)
	}
	if res.Err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", sh, res.Err)
	}
	s.m.superseded.Add(float64(res.Superseded))
	return &peerv1.RepairShardResponse{Applied: uint64(res.Applied)}, nil
}

// Ping implements peerv1.ChainServer.
func (s *Service) Ping(_ context.Context, req *peerv1.PingRequest) (*peerv1.PingResponse, error) {
	resp := &peerv1.PingResponse{Site: s.cfg.Site, NodeId: s.cfg.NodeID}
	cfg, _ := s.configs()
	if r, ok := cfg.Removed[req.GetFromSite()]; ok {
		// A node of a site removed for good that came back (a partition
		// healed, a machine restarted on its disks): tell it, and it
		// stops (OnRemoved).
		resp.SiteRemoved, resp.RemovedVersion = true, r.Version
	}
	return resp, nil
}
