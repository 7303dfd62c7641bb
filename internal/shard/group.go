package shard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/logging"
	"github.com/causeway-db/causeway/internal/raftutil"
	"github.com/causeway-db/causeway/internal/recovery"
	"github.com/causeway-db/causeway/internal/snapstore"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/wal"
)

// Errors returned by Group methods.
var (
	// ErrNotLeader: this replica is not the shard leader; nothing was
	// proposed. Retryable.
	ErrNotLeader = errors.New("shard: not the leader")
	// ErrLeadershipLost: the replica lost leadership while a proposal was
	// in flight; it may or may not commit. Retry only with a request id.
	ErrLeadershipLost = errors.New("shard: leadership lost; outcome unknown")
	// ErrStopped: the group was closed or stopped on a fatal error.
	ErrStopped = errors.New("shard: replica stopped")
	// ErrTimeout: raft did not accept or finish the operation in time.
	// Retryable; the outcome of a write may be unknown.
	ErrTimeout = errors.New("shard: timed out")
	// ErrStaleGeneration: the replica on disk belongs to an older
	// generation of its group than Deps.Generation: a recovery gave it up
	// (docs/adr/014). It must be deleted, never opened.
	ErrStaleGeneration = errors.New("shard: the replica belongs to an older generation of its group")
	// ErrUnsafeRecovery is returned when a replica is asked to go on alone
	// but may not (recovery.ErrUnsafe): forcing it could drop entries the
	// servers of its configuration committed without it.
	ErrUnsafeRecovery = recovery.ErrUnsafe
)

// defaultTimeout bounds raft operations whose context has no deadline.
const defaultTimeout = 10 * time.Second

// Deps are a group's collaborators.
type Deps struct {
	// DB holds the shard's MVCC state; LogDB its raft log and stable store.
	DB        *storage.DB
	LogDB     *storage.RaftLogs
	Clock     *causal.Clock
	Logger    *slog.Logger
	Metrics   *Metrics
	NodeID    string
	Transport raft.Transport
	// Bootstrap creates the group when it has no state yet, with Peers as
	// voters (itself alone when Peers is empty). Without it, a group with
	// no state waits to be added by the group's leader.
	Bootstrap bool
	// Peers are the voters a brand-new group is bootstrapped with (itself
	// included). Ignored when the group already has state.
	Peers []raft.Server
	// ConfirmBootstrap, if set, is called before a group with no state is
	// bootstrapped; an error fails Open, which then creates nothing. The
	// caller checks there that the group is still to be created here (a
	// node whose copy of the placement map lags, replaying the site
	// catalog's log after a restart, must not create a group its site
	// gave to other nodes long ago).
	ConfirmBootstrap func() error
	// Recover, when set, makes the replica go on as the only voter of its
	// group before raft starts (recovery.Alone): without Force only a
	// two-voter group that lost the other voter, giving up its non-voters
	// too (docs/adr/013, 023), with it
	// whatever the group was (docs/adr/014).
	Recover *recovery.Options
	// Generation is the shard's generation in the placement map
	// (placement.Map.Generations). A replica with no state starts it; one
	// of an older generation fails to open with ErrStaleGeneration; after a
	// Recover the replica takes it (the caller passes the new one). Raft
	// traffic only flows between replicas of one generation.
	Generation uint64
	// TakeGeneration makes a replica of an older generation take
	// Generation instead of failing: the caller knows it is the shard's
	// only voter, so there is no other copy to rebuild it from.
	TakeGeneration bool
	// OnFatal, if set, is called once when the replica stops on a fatal
	// error (its state machine refused a committed command, or its raft
	// log cannot be written: wal.ErrFailed): the node cannot go on serving
	// the shard and should stop.
	OnFatal func(error)
	// Done, if set, is closed when the node begins to stop: background
	// loops (garbage collection) end at once, before Close.
	Done <-chan struct{}
	// Replicas reaches the group's other replicas for consistency checks;
	// nil turns the checks off.
	Replicas Peers
}

