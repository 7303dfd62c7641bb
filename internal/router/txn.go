package router

import (
	"context"
	"fmt"
	"math"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// GetTxn reads keys as one causally consistent snapshot: the versions
// this site applied up to one of its local HLCs, the snapshot (docs/adr/019).
//
// Every version has a stamp here: its HLC for a write of this site, the
// local HLC at which this site applied it for another site's write
// (storage.Record.Stamp). Stamps grow with each shard's log, a write
// depending on another is stamped above it on any shard (local HLCs
// exceed what the writer saw; remote writes are applied after their
// dependencies, by a clock that observed the dependencies' replicas), so
// the versions stamped at or below one HLC on every shard are closed
// under causality. Each shard is read on a replica that applied
// everything up to the snapshot (its newest HLC reached it), and per key
// the newest version stamped at or below it is returned.
//
// The snapshot is at least the session's MaxHLC and PastHLC, so it holds
// the session's own writes and the causal past of everything it read (a
// version of another site raises PastHLC to its stamp, see
// Call.ObserveStamp), and at least what the site had acknowledged when
// the call arrived (freshSnapshot). at is the snapshot of a part
// forwarded by another node, or one the client asked for (0: choose).
func (r *Router) GetTxn(ctx context.Context, c *Call, keys [][]byte, at uint64) ([]*kvv1.KeyValue, uint64, error) {
	type part struct {
		sh   placement.Shard
		idx  []int
		keys [][]byte
	}
	var parts []*part
	byShard := map[uint32]*part{}
	for i, k := range keys {
		sh, err := r.Shard(c.Keyspace, k)
		if err != nil {
			return nil, 0, err
		}
		p := byShard[sh.ID]
		if p == nil {
			p = &part{sh: sh}
			byShard[sh.ID] = p
			parts = append(parts, p)
		}
		p.idx = append(p.idx, i)
		p.keys = append(p.keys, k)
	}
	if err := r.CheckJoined(ctx, c); err != nil {
		return nil, 0, err
	}
	if at != 0 {
		if err := r.checkAhead("the snapshot", at); err != nil {
			return nil, 0, err
		}
		if ret := r.cfg.VersionRetention; ret > 0 {
			oldest := r.clock.Physical() - min(r.clock.Physical(), uint64(ret.Milliseconds())<<causal.LogicalBits)
			if at < oldest {
				return nil, 0, fmt.Errorf("%w (%v): snapshot HLC %d; leave snapshot_hlc 0 and the node picks one", ErrSnapshotTooOld, ret, at)
			}
		}
	}
	snap := at
	if snap == 0 {
		shards := make([]placement.Shard, len(parts))
		for i, p := range parts {
			shards[i] = p.sh
		}
		snap = r.freshSnapshot(c, shards)
	}
	out := make([]*kvv1.KeyValue, len(keys))
	for _, p := range parts {
		items, err := r.snapshotShard(ctx, c, p.sh, p.keys, snap)
		if err != nil {
			return nil, 0, err
		}
		for j, it := range items {
			out[p.idx[j]] = it
		}
	}
	if wall, _ := causal.SplitHLC(snap); wall > 0 {
		now, _ := causal.SplitHLC(r.clock.Now())
		if now >= wall {
			r.metrics.txnStaleness.Observe(float64(now-wall) / 1000)
		}
	}
	return out, snap, nil
}

// freshSnapshot picks the snapshot of a GetTxn this node serves: the
// present, as far as this site can have stamped anything by now. That is
// the end of the current millisecond of this node's clock (a write
// acknowledged before the call was stamped by a leader whose wall clock
// read no later, given clocks in step), its HLC (which observed the
// writes this node proposed), the newest HLC of its replicas of the
// shards read (the writes they applied), and the session's MaxHLC and
// PastHLC (its own writes and the causal past of what it read). A shard
// that is idle is not behind: its leader closes the snapshot (one raft
// round) and the cadence that starts keeps the next GetTxns' waits short.
// (Taking the smallest newest HLC of the replicas instead answered from
// an idle shard's last write, and missed every later write of the other
// shards for as long as it stayed idle.)
func (r *Router) freshSnapshot(c *Call, shards []placement.Shard) uint64 {
	wall, _ := causal.SplitHLC(r.clock.Physical())
	snap := max(c.Session.MaxHLC, c.Session.PastHLC, r.clock.Now(), causal.MakeHLC(wall, math.MaxUint16))
	if guards.Off(guards.TxnFresh) {
		// Test-only: the smallest newest HLC of this node's replicas.
		snap = max(c.Session.MaxHLC, c.Session.PastHLC)
		fresh, first := uint64(0), true
		for _, sh := range shards {
			g := r.Local(sh)
			if g == nil {
				return max(snap, r.clock.Now())
			}
			if h := g.MaxHLC(); first || h < fresh {
				fresh, first = h, false
			}
		}
		return max(snap, fresh)
	}
	for _, sh := range shards {
		if g := r.Local(sh); g != nil {
			snap = max(snap, g.MaxHLC())
		}
	}
	return snap
}

// snapshotShard reads keys of sh at snapshot snap, here or on the node
// chosen for it.
func (r *Router) snapshotShard(ctx context.Context, c *Call, sh placement.Shard, keys [][]byte, snap uint64) ([]*kvv1.KeyValue, error) {
	if hopsIn(ctx) >= maxHops {
		return nil, routingLoop(sh, "replica")
	}
	var floors []causal.Floor
	for _, k := range keys {
		floors = append(floors, r.readFloors(c, sh, k, nil, nil)...)
	}
	floors = append(floors, causal.Floor{HLC: snap, Fallback: true})
	// A part handed to a node that does not answer (a leader that died,
	// which its followers name until they elect another) is routed again
	// until LeaderWait, as a Get is (retryForward).
	g, items, forwarded, err := routed(ctx, r,
		func() (*shard.Group, string, error) { return r.causalTarget(ctx, sh, floors) },
		func(ctx context.Context, addr string) ([]*kvv1.KeyValue, error) {
			r.metrics.txns.WithLabelValues("forwarded").Inc()
			return r.remoteSnapshot(ctx, c, sh, addr, keys, snap)
		})
	if forwarded || err != nil {
		return items, err
	}
	r.metrics.txns.WithLabelValues("local").Inc()
	if err := waitSnapshot(ctx, g, snap, r.cfg.CausalWait); err != nil {
		return nil, fmt.Errorf("%w: %s has not reached snapshot HLC %d: %v", ErrCausalWait, sh, snap, err)
	}
	recs := make([]storage.Record, len(keys))
	found := make([]bool, len(keys))
	if err := g.Read(func(st *storage.ShardTx) error {
		for i, k := range keys {
			var err error
			if guards.Off(guards.SnapshotCut) {
				// Test-only: the newest version, whatever its stamp.
				recs[i], found[i], err = st.Latest(k, false)
			} else {
				recs[i], found[i], err = st.LatestAtStamp(k, snap)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	items = make([]*kvv1.KeyValue, len(keys))
	for i, k := range keys {
		items[i] = &kvv1.KeyValue{Key: k}
		if found[i] {
			rec := recs[i]
			c.Observe(sh, k, rec.Version)
			c.ObserveStamp(rec.Stamp)
			items[i].Version = VersionPB(rec.Version)
			items[i].Found = !rec.Tombstone
			items[i].Value = rec.Value
		}
	}
	return items, nil
}

// waitSnapshot waits until g applied everything stamped up to snap. The
// leader serves a CAUSAL read as soon as a read barrier made it current,
// but a snapshot also needs every write proposed later to be stamped
// above it: the replica closes snap (a Close entry) and applies it.
func waitSnapshot(ctx context.Context, g *shard.Group, snap uint64, wait time.Duration) error {
	if g.HasApplied("", snap) {
		return nil
	}
	if g.IsLeader() {
		g.AdvanceClosed(snap)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return g.WaitHLC(wctx, snap)
}

// remoteSnapshot reads part of a GetTxn on another node of the site.
func (r *Router) remoteSnapshot(ctx context.Context, c *Call, sh placement.Shard, addr string, keys [][]byte, snap uint64) ([]*kvv1.KeyValue, error) {
	kv, err := r.pool.KV(addr)
	if err != nil {
		return nil, err
	}
	resp, err := kv.GetTxn(forwardCtx(ctx), &kvv1.GetTxnRequest{
		Header:      &kvv1.RequestHeader{Keyspace: c.Keyspace, Session: c.Session.ForRead(c.Keyspace, keys, shardIs(sh)).Encode()},
		Keys:        keys,
		SnapshotHlc: snap,
	})
	if err != nil {
		return nil, RemoteErr(err)
	}
	if err := mergeSession(c, resp.Header); err != nil {
		return nil, err
	}
	if len(resp.Items) != len(keys) {
		return nil, fmt.Errorf("%w: node %s returned %d items for %d keys", ErrPeerUnavailable, addr, len(resp.Items), len(keys))
	}
	return resp.Items, nil
}
