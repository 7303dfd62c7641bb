package rpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// Routing errors.
var (
	// ErrNoLeader: the shard has no reachable leader right now. Retryable.
	ErrNoLeader = errors.New("rpc: shard has no leader")
	// ErrRoutingLoop: a request was forwarded too many times. Retryable.
	ErrRoutingLoop = errors.New("rpc: request forwarded too many times")
)

// hopsKey is the metadata key counting how often a request was forwarded.
const (
	hopsKey = "causeway-hops"
	maxHops = 3
)

func hopsIn(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(hopsKey); len(v) > 0 {
		n, _ := strconv.Atoi(v[0])
		return n
	}
	return 0
}

// forwardCtx returns the outgoing context of a forwarded request.
func forwardCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, hopsKey, strconv.Itoa(hopsIn(ctx)+1))
}

// leaderTarget returns this node's replica of sh if it leads, or the peer
// address of the leader; it waits up to LeaderWait for an election.
func (s *KV) leaderTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error) {
	if hopsIn(ctx) >= maxHops {
		return nil, "", ErrRoutingLoop
	}
	deadline := time.Now().Add(s.cfg.LeaderWait)
	for {
		if g := s.router.Local(sh); g != nil {
			if g.IsLeader() {
				return g, "", nil
			}
			if addr := g.LeaderAddr(); addr != "" {
				return nil, addr, nil
			}
		} else if reps, _ := s.router.Replicas(sh); len(reps) > 0 {
			// Any replica knows its leader and forwards once more.
			return nil, reps[0].PeerAddr, nil
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("%w: %s", ErrNoLeader, sh)
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// onLeader runs local on the shard leader, here or, through forward, on
// the node that leads it. A leadership change (election, transfer) before
// or during the proposal is retried until LeaderWait: every mutation
// carries a request id by then, so a retry of a write that did commit
// applies once. Only the node the client called retries (hop 0).
func (s *KV) onLeader(ctx context.Context, sh placement.Shard, local func(*shard.Group) error, forward func(kvv1.KVClient, context.Context) error) error {
	deadline := time.Now().Add(s.cfg.LeaderWait)
	for {
		g, addr, err := s.leaderTarget(ctx, sh)
		if err != nil {
			return err
		}
		if addr != "" {
			kv, err := s.pool.KV(addr)
			if err != nil {
				return err
			}
			s.metrics.forwarded.Inc()
			err = remoteErr(forward(kv, forwardCtx(ctx)))
			// The node we forwarded to may have just lost the leadership
			// (an election, a leadership transfer): ask again.
			if status.Code(err) != codes.Unavailable || hopsIn(ctx) > 0 || !retryBefore(ctx, deadline) {
				return err
			}
			continue
		}
		err = local(g)
		if !(errors.Is(err, shard.ErrNotLeader) || errors.Is(err, shard.ErrLeadershipLost)) || !retryBefore(ctx, deadline) {
			return err
		}
	}
}

// retryBefore waits a moment before a retry and reports whether there is
// still time for one.
func retryBefore(ctx context.Context, deadline time.Time) bool {
	if time.Now().After(deadline) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// readTarget decides where a read of key is served: STRONG on the leader;
// CAUSAL on this node's replica once it has applied the session's floor
// (waiting up to FollowerWait, or CausalWait on the leader), else on the
// leader, else on another replica.
func (s *KV) readTarget(ctx context.Context, c *call, sh placement.Shard, key []byte, cons kvv1.Consistency) (*shard.Group, string, error) {
	if cons == kvv1.Consistency_CONSISTENCY_STRONG {
		return s.strongTarget(ctx, sh)
	}
	if hopsIn(ctx) >= maxHops {
		return nil, "", ErrRoutingLoop
	}
	floor, fallback := c.session.ReadFloor(c.keyspace, key, sh.ID)
	return s.causalTarget(ctx, sh, floor, fallback)
}

// strongTarget returns the leader of sh, here after a read barrier, or
// its address. A leadership change under the barrier (an election, a
// transfer) is retried until LeaderWait, like a write.
func (s *KV) strongTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error) {
	deadline := time.Now().Add(s.cfg.LeaderWait)
	for {
		g, addr, err := s.leaderTarget(ctx, sh)
		if err == nil && g != nil {
			err = g.ReadBarrier(ctx)
		}
		if !(errors.Is(err, shard.ErrNotLeader) || errors.Is(err, shard.ErrLeadershipLost)) || !retryBefore(ctx, deadline) {
			return g, addr, err
		}
	}
}

// causalTarget serves a CAUSAL read that needs the replica to have applied
// floorHLC (zero: no floor). A fallback floor (see causal.Session.Fallback)
// may lie above the shard's newest version: a replica that has not applied
// it hands the read to the leader at once, and the leader serves it after a
// read barrier, which makes it current with every committed write. A
// replica that failed a consistency check hands the read to another
// replica, once: a read forwarded to it fails with shard.ErrCorrupt.
func (s *KV) causalTarget(ctx context.Context, sh placement.Shard, floorHLC uint64, fallback bool) (*shard.Group, string, error) {
	hasFloor := floorHLC > 0
	g := s.router.Local(sh)
	if g != nil && g.Corrupt() {
		if hopsIn(ctx) > 0 {
			return nil, "", fmt.Errorf("%w: %s on node %s", shard.ErrCorrupt, sh, s.cfg.NodeID)
		}
		g = nil
	}
	if g == nil {
		reps, _ := s.router.Replicas(sh)
		if len(reps) == 0 {
			// The placement is not known here yet, or the replica is
			// still opening: wait like a leader lookup does.
			return s.leaderTarget(ctx, sh)
		}
		s.metrics.forwarded.Inc()
		return nil, reps[rand.IntN(len(reps))].PeerAddr, nil
	}
	if !hasFloor {
		s.metrics.followerRead(g.IsLeader())
		return g, "", nil
	}
	if fallback && !appliedHLC(ctx, g, floorHLC) {
		switch {
		case g.IsLeader():
			if err := g.ReadBarrier(ctx); err != nil {
				return nil, "", err
			}
			s.metrics.followerRead(true)
			return g, "", nil
		case g.LeaderAddr() != "":
			s.metrics.floorWaits.Inc()
			s.metrics.forwarded.Inc()
			return nil, g.LeaderAddr(), nil
		}
	}
	// A follower that knows no leader (an election is under way) waits for
	// one, up to LeaderWait, rather than fail the read.
	deadline := time.Now().Add(s.cfg.LeaderWait)
	for {
		wait := s.cfg.CausalWait
		if !g.IsLeader() {
			wait = s.cfg.FollowerWait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := g.WaitHLC(wctx, floorHLC)
		cancel()
		switch {
		case err == nil:
			s.metrics.followerRead(g.IsLeader())
			return g, "", nil
		case ctx.Err() != nil:
			return nil, "", ctx.Err()
		case !g.IsLeader() && g.LeaderAddr() != "":
			s.metrics.floorWaits.Inc()
			s.metrics.forwarded.Inc()
			return nil, g.LeaderAddr(), nil
		case !g.IsLeader() && retryBefore(ctx, deadline):
			continue
		}
		return nil, "", fmt.Errorf("%w: %s needs HLC %d", ErrCausalWait, sh, floorHLC)
	}
}

// appliedHLC reports whether g has already applied hlc, without waiting.
func appliedHLC(ctx context.Context, g *shard.Group, hlc uint64) bool {
	done, cancel := context.WithCancel(ctx)
	cancel()
	return g.WaitHLC(done, hlc) == nil
}

// shardIs returns a shard function for causal.Session.ForRead that places
// every key in sh.
func shardIs(sh placement.Shard) func([]byte) (uint32, bool) {
	return func([]byte) (uint32, bool) { return sh.ID, true }
}

// remoteGet reads one key on another node, carrying the floors that read
// needs and merging what it observed.
func (s *KV) remoteGet(ctx context.Context, c *call, sh placement.Shard, addr string, key []byte, cons kvv1.Consistency) (*kvv1.KeyValue, error) {
	kv, err := s.pool.KV(addr)
	if err != nil {
		return nil, err
	}
	resp, err := kv.Get(forwardCtx(ctx), &kvv1.GetRequest{
		Header: &kvv1.RequestHeader{Keyspace: c.keyspace, Session: c.session.ForRead(c.keyspace, [][]byte{key}, shardIs(sh)).Encode()},
		Key:    key, Consistency: cons,
	})
	if err != nil {
		return nil, remoteErr(err)
	}
	if err := s.mergeSession(c, resp.Header); err != nil {
		return nil, err
	}
	return &kvv1.KeyValue{Key: key, Found: resp.Found, Value: resp.Value, Version: resp.Version}, nil
}

func (s *KV) mergeSession(c *call, h *kvv1.ResponseHeader) error {
	if h == nil {
		return nil
	}
	sess, err := causal.DecodeSession(h.Session)
	if err != nil {
		return fmt.Errorf("rpc: session from peer: %w", err)
	}
	c.merge(sess)
	return nil
}

// scanShard scans one shard here or on the node chosen for it.
func (s *KV) scanShard(ctx context.Context, c *call, sh placement.Shard, sr scanRange, keysOnly bool, cons kvv1.Consistency) ([]storage.Record, bool, error) {
	var g *shard.Group
	var addr string
	var err error
	strong := cons == kvv1.Consistency_CONSISTENCY_STRONG
	if strong {
		g, addr, err = s.strongTarget(ctx, sh)
	} else {
		// The replica must have applied the shard's floor and the floors of
		// the keys of this shard inside the range.
		floor, fallback := c.session.ShardReadFloor(c.keyspace, sh.ID, sr.start, sr.end, func(key []byte) uint32 {
			k, _ := s.router.Shard(c.keyspace, key)
			return k.ID
		})
		if local := s.router.Local(sh); floor > 0 && (local == nil || local.Corrupt()) {
			// A shard scan on another node carries no floor: read it on
			// the leader after a read barrier, which is at least as new.
			strong = true
			g, addr, err = s.strongTarget(ctx, sh)
		} else {
			g, addr, err = s.causalTarget(ctx, sh, floor, fallback)
		}
	}
	if err != nil {
		return nil, false, err
	}
	if addr == "" {
		var recs []storage.Record
		var more bool
		err := g.Read(func(st *storage.ShardTx) (err error) {
			recs, more, err = st.Scan(sr.start, sr.end, sr.limit, keysOnly)
			return err
		})
		return recs, more, err
	}
	nc, err := s.pool.Node(addr)
	if err != nil {
		return nil, false, err
	}
	resp, err := nc.ScanShard(forwardCtx(ctx), &peerv1.ScanShardRequest{
		Shard: &peerv1.ShardRef{Keyspace: sh.Keyspace, Shard: sh.ID},
		Start: sr.start, End: sr.end, Limit: uint32(sr.limit), KeysOnly: keysOnly,
		Strong: strong,
	})
	if err != nil {
		return nil, false, remoteErr(err)
	}
	recs := make([]storage.Record, len(resp.Items))
	for i, it := range resp.Items {
		recs[i] = storage.Record{Key: it.Key, Value: it.Value, Version: causal.Version{HLC: it.Hlc, Site: it.Site}}
	}
	return recs, resp.More, nil
}