// Group is this node's replica of one shard.
type Group struct {
	id    storage.ShardID
	cfg   Config
	deps  Deps
	raft  *raft.Raft
	fsm   *fsm.FSM
	log   *slog.Logger
	label string

	readyMu    sync.Mutex
	readyTerm  uint64 // term whose barrier has applied; REQUIRES: readyMu
	caughtUp   uint64 // term in which CaughtUp last held as leader; REQUIRES: readyMu
	target     uint64 // the log's last command when the leader first checked; REQUIRES: readyMu
	targetTerm uint64 // the term target was read in; REQUIRES: readyMu
	logs       raft.LogStore
	gen        uint64 // generation of the replica (fixed while open)
	verifier   verifier
	leases     leaseTransport // nil: the transport keeps no promises (lease.go)
	// lostUpTo is the index up to which the state database applied
	// entries the log lost (checkLogKept), 0 if it lost none: the
	// replica's votes are held until its log reaches it (lease.go).
	lostUpTo uint64
	checks   checker // replica consistency checks (digest.go)

	// closeWant is the highest HLC a read asked this replica, as leader,
	// to close (AdvanceClosed), closeDemand until when (unix nanoseconds)
	// the leader keeps closing at CloseInterval; closeKick wakes
	// closeLoop. lastAdvance is when this replica last applied a Close or
	// a write of this site that raised the shard's newest HLC (unix
	// nanoseconds), which tells followers a cadence is running.
	closeWant   atomic.Uint64
	closeDemand atomic.Int64
	closeKick   chan struct{}
	lastAdvance atomic.Int64

	// paused, while set, holds every apply until it is closed
	// (PauseApplyForTest).
	paused atomic.Pointer[chan struct{}]
	// publishPaused, while set, holds every stored batch before the state
	// machine publishes it (PausePublishForTest).
	publishPaused atomic.Pointer[chan struct{}]

	// failure is the error the replica stopped on (Failure), set once;
	// running is set once raft has started (g.raft is set).
	failure   atomic.Pointer[error]
	failOnce  sync.Once
	running   atomic.Bool
	stop      chan struct{}
	down      chan struct{} // closed once raft has shut down
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// applyGate holds an apply while the replica's applies are paused.
func (g *Group) applyGate() { g.gate(&g.paused) }

// publishGate holds a stored batch while publishing is paused.
func (g *Group) publishGate() { g.gate(&g.publishPaused) }

func (g *Group) gate(p *atomic.Pointer[chan struct{}]) {
	if ch := p.Load(); ch != nil {
		select {
		case <-*ch:
		case <-g.stop:
		}
	}
}

// Open starts this node's replica of shard id.
func Open(id storage.ShardID, cfg Config, deps Deps) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.LogDB == nil {
		return nil, errors.New("shard: Deps.LogDB is required")
	}
	g := &Group{
		id:    id,
		cfg:   cfg,
		deps:  deps,
		log:   deps.Logger.With("shard", id.String()),
		label: id.String(),
		stop:  make(chan struct{}),
		down:  make(chan struct{}),

		closeKick: make(chan struct{}, 1),
	}
	f, err := fsm.New(id, deps.DB, g.log, fsm.Hooks{Fatal: g.onFatal, Digest: g.digestHook(), Restored: g.checks.restored,
		Advanced: func() { g.lastAdvance.Store(time.Now().UnixNano()) }, Gate: g.applyGate, Publish: g.publishGate})
	if err != nil {
		return nil, err
	}
	g.fsm = f
	g.verifier.round = func() error {
		// raft's heartbeats go at once while it verifies (transport.LeaderVerifier).
		if v, ok := deps.Transport.(interface{ VerifyingLeader() func() }); ok {
			defer v.VerifyingLeader()()
		}
		// raft abandons a verification still queued when it shuts down.
		return g.wait(context.Background(), g.raft.VerifyLeader())
	}
	g.verifier.done = deps.Metrics.observeLeaderCheck

	hl := logging.HCLog(g.log, "raft", hclog.Warn)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(deps.NodeID)
	rc.Logger = hl
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	// Proposals queued in the buffered apply channel are never answered
	// when raft shuts down; Group.wait does not wait for them.
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotCountInterval = cfg.SnapshotCountInterval
	rc.TrailingLogs = cfg.TrailingLogs
	// A log of large entries is snapshotted and compacted by its bytes
	// (the write-ahead log reports them; third_party/raft/FORK.md).
	rc.SnapshotThresholdBytes = cfg.SnapshotThresholdBytes
	rc.TrailingBytes = cfg.TrailingBytes
	rc.NoSnapshotRestoreOnStart = true // the FSM state is persistent
	rc.NoLegacyTelemetry = true
	// The leader stores new entries while the followers do (ADR 020,
	// step 20; third_party/raft/FORK.md).
	rc.ParallelLeaderAppend = true
	// A group whose only voter is this node elects at once
	// (third_party/raft/FORK.md).
	rc.SoleVoterElectsAtOnce = true
	// A term that cannot be saved in raft.db (a full or failing disk)
	// stops the replica instead of panicking the node
	// (third_party/raft/FORK.md).
	// A follower back from an outage gets entries within a quarter of the
	// heartbeat timeout (third_party/raft/FORK.md).
	rc.MaxReplicationBackoff = raftutil.MaxReplicationBackoff(cfg.HeartbeatTimeout)
	rc.TermSaveFailed = func(err error) { g.onFatal(fmt.Errorf("its raft term cannot be saved: %w", err)) }

	snaps, err := snapstore.New(snapstore.Config{Dir: SnapshotDir(cfg, id), Retain: 2, FS: cfg.FS}, g.log)
	if err != nil {
		return nil, fmt.Errorf("shard %s: snapshot store: %w", id, err)
	}
	store := deps.LogDB.RaftStore(id.String())
	if err := snapstore.CheckLog(snaps, store); err != nil {
		return nil, fmt.Errorf("shard %s: %w", id, err)
	}
	logs := newLogCache(failStopLog{LogStore: store, failed: g.logFailed}, cmp.Or(cfg.LogCacheBytes, DefaultLogCacheBytes))
	g.logs = logs
	if err := g.catchUpFromSnapshot(snaps); err != nil {
		return nil, err
	}
	if err := g.checkLogKept(store, snaps); err != nil {
		return nil, err
	}
	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", id, err)
	}
	stored, err := recovery.Generation(store)
	if err != nil {
		return nil, fmt.Errorf("shard %s: read the generation: %w", id, err)
	}
	switch {
	case !has || deps.Recover != nil || deps.TakeGeneration:
		g.gen = max(stored, deps.Generation)
	case stored < deps.Generation:
		return nil, fmt.Errorf("shard %s: %w (%d, the group's is %d)", id, ErrStaleGeneration, stored, deps.Generation)
	default:
		g.gen = stored // the caller's map may be older than the replica
	}
	if !has && deps.Bootstrap {
		if deps.ConfirmBootstrap != nil {
			if err := deps.ConfirmBootstrap(); err != nil {
				return nil, fmt.Errorf("shard %s: bootstrap: %w", id, err)
			}
		}
		peers := deps.Peers
		if len(peers) == 0 {
			peers = []raft.Server{{ID: rc.LocalID, Address: deps.Transport.LocalAddr()}}
		}
		if err := raft.BootstrapCluster(rc, logs, store, snaps, deps.Transport, raft.Configuration{Servers: peers}); err != nil {
			return nil, fmt.Errorf("shard %s: bootstrap: %w", id, err)
		}
	}
	if deps.Recover != nil {
		res, err := recovery.Alone(logs, store, snaps, rc.LocalID, deps.Transport.LocalAddr(), *deps.Recover)
		if err != nil {
			return nil, fmt.Errorf("shard %s: recover: %w", id, err)
		}
		if res.Appended {
			g.log.Warn("going on as the only voter of the group", "lost", deps.Recover.Lost, "forced", deps.Recover.Force,
				"previous", res.Previous.Servers, "index", res.Index, "term", res.Term, "generation", g.gen)
		}
	}
	if g.gen != stored {
		if err := recovery.SetGeneration(store, g.gen); err != nil {
			return nil, fmt.Errorf("shard %s: record the generation: %w", id, err)
		}
	}
	if t, ok := deps.Transport.(interface{ SetGeneration(uint64) }); ok {
		t.SetGeneration(g.gen)
	}
	started := g.promise(has)
	r, err := raft.NewRaft(rc, f, logs, store, snaps, deps.Transport)
	if err != nil {
		return nil, fmt.Errorf("shard %s: start raft: %w", id, err)
	}
	g.raft = r
	snaps.ReplaceWith(r)
	started.Store(r)
	g.running.Store(true)
	if g.Failure() != nil { // the log failed before running was set
		go func() { _ = g.Close() }()
	}
	if deps.Metrics != nil {
		deps.Metrics.add(g)
	}
	if cfg.GCInterval > 0 {
		g.wg.Add(1)
		go g.gcLoop()
	}
	g.wg.Add(1)
	go g.closeLoop()
	if ht := cfg.heartbeats(); ht.Slow() {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			raftutil.LeaderHeartbeats(g.raft, ht, g.stop, g.log)
		}()
	}
	g.startChecks()
	return g, nil
}

