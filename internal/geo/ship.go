package geo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// selfProgress is what this replica applied of origin's updates: its own
// writes (outbound sequence and newest HLC) or another origin's progress.
func (s *Service) selfProgress(g *shard.Group, origin string) (storage.Progress, <-chan struct{}, map[string]storage.Progress) {
	geo := g.Geo()
	if origin == s.cfg.Site {
		return geo.Local, geo.Changed, geo.Stable
	}
	return geo.Origins[origin], geo.Changed, geo.Stable
}

// shipCall is one Ship call of a shipper, answered or in flight.
type shipCall struct {
	target string
	req    *peerv1.ShipRequest
	next   uint64 // the first sequence number the call covers
	last   uint64 // the last write it carries (next-1 if none)
	start  time.Time
	done   chan struct{} // closed when resp, err are set
	resp   *peerv1.ShipResponse
	err    error
}

// ship runs while this node leads g: it sends origin's updates to the
// next reachable site of origin's chain.
//
// Up to InFlight calls of the stream are in flight at once: while the
// first is unanswered, new writes go out in further calls, each starting
// after the last write already in flight. Answers are taken in the order
// the calls were sent. An error, or an answer whose progress is behind
// what its call carried, drops the window: nothing more is sent until
// every call in flight is answered, and shipping goes on from the
// progress the target acknowledged (the receiver skips duplicates).
// Probes, heartbeats, repairs and renumbering happen only with nothing in
// flight.
func (s *Service) ship(ctx context.Context, g *shard.Group, k streamKey) {
	st := s.stream(k)
	st.mu.Lock()
	st.probed = map[string]bool{} // a new leader learns every site's progress first
	st.mu.Unlock()
	cctx, cancel := context.WithCancel(ctx)
	var inflight []*shipCall
	defer func() {
		cancel()
		for _, c := range inflight {
			<-c.done
		}
	}()
	reset := false // the window was dropped: drain it before sending again
	lastWrite := time.Now()
	var lastLocal storage.Progress
	for ctx.Err() == nil {
		if len(inflight) > 0 {
			select {
			case <-inflight[0].done:
				c := inflight[0]
				inflight = inflight[1:]
				if !s.shipped(ctx, k, st, c) && !reset {
					reset = true
					if len(inflight) > 0 {
						s.m.resent.WithLabelValues(c.target).Inc()
					}
				}
				continue
			default:
			}
		} else {
			reset = false
		}
		if !g.IsLeader() {
			return
		}
		ks, ok := s.keyspace(k.sh)
		if !ok {
			return
		}
		chain := ks.Chain(k.origin)
		pos := position(chain, s.cfg.Site)
		if pos < 0 || pos == len(chain)-1 {
			return
		}
		self, changed, stableState := s.selfProgress(g, k.origin)
		st.mu.Lock()
		st.known[s.cfg.Site] = self
		if k.origin == s.cfg.Site {
			before := st.stable
			st.stable = maxProgress(st.stable, minProgress(st.known, chain))
			if st.stable.Seq > before.Seq {
				s.observeStability(st.stable)
			}
		}
		st.stable = maxProgress(st.stable, stableState[k.origin])
		target := st.links.target(chain[pos+1:], s.pingOK)
		tk, probed := st.known[target], st.probed[target]
		sinceSent := time.Since(st.lastSent[target])
		stable := st.stable
		st.mu.Unlock()
		s.proposeStable(ctx, g, k, st)

		// An origin that wrote nothing for a while closes its present,
		// so every site's frontier for it moves on.
		if k.origin == s.cfg.Site {
			if self != lastLocal {
				lastLocal, lastWrite = self, time.Now()
			} else if time.Since(lastWrite) > s.cfg.CloseEvery {
				g.CloseOnce()
				lastWrite = time.Now()
			}
		}

		req := &peerv1.ShipRequest{Keyspace: k.sh.Keyspace, Shard: k.sh.ID, FromSite: s.cfg.Site,
			Updates: &peerv1.Replicate{Origin: k.origin}, StableSeq: stable.Seq, StableHlc: stable.HLC}
		if len(inflight) > 0 {
			// Calls in flight: send the writes after the last of them,
			// if the window has room, else wait for the first answer.
			c := s.pipelined(g, k, req, inflight, reset, target, tk, self, probed)
			if c == nil {
				t := time.NewTimer(s.cfg.HeartbeatEvery)
				select {
				case <-ctx.Done():
				case <-inflight[0].done:
				case <-changed:
				case <-t.C:
				}
				t.Stop()
				continue
			}
			st.mu.Lock()
			req.Known = progressList(st.known, chain)
			st.mu.Unlock()
			s.m.pipelined.WithLabelValues(target).Inc()
			inflight = append(inflight, s.call(cctx, c))
			continue
		}
		if probed && k.origin == s.cfg.Site && tk.Seq > self.Seq {
			// target applied more of this site's writes than this replica
			// numbered: the replica lost its data. Number the next writes
			// after target's progress, and send target what this replica
			// wrote since (anti-entropy; the writes numbered before the
			// move look like duplicates there).
			s.renumber(ctx, g, k, tk)
			s.startRepair(ctx, g, k.sh, target, repairAll, fmt.Sprintf("this site's sequence %d is behind %s's progress %d for it (rebuilt replica)", self.Seq, target, tk.Seq))
			sleep(ctx, s.cfg.HeartbeatEvery)
			continue
		}
		next := tk.Seq + 1
		if probed {
			if self.Seq >= next {
				writes, first, err := s.readOutbound(g, k.origin, next)
				if err != nil {
					s.log.Warn("reading the outbound log failed", "shard", k.sh.String(), "err", err)
					sleep(ctx, s.cfg.HeartbeatEvery)
					continue
				}
				if len(writes) == 0 || first > next {
					// What target needs is no longer here: anti-entropy
					// brings target up to date. If the log was trimmed at
					// global stability only (a site that joined the
					// chain, or lost its data), what target lacks below
					// it is stable and the chain brings the rest, with
					// its dependencies. If the cap dropped updates that
					// were not stable, target needs everything the
					// progress covers.
					stable := g.Geo().Stable[k.origin]
					mode := repairAll
					if (first == 0 && stable.Seq >= self.Seq) || (first > 0 && first <= stable.Seq+1) {
						mode = repairStable
					}
					s.startRepair(ctx, g, k.sh, target, mode, fmt.Sprintf("outbound log of %s starts at %d, %s needs %d", k.origin, first, target, next))
					st.mu.Lock()
					st.probed[target] = false
					st.mu.Unlock()
					sleep(ctx, s.cfg.HeartbeatEvery)
					continue
				}
				req.Updates.Writes = writes
			}
			last := next - 1
			if n := len(req.Updates.Writes); n > 0 {
				last = req.Updates.Writes[n-1].Seq
			}
			if last == self.Seq && self.HLC > tk.HLC {
				req.Updates.ClosedSeq, req.Updates.ClosedHlc = self.Seq, self.HLC
			}
			// While some of this site's writes are not yet applied at
			// every site, ask for the chain's progress more often: the
			// answer makes them globally stable (and SITES(n)/ALL writes
			// acknowledged) sooner.
			every := s.cfg.HeartbeatEvery
			if k.origin == s.cfg.Site && stable.Seq < self.Seq {
				every = min(every, s.cfg.AckEvery)
			}
			if len(req.Updates.Writes) == 0 && req.Updates.ClosedHlc == 0 && sinceSent < every {
				wait(ctx, changed, every-sinceSent)
				continue
			}
		}
		st.mu.Lock()
		req.Known = progressList(st.known, chain)
		st.mu.Unlock()
		c := &shipCall{target: target, req: req, next: next, last: next - 1}
		if n := len(req.Updates.Writes); n > 0 {
			c.last = req.Updates.Writes[n-1].Seq
		}
		inflight = append(inflight, s.call(cctx, c))
	}
}

