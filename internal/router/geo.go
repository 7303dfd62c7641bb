package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/deadline"
	"github.com/causeway-db/causeway/internal/guards"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

// ErrRemoteDurability: a write committed at this site, but the sites its
// durability asked for did not confirm it in time. It is not lost here
// and still travels down its chain; retrying with the same request id
// does not write it twice.
var ErrRemoteDurability = errors.New("router: committed locally, remote durability unconfirmed")

// ErrDurability: a durability level the keyspace cannot give (more sites
// than hold it).
var ErrDurability = errors.New("router: durability cannot be met")

// DurabilityWait is how long a SITES(n) or ALL write waits for the other
// sites when its request has no deadline.
const DurabilityWait = 10 * time.Second

// Durability waits until the first sites of a write's chain applied it
// (internal/geo).
type Durability interface {
	// ChainLength returns how many sites the shard's chain has (1: one
	// site).
	ChainLength(sh placement.Shard) int
	// WaitDurable waits until the first n sites of this site's chain for
	// sh applied this site's write with outbound sequence number seq.
	WaitDurable(ctx context.Context, sh placement.Shard, seq uint64, n int) error
	// EnsureChain sets the chain of g (this node's replica of sh, which
	// leads) if the configuration gives the keyspace more sites than the
	// replica knows, so that no write of a replicated keyspace misses the
	// outbound log.
	EnsureChain(ctx context.Context, sh placement.Shard, g *shard.Group) error
	// WaitSiteApplied waits until a replica of every shard this site holds
	// (of a keyspace other sites hold too) applied the other sites'
	// writes up to hlc, and returns the largest newest HLC of those
	// replicas.
	WaitSiteApplied(ctx context.Context, hlc uint64) (uint64, error)
	// WaitObserved waits until this site applied every observed version
	// (causal.Session.Observed) of other sites, and returns the largest
	// newest HLC of the replicas it checked.
	WaitObserved(ctx context.Context, observed []causal.Dependency) (uint64, error)
	// Joined returns an error wrapping ErrJoining while this site may not
	// serve reads of keyspace: it joined the keyspace after its creation
	// and a shard still waits for the join repair of a site it needs
	// (docs/adr/019). Once every shard has them, it returns the newest HLC
	// of the replicas it found them on (0 for a keyspace this site did not
	// join).
	Joined(ctx context.Context, keyspace string) (uint64, error)
	// HasSite reports whether the cluster configuration has site.
	HasSite(site string) bool
	// ClusterID returns the cluster's id (0: not known yet; see
	// cluster.Config.ID).
	ClusterID() uint64
}

// ErrJoining: this site joined the keyspace after its creation and a shard
// of it has not received every other site's join repair yet; until then
// the site could show a version before one it depends on, on another
// shard (docs/adr/019). Retryable (here, later, or at another site).
var ErrJoining = errors.New("router: keyspace not served here during its join")

// CheckJoined refuses a read of a keyspace this site is still joining
// (ErrJoining; guard join-gate), and a compare-and-swap, which decides on
// what the site holds. Once the join is complete, it raises the
// session's PastHLC to the newest HLC of the replicas the join repairs
// were found complete on: a replica of any shard that reached it applied
// them, so none that lags behind them serves the session a version
// without what it depends on. A request forwarded inside the site was
// checked by the node that took it.
func (r *Router) CheckJoined(ctx context.Context, c *Call) error {
	if r.durability == nil || hopsIn(ctx) > 0 || guards.Off(guards.JoinGate) {
		return nil
	}
	stamp, err := r.durability.Joined(ctx, c.Keyspace)
	if err != nil {
		r.metrics.joinRefusals.Inc()
		return err
	}
	c.ObserveStamp(stamp)
	return nil
}

// ErrSessionMoved: a session that was served at another site arrived here
// before this site applied its causal past. Retryable (here, later, or at
// the session's previous site).
var ErrSessionMoved = errors.New("router: this site has not applied the session's causal past yet")

// ErrForeignSession: a session token names a site this cluster does not
// have (a token of another cluster, or of a site that was removed). Its
// causal past can never arrive here; the client must start a new session.
var ErrForeignSession = errors.New("router: the session comes from a site this cluster does not have")

// ErrClockAhead: a timestamp a client sent (in its session token, or as a
// GetTxn snapshot) is further ahead of this node's clock than
// Config.MaxClockAhead. The clock would observe it.
var ErrClockAhead = errors.New("router: a timestamp of the request is ahead of this node's clock")

// ErrSnapshotTooOld: a GetTxn snapshot older than the version retention,
// whose versions garbage collection may have removed.
var ErrSnapshotTooOld = errors.New("router: the snapshot is older than the version retention")