// SnapshotDir is the directory of shard id's raft snapshots.
func SnapshotDir(cfg Config, id storage.ShardID) string {
	return filepath.Join(cfg.SnapshotDir, id.Keyspace, fmt.Sprint(id.Shard))
}

// catchUpFromSnapshot restores the newest snapshot when the persistent
// state is older than it (raft does not restore on start, see Open).
func (g *Group) catchUpFromSnapshot(snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	applied, _, _ := g.fsm.Applied()
	if list[0].Index <= applied {
		return nil
	}
	g.log.Warn("state is older than the newest snapshot; restoring it", "applied", applied, "snapshot", list[0].Index)
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("shard %s: open snapshot: %w", g.id, err)
	}
	return g.fsm.Restore(rc)
}

// ErrLogLost: the replica's raft log lost entries it had stored (a
// write-ahead log segment deleted, truncated or zeroed): entries after the
// newest snapshot are missing, or this replica, its group's only voter,
// applied entries the log no longer holds. The replica refuses to open.
var ErrLogLost = errors.New("shard: the raft log lost committed entries")

// checkLogKept refuses to open a replica whose log lost entries. Raft
// reads every entry after the newest snapshot when it starts (a gap there
// made it panic). A state database that applied entries beyond the end of
// the log proves committed entries gone: with other voters, they send them
// again (the state machine skips what it applied); as the only voter, the
// group would number its next entries over them, and the state machine
// would skip those as applied already.
func (g *Group) checkLogKept(store storage.GroupStore, snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil {
		return fmt.Errorf("shard %s: %w", g.id, err)
	}
	var snap uint64
	if len(list) > 0 {
		snap = list[0].Index
	}
	const help = `refusing to start (see "A damaged data directory" in docs/operations.md)`
	if gl, ok := store.(interface {
		Gap(uint64) (uint64, uint64, bool)
	}); ok {
		if first, last, gap := gl.Gap(snap); gap {
			return fmt.Errorf("%w: shard %s: the log lacks entries %d to %d, after the newest snapshot (%d): a write-ahead log segment was deleted or damaged; %s",
				ErrLogLost, g.id, first, last, snap, help)
		}
	}
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("shard %s: %w", g.id, err)
	}
	applied, _, _ := g.fsm.Applied()
	if applied <= max(last, snap) || guards.Off(guards.LogKept) {
		return nil
	}
	if conf, err := recovery.LatestConfiguration(store, snaps); err == nil && voters(conf) > 1 {
		g.log.Warn("the state database applied raft entries the log no longer holds; the group's other voters send them again, and until this replica holds them it grants no vote and asks for none",
			"applied", applied, "log_last", last, "snapshot", snap)
		g.lostUpTo = applied
		return nil
	}
	return fmt.Errorf("%w: shard %s: the state database applied raft entries up to %d, but the log ends at %d and the newest snapshot at %d: committed entries are gone from the write-ahead log (a segment truncated, zeroed or deleted), and no other replica holds them; %s",
		ErrLogLost, g.id, applied, last, snap, help)
}