// pipelined returns the next call of a window with calls in flight: the
// writes after the last one in flight, to the same target, or nil if the
// window is full or being drained, or there is nothing to send yet.
func (s *Service) pipelined(g *shard.Group, k streamKey, req *peerv1.ShipRequest, inflight []*shipCall, reset bool, target string, tk, self storage.Progress, probed bool) *shipCall {
	if reset || len(inflight) >= s.cfg.InFlight || !probed || inflight[0].target != target {
		return nil
	}
	next := max(inflight[len(inflight)-1].last, tk.Seq) + 1
	if self.Seq < next {
		return nil
	}
	writes, first, err := s.readOutbound(g, k.origin, next)
	if err != nil || len(writes) == 0 || first > next {
		return nil // dealt with once the window drained
	}
	req.Updates.Writes = writes
	last := writes[len(writes)-1].Seq
	if last == self.Seq && self.HLC > tk.HLC {
		req.Updates.ClosedSeq, req.Updates.ClosedHlc = self.Seq, self.HLC
	}
	return &shipCall{target: target, req: req, next: next, last: last}
}

// call sends c in the background; c.done is closed when it is answered.
func (s *Service) call(ctx context.Context, c *shipCall) *shipCall {
	c.start, c.done = time.Now(), make(chan struct{})
	go func() {
		defer close(c.done)
		c.resp, c.err = s.send(ctx, c.target, c.req)
	}()
	return c
}

