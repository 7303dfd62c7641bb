package geo

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/lockorder"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// Config tunes the chains. Zero fields take DefaultConfig's values.
type Config struct {
	// Site and NodeID identify this node.
	Site, NodeID string
	// HeartbeatEvery: a shipper with nothing new still sends its progress
	// and closed timestamp this often.
	HeartbeatEvery time.Duration
	// CloseEvery: an origin shard that wrote nothing for this long closes
	// its present (a Close command), so that every site's frontier for it
	// advances and garbage collection goes on.
	CloseEvery time.Duration
	// SkipAfter: a successor site unreachable for this long is skipped.
	SkipAfter time.Duration
	// CallTimeout bounds one call to a node of another site (a call to a
	// site tries its nodes in turn, each for up to CallTimeout).
	CallTimeout time.Duration
	// PingEvery: every remote site is pinged this often (round trip,
	// whether a skipped site is back).
	PingEvery time.Duration
	// BatchEntries and BatchBytes bound one shipped batch (one raft entry
	// at the receiver).
	BatchEntries, BatchBytes int
	// InFlight is how many batches of one stream (shard and origin) a
	// shipper sends to the next site before the first is answered; 1 is
	// stop-and-wait.
	InFlight int
	// LogCapBytes caps each origin's part of a shard's outbound log; a
	// site that needs what the cap dropped is repaired by anti-entropy.
	LogCapBytes uint64
	// DepWait is how long a receiver waits for an update's dependencies
	// before it applies the part of the batch before it and answers.
	DepWait time.Duration
	// AckEvery is how often an origin asks the next site for the chain's
	// progress while some of its writes are not globally stable yet.
	AckEvery time.Duration
	// StableEvery bounds how often a shard leader proposes new stable
	// progress (trimming the outbound log).
	StableEvery time.Duration
	// AntiEntropyEvery: each shard leader compares its shard with the next
	// site of its chain this often (0: DefaultConfig's; negative: only on
	// demand and on gaps).
	AntiEntropyEvery time.Duration
	// ReconcileEvery: how often the node re-checks which shards it leads.
	ReconcileEvery time.Duration
}