func voters(c raft.Configuration) int {
	n := 0
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// ID returns the shard this group replicates.
func (g *Group) ID() storage.ShardID { return g.id }

// NodeID returns the id of this node, the replica's raft server id.
func (g *Group) NodeID() string { return g.deps.NodeID }

// Generation returns the generation of the replica (Deps.Generation).
func (g *Group) Generation() uint64 { return g.gen }

// onFatal stops the replica on a fatal error: from now on requests fail
// at once with ErrStopped and err (Failure), the node is told
// (Deps.OnFatal), and raft shuts down. Only the first error counts.
func (g *Group) onFatal(err error) {
	g.failOnce.Do(func() {
		err = fmt.Errorf("shard %s: %w", g.id, err)
		stopped := fmt.Errorf("%w: %w", ErrStopped, err)
		g.failure.Store(&stopped)
		if g.deps.OnFatal != nil {
			g.deps.OnFatal(err)
		}
		// raft.Shutdown waits for the goroutine that is calling us (the
		// FSM's, or the log writer's). Before raft runs, Open closes it.
		if g.running.Load() {
			go func() { _ = g.Close() }()
		}
	})
}

// logFailed stops the replica once its raft log failed stop: the node's
// write-ahead log refuses every write after a failed write or fdatasync
// (wal.ErrFailed), so raft could never store an entry again. Raft itself
// would only step down, stand again and fail again; requests would wait
// for a leader until their deadline.
func (g *Group) logFailed(err error) {
	if errors.Is(err, wal.ErrFailed) {
		g.onFatal(fmt.Errorf("its raft log cannot be written: %w", err))
	}
}

// failStopLog is a replica's raft log store: a write that fails calls
// failed with the error (before raft sees it).
type failStopLog struct {
	raft.LogStore
	failed func(error)
}

func (l failStopLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l failStopLog) StoreLogs(logs []*raft.Log) error {
	err := l.LogStore.StoreLogs(logs)
	if err != nil {
		l.failed(err)
	}
	return err
}

// BytesAfter implements raft.LogSizer if the store does (0 otherwise).
func (l failStopLog) BytesAfter(index uint64) uint64 {
	if s, ok := l.LogStore.(raft.LogSizer); ok {
		return s.BytesAfter(index)
	}
	return 0
}

// NewestWithin implements raft.LogSizer if the store does (every entry
// otherwise).
func (l failStopLog) NewestWithin(maxBytes uint64) uint64 {
	if s, ok := l.LogStore.(raft.LogSizer); ok {
		return s.NewestWithin(maxBytes)
	}
	return math.MaxUint64
}

func (l failStopLog) DeleteRange(min, max uint64) error {
	err := l.LogStore.DeleteRange(min, max)
	if err != nil {
		l.failed(err)
	}
	return err
}

// Failure returns the error the replica stopped on, which matches
// ErrStopped (its raft log cannot be written, its state machine refused a
// committed command), or nil: nil too for a replica closed without one.
// A replica that failed answers every request with it at once.
func (g *Group) Failure() error {
	if p := g.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops the replica. It is safe to call more than once.
func (g *Group) Close() error {
	var err error
	g.closeOnce.Do(func() {
		close(g.stop)
		g.wg.Wait()
		if g.deps.Metrics != nil {
			g.deps.Metrics.remove(g)
		}
		err = g.raft.Shutdown().Error()
		close(g.down)
		g.checks.drop()
		if c, ok := g.deps.Transport.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	})
	return err
}

// IsLeader reports whether this replica currently believes it leads.
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

// Leader returns the current leader's id, if known.
func (g *Group) Leader() string {
	_, id := g.raft.LeaderWithID()
	return string(id)
}

// LeaderAddr returns the current leader's transport (peer) address, if
// known.
func (g *Group) LeaderAddr() string {
	addr, _ := g.raft.LeaderWithID()
	return string(addr)
}

// LeaderlessFor returns how long this replica has known no leader and
// heard from none (the longest duration if it never has); 0 while it
// knows one.
func (g *Group) LeaderlessFor() time.Duration {
	if g.LeaderAddr() != "" || g.IsLeader() {
		return 0
	}
	return time.Since(g.raft.LastContact())
}

// Raft exposes the group's raft node for configuration changes.
func (g *Group) Raft() *raft.Raft { return g.raft }

// Propose replicates cmd and returns its outcome once this replica applied
// it. ErrNotLeader means it was not proposed.
func (g *Group) Propose(ctx context.Context, cmd *peerv1.Command) (fsm.Result, error) {
	if err := g.Failure(); err != nil {
		return fsm.Result{}, err
	}
	if g.raft.State() != raft.Leader {
		if err := g.Failure(); err != nil {
			return fsm.Result{}, err // it failed, and stepped down, meanwhile
		}
		return fsm.Result{}, ErrNotLeader
	}
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fsm.Result{}, fmt.Errorf("shard %s: encode: %w", g.id, err)
	}
	start := time.Now()
	f := g.raft.Apply(data, timeoutOf(ctx))
	if err := g.wait(ctx, f); err != nil {
		g.deps.Metrics.observePropose(g.label, "error", time.Since(start))
		return fsm.Result{}, g.raftErr(err)
	}
	g.deps.Metrics.observePropose(g.label, "ok", time.Since(start))
	if p, ok := g.deps.Transport.(interface{ CommitApplied(uint64) }); ok {
		// Followers that hold the entry learn at once that it committed,
		// not with raft's next message (docs/adr/020).
		p.CommitApplied(f.Index())
	}
	res, ok := f.Response().(fsm.Result)
	if !ok {
		return fsm.Result{}, fmt.Errorf("shard %s: unexpected apply response %T", g.id, f.Response())
	}
	if errors.Is(res.Err, fsm.ErrUnknownCommand) {
		return res, fmt.Errorf("%w: %v", ErrStopped, res.Err)
	}
	g.deps.Clock.Observe(res.Version.HLC)
	return res, nil
}

// ReadBarrier makes the next read on this replica linearizable: it confirms
// that the replica still leads, by its read lease (lease.go) or else by a
// quorum's answers in a round that started after the call (concurrent
// calls share rounds).
//
// That suffices because every write is acknowledged only after the leader
// applied it, and a new leader applies everything committed before it
// serves: a barrier, once per term, before its first linearizable read.
// (hashicorp/raft does not hand barrier and no-op entries to the FSM, so
// the FSM's index cannot be compared with the commit index.)
func (g *Group) ReadBarrier(ctx context.Context) error {
	if g.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	if guards.Off(guards.ReadBarrier) {
		return nil // test-only: a deposed leader serves stale reads
	}
	term := g.raft.CurrentTerm()
	g.readyMu.Lock()
	ready := g.readyTerm == term
	g.readyMu.Unlock()
	if !ready {
		// A new leader learns the commit index only once an entry of its
		// own term commits; a barrier makes sure of it (once per term).
		if err := g.wait(ctx, g.raft.Barrier(timeoutOf(ctx))); err != nil {
			return g.raftErr(err)
		}
		g.readyMu.Lock()
		g.readyTerm = term
		g.readyMu.Unlock()
	}
	if g.leaseHeld(term) {
		g.deps.Metrics.observeLeaseRead()
		return nil
	}
	if err := g.verifier.verify(ctx); err != nil {
		return g.raftErr(err)
	}
	return nil
}

// CaughtUp reports whether this replica's state holds what its raft log
// holds as committed: a leader once its state machine applied every
// command its log held when it first checked in its term (entries of
// earlier terms included), a follower once it has heard from a leader and
// applied every command up to the commit index it learned. A replica
// rebuilding its state from the log (after a restart) is not caught up
// until the replay is done. It reads the state machine's own applied index
// (raft's runs ahead of it while batches are being applied). Once a leader
// is caught up it stays so for its term, so new proposals in flight do not
// make it flap.
func (g *Group) CaughtUp() bool {
	r := g.raft
	applied, _, _ := g.fsm.Applied()
	if r.State() == raft.Leader {
		term := r.CurrentTerm()
		g.readyMu.Lock()
		defer g.readyMu.Unlock()
		if g.caughtUp == term {
			return true
		}
		if g.targetTerm != term {
			// The leader's last entries may not be in its log store yet
			// (raft.Config.ParallelLeaderAppend): unreadable, the target
			// is not known yet.
			target, ok := g.lastCommandAtOrBelow(r.LastIndex())
			if !ok {
				return false
			}
			g.target, g.targetTerm = target, term
		}
		if applied >= g.target {
			g.caughtUp = term
			return true
		}
		return false
	}
	if r.Leader() == "" || r.LastContact().IsZero() {
		return false
	}
	target, _ := g.lastCommandAtOrBelow(r.CommitIndex())
	return applied >= target
}

// WaitCommittedApplied waits until this replica's state machine has
// published every command its log holds as committed now. A read sees an
// apply in the state database a moment before the state machine publishes
// it (its index, its HLC: HasApplied); once this returns, every version a
// read could have seen before the call is published.
func (g *Group) WaitCommittedApplied(ctx context.Context) error {
	target, _ := g.lastCommandAtOrBelow(g.raft.CommitIndex())
	for {
		applied, _, ch := g.fsm.Applied()
		if applied >= target {
			return nil
		}
		if err := g.waitChange(ctx, ch); err != nil {
			return err
		}
	}
}

// lastCommandAtOrBelow returns the index of the last command entry of the
// log at or below index, or 0 if there is none (everything before is in
// the snapshot the state was restored from). If an entry cannot be read,
// it returns index and false.
func (g *Group) lastCommandAtOrBelow(index uint64) (uint64, bool) {
	first, err := g.logs.FirstIndex()
	if err != nil {
		return index, false
	}
	for i := index; i >= first && i > 0; i-- {
		var e raft.Log
		if err := g.logs.GetLog(i, &e); err != nil {
			return index, false // unreadable: be conservative
		}
		if e.Type == raft.LogCommand {
			return i, true
		}
	}
	return 0, true
}

// WaitHLC waits until this replica has applied a write with an HLC of at
// least hlc. Versions grow with the log, so every write of the shard up to
// that version is then applied.
func (g *Group) WaitHLC(ctx context.Context, hlc uint64) error { return g.WaitOrigin(ctx, "", hlc) }

// WaitOrigin waits until this replica has applied every write of origin
// up to hlc: for another site, its progress for that origin reached hlc;
// for origin "" (this site), as WaitHLC.
func (g *Group) WaitOrigin(ctx context.Context, origin string, hlc uint64) error {
	for {
		done, ch := g.applied(origin, hlc)
		if done {
			return nil
		}
		if err := g.waitChange(ctx, ch); err != nil {
			return err
		}
	}
}

// MaxHLC returns the replica's newest HLC: that of this site's newest
// write, close or stamp of another site's writes (storage.Record.Stamp).
func (g *Group) MaxHLC() uint64 {
	_, h, _ := g.fsm.Applied()
	return h
}

// Clock returns the node's hybrid logical clock.
func (g *Group) Clock() *causal.Clock { return g.deps.Clock }

// HasApplied reports, without waiting, what WaitOrigin waits for.
func (g *Group) HasApplied(origin string, hlc uint64) bool {
	done, _ := g.applied(origin, hlc)
	return done
}

// applied reports whether every write of origin ("" for this site) up to
// hlc is applied, and a channel closed at the next apply.
func (g *Group) applied(origin string, hlc uint64) (bool, <-chan struct{}) {
	if guards.Off(guards.FloorWait) {
		return true, nil // test-only: a lagging replica serves reads below the floor
	}
	if origin == "" {
		_, maxHLC, ch := g.fsm.Applied()
		return maxHLC >= hlc, ch
	}
	p, ch := g.fsm.Progress(origin)
	return p.HLC >= hlc, ch
}

// Commands returns the commands of the log entries in [from, to] this
// replica still holds (entries that are not commands are skipped), for
// inspection.
func (g *Group) Commands(from, to uint64) ([]*peerv1.Command, error) {
	store := g.deps.LogDB.RaftStore(g.id.String())
	var out []*peerv1.Command
	for i := from; i <= to; i++ {
		var l raft.Log
		if err := store.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return nil, err
		}
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.Decode(l.Data)
		if err != nil {
			return nil, fmt.Errorf("shard %s: entry %d: %w", g.id, i, err)
		}
		out = append(out, cmd)
	}
	return out, nil
}