// shipped takes the answer to c. It reports whether the target applied
// everything c carried (else the shipper drops its window).
func (s *Service) shipped(ctx context.Context, k streamKey, st *stream, c *shipCall) bool {
	target, resp, err := c.target, c.resp, c.err
	if err != nil || resp.NotHeld {
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			err = errors.New("the site does not hold the keyspace (yet)")
		}
		st.mu.Lock()
		skippedNow := st.links.fail(target, c.start, time.Now(), s.cfg.SkipAfter)
		st.mu.Unlock()
		s.m.batches.WithLabelValues(target, "error").Inc()
		if skippedNow {
			s.m.skips.WithLabelValues(target).Inc()
			s.log.Warn("skipping an unreachable site in the chain", "shard", k.sh.String(), "origin", k.origin, "to_site", target, "after", s.cfg.SkipAfter, "err", err)
		} else {
			s.log.Debug("shipping failed", "shard", k.sh.String(), "origin", k.origin, "to_site", target, "err", err)
		}
		sleep(ctx, min(s.cfg.HeartbeatEvery, 200*time.Millisecond))
		return false
	}
	st.mu.Lock()
	if st.links.ok(target) {
		s.m.rejoins.WithLabelValues(target).Inc()
		s.log.Info("a skipped site is back in the chain", "shard", k.sh.String(), "origin", k.origin, "to_site", target)
	}
	st.probed[target] = true
	st.lastSent[target] = time.Now()
	st.mu.Unlock()
	// The receiver's NextSeq is its own progress.
	known := resp.Known
	if resp.NextSeq > 0 {
		found := false
		for _, p := range known {
			if p.GetSite() == target {
				found = true
			}
		}
		if !found {
			known = append(known, &peerv1.OriginProgress{Site: target, Seq: resp.NextSeq - 1})
		}
	}
	st.noteKnown(target, known)
	n := len(c.req.Updates.Writes)
	s.m.batches.WithLabelValues(target, "ok").Inc()
	if n > 0 {
		s.m.shipped.WithLabelValues(target).Add(float64(n))
		s.m.shipSec.Observe(time.Since(c.start).Seconds())
	}
	if resp.Error != "" {
		s.log.Debug("receiver applied part of a batch", "shard", k.sh.String(), "origin", k.origin, "to_site", target, "reason", resp.Error)
		if resp.NextSeq <= c.next {
			sleep(ctx, 20*time.Millisecond) // nothing applied: do not spin
		}
		return false
	}
	return resp.NextSeq > c.last
}

