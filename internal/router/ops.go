package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// CondError is a write whose condition failed (a compare-and-swap that
// lost); Result holds the key's current version.
type CondError struct{ Result fsm.Result }

func (e *CondError) Error() string {
	return fmt.Sprintf("router: condition failed: %v", e.Result.Err)
}

func (e *CondError) Unwrap() error { return e.Result.Err }

// ErrApplyFailed: a write committed, but the leader's state machine failed
// to apply it; its outcome is not known to the caller (UNAVAILABLE: retry
// with the same request id).
var ErrApplyFailed = errors.New("router: the write's apply failed")

// isCondition reports whether err is a failed write condition
// (compare-and-swap), not a failure to apply.
func isCondition(err error) bool {
	return errors.Is(err, fsm.ErrVersionMismatch) || errors.Is(err, fsm.ErrKeyNotFound) || errors.Is(err, fsm.ErrKeyExists)
}

// Propose stamps w and proposes it to g, this node's replica of sh, which
// must lead. The clock first observes everything the session has seen, so
// the new version is newer than all of it (monotonic writes,
// writes-follow-reads). A failed condition is a *CondError.
func (r *Router) Propose(ctx context.Context, c *Call, sh placement.Shard, g *shard.Group, w *peerv1.Write, o *kvv1.WriteOptions) (fsm.Result, error) {
	if err := r.checkDurability(sh, o); err != nil {
		return fsm.Result{}, err
	}
	if r.durability != nil {
		if err := r.durability.EnsureChain(ctx, sh, g); err != nil {
			return fsm.Result{}, err
		}
	}
	deps := c.Session.Deps(nil)
	if err := r.waitDeps(ctx, c.Keyspace, deps); err != nil {
		return fsm.Result{}, err
	}
	w.Deps = w.Deps[:0]
	for _, d := range deps {
		w.Deps = append(w.Deps, &peerv1.Dependency{Keyspace: d.Ref.Keyspace, Shard: d.Ref.Shard, AllShards: d.Ref.Shard == causal.UnknownShard, Origin: d.Ref.Origin, Hlc: d.HLC})
	}
	r.clock.Observe(c.Session.MaxHLC)
	w.Hlc = r.clock.Now()
	w.Site = r.cfg.Site
	if o != nil && o.RequestId != nil {
		w.ClientId, w.Seq = o.RequestId.ClientId, o.RequestId.Seq
	}
	res, err := g.Propose(ctx, &peerv1.Command{Op: &peerv1.Command_Write{Write: w}})
	if err != nil {
		return fsm.Result{}, err
	}
	if res.Err != nil {
		if !isCondition(res.Err) {
			// Committed, but this replica's state machine failed to apply
			// it (a full disk, a damaged state database): the node stops
			// and applies it again from the log when it starts.
			return res, fmt.Errorf("%w: the write is committed in the raft log, but node %s failed to apply it (%v); it is applied when the node restarts: retry with the same request id (the Go client and kvctl do)", ErrApplyFailed, r.cfg.NodeID, res.Err)
		}
		if !res.Current.IsZero() {
			c.Observe(sh, w.Key, res.Current)
		}
		return res, &CondError{Result: res}
	}
	c.ObserveWrite(sh, w.Key, res.Version)
	return res, r.waitDurable(ctx, sh, res, o)
}

// waitDeps waits until this site has applied the writes of other sites
// that deps name (a session that read them at another site writes here),
// on this node's replicas, up to CausalWait. Dependencies on this site's
// own writes need no wait: they were committed here before anyone could
// read them. A dependency on a shard this node holds no replica of is not
// checked here; the chain of sites checks it where the write is applied.
func (r *Router) waitDeps(ctx context.Context, keyspace string, deps []causal.Dependency) error {
	start := time.Now()
	waited := false
	defer func() {
		if waited {
			r.metrics.depWaitSec.Observe(time.Since(start).Seconds())
		}
	}()
	for _, d := range deps {
		if d.Ref.Origin == "" || d.Ref.Origin == r.cfg.Site {
			continue
		}
		shards := []placement.Shard{{Keyspace: d.Ref.Keyspace, ID: d.Ref.Shard}}
		if d.Ref.Shard == causal.UnknownShard {
			var err error
			if shards, err = r.Shards(d.Ref.Keyspace); err != nil {
				continue // a keyspace this site does not hold
			}
		}
		for _, sh := range shards {
			g := r.Local(sh)
			if g == nil {
				r.metrics.depsUnchecked.Inc()
				continue
			}
			f := causal.Floor{Origin: d.Ref.Origin, HLC: d.HLC}
			if g.HasApplied(f.Origin, f.HLC) {
				continue
			}
			waited = true
			wctx, cancel := context.WithTimeout(ctx, r.cfg.CausalWait)
			err := waitFloor(wctx, g, f)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%w: %s has not applied HLC %s of %s this write depends on", ErrCausalWait, sh, causal.FormatHLC(d.HLC), d.Ref.Origin)
			}
		}
	}
	return nil
}