// Origins returns the progress of every other site's writes to the shard.
func (g *Group) Origins() map[string]storage.Progress { return g.fsm.Origins() }

func (g *Group) waitChange(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.stop:
		return ErrStopped
	}
}

// Geo returns the replica's chain state (fsm.Geo).
func (g *Group) Geo() fsm.Geo { return g.fsm.Geo() }

// Read runs fn on this replica's applied state. It fails with ErrCorrupt
// while the replica refuses reads after a failed consistency check.
func (g *Group) Read(fn func(*storage.ShardTx) error) error {
	if err := g.refusal(); err != nil {
		return err
	}
	return g.deps.DB.ViewShard(g.id, fn)
}

// ReadLong is Read for reads that scan the whole shard or call out while
// they hold its state: the node's other applies are not held up meanwhile
// (storage.DB.ViewShardLong).
func (g *Group) ReadLong(fn func(*storage.ShardTx) error) error {
	if err := g.refusal(); err != nil {
		return err
	}
	return g.deps.DB.ViewShardLong(g.id, fn)
}

// Snapshot takes a raft snapshot now, truncating the log behind it.
func (g *Group) Snapshot(ctx context.Context) error {
	f := g.raft.Snapshot()
	if err := g.wait(ctx, f); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("shard %s: snapshot: %w", g.id, err)
	}
	return nil
}

