package geo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/rpc"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// repairBatchBytes bounds one RepairRecords command.
const repairBatchBytes = 1 << 20

// maybeAntiEntropy starts the periodic comparison of a led shard with the
// next site of this site's chain.
func (s *Service) maybeAntiEntropy(ctx context.Context, g *shard.Group, sh placement.Shard, ks cluster.Keyspace) {
	if s.cfg.AntiEntropyEvery <= 0 {
		return
	}
	chain := ks.Chain(s.cfg.Site)
	if len(chain) < 2 {
		return
	}
	s.mu.Lock()
	last, ok := s.aeLast[sh]
	if !ok {
		// Spread the first runs over the interval.
		s.aeLast[sh] = time.Now().Add(-time.Duration(uint64(sh.ID)*uint64(s.cfg.AntiEntropyEvery)/uint64(max(ks.Shards, 1))) / 2)
		s.mu.Unlock()
		return
	}
	due := time.Since(last) >= s.cfg.AntiEntropyEvery
	s.mu.Unlock()
	if due {
		s.startRepair(ctx, g, sh, chain[1], repairStable, "periodic")
	}
}

// repairKey names one anti-entropy run: a shard towards a site.
type repairKey struct {
	sh   placement.Shard
	site string
}

// repairMode says which versions a repair may send.
type repairMode int

const (
	// repairStable sends only versions globally stable here (applied at
	// every site of their chain, so after their dependencies), with
	// progress marks no further: what is newer still travels down the
	// chain with its dependencies, so the repair never shows a version
	// at a site before what it depends on.
	repairStable repairMode = iota
	// repairAll sends every version the progress covers: for a site the
	// chain cannot bring up to date (the log it needs was dropped by the
	// cap, or a replica lost its data), and for an operator's repair.
	// Until the chain catches up, the site may show such a version before
	// a dependency of it on another shard.
	repairAll
)

// startRepair runs anti-entropy of sh towards site in the background,
// once at a time per shard and site, until ctx ends.
func (s *Service) startRepair(ctx context.Context, g *shard.Group, sh placement.Shard, site string, mode repairMode, reason string) {
	s.launchRepair(func() (context.Context, context.CancelFunc) { return ctx, func() {} }, g, sh, site, mode, reason)
}

// repairDetached is startRepair for a repair a request starts: it runs
// until the service stops.
func (s *Service) repairDetached(g *shard.Group, sh placement.Shard, site string, mode repairMode, reason string) {
	s.launchRepair(s.detached, g, sh, site, mode, reason)
}

func (s *Service) launchRepair(start func() (context.Context, context.CancelFunc), g *shard.Group, sh placement.Shard, site string, mode repairMode, reason string) {
	s.launchRepairLoop(start, g, sh, site, mode, reason, repairOnce)
}

// repairRounds says when a launched repair runs again.
type repairRounds int

const (
	// repairOnce runs once; a failure is logged and left to the next
	// periodic run.
	repairOnce repairRounds = iota
	// repairRetry runs again after a failure (the site out of reach, its
	// shard not created yet), backing off, while this replica leads and
	// site is one of the keyspace's sites: for a repair that nothing else
	// would bring before the periodic anti-entropy.
	repairRetry
	// repairUntilSent is repairRetry that also runs again while it held
	// back versions this replica had applied when it started.
	repairUntilSent
)

// joinMark returns the configuration version of site's join of sh's
// keyspace that this site's join repair must mark (0: none).
func (s *Service) joinMark(sh placement.Shard, site string) uint64 {
	ks, ok := s.keyspace(sh)
	if !ok {
		return 0
	}
	return joinMarkFor(ks, site, s.cfg.Site)
}

// holds reports whether site is one of the sites of sh's keyspace.
func (s *Service) holds(sh placement.Shard, site string) bool {
	ks, ok := s.keyspace(sh)
	return ok && slices.Contains(ks.Sites, site)
}

// maxJoinRepairWait bounds the wait between the rounds of
// launchRepairUntilSent.
const maxJoinRepairWait = 30 * time.Second