// casTurnKey names the swaps of which at most one can succeed: those of
// one key on one group that expect the same version.
type casTurnKey struct {
	g    *shard.Group
	key  string
	hlc  uint64
	site string
}

// CASTurn prepares a compare-and-swap on g, the leader of sh, for its
// proposal. A swap that expects a version this replica already holds a
// newer version of is rejected at once (CASFailFast). Of the swaps of
// one key that expect the same version at most one can succeed: while
// one of them is being proposed, the others wait for it to be applied
// and check again, and those that lost are then rejected without a log
// entry, which they would otherwise each spend on a mismatch (a hot key
// under YCSB-F). The caller proposes, then calls release. Swaps on
// absence, and with guard cas-turn off every swap, take no turn.
func (r *Router) CASTurn(ctx context.Context, g *shard.Group, c *Call, sh placement.Shard, w *peerv1.Write, o *kvv1.WriteOptions) (release func(), err error) {
	takesTurn := w.Condition != nil && w.Condition.Kind == peerv1.Condition_KIND_VERSION && !guards.Off(guards.CASTurn)
	k := casTurnKey{g: g, key: string(w.Key), hlc: w.Condition.GetHlc(), site: w.Condition.GetSite()}
	for when := "newer"; ; when = "after_turn" {
		if err := r.CASFailFast(g, c, sh, w, o); err != nil {
			r.metrics.casFailFast.WithLabelValues(when).Inc()
			return nil, err
		}
		if !takesTurn {
			return func() {}, nil
		}
		r.casMu.Lock()
		turn, busy := r.casTurns[k]
		if !busy {
			turn = make(chan struct{})
			r.casTurns[k] = turn
			r.casMu.Unlock()
			return func() {
				r.casMu.Lock()
				delete(r.casTurns, k)
				r.casMu.Unlock()
				close(turn)
			}, nil
		}
		r.casMu.Unlock()
		select {
		case <-turn:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CASFailFast rejects a version-conditioned swap on g without a raft
// round trip when this replica already holds a newer version than the
// expected one. Versions only grow, so the swap could never succeed; every
// other case is decided in the log. A retry of a request (o's request id)
// that was applied is not rejected: the swap itself made the expected
// version old, and the log answers the retry with the first outcome.
func (r *Router) CASFailFast(g *shard.Group, c *Call, sh placement.Shard, w *peerv1.Write, o *kvv1.WriteOptions) error {
	if w.Condition == nil || w.Condition.Kind != peerv1.Condition_KIND_VERSION {
		return nil
	}
	want := causal.Version{HLC: w.Condition.Hlc, Site: w.Condition.Site}
	var cur storage.Record
	var found, applied bool
	if err := g.Read(func(st *storage.ShardTx) (err error) {
		if id := o.GetRequestId(); id != nil && !guards.Off(guards.RequestDedupe) {
			if _, applied, err = st.Request(id.ClientId, id.Seq); applied || err != nil {
				return err
			}
		}
		cur, found, err = st.Latest(w.Key, true)
		return err
	}); err != nil || applied || !found || !want.Less(cur.Version) {
		return nil
	}
	c.Observe(sh, w.Key, cur.Version)
	return &CondError{Result: fsm.Result{Err: fsm.ErrVersionMismatch, Current: cur.Version, CurrentFound: !cur.Tombstone}}
}

// Get reads one key under the requested consistency, here or on the node
// chosen for it, and records what the session saw.
func (r *Router) Get(ctx context.Context, c *Call, key []byte, cons kvv1.Consistency, keysOnly bool) (*kvv1.KeyValue, error) {
	sh, err := r.Shard(c.Keyspace, key)
	if err != nil {
		return nil, err
	}
	if err := r.CheckJoined(ctx, c); err != nil {
		return nil, err
	}
	g, item, forwarded, err := routed(ctx, r,
		func() (*shard.Group, string, error) { return r.readTarget(ctx, c, sh, key, cons) },
		func(ctx context.Context, addr string) (*kvv1.KeyValue, error) {
			return r.remoteGet(ctx, c, sh, addr, key, cons)
		})
	if forwarded || err != nil {
		return item, err
	}
	var rec storage.Record
	var found bool
	if err := g.Read(func(st *storage.ShardTx) error {
		rec, found, err = st.Latest(key, keysOnly)
		return err
	}); err != nil {
		return nil, err
	}
	item = &kvv1.KeyValue{Key: key}
	if found {
		c.Observe(sh, key, rec.Version)
		c.ObserveStamp(rec.Stamp)
		item.Version = VersionPB(rec.Version)
		item.Found = !rec.Tombstone
		item.Value = rec.Value
	}
	return item, nil
}

// shardIs returns a shard function for causal.Session.ForRead that places
// every key in sh.
func shardIs(sh placement.Shard) func([]byte) (uint32, bool) {
	return func([]byte) (uint32, bool) { return sh.ID, true }
}

// remoteGet reads one key on another node, carrying the floors that read
// needs and merging what it observed.
func (r *Router) remoteGet(ctx context.Context, c *Call, sh placement.Shard, addr string, key []byte, cons kvv1.Consistency) (*kvv1.KeyValue, error) {
	kv, err := r.pool.KV(addr)
	if err != nil {
		return nil, err
	}
	resp, err := kv.Get(forwardCtx(ctx), &kvv1.GetRequest{
		Header: &kvv1.RequestHeader{Keyspace: c.Keyspace, Session: c.Session.ForRead(c.Keyspace, [][]byte{key}, shardIs(sh)).Encode()},
		Key:    key, Consistency: cons,
	})
	if err != nil {
		return nil, RemoteErr(err)
	}
	if err := mergeSession(c, resp.Header); err != nil {
		return nil, err
	}
	return &kvv1.KeyValue{Key: key, Found: resp.Found, Value: resp.Value, Version: resp.Version}, nil
}

func mergeSession(c *Call, h *kvv1.ResponseHeader) error {
	if h == nil {
		return nil
	}
	sess, err := causal.DecodeSession(h.Session)
	if err != nil {
		return fmt.Errorf("router: session from peer: %w", err)
	}
	c.Merge(sess)
	return nil
}

// History returns up to limit versions of key, newest first, read under
// the requested consistency here or on the node chosen for it. Read here,
// it stops after the values add up to more than maxBytes (0: no bound;
// storage.ShardTx.HistoryBytes); a node it forwards to applies its own
// bound.
func (r *Router) History(ctx context.Context, c *Call, key []byte, limit, maxBytes int, cons kvv1.Consistency) ([]*kvv1.VersionedValue, error) {
	sh, err := r.Shard(c.Keyspace, key)
	if err != nil {
		return nil, err
	}
	if err := r.CheckJoined(ctx, c); err != nil {
		return nil, err
	}
	g, versions, forwarded, err := routed(ctx, r,
		func() (*shard.Group, string, error) { return r.readTarget(ctx, c, sh, key, cons) },
		func(ctx context.Context, addr string) ([]*kvv1.VersionedValue, error) {
			return r.remoteHistory(ctx, c, sh, addr, key, limit, cons)
		})
	if forwarded || err != nil {
		return versions, err
	}
	var recs []storage.Record
	if err := g.Read(func(st *storage.ShardTx) error {
		recs, err = st.HistoryBytes(key, limit, maxBytes)
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]*kvv1.VersionedValue, len(recs))
	for i, rec := range recs {
		out[i] = &kvv1.VersionedValue{Version: VersionPB(rec.Version), Value: rec.Value, Tombstone: rec.Tombstone}
	}
	if len(recs) > 0 {
		c.Observe(sh, key, recs[0].Version)
		c.ObserveStamp(recs[0].Stamp)
	}
	return out, nil
}

// remoteHistory reads the versions of key on another node.
func (r *Router) remoteHistory(ctx context.Context, c *Call, sh placement.Shard, addr string, key []byte, limit int, cons kvv1.Consistency) ([]*kvv1.VersionedValue, error) {
	kv, err := r.pool.KV(addr)
	if err != nil {
		return nil, err
	}
	resp, err := kv.History(forwardCtx(ctx), &kvv1.HistoryRequest{
		Header: &kvv1.RequestHeader{Keyspace: c.Keyspace, Session: c.Session.ForRead(c.Keyspace, [][]byte{key}, shardIs(sh)).Encode()},
		Key:    key, Limit: uint32(limit), Consistency: cons,
	})
	if err != nil {
		return nil, RemoteErr(err)
	}
	if err := mergeSession(c, resp.Header); err != nil {
		return nil, err
	}
	return resp.Versions, nil
}

// routed serves a read of one shard: target chooses where, this node's
// replica g or the node at an address, and remote forwards the read
// there. A node that does not answer is replaced by another choice
// (retryForward). forwarded reports that out (or err) is the answer;
// otherwise the caller reads g. remote runs under a context that ends
// when the node stops answering (forwardWatched).
func routed[T any](ctx context.Context, r *Router, target func() (*shard.Group, string, error), remote func(ctx context.Context, addr string) (T, error)) (g *shard.Group, out T, forwarded bool, err error) {
	deadline := time.Now().Add(r.cfg.LeaderWait)
	for {
		var addr string
		if g, addr, err = target(); err != nil || addr == "" {
			return g, out, false, err
		}
		err = r.forwardWatched(ctx, addr, func(ctx context.Context) (err error) {
			out, err = remote(ctx, addr)
			return err
		})
		if !r.retryForward(ctx, addr, err, deadline) {
			return nil, out, true, err
		}
	}
}

// retryForward reports whether a read forwarded to addr that failed with
// err is routed again: when the node there did not answer (it died, or
// just lost the leadership) and there is time left before deadline. A
// shard's followers name a leader that died until they elect another (2
// to 6 s with the default timings), so a STRONG read through one of them
// waits for the election, as a write does (OnLeader), rather than fail
// with the dead leader's connection error; a CAUSAL read asks another
// replica. So does a read that a node refused for not hosting the shard:
// a node that restarts serves its peers before it has opened every
// replica, and another replica (or the node itself, a moment later)
// serves the read. Only the node the client called retries (hop 0).
func (r *Router) retryForward(ctx context.Context, addr string, err error, deadline time.Time) bool {
	if err == nil || !(unavailable(err) || notHosted(err)) {
		return false
	}
	r.markUnanswered(addr, err)
	return hopsIn(ctx) == 0 && retryBefore(ctx, deadline)
}

// ScanRange is a validated scan of one shard: keys in [Start, End) (nil
// End: unbounded), at most Limit of them.
type ScanRange struct {
	Start, End []byte
	Limit      int
}

// ScanShard scans one shard here or on the node chosen for it; a node
// that does not answer is replaced by another choice (retryForward).
func (r *Router) ScanShard(ctx context.Context, c *Call, sh placement.Shard, sr ScanRange, keysOnly bool, cons kvv1.Consistency) ([]storage.Record, bool, error) {
	type page struct {
		recs []storage.Record
		more bool
	}
	if err := r.CheckJoined(ctx, c); err != nil {
		return nil, false, err
	}
	var strong bool
	g, p, forwarded, err := routed(ctx, r,
		func() (g *shard.Group, addr string, err error) {
			g, addr, strong, err = r.scanTarget(ctx, c, sh, sr, cons)
			return g, addr, err
		},
		func(ctx context.Context, addr string) (page, error) {
			recs, more, err := r.remoteScanShard(ctx, sh, addr, sr, keysOnly, strong)
			return page{recs, more}, err
		})
	if forwarded || err != nil {
		return p.recs, p.more, err
	}
	err = g.Read(func(st *storage.ShardTx) (err error) {
		p.recs, p.more, err = st.ScanBytes(sr.Start, sr.End, sr.Limit, storage.MaxScanPageBytes, keysOnly)
		return err
	})
	return p.recs, p.more, err
}

// scanTarget chooses where a scan of sh is served, and whether it is
// served as STRONG.
func (r *Router) scanTarget(ctx context.Context, c *Call, sh placement.Shard, sr ScanRange, cons kvv1.Consistency) (*shard.Group, string, bool, error) {
	if cons == kvv1.Consistency_CONSISTENCY_STRONG {
		g, addr, err := r.strongTarget(ctx, sh)
		return g, addr, true, err
	}
	// The replica must have applied the shard's floor and the floors of
	// the keys of this shard inside the range.
	floors := r.readFloors(c, sh, nil, sr.Start, sr.End)
	if local := r.Local(sh); len(floors) > 0 && (local == nil || local.Corrupt()) {
		// A shard scan on another node carries no floor: read it on
		// the leader after a read barrier, which is at least as new.
		g, addr, err := r.strongTarget(ctx, sh)
		return g, addr, true, err
	}
	g, addr, err := r.causalTarget(ctx, sh, floors)
	return g, addr, false, err
}

// remoteScanShard scans sh on the node at addr.
func (r *Router) remoteScanShard(ctx context.Context, sh placement.Shard, addr string, sr ScanRange, keysOnly, strong bool) ([]storage.Record, bool, error) {
	nc, err := r.pool.Node(addr)
	if err != nil {
		return nil, false, err
	}
	resp, err := nc.ScanShard(forwardCtx(ctx), &peerv1.ScanShardRequest{
		Shard: &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID},
		Start: sr.Start, End: sr.End, Limit: uint32(sr.Limit), KeysOnly: keysOnly,
		Strong: strong,
	})
	if err != nil {
		return nil, false, RemoteErr(err)
	}
	recs := make([]storage.Record, len(resp.Items))
	for i, it := range resp.Items {
		recs[i] = storage.Record{Key: it.Key, Value: it.Value, Version: causal.Version{HLC: it.Hlc, Site: it.Site}, Stamp: it.Stamp}
	}
	return recs, resp.More, nil
}

// VersionPB converts a version to its wire form (nil for none).
func VersionPB(v causal.Version) *kvv1.Version {
	if v.IsZero() {
		return nil
	}
	return &kvv1.Version{Hlc: v.HLC, Site: v.Site}
}