// Status describes the replica.
type Status struct {
	ID                storage.ShardID
	State             string
	Leader            string
	Term              uint64
	CommitIndex       uint64
	AppliedIndex      uint64
	LastSnapshotIndex uint64
	FirstLogIndex     uint64
	Generation        uint64
}

// Status returns the replica's current raft state.
func (g *Group) Status() Status {
	applied, _, _ := g.fsm.Applied()
	st := Status{
		ID:     g.id,
		State:  g.raft.State().String(),
		Leader: g.Leader(),
		Term:   g.raft.CurrentTerm(),
		// raft learns the commit index from a leader: a restarted replica
		// that has heard from none reports 0, but everything its state
		// machine applied was committed (kvctl shard recover's dry run
		// reports what may be lost after this index).
		CommitIndex:  max(g.raft.CommitIndex(), applied),
		AppliedIndex: applied,
		Generation:   g.gen,
	}
	st.LastSnapshotIndex, _ = g.raft.LastSnapshot()
	st.FirstLogIndex, _ = g.deps.LogDB.RaftStore(g.id.String()).FirstIndex()
	return st
}

// AdvanceClosed asks this replica, if it leads, to propose a Close command
// raising the shard's newest HLC to at least hlc (closed timestamps,
// docs/adr/015-cross-session-causality.md), and to keep closing the
// current time every CloseInterval for CloseDemand, so that its followers
// can serve the next reads with newer floors. It does not wait: requests
// coalesce, and one Close at a time is in flight.
func (g *Group) AdvanceClosed(hlc uint64) {
	for {
		cur := g.closeWant.Load()
		if cur >= hlc || g.closeWant.CompareAndSwap(cur, hlc) {
			break
		}
	}
	g.closeDemand.Store(time.Now().Add(g.cfg.CloseDemand).UnixNano())
	select {
	case g.closeKick <- struct{}{}:
	default:
	}
}