// DefaultConfig returns kvd's settings.
func DefaultConfig() Config {
	return Config{
		HeartbeatEvery: 500 * time.Millisecond, CloseEvery: 2 * time.Second,
		SkipAfter: 5 * time.Second, CallTimeout: 3 * time.Second, PingEvery: time.Second,
		BatchEntries: 512, BatchBytes: 1 << 20, InFlight: 4, LogCapBytes: 256 << 20,
		DepWait: time.Second, StableEvery: 200 * time.Millisecond, AckEvery: 50 * time.Millisecond,
		AntiEntropyEvery: 5 * time.Minute, ReconcileEvery: 200 * time.Millisecond,
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	for _, f := range []struct{ v, d *time.Duration }{
		{&c.HeartbeatEvery, &d.HeartbeatEvery}, {&c.CloseEvery, &d.CloseEvery}, {&c.SkipAfter, &d.SkipAfter},
		{&c.CallTimeout, &d.CallTimeout}, {&c.PingEvery, &d.PingEvery}, {&c.DepWait, &d.DepWait},
		{&c.StableEvery, &d.StableEvery}, {&c.ReconcileEvery, &d.ReconcileEvery}, {&c.AckEvery, &d.AckEvery},
		{&c.AntiEntropyEvery, &d.AntiEntropyEvery},
	} {
		if f.v == &c.AntiEntropyEvery && *f.v < 0 {
			continue // off
		}
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	if c.BatchEntries <= 0 {
		c.BatchEntries = d.BatchEntries
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = d.BatchBytes
	}
	if c.InFlight <= 0 {
		c.InFlight = d.InFlight
	}
	if c.LogCapBytes == 0 {
		c.LogCapBytes = d.LogCapBytes
	}
	if c.AntiEntropyEvery < 0 {
		c.AntiEntropyEvery = 0
	}
}

// Host gives this node's shard replicas.
type Host interface {
	Group(s placement.Shard) *shard.Group
	Groups() []*shard.Group
}

// Leaders finds a shard's leader in this site (the router).
type Leaders interface {
	LeaderTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error)
}

// Conns dials other nodes (peer.Pool).
type Conns interface {
	Conn(addr string) (*grpc.ClientConn, error)
}

// Configs returns the node's copy of the cluster configuration and a
// channel closed when it changes.
type Configs func() (cluster.Config, <-chan struct{})

// The order in which geo's locks may be taken (internal/lockorder, checked
// by the tests): a stream's lock, then the service's, then the pings'.
// Code that holds the service's lock never takes a stream's.
const (
	rankStream = iota + 1
	rankService
	rankPing
)

type streamKey struct {
	sh     placement.Shard
	origin string
}

// stream is what this node knows of one origin's updates to one shard.
type stream struct {
	mu lockorder.Mutex // rankStream
	// known: per chain site, the progress it applied (this site's own is
	// refreshed from the replica).
	known map[string]storage.Progress
	// stable: the progress every chain site applied (computed here when
	// this site is the origin, else received from upstream).
	stable   storage.Progress
	proposed storage.Progress // last stable progress proposed to the group
	lastProp time.Time
	links    links
	// probed: downstream sites whose progress was learned since this
	// shipper started or since a repair.
	probed   map[string]bool
	lastSent map[string]time.Time
	// behindSince: per chain site, when this node first saw it short of
	// this site's writes (cleared once it caught up): the lag's age.
	behindSince map[string]time.Time
	changed     chan struct{} // closed when known changes
	// serving counts the Ship calls of this stream this node handles now
	// (as its receiver), gapWaits those of them that wait for an earlier
	// batch (Service.waitEarlier); served is closed, and replaced,
	// whenever either changes.
	serving, gapWaits int
	served            chan struct{}
}

// serveChange adds d to the stream's calls under way and g to those that
// wait for an earlier batch, and wakes the calls that wait for either.
func (st *stream) serveChange(d, g int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.serving += d
	st.gapWaits += g
	close(st.served)
	st.served = make(chan struct{})
}

func newStream() *stream {
	return &stream{mu: lockorder.Mutex{Rank: rankStream, Name: "geo stream"}, known: map[string]storage.Progress{}, links: newLinks(), probed: map[string]bool{}, lastSent: map[string]time.Time{}, behindSince: map[string]time.Time{}, changed: make(chan struct{}), served: make(chan struct{})}
}

// noteKnown merges progress reports (the reporter's own progress is
// authoritative: it may go down after a site lost data).
func (st *stream) noteKnown(reporter string, ps []*peerv1.OriginProgress) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, p := range ps {
		if p.GetSite() == "" {
			continue
		}
		np := storage.Progress{Seq: p.Seq, HLC: p.Hlc}
		if p.Site != reporter {
			np = maxProgress(st.known[p.Site], np)
		}
		st.known[p.Site] = np
	}
	close(st.changed)
	st.changed = make(chan struct{})
}

// Service runs the chains of this node's shard leaders and serves the
// peer Chain service.
type Service struct {
	peerv1.UnimplementedChainServer
	cfg     Config
	host    Host
	leaders Leaders
	configs Configs
	conns   Conns
	log     *slog.Logger
	m       *Metrics

	mu       lockorder.Mutex                  // rankService
	streams  map[streamKey]*stream            // REQUIRES: mu
	shippers map[streamKey]context.CancelFunc // REQUIRES: mu
	chainSet map[placement.Shard]bool         // SetChain in flight; REQUIRES: mu
	aeLast   map[placement.Shard]time.Time    // last periodic anti-entropy; REQUIRES: mu
	aeBusy   map[repairKey]bool               // REQUIRES: mu
	lastNode map[string]string                // per site: the node that answered last; REQUIRES: mu
	stop     chan struct{}                    // closed when Run is ending, before it waits for its goroutines
	stopping bool                             // Run is ending: no new goroutines; REQUIRES: mu
	wg       sync.WaitGroup

	// joinMarked: per shard and joined site, the join version this node
	// knows that site holds this site's join mark for (join.go).
	joinMarked map[repairKey]uint64 // REQUIRES: mu
	// joinedKS and joinedShards: this site's joins found complete, per
	// keyspace and per shard (join.go).
	joinedKS     map[string]joined          // REQUIRES: mu
	joinedShards map[placement.Shard]joined // REQUIRES: mu

	// pingMu guards pings on its own: shippers read them while they hold
	// their stream's lock, and code that holds mu takes stream locks.
	pingMu lockorder.Mutex      // rankPing
	pings  map[string]pingState // per site; REQUIRES: pingMu

	onReach   func(unreachable int)                       // see OnReach; set before Run
	onRemoved func(bySite, byNode string, version uint64) // see OnRemoved; set before Run
	lastReach int                                         // pingLoop's
}