// leaderWait is how long a request may wait for a shard's leader: up to
// LeaderWait, ending early enough before ctx's deadline for the caller to
// hear why (deadline.Budget).
func (r *Router) leaderWait(ctx context.Context) time.Duration {
	return deadline.Budget(ctx, r.cfg.LeaderWait)
}

// checkAhead refuses a client's timestamp hlc (what names it) that is
// further ahead of this node's physical clock than MaxClockAhead
// (guard clock-ahead).
func (r *Router) checkAhead(what string, hlc uint64) error {
	now := r.clock.Physical()
	limit := now + uint64(r.cfg.MaxClockAhead.Milliseconds())<<causal.LogicalBits
	if hlc <= limit || guards.Off(guards.ClockAhead) {
		return nil
	}
	wall, _ := causal.SplitHLC(hlc)
	nowWall, _ := causal.SplitHLC(now)
	ahead := "more than 100 years"
	if d := wall - nowWall; d < uint64(100*365*24*time.Hour/time.Millisecond) {
		ahead = (time.Duration(d) * time.Millisecond).String()
	}
	return fmt.Errorf("%w: %s (HLC %s) is %s ahead of it, more than the %v allowed: a token or snapshot that no node issued, or a node whose clock runs ahead (check NTP); start a new session", ErrClockAhead, what, causal.FormatHLC(hlc), ahead, r.cfg.MaxClockAhead)
}

// ErrLostSession: a session observed a write of this site that the site
// does not hold (its data was deleted or lost since). Waiting cannot
// help; the client must start a new session.
var ErrLostSession = errors.New("router: the session observed writes this site no longer holds")

// Arrive prepares c's session for this site. A session last served at
// another site (it moved, or its client failed over) carries floors that
// hold there: this site may not have applied yet what it read there, nor
// those versions' causal past. So this site first waits, up to MoveWait,
// until it applied every version the session observed (its floors per
// shard and origin, docs/adr/019): it applied every other site's write
// only after the writes that write depends on, so it then holds the
// session's whole causal past. A narrowed token (a partial session) does
// not show every floor: this site then waits until a replica of every
// shard it holds applied every other site's writes up to the session's
// MaxHLC, which covers the whole past too, but needs every origin's
// progress (or closed timestamps) to reach it. The session's PastHLC then
// rises to the newest HLC of the replicas waited on, which covers the
// stamps of what they applied (storage.Record.Stamp), so any replica of
// this site that reaches it holds that past too. A session of this site,
// or a new one, passes at once.
func (r *Router) Arrive(ctx context.Context, c *Call) error {
	s := c.Session
	if err := r.checkAhead("the session's newest timestamp", max(s.MaxHLC, s.PastHLC)); err != nil {
		return err
	}
	if r.durability != nil {
		id := r.durability.ClusterID()
		if id == 0 && s.Cluster != 0 && !s.IsEmpty() {
			// A node that has just started may not hold the cluster's
			// configuration yet: wait a moment for it, so that a session
			// of another cluster is told so rather than failing on its
			// floors.
			id = r.waitClusterID(ctx)
		}
		if id != 0 {
			if s.Cluster != 0 && s.Cluster != id && !s.IsEmpty() && !guards.Off(guards.ClusterSession) {
				return fmt.Errorf("%w: the session token belongs to another cluster (id %016x; this cluster is %016x): its floors name versions this cluster never held; start a new session (kvctl starts one by itself)", ErrForeignSession, s.Cluster, id)
			}
			s.Cluster = id
			c.Observed.Cluster = id
		}
	}
	if s.Site == "" || s.Site == r.cfg.Site || hopsIn(ctx) > 0 {
		s.Site = r.cfg.Site
		c.Observed.Site = r.cfg.Site
		return nil
	}
	from := s.Site
	if r.durability != nil && !r.durability.HasSite(from) {
		return fmt.Errorf("%w: the session was last served at site %q, which is not a site of this cluster (a session token of another cluster, or of a removed site); start a new session (kvctl: --session-file none, or delete the session file)", ErrForeignSession, from)
	}
	if r.durability != nil && !guards.Off(guards.SessionArrival) {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, deadline.Budget(ctx, r.cfg.MoveWait))
		var stamp uint64
		var err error
		what := "the versions it observed"
		if s.Partial {
			what = fmt.Sprintf("every write up to HLC %s", causal.FormatHLC(s.MaxHLC))
			if s.MaxHLC > 0 {
				stamp, err = r.durability.WaitSiteApplied(wctx, s.MaxHLC)
			}
		} else {
			stamp, err = r.durability.WaitObserved(wctx, s.Observed())
		}
		cancel()
		if err != nil {
			r.metrics.moves.WithLabelValues("timeout").Inc()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: the session was last served at site %s; site %s has not applied %s (this attempt waited %v: %v); retry, or use site %s", ErrSessionMoved, from, r.cfg.Site, what, time.Since(start).Round(time.Millisecond), err, from)
		}
		r.metrics.moves.WithLabelValues("arrived").Inc()
		r.metrics.moveWaitSec.Observe(time.Since(start).Seconds())
		s.ObserveHLC(stamp)
		c.Observed.ObserveHLC(stamp)
	}
	s.Site = r.cfg.Site
	c.Observed.Site = r.cfg.Site
	return nil
}