// CloseOnce asks this replica, if it leads, to propose one Close at the
// present, without the cadence AdvanceClosed starts: an idle shard's
// origin progress then moves on at every site of its chain.
func (g *Group) CloseOnce() {
	hlc := g.deps.Clock.Now()
	for {
		cur := g.closeWant.Load()
		if cur >= hlc || g.closeWant.CompareAndSwap(cur, hlc) {
			break
		}
	}
	select {
	case g.closeKick <- struct{}{}:
	default:
	}
}

// CloseCadence returns CloseInterval while this replica's newest HLC of
// this site moves on at that cadence, by Close commands or by writes (one
// applied within the last two intervals), zero otherwise: a follower
// that has not applied a read's fallback floor may then expect it within
// an interval or two rather than hand the read to the leader.
func (g *Group) CloseCadence() time.Duration {
	iv := g.cfg.CloseInterval
	if iv <= 0 {
		return 0
	}
	if last := g.lastAdvance.Load(); last == 0 || time.Since(time.Unix(0, last)) > 2*iv {
		return 0
	}
	return iv
}

// closeLoop proposes the Close commands AdvanceClosed asks for while this
// replica leads, one at a time, each covering every request made before
// it was proposed, and then one every CloseInterval while the demand
// lasts. A cadence Close is left out when a write of this site applied in
// the last interval already moved the shard's newest HLC on that far: on
// a shard that takes writes, the writes keep the cadence (followers
// catch up with a floor as fast) and a Close would only add a raft entry
// per interval. It sleeps while there is no demand.
func (g *Group) closeLoop() {
	defer g.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	var tick <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.closeKick:
		case <-tick:
		}
		tick = nil
		demand := time.Now().UnixNano() < g.closeDemand.Load()
		if !g.IsLeader() {
			continue
		}
		want := g.closeWant.Load()
		_, applied, _ := g.fsm.Applied()
		if demand && g.cfg.CloseInterval > 0 {
			// The cadence: close the present, not only what was asked,
			// unless the shard's newest HLC is within an interval of it.
			if now := g.deps.Clock.Now(); applied < hlcBefore(now, g.cfg.CloseInterval) {
				want = max(want, now)
			}
			tick = time.After(g.cfg.CloseInterval)
		}
		if applied >= want {
			continue
		}
		// The Close must not lie below what the leader may still stamp:
		// its clock observes the request, and the FSM keeps the maximum.
		g.deps.Clock.Observe(want)
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := g.Propose(pctx, &peerv1.Command{Op: &peerv1.Command_Close{Close: &peerv1.Close{Hlc: g.deps.Clock.Now()}}})
		pcancel()
		g.deps.Metrics.observeClose(err == nil)
		if err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStopped) && ctx.Err() == nil {
			g.log.Debug("close proposal failed", "err", err)
		}
	}
}