type pingState struct {
	lastOK, lastTry, firstTry time.Time
	rtt                       time.Duration
	ok                        bool
}

// OnReach sets f to be called, from the ping loop, whenever the number
// of other sites this node has not reached for three ping rounds changes
// (the server announces it in gossip: docs/adr/031). Call it before Run.
func (s *Service) OnReach(f func(unreachable int)) { s.onReach = f }

// OnRemoved sets f to be called, from the ping loop, when a node of
// another site answers that its cluster configuration removed this
// node's site from the cluster for good (at configuration version
// version). Call it before Run.
func (s *Service) OnRemoved(f func(bySite, byNode string, version uint64)) { s.onRemoved = f }

// New returns the service; Run starts its loops.
func New(cfg Config, host Host, leaders Leaders, configs Configs, conns Conns, logger *slog.Logger, m *Metrics) *Service {
	cfg.fill()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = newMetrics()
	}
	return &Service{
		mu:     lockorder.Mutex{Rank: rankService, Name: "geo.Service.mu"},
		pingMu: lockorder.Mutex{Rank: rankPing, Name: "geo.Service.pingMu"},
		cfg:    cfg, host: host, leaders: leaders, configs: configs, conns: conns, log: logger, m: m,
		streams: map[streamKey]*stream{}, shippers: map[streamKey]context.CancelFunc{},
		chainSet: map[placement.Shard]bool{}, aeLast: map[placement.Shard]time.Time{}, aeBusy: map[repairKey]bool{},
		joinMarked: map[repairKey]uint64{}, joinedKS: map[string]joined{}, joinedShards: map[placement.Shard]joined{},
		pings: map[string]pingState{}, lastNode: map[string]string{}, stop: make(chan struct{}),
	}
}

func (s *Service) stream(k streamKey) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[k]
	if st == nil {
		st = newStream()
		s.streams[k] = st
	}
	return st
}

func shardOf(g *shard.Group) placement.Shard {
	id := g.ID()
	return placement.Shard{Keyspace: id.Keyspace, ID: id.Shard}
}

// keyspace returns the keyspace of sh as this node knows it, if this site
// holds it.
func (s *Service) keyspace(sh placement.Shard) (cluster.Keyspace, bool) {
	cfg, _ := s.configs()
	ks, ok := cfg.Keyspace(sh.Keyspace)
	if !ok || !ks.Holds(s.cfg.Site) || sh.ID >= ks.Shards {
		return cluster.Keyspace{}, false
	}
	return ks, true
}

// Run reconciles the shippers with the shards this node leads until ctx
// ends, and pings the other sites.
func (s *Service) Run(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.pingLoop(ctx)
	}()
	t := time.NewTicker(s.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		_, changed := s.configs()
		s.reconcile(ctx)
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.stopping = true
			for k, cancel := range s.shippers {
				cancel()
				delete(s.shippers, k)
			}
			s.mu.Unlock()
			// The detached repairs (a site's join repair, retrying
			// while the site is out of reach or its versions are not
			// stable; an operator's repair) end on stop: close it
			// before waiting for them, or the wait never ends and the
			// node never stops.
			close(s.stop)
			s.wg.Wait()
			return
		case <-changed:
		case <-t.C:
		}
	}
}