// renumber moves this site's next write sequence number past p (the
// progress another site applied of this site's writes).
func (s *Service) renumber(ctx context.Context, g *shard.Group, k streamKey, p storage.Progress) {
	s.m.rebuilt.WithLabelValues(s.cfg.Site).Inc()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	_, err := g.Propose(pctx, &peerv1.Command{Op: &peerv1.Command_Repair{Repair: &peerv1.RepairRecords{
		Origins: []*peerv1.RepairProgressMark{{Origin: s.cfg.Site, Seq: p.Seq, Hlc: p.HLC}},
	}}})
	if err != nil {
		s.log.Warn("moving the write sequence past another site's progress failed", "shard", k.sh.String(), "seq", p.Seq, "err", err)
		return
	}
	s.log.Warn("this replica's write sequence was behind another site's progress for it (rebuilt replica); moved past it", "shard", k.sh.String(), "seq", p.Seq)
}

// readOutbound returns origin's updates from next on (one batch) and the
// first sequence number the log holds for origin.
func (s *Service) readOutbound(g *shard.Group, origin string, next uint64) ([]*peerv1.RemoteWrite, uint64, error) {
	var out []*peerv1.RemoteWrite
	var first uint64
	err := g.Read(func(tx *storage.ShardTx) error {
		es, f, _, err := tx.ReadOutbound(origin, next, s.cfg.BatchEntries, s.cfg.BatchBytes)
		if err != nil {
			return err
		}
		first = f
		for _, e := range es {
			if e.Seq != next+uint64(len(out)) {
				break // a hole (never expected): ship up to it
			}
			w := &peerv1.RemoteWrite{}
			if err := proto.Unmarshal(e.Update, w); err != nil {
				return fmt.Errorf("%w: outbound entry %s/%d: %v", storage.ErrBadEncoding, origin, e.Seq, err)
			}
			out = append(out, w)
		}
		return nil
	})
	return out, first, err
}

// proposeStable proposes the stream's stable progress to g when it
// advanced, at most every StableEvery.
func (s *Service) proposeStable(ctx context.Context, g *shard.Group, k streamKey, st *stream) {
	st.mu.Lock()
	p := st.stable
	if p.Seq <= st.proposed.Seq && p.HLC <= st.proposed.HLC || time.Since(st.lastProp) < s.cfg.StableEvery {
		st.mu.Unlock()
		return
	}
	if cur := g.Geo().Stable[k.origin]; p.Seq <= cur.Seq && p.HLC <= cur.HLC {
		st.proposed = cur
		st.mu.Unlock()
		return
	}
	st.proposed, st.lastProp = p, time.Now()
	st.mu.Unlock()
	s.spawn(func() {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		defer cancel()
		if _, err := g.Propose(pctx, &peerv1.Command{Op: &peerv1.Command_Stable{Stable: &peerv1.Stable{Origin: k.origin, Seq: p.Seq, Hlc: p.HLC}}}); err != nil {
			st.mu.Lock()
			st.proposed = storage.Progress{}
			st.mu.Unlock()
		}
	})
}

// send calls Ship on a node of site: the one that answered last first.
func (s *Service) send(ctx context.Context, site string, req *peerv1.ShipRequest) (*peerv1.ShipResponse, error) {
	var resp *peerv1.ShipResponse
	err := s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
		var err error
		resp, err = c.Ship(ctx, req)
		return err
	})
	return resp, err
}