// launchRepairUntilSent is a stable repair that runs again (after
// HeartbeatEvery, then twice as long each round up to maxJoinRepairWait,
// while this replica leads) until it holds back no
// version this replica had applied when it started (such a version is not
// globally stable yet; what is written later travels down the chain).
func (s *Service) launchRepairUntilSent(start func() (context.Context, context.CancelFunc), g *shard.Group, sh placement.Shard, site string, reason string) {
	s.launchRepairLoop(start, g, sh, site, repairStable, reason, repairUntilSent)
}

func (s *Service) launchRepairLoop(start func() (context.Context, context.CancelFunc), g *shard.Group, sh placement.Shard, site string, mode repairMode, reason string, rounds repairRounds) {
	rk := repairKey{sh, site}
	var heldUpTo uint64
	if rounds == repairUntilSent {
		heldUpTo = g.Geo().Local.HLC
	}
	s.mu.Lock()
	if s.aeBusy[rk] {
		s.mu.Unlock()
		return
	}
	s.aeBusy[rk] = true
	s.aeLast[sh] = time.Now()
	s.mu.Unlock()
	ctx, cancel := start()
	ok := s.spawn(func() {
		defer cancel()
		defer func() { s.mu.Lock(); delete(s.aeBusy, rk); s.mu.Unlock() }()
		wait := s.cfg.HeartbeatEvery
		if rounds == repairUntilSent {
			if v := s.joinMark(sh, site); v > 0 && s.joinMarkedThere(ctx, sh, site, v) {
				s.log.Debug("join repair marked done already", "shard", sh.String(), "to_site", site, "reason", reason, "config_version", v)
				return
			}
		}
		for {
			// A repair that runs until it sent what this replica held
			// when it started is a join repair when site joined the
			// keyspace and needs this site's: its last command marks it
			// done there (join.go).
			var join uint64
			if rounds == repairUntilSent {
				join = s.joinMark(sh, site)
			}
			p, held, err := s.repairShard(ctx, g, sh, site, mode, heldUpTo, join)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if rounds == repairOnce || !g.IsLeader() || !s.holds(sh, site) {
					s.log.Warn("anti-entropy failed", "shard", sh.String(), "to_site", site, "reason", reason, "err", err)
					return
				}
				// The site may not have taken the shard yet, or be out of
				// reach for a while: nothing else brings it what it
				// missed before the periodic run, so try again.
				s.log.Warn("anti-entropy failed; trying again", "shard", sh.String(), "to_site", site, "reason", reason, "err", err, "in", wait)
				sleep(ctx, wait)
				wait = min(2*wait, maxJoinRepairWait)
				continue
			}
			if rounds == repairUntilSent && held > 0 && g.IsLeader() && s.holds(sh, site) {
				s.log.Info("anti-entropy held back versions not yet stable; running again", "shard", sh.String(), "to_site", site,
					"reason", reason, "slots_differing", p.SlotsDiffering, "keys_sent", p.KeysSent, "keys_held", held)
				sleep(ctx, wait)
				// Stability waits on every site: while one is down, the
				// held versions stay held, and each round compares the
				// whole shard's digests. Back off to maxJoinRepairWait.
				wait = min(2*wait, maxJoinRepairWait)
				if ctx.Err() != nil {
					return
				}
				continue
			}
			if join > 0 && held == 0 {
				s.noteJoinMarked(rk, join)
				s.log.Info("join repair done: marked at the joining site", "shard", sh.String(), "to_site", site, "reason", reason,
					"config_version", join, "slots_differing", p.SlotsDiffering, "keys_sent", p.KeysSent)
				return
			}
			s.log.Info("anti-entropy done", "shard", sh.String(), "to_site", site, "reason", reason,
				"slots_differing", p.SlotsDiffering, "keys_sent", p.KeysSent, "keys_held", held)
			return
		}
	})
	if !ok {
		cancel()
		s.mu.Lock()
		delete(s.aeBusy, rk)
		s.mu.Unlock()
	}
}