// SetDurability sets what SITES(n) and ALL writes wait on. Call before
// serving.
func (r *Router) SetDurability(d Durability) { r.durability = d }

// LeaderTarget returns this node's replica of sh if it leads, or the peer
// address of the leader; it waits up to LeaderWait for an election.
func (r *Router) LeaderTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error) {
	return r.leaderTarget(ctx, sh)
}

// ForwardCtx marks ctx as forwarded once more (loops end at a bound).
func ForwardCtx(ctx context.Context) context.Context { return forwardCtx(ctx) }

// clusterIDWait bounds how long a request waits for a node that has just
// started to learn its cluster's id (Arrive).
const clusterIDWait = 2 * time.Second

// waitClusterID polls for the cluster's id, up to clusterIDWait (0 if it
// is still unknown).
func (r *Router) waitClusterID(ctx context.Context) uint64 {
	deadline := time.Now().Add(deadline.Budget(ctx, clusterIDWait))
	for {
		if id := r.durability.ClusterID(); id != 0 || !time.Now().Before(deadline) {
			return id
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sitesWanted returns how many sites of the chain a write's durability
// asks for (1: this site only).
func sitesWanted(o *kvv1.WriteOptions, chain int) (int, error) {
	if o == nil {
		return 1, nil
	}
	switch o.Durability {
	case kvv1.Durability_DURABILITY_SITES:
		n := int(o.MinSites)
		if n > chain {
			return 0, fmt.Errorf("%w: SITES(%d) but the keyspace is held by %d site(s)", ErrDurability, n, chain)
		}
		return max(n, 1), nil
	case kvv1.Durability_DURABILITY_ALL:
		return chain, nil
	default:
		return 1, nil
	}
}

// checkDurability refuses, before anything is written, a durability the
// keyspace cannot give.
func (r *Router) checkDurability(sh placement.Shard, o *kvv1.WriteOptions) error {
	chain := 1
	if r.durability != nil {
		chain = max(1, r.durability.ChainLength(sh))
	}
	_, err := sitesWanted(o, chain)
	return err
}

// waitDurable waits, for a write committed here, until as many sites as
// its durability asks for applied it.
func (r *Router) waitDurable(ctx context.Context, sh placement.Shard, res fsm.Result, o *kvv1.WriteOptions) error {
	if r.durability == nil {
		return nil
	}
	n, err := sitesWanted(o, max(1, r.durability.ChainLength(sh)))
	if err != nil || n <= 1 {
		return err
	}
	if res.Seq == 0 {
		// The write entered no outbound log: the shard's chain was being
		// set up when it committed, or this is a retry of a write whose
		// deduplication record an earlier release kept without its
		// sequence number.
		return fmt.Errorf("%w: version %v committed at site %s outside the shard's chain of sites (the chain was being set up); it reaches the other sites by anti-entropy, but its durability cannot be confirmed: write the key again to wait for the sites", ErrRemoteDurability, res.Version, r.cfg.Site)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, deadline.Budget(ctx, DurabilityWait))
	defer cancel()
	if err := r.durability.WaitDurable(wctx, sh, res.Seq, n); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A retried request (the same request id) finds the write
		// committed by its first attempt: the time since the commit,
		// from the version's clock reading, says how long the sites have
		// had.
		waited := time.Since(start)
		if wall, _ := causal.SplitHLC(res.Version.HLC); wall > 0 {
			if since := time.Since(time.UnixMilli(int64(wall))); since > waited && since < 24*time.Hour {
				waited = since
			}
		}
		return fmt.Errorf("%w: version %v is committed and applied at site %s; the first %d sites of its chain (%s included) had not all applied it %v after its commit (%v); it is not lost and keeps propagating", ErrRemoteDurability, res.Version, r.cfg.Site, n, r.cfg.Site, waited.Round(time.Millisecond), err)
	}
	r.metrics.durableWaitSec.Observe(time.Since(start).Seconds())
	return nil
}