// callSite runs call against the nodes of site until one answers.
func (s *Service) callSite(ctx context.Context, site string, call func(context.Context, peerv1.ChainClient) error) error {
	cfg, _ := s.configs()
	nodes := cfg.Nodes(site)
	if len(nodes) == 0 {
		return fmt.Errorf("site %s has no known nodes", site)
	}
	s.mu.Lock()
	last := s.lastNode[site]
	s.mu.Unlock()
	order := make([]cluster.Node, 0, len(nodes))
	for _, n := range nodes {
		if n.ID == last {
			order = append([]cluster.Node{n}, order...)
		} else {
			order = append(order, n)
		}
	}
	var err error
	for _, n := range order {
		conn, cerr := s.conns.Conn(n.PeerAddr)
		if cerr != nil {
			err = cerr
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		err = call(cctx, peerv1.NewChainClient(conn))
		cancel()
		if err == nil {
			s.mu.Lock()
			s.lastNode[site] = n.ID
			s.mu.Unlock()
			return nil
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.Canceled {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

// pingLoop measures the round trip to every other site.
func (s *Service) pingLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.PingEvery)
	defer t.Stop()
	for {
		cfg, _ := s.configs()
		for _, site := range cfg.SiteNames() {
			if site == s.cfg.Site {
				continue
			}
			s.pingMu.Lock()
			ps := s.pings[site]
			busy := !ps.lastTry.IsZero() && ps.lastTry.After(ps.lastOK) && time.Since(ps.lastTry) < s.cfg.CallTimeout
			if !busy {
				ps.lastTry = time.Now()
				if ps.firstTry.IsZero() {
					ps.firstTry = ps.lastTry
				}
				s.pings[site] = ps
			}
			s.pingMu.Unlock()
			if busy {
				continue
			}
			s.spawn(func() {
				start := time.Now()
				var resp *peerv1.PingResponse
				err := s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
					var err error
					resp, err = c.Ping(ctx, &peerv1.PingRequest{FromSite: s.cfg.Site})
					return err
				})
				if err == nil && resp.GetSiteRemoved() && s.onRemoved != nil {
					s.onRemoved(resp.GetSite(), resp.GetNodeId(), resp.GetRemovedVersion())
				}
				rtt := time.Since(start)
				s.pingMu.Lock()
				ps := s.pings[site]
				ps.ok = err == nil
				if err == nil {
					ps.lastOK, ps.rtt = time.Now(), rtt
				}
				s.pings[site] = ps
				s.pingMu.Unlock()
				if err == nil {
					s.m.rtt.WithLabelValues(site).Set(rtt.Seconds())
				}
			})
		}
		if n := s.unreachableSites(cfg.SiteNames()); n != s.lastReach {
			s.log.Info("sites this node cannot reach", "count", n, "was", s.lastReach)
			s.lastReach = n
			s.m.unreachable.Set(float64(n))
			if s.onReach != nil {
				s.onReach(n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// unreached returns how long pings to site have failed, once they have
// failed for three ping rounds (0 before, or if a ping reached it since).
func (s *Service) unreached(site string) time.Duration {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	ps, ok := s.pings[site]
	if site == s.cfg.Site || !ok || ps.firstTry.IsZero() {
		return 0
	}
	since := ps.lastOK
	if since.IsZero() {
		since = ps.firstTry
	}
	if d := time.Since(since); d > 3*s.cfg.PingEvery {
		return d
	}
	return 0
}

// unreachableSites counts the other sites of sites that no ping has
// reached for three ping rounds, of those pinged for that long.
func (s *Service) unreachableSites(sites []string) int {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	n := 0
	for _, site := range sites {
		ps, ok := s.pings[site]
		if site == s.cfg.Site || !ok || ps.firstTry.IsZero() {
			continue
		}
		if quiet := 3 * s.cfg.PingEvery; time.Since(ps.firstTry) > quiet && time.Since(ps.lastOK) > quiet {
			n++
		}
	}
	return n
}

// pingOK returns when a ping last reached site.
func (s *Service) pingOK(site string) time.Time {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	return s.pings[site].lastOK
}

// RTT returns the last measured round trip to site and whether the last
// ping reached it, within the last three ping rounds.
func (s *Service) RTT(site string) (time.Duration, bool) {
	s.pingMu.Lock()
	defer s.pingMu.Unlock()
	p := s.pings[site]
	// A ping that hangs (the site cut off) leaves ok as the last answer
	// had it until the call times out: an answer older than three ping
	// rounds does not count.
	fresh := time.Since(p.lastOK) <= 3*s.cfg.PingEvery
	return p.rtt, p.ok && fresh
}

// lagOf sums, over the streams this node ships, what site has not applied
// yet: entries, and the age of the oldest. The age is how long this node
// has seen the site short of the stream's writes, and at most the time
// since the site's last applied write was written (the oldest pending
// write is newer than that one): on a quiet shard the latter alone would
// count the quiet time before the pending write as lag.
func (s *Service) lagOf(site string) (seconds float64, entries uint64, skipped bool) {
	s.mu.Lock()
	streams := make([]*stream, 0, len(s.shippers))
	for k := range s.shippers {
		streams = append(streams, s.streams[k])
	}
	s.mu.Unlock()
	now := time.Now()
	// A stream skips a site until its next call to it succeeds, and a
	// stream with nothing to ship makes none: a site a ping reached after
	// the skip is shipped to again (links.target), so it is not reported
	// skipped.
	lastOK := s.pingOK(site)
	for _, st := range streams {
		if st == nil {
			continue
		}
		st.mu.Lock()
		self, ok := st.known[s.cfg.Site]
		there, known := st.known[site]
		if at, sk := st.links.skippedAt[site]; sk && !lastOK.After(at) {
			skipped = true
		}
		behind := ok && known && there.Seq < self.Seq
		since, seen := st.behindSince[site]
		switch {
		case !behind:
			delete(st.behindSince, site)
		case !seen:
			since = now
			st.behindSince[site] = now
		}
		st.mu.Unlock()
		if !behind {
			continue
		}
		entries += self.Seq - there.Seq
		age := now.Sub(since)
		if wall, _ := causal.SplitHLC(there.HLC); wall > 0 {
			age = min(age, now.Sub(time.UnixMilli(int64(wall))))
		}
		seconds = max(seconds, age.Seconds())
	}
	return seconds, entries, skipped
}

// observeStability records how long this site's write p took to become
// globally stable (applied at every site of its chain).
func (s *Service) observeStability(p storage.Progress) {
	if wall, _ := causal.SplitHLC(p.HLC); wall > 0 {
		if now := uint64(time.Now().UnixMilli()); now >= wall {
			s.m.stabilitySec.Observe(float64(now-wall) / 1000)
		}
	}
}

// updateLagMetrics refreshes the per-site lag gauges and the age of the
// oldest version not yet globally stable.
func (s *Service) updateLagMetrics(cfg cluster.Config) {
	for _, site := range cfg.SiteNames() {
		if site == s.cfg.Site {
			continue
		}
		sec, n, _ := s.lagOf(site)
		s.m.lagSeconds.WithLabelValues(site).Set(sec)
		s.m.lagEntries.WithLabelValues(site).Set(float64(n))
	}
	var oldest float64
	now := uint64(time.Now().UnixMilli())
	// A stream's lock is never taken under s.mu: a shipper holds its
	// stream's lock while it asks for the last ping (pingMu).
	s.mu.Lock()
	own := make([]*stream, 0, len(s.shippers))
	for k, st := range s.streams {
		if k.origin == s.cfg.Site && s.shippers[k] != nil {
			own = append(own, st)
		}
	}
	s.mu.Unlock()
	for _, st := range own {
		st.mu.Lock()
		self, stable := st.known[s.cfg.Site], st.stable
		st.mu.Unlock()
		if self.Seq > stable.Seq {
			if wall, _ := causal.SplitHLC(stable.HLC); wall > 0 && now > wall {
				oldest = max(oldest, float64(now-wall)/1000)
			}
		}
	}
	s.m.oldestUnstable.Set(oldest)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func wait(ctx context.Context, ch <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-ch:
	case <-t.C:
	}
}

var _ = placement.Shard{}