// repairShard compares this site's replica of sh (g, which leads) with
// site's, and sends site the newest versions of every differing digest
// slot, then the progress of every origin they cover. Versions merge by
// last-writer-wins, so a repair never undoes a newer write there.
//
// held counts the versions at or below heldUpTo (an HLC) of differing
// slots left out for being newer than the progress the marks give (not
// yet stable, in repairStable). With join set (a configuration version)
// and none held, the last command marks this site's join repair of sh
// done at site, for site's join of the keyspace at that version.
func (s *Service) repairShard(ctx context.Context, g *shard.Group, sh placement.Shard, site string, mode repairMode, heldUpTo, join uint64) (p *adminv1.RepairProgress, held int, err error) {
	start := time.Now()
	defer func() {
		result := "ok"
		if err != nil {
			result = "error"
		}
		s.m.aeRuns.WithLabelValues(result).Inc()
		s.m.aeSec.Observe(time.Since(start).Seconds())
	}()
	p = &adminv1.RepairProgress{Keyspace: sh.Keyspace, Shard: sh.ID, Site: site, SlotsCompared: storage.DigestSlots}
	// The progress marks are read before the data: the data read later
	// holds at least what they cover.
	geo := g.Geo()
	var marks []*peerv1.RepairProgressMark
	covered := map[string]uint64{}
	ks, known := s.keyspace(sh)
	mark := func(o string, pr storage.Progress) {
		// The target's own writes come back whole: no chain brings a
		// site its own writes (it lost them). So do the writes of an
		// origin that is no longer a site of the keyspace (removed, or
		// lost for good and removed with --force): no chain carries
		// them any more, and their stability, which travels back
		// through that site, never comes, so a stable repair would
		// hold them back for good.
		if mode == repairStable && o != site && (!known || slices.Contains(ks.Sites, o)) {
			st := geo.Stable[o]
			if st.Seq < pr.Seq || (st.Seq == pr.Seq && st.HLC < pr.HLC) {
				pr = st
			}
		}
		marks = append(marks, &peerv1.RepairProgressMark{Origin: o, Seq: pr.Seq, Hlc: pr.HLC})
		covered[o] = pr.HLC
	}
	mark(s.cfg.Site, geo.Local)
	for o, pr := range geo.Origins {
		mark(o, pr)
	}
	var theirs *peerv1.SiteDigestResponse
	if err := s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
		var err error
		theirs, err = c.SiteDigest(ctx, &peerv1.SiteDigestRequest{Keyspace: sh.Keyspace, Shard: sh.ID})
		return err
	}); err != nil {
		return p, held, fmt.Errorf("digest of %s at %s: %w", sh, site, err)
	}
	if len(theirs.Slots) != storage.DigestSlots {
		return p, held, fmt.Errorf("digest of %s at %s has %d slots", sh, site, len(theirs.Slots))
	}
	var mine storage.Digest
	if err := g.ReadLong(func(tx *storage.ShardTx) error {
		var err error
		mine, err = tx.DigestNewest()
		return err
	}); err != nil {
		return p, held, err
	}
	diff := map[int]bool{}
	for i := range mine.Slots {
		if mine.Slots[i] != theirs.Slots[i] {
			diff[i] = true
		}
	}
	p.SlotsDiffering = uint32(len(diff))
	send := func(recs []*peerv1.RepairRecord, marks []*peerv1.RepairProgressMark) error {
		r := &peerv1.RepairRecords{Records: recs, Origins: marks}
		if marks != nil && join > 0 && held == 0 {
			// The last command, and nothing of what this replica held at
			// the start was left out: the join repair is done.
			r.JoinFrom, r.JoinVersion = s.cfg.Site, join
		}
		return s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
			_, err := c.Repair(ctx, &peerv1.RepairShardRequest{Keyspace: sh.Keyspace, Shard: sh.ID, FromSite: s.cfg.Site, Repair: r})
			return err
		})
	}
	var batch []*peerv1.RepairRecord
	size := 0
	errStop := errors.New("stop")
	var sendErr error
	if len(diff) > 0 {
		err := g.ReadLong(func(tx *storage.ShardTx) error {
			return tx.NewestInSlots(diff, func(r storage.Record) error {
				if r.Version.HLC > covered[r.Version.Site] {
					// Newer than the progress the marks give: it is still
					// on its way down the chain, and a site must not show
					// a version its progress does not cover (dependencies
					// on it would wait for what it already has).
					if r.Version.HLC <= heldUpTo {
						held++
					}
					return nil
				}
				batch = append(batch, &peerv1.RepairRecord{Key: r.Key, Value: r.Value, Tombstone: r.Tombstone, Hlc: r.Version.HLC, Site: r.Version.Site})
				size += len(r.Key) + len(r.Value) + 32
				if size >= repairBatchBytes {
					if sendErr = send(batch, nil); sendErr != nil {
						return errStop
					}
					p.KeysSent += uint64(len(batch))
					batch, size = nil, 0
				}
				return nil
			})
		})
		if sendErr != nil {
			return p, held, sendErr
		}
		if err != nil {
			return p, held, err
		}
	}
	if err := send(batch, marks); err != nil {
		return p, held, err
	}
	p.KeysSent += uint64(len(batch))
	s.m.aeKeys.Add(float64(p.KeysSent))
	// The shippers learn site's new progress before they ship again.
	s.mu.Lock()
	var sts []*stream
	for k, st := range s.streams {
		if k.sh == sh {
			sts = append(sts, st)
		}
	}
	s.mu.Unlock()
	for _, st := range sts { // stream locks are never taken under s.mu
		st.mu.Lock()
		st.probed[site] = false
		st.mu.Unlock()
	}
	return p, held, nil
}