// hlcBefore returns the HLC d before hlc (its wall clock part).
func hlcBefore(hlc uint64, d time.Duration) uint64 {
	wall, _ := causal.SplitHLC(hlc)
	ms := uint64(d.Milliseconds())
	if wall <= ms {
		return 0
	}
	return causal.MakeHLC(wall-ms, 0)
}

// gcLoop proposes garbage-collection passes while this replica leads.
// It ends, and cancels a pass in flight, when the group closes or the
// node begins to stop (Deps.Done).
func (g *Group) gcLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.GCInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-g.stop:
		case <-g.deps.Done: // nil: never
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if g.IsLeader() {
			if err := g.Collect(ctx); err != nil && !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrStopped) && ctx.Err() == nil {
				g.log.Warn("garbage collection failed", "err", err)
			}
		}
	}
}

// frontier bounds what garbage collection may remove. With a chain of
// sites it is the global frontier (docs/adr/018): the lowest progress that
// every site of the chain applied, over every origin of the chain, so a
// collected tombstone is one no site can still deliver an older write
// under, nor hold an older live version that anti-entropy would bring
// back. Without a chain: nil when no other site replicated writes to the
// shard, else the lowest progress of those origins.
func (g *Group) frontier() *uint64 {
	if geo := g.fsm.Geo(); len(geo.Chain) > 1 {
		low := ^uint64(0)
		for _, site := range geo.Chain {
			low = min(low, geo.Stable[site].HLC) // zero until known
		}
		return &low
	}
	origins := g.fsm.Origins()
	if len(origins) == 0 {
		return nil
	}
	low := ^uint64(0)
	for _, p := range origins {
		low = min(low, p.HLC)
	}
	return &low
}

// Collect runs one full garbage-collection pass over the shard.
func (g *Group) Collect(ctx context.Context) error {
	now := g.deps.Clock.Now()
	pass := &peerv1.Collect{
		CutoffHlc:        hlcBefore(now, g.cfg.VersionRetention),
		RequestCutoffHlc: hlcBefore(now, g.cfg.RequestRetention),
		MaxKeys:          g.cfg.GCBatchKeys,
		FrontierHlc:      g.frontier(),
	}
	// A pass is a replicated write: an idle shard with nothing to collect
	// on this replica's applied state proposes none. Garbage the state
	// does not show yet (writes still being applied) waits for the next
	// pass.
	var found bool
	if err := g.ReadLong(func(s *storage.ShardTx) (err error) {
		found, err = s.HasGarbage(fsm.CollectCutoff(pass), pass.RequestCutoffHlc)
		return err
	}); err == nil && !found {
		g.deps.Metrics.observeGCSkipped(g.label)
		return nil
	}
	var next []byte
	removed := 0
	for {
		pass.StartKey = next
		res, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Collect{Collect: pass}})
		if err != nil {
			return err
		}
		removed += res.Removed
		if res.Next == nil {
			break
		}
		next = res.Next
		select {
		case <-g.stop:
			return ErrStopped
		default:
		}
	}
	g.deps.Metrics.observeGC(g.label, removed)
	return nil
}

func timeoutOf(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if t := time.Until(d); t > 0 {
			return t
		}
		return time.Millisecond
	}
	return defaultTimeout
}

// Wait waits for f, a future of this replica's raft, until ctx ends or the
// replica stops (see wait): raft abandons some futures at shutdown, such
// as a membership change still waiting for the previous one to commit.
func (g *Group) Wait(ctx context.Context, f raft.Future) error { return g.wait(ctx, f) }

// wait waits for a raft future, giving up when ctx ends or raft has shut
// down. Raft abandons some futures at shutdown without an answer (those of
// committed entries still queued for the state machine, whose outcome is
// then unknown: they are in the log and apply at restart), so a caller
// must not wait on one alone (TestProposalsEndWhenTheGroupCloses). The
// goroutine that waits on such a future stays parked after the caller got
// ErrRaftShutdown; it holds nothing but the future.
func (g *Group) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-g.down:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

func (g *Group) raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return ErrLeadershipLost
	case errors.Is(err, raft.ErrRaftShutdown):
		if ferr := g.Failure(); ferr != nil {
			return ferr // it stopped on its own, and says why
		}
		return ErrStopped
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	}
	return err
}