// reconcile starts and stops shippers, sets chains, and starts periodic
// anti-entropy.
func (s *Service) reconcile(ctx context.Context) {
	cfg, _ := s.configs()
	want := map[streamKey]*shard.Group{}
	var outBytes uint64
	joining := 0
	for _, g := range s.host.Groups() {
		// A new leader whose state machine has not applied what its log
		// committed yet would ship, compare and number from a stale
		// progress: a chain neighbour that applied more of this site's
		// writes would take it for a replica that lost its data (a repair
		// that sends versions ahead of their dependencies, or renumbered
		// writes). It waits until it caught up.
		if !g.IsLeader() || (!g.CaughtUp() && !guards.Off(guards.LeaderCaughtUp)) {
			continue
		}
		sh := shardOf(g)
		ks, ok := cfg.Keyspace(sh.Keyspace)
		if !ok || !ks.Holds(s.cfg.Site) {
			continue
		}
		if joiningShard(g, ks, s.cfg.Site) {
			joining++
		}
		geo := g.Geo()
		desired := ks.Sites
		if len(desired) < 2 {
			desired = nil
		}
		if !slices.Equal(geo.Chain, desired) {
			s.setChain(ctx, g, sh, geo.Chain, desired)
			continue
		}
		if desired == nil {
			continue
		}
		for _, origin := range desired {
			chain := ks.Chain(origin)
			if p := position(chain, s.cfg.Site); p >= 0 && p < len(chain)-1 {
				want[streamKey{sh, origin}] = g
			}
		}
		_ = g.Read(func(tx *storage.ShardTx) error { outBytes += tx.OutboundBytes(); return nil })
		s.maybeJoinRepairs(g, sh, ks)
		s.maybeAntiEntropy(ctx, g, sh, ks)
	}
	s.m.outboundBytes.Set(float64(outBytes))
	s.m.joiningShards.Set(float64(joining))
	s.startShippers(ctx, want)
	s.updateLagMetrics(cfg)
}

// startShippers starts a shipper for every stream in want that has none
// and stops those not wanted any more.
func (s *Service) startShippers(ctx context.Context, want map[streamKey]*shard.Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, cancel := range s.shippers {
		if want[k] == nil {
			cancel()
			delete(s.shippers, k)
		}
	}
	for k, g := range want {
		if _, ok := s.shippers[k]; ok {
			continue
		}
		if s.stopping {
			return
		}
		sctx, cancel := context.WithCancel(ctx)
		s.shippers[k] = cancel
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ship(sctx, g, k)
			s.mu.Lock()
			if s.shippers[k] != nil && sctx.Err() == nil {
				// Ended on its own (lost the leadership): let the next
				// reconcile start it again if needed.
				delete(s.shippers, k)
			}
			s.mu.Unlock()
			cancel()
		}()
	}
}

// setChain proposes the shard's chain, once at a time per shard; sites
// added to the chain are then brought up to date by anti-entropy (what
// was written before they joined is in no outbound log).
func (s *Service) setChain(ctx context.Context, g *shard.Group, sh placement.Shard, old, desired []string) {
	s.mu.Lock()
	if s.chainSet[sh] {
		s.mu.Unlock()
		return
	}
	s.chainSet[sh] = true
	s.mu.Unlock()
	s.spawn(func() {
		defer func() { s.mu.Lock(); delete(s.chainSet, sh); s.mu.Unlock() }()
		if err := s.proposeChain(ctx, g, sh, old, desired); err != nil {
			s.log.Debug("setting the chain failed", "shard", sh.String(), "err", err)
		}
	})
}

// spawn runs f in a goroutine that Run waits for before it returns. Once
// Run is ending it runs nothing and returns false: requests are still
// served while the node stops.
func (s *Service) spawn(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
	return true
}