// RepairAll runs anti-entropy now from this site towards every other site of
// keyspace (every keyspace if empty), or of one shard, on the shards this
// node leads, calling progress after each shard and site.
func (s *Service) RepairAll(ctx context.Context, keyspace string, only *uint32, progress func(*adminv1.RepairProgress)) error {
	cfg, _ := s.configs()
	var names []string
	if keyspace != "" {
		ks, ok := cfg.Keyspace(keyspace)
		if !ok {
			return fmt.Errorf("%w %s", router.ErrUnknownKeyspace, placement.QuoteKeyspace(keyspace))
		}
		if !ks.Holds(s.cfg.Site) {
			return fmt.Errorf("keyspace %q is not held by site %s (held by %v)", keyspace, s.cfg.Site, ks.Sites)
		}
		if only != nil && *only >= ks.Shards {
			return fmt.Errorf("%w %d of keyspace %q: it has shards 0 to %d", rpc.ErrUnknownShard, *only, keyspace, ks.Shards-1)
		}
		names = []string{keyspace}
	} else {
		for name := range cfg.Keyspaces {
			if ks, ok := cfg.Keyspace(name); ok && ks.Holds(s.cfg.Site) {
				names = append(names, name)
			}
		}
	}
	type job struct {
		sh   placement.Shard
		site string
	}
	var jobs []job
	for _, name := range names {
		ks, _ := cfg.Keyspace(name)
		for id := uint32(0); id < ks.Shards; id++ {
			if only != nil && id != *only {
				continue
			}
			for _, site := range ks.Sites {
				if site != s.cfg.Site {
					jobs = append(jobs, job{placement.Shard{Keyspace: name, ID: id}, site})
				}
			}
		}
	}
	for i, j := range jobs {
		var p *adminv1.RepairProgress
		g, _, err := s.leaders.LeaderTarget(ctx, j.sh)
		switch {
		case err != nil:
			p = &adminv1.RepairProgress{Keyspace: j.sh.Keyspace, Shard: j.sh.ID, Site: j.site, Error: err.Error()}
		case g == nil:
			p = &adminv1.RepairProgress{Keyspace: j.sh.Keyspace, Shard: j.sh.ID, Site: j.site, Error: "this node does not lead the shard; run the repair on its leader or on every node of the site", NotLeader: true}
		default:
			p, _, err = s.repairShard(ctx, g, j.sh, j.site, repairAll, 0, 0)
			if err != nil {
				p.Error = err.Error()
			}
		}
		p.Done, p.Total = uint32(i+1), uint32(len(jobs))
		progress(p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}