// proposeChain sets the shard's chain to desired (was old) and brings
// the sites added to it up to date. A replica that had no chain first
// learns how far the other sites got with this site's writes and numbers
// its next writes after that: if it was rebuilt from nothing, its new
// writes would otherwise reuse sequence numbers the others took for
// duplicates.
func (s *Service) proposeChain(ctx context.Context, g *shard.Group, sh placement.Shard, old, desired []string) error {
	if len(old) == 0 {
		s.adoptOwnProgress(ctx, g, sh, desired)
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	if _, err := g.Propose(pctx, &peerv1.Command{Op: &peerv1.Command_SetChain{SetChain: &peerv1.SetChain{Sites: desired, LogCapBytes: s.cfg.LogCapBytes}}}); err != nil {
		return fmt.Errorf("%s: setting the chain of sites %v: %w", sh, desired, err)
	}
	s.log.Info("shard chain set", "shard", sh.String(), "chain", desired, "was", old)
	s.chainChanged(g, sh, old, desired)
	return nil
}

// adoptOwnProgress asks the other sites of chain (in parallel, each within
// CallTimeout) how far they applied this site's writes to sh, and moves
// this replica's write sequence past the furthest. Sites that do not
// answer are passed over: a rebuilt replica that could not learn their
// progress is found out when it ships to them, and repaired.
func (s *Service) adoptOwnProgress(ctx context.Context, g *shard.Group, sh placement.Shard, chain []string) {
	var mu sync.Mutex
	var best storage.Progress
	var wg sync.WaitGroup
	for _, site := range chain {
		if site == s.cfg.Site {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.callSite(ctx, site, func(ctx context.Context, c peerv1.ChainClient) error {
				resp, err := c.SiteDigest(ctx, &peerv1.SiteDigestRequest{Keyspace: sh.Keyspace, Shard: sh.ID})
				if err != nil {
					return err
				}
				for _, p := range resp.Origins {
					if p.GetSite() == s.cfg.Site {
						mu.Lock()
						best = maxProgress(best, storage.Progress{Seq: p.Seq, HLC: p.Hlc})
						mu.Unlock()
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if best.Seq > g.Geo().Local.Seq {
		s.renumber(ctx, g, streamKey{sh, s.cfg.Site}, best)
	}
}

// detached returns a context for background work started by a request
// (it outlives the request): it ends when Run ends or cancel is called.
func (s *Service) detached() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// EnsureChain implements router.Durability: a leader whose replica has
// not set the chain the configuration gives sets it before the write.
func (s *Service) EnsureChain(ctx context.Context, sh placement.Shard, g *shard.Group) error {
	ks, ok := s.keyspace(sh)
	if !ok || len(ks.Sites) < 2 {
		return nil
	}
	old := g.Geo().Chain
	if slices.Equal(old, ks.Sites) {
		return nil
	}
	return s.proposeChain(ctx, g, sh, old, ks.Sites)
}

// chainChanged brings the sites added to a shard's chain up to date by
// anti-entropy (what was written before they joined is in no outbound
// log). Versions not yet globally stable when the site joined (written
// while the shard had no chain, or while the site was not in it) are
// held back by a stable repair; it runs again until none is, as the new
// chain's progress makes them stable: no chain brings them to the site.
// When a site left the chain, it compares with the remaining sites once.
func (s *Service) chainChanged(g *shard.Group, sh placement.Shard, old, chain []string) {
	for _, site := range chain {
		if site != s.cfg.Site && !slices.Contains(old, site) {
			s.launchRepairUntilSent(s.detached, g, sh, site, "site joined the chain")
		}
	}
	// A site that left the chain (taken out of the keyspace, or removed
	// from the cluster) no longer has a chain for its writes: those that
	// reached this site and not yet the next ones would wait for the
	// periodic anti-entropy. Compare with the other sites now (a stable
	// repair sends an origin that left the keyspace in full), and again
	// after a failure: a site out of reach when the change came (the
	// reason the writes had not reached it) gets them once it is back
	// (TestSiteRemovalPassesOnTheRemovedSitesWrites).
	left := slices.ContainsFunc(old, func(site string) bool { return !slices.Contains(chain, site) })
	if left && len(chain) >= 2 {
		for _, site := range chain {
			if site != s.cfg.Site && slices.Contains(old, site) {
				s.launchRepairLoop(s.detached, g, sh, site, repairStable, "a site left the chain", repairRetry)
			}
		}
	}
}

// ChainLength implements router.Durability.
func (s *Service) ChainLength(sh placement.Shard) int {
	ks, ok := s.keyspace(sh)
	if !ok {
		return 1
	}
	return len(ks.Sites)
}

// WaitDurable implements router.Durability: it waits until the first n
// sites of this site's chain for sh applied this site's write seq.
func (s *Service) WaitDurable(ctx context.Context, sh placement.Shard, seq uint64, n int) error {
	ks, ok := s.keyspace(sh)
	if !ok {
		return fmt.Errorf("keyspace %s is not held here", sh.Keyspace)
	}
	chain := ks.Chain(s.cfg.Site)
	if n > len(chain) {
		n = len(chain)
	}
	st := s.stream(streamKey{sh, s.cfg.Site})
	for {
		st.mu.Lock()
		done := true
		for _, site := range chain[1:n] {
			if st.known[site].Seq < seq {
				done = false
				break
			}
		}
		ch := st.changed
		st.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
