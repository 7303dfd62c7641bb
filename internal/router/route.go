package router

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/guards"
	"github.com/causeway-db/causeway/internal/peer"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/shard"
)

// Routing errors.
var (
	// ErrNoLeader: the shard has no reachable leader right now. Retryable.
	ErrNoLeader = errors.New("router: shard has no leader")
	// ErrRoutingLoop: a request was forwarded too many times. Retryable.
	ErrRoutingLoop = errors.New("router: request forwarded too many times")
	// ErrCausalWait: no replica caught up with the session's floor in
	// time. Retryable.
	ErrCausalWait = errors.New("router: timed out waiting for causal dependencies")
	// ErrPeerUnavailable: a call to another node failed without an
	// answer from it. Retryable.
	ErrPeerUnavailable = errors.New("router: node unavailable")
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

// RemoteErr passes a remote status through and wraps any other failure of
// a call to another node in ErrPeerUnavailable. So is gRPC's own status
// that the call could not connect to the node (UNAVAILABLE too, and
// saying that it is this node's forward that failed): passed on as is, the
// client would read it as its own connection failure (a request that
// reached no node, so a write it may send anywhere), and its user would
// see a peer address they never configured.
func RemoteErr(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.Unavailable && strings.HasPrefix(st.Message(), "connection error:") {
			return fmt.Errorf("%w: the node could not connect to another node to forward the request: %s", ErrPeerUnavailable, st.Message())
		}
		return err
	}
	return fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
}

// unavailable reports whether a forwarded call failed in a way a retry
// elsewhere may fix.
func unavailable(err error) bool {
	return errors.Is(err, ErrPeerUnavailable) || status.Code(err) == codes.Unavailable
}

// notHosted reports whether err is a peer's refusal of a shard it has no
// open replica of (peer.ErrNotHosted).
func notHosted(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.FailedPrecondition && strings.HasPrefix(st.Message(), peer.ErrNotHosted.Error())
}

// unansweredFor is how long a peer that failed a forwarded request is
// asked only after the other replicas of a shard this node does not hold.
const unansweredFor = 2 * time.Second

// unansweredMark is what the router remembers of a peer that failed a
// forwarded request: until when it is asked last, and whether the node
// itself gave no answer (silent: it could not be reached, or answered
// neither the request nor a ping), rather than answering that it could
// not serve the request.
type unansweredMark struct {
	until   time.Time
	silent  bool
	probing atomic.Bool // a ping is checking whether it answers again
}

// markUnanswered records that the peer at addr failed a forwarded request
// with err.
func (r *Router) markUnanswered(addr string, err error) {
	r.unanswered.Store(addr, &unansweredMark{until: time.Now().Add(unansweredFor), silent: errors.Is(err, ErrPeerUnavailable)})
}

// pickReplica returns the first of reps, from reps[start] on, that has
// not failed a forwarded request lately, else reps[start].
//
// A silent node is not asked again once its mark runs out: each request
// sent to a node that stays silent (stopped with SIGSTOP, or behind a
// link that drops its packets) would wait out a probe (2 s) before it is
// routed again, and every node would send it one such request every
// couple of seconds for as long as it stays silent. It is pinged instead
// (pingSilent), and asked again once it answers.
func (r *Router) pickReplica(reps []catalog.Node, start int) string {
	now := time.Now()
	for i := range reps {
		n := reps[(start+i)%len(reps)]
		v, ok := r.unanswered.Load(n.PeerAddr)
		if !ok {
			return n.PeerAddr
		}
		m := v.(*unansweredMark)
		if now.Before(m.until) {
			continue
		}
		if m.silent {
			r.pingSilent(n.PeerAddr, m)
			continue
		}
		return n.PeerAddr
	}
	return reps[start].PeerAddr
}

// pingSilent pings the silent node at addr, once at a time, in the
// background: if it answers, it is asked again; if not, it stays marked.
func (r *Router) pingSilent(addr string, m *unansweredMark) {
	if !m.probing.CompareAndSwap(false, true) {
		return
	}
	if r.pool == nil {
		r.unanswered.CompareAndDelete(addr, m)
		return
	}
	go func() {
		err := r.ping(context.Background(), addr)
		if err == nil {
			r.unanswered.CompareAndDelete(addr, m)
			return
		}
		r.unanswered.CompareAndSwap(addr, m, &unansweredMark{until: time.Now().Add(unansweredFor), silent: true})
	}()
}

// A link that stopped carrying packets (a cable pulled, a network
// partition) fails no call made over it: a request forwarded across it
// waits for its caller's deadline, and gRPC's keepalive closes the
// connection only some 15 s later (grpcopts). Even after the link is
// back, the kernel resends what it holds with a backoff of seconds. So
// a forwarded request still unanswered after probeAfter has its node
// pinged over the same connection, again every probeAfter, and a ping
// unanswered within probeTimeout ends the request as ErrPeerUnavailable:
// the node the client called routes it again (another replica, the new
// leader) instead of waiting. A node that is only slow (a read waiting
// for its floor, an election) answers its pings and keeps the request. A
// write retried so applies once (its request id).
const (
	probeAfter   = time.Second
	probeTimeout = time.Second
)

// forwardWatched runs call, a request forwarded to the node at addr,
// under a context that ends when that node stops answering pings; the
// request then fails with ErrPeerUnavailable.
func (r *Router) forwardWatched(ctx context.Context, addr string, call func(context.Context) error) error {
	if r.pool == nil {
		return call(ctx)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var lost atomic.Bool
	probe := time.AfterFunc(probeAfter, func() {
		for {
			if err := r.ping(cctx, addr); err != nil {
				if cctx.Err() == nil {
					lost.Store(true)
					cancel()
				}
				return
			}
			select {
			case <-done:
				return
			case <-cctx.Done():
				return
			case <-time.After(probeAfter):
			}
		}
	})
	err := call(cctx)
	close(done)
	probe.Stop()
	if lost.Load() {
		r.metrics.unanswered.Inc()
		r.log.Warn("a node did not answer a forwarded request nor a ping; routing the request again", "peer", addr, "ping_timeout", probeTimeout)
		return fmt.Errorf("%w: node at %s stopped answering (no answer to a ping within %v); the request is routed again", ErrPeerUnavailable, addr, probeTimeout)
	}
	return err
}

// ping reports whether the node at addr answers a ping within
// probeTimeout (on the connection forwarded requests use). A node that
// answers with an error answered.
func (r *Router) ping(ctx context.Context, addr string) error {
	conn, err := r.pool.Conn(addr)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = peerv1.NewChainClient(conn).Ping(pctx, &peerv1.PingRequest{})
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled:
		return err
	}
	return nil
}

// leaderlessAsk is how long a request waits for this node's replica to
// learn its leader before it asks another replica (leaderTarget).
const leaderlessAsk = time.Second

// otherReplicas returns the replicas of sh on other nodes.
func (r *Router) otherReplicas(sh placement.Shard) []catalog.Node {
	reps, _ := r.Replicas(sh)
	return slices.DeleteFunc(slices.Clone(reps), func(n catalog.Node) bool { return string(n.ID) == r.cfg.NodeID })
}

// closerOf returns where a read this node's replica of sh cannot serve
// until its leader closes a newer timestamp goes: the leader at
// leaderAddr, or, while that leader left a forwarded request unanswered
// or this replica knows no leader (it does not hear from it, though the
// leader may still lead and reach the other replicas), another replica
// that answers, which hands the read to the leader from its side
// (TestGetTxnCutsAtOneSnapshot); else leaderAddr ("" when none is known).
func (r *Router) closerOf(ctx context.Context, sh placement.Shard, leaderAddr string) string {
	if hopsIn(ctx) > 0 {
		// Only the node the client called looks further: a replica a
		// read was handed to waits for its leader, so that replicas
		// that all lost the leader do not hand the read round.
		return leaderAddr
	}
	answering := func(addr string) bool {
		v, ok := r.unanswered.Load(addr)
		if !ok {
			return true
		}
		m := v.(*unansweredMark)
		return !m.silent && time.Now().After(m.until)
	}
	if leaderAddr != "" && answering(leaderAddr) {
		return leaderAddr
	}
	others := slices.DeleteFunc(r.otherReplicas(sh), func(n catalog.Node) bool { return n.PeerAddr == leaderAddr })
	if len(others) > 0 {
		if addr := r.pickReplica(others, rand.IntN(len(others))); answering(addr) {
			return addr
		}
	}
	return leaderAddr
}

// routingLoop is ErrRoutingLoop for a request of sh that went from node
// to node looking for its leader or a replica (want).
func routingLoop(sh placement.Shard, want string) error {
	return fmt.Errorf("%w (%d hops) looking for the %s of %s: the nodes disagree on where it is, as while its leadership or its replicas move; retry", ErrRoutingLoop, maxHops, want, sh)
}

// leaderTarget returns this node's replica of sh if it leads, or the peer
// address of the leader; it waits up to LeaderWait for an election. A
// replica here that stopped on a fatal error (its raft log cannot be
// written) fails the request at once: it will not lead again, and the
// node is stopping.
func (r *Router) leaderTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error) {
	if hopsIn(ctx) >= maxHops {
		return nil, "", routingLoop(sh, "leader")
	}
	start := time.Now()
	deadline := start.Add(r.leaderWait(ctx))
	for {
		if g := r.Local(sh); g != nil {
			if err := g.Failure(); err != nil {
				return nil, "", err
			}
			if g.IsLeader() {
				return g, "", nil
			}
			if addr := g.LeaderAddr(); addr != "" {
				return nil, addr, nil
			}
			if hopsIn(ctx) == 0 && (time.Since(start) >= leaderlessAsk || g.LeaderlessFor() >= leaderlessAsk) {
				// This replica knows no leader for a while. While the
				// shard elects one, every replica waits alike; but a
				// replica cut off from a leader the others still reach
				// (a link between two nodes down, no node isolated)
				// knows none as long as the cut lasts: ask another
				// replica, which forwards to its leader or waits there.
				// A replica that has heard from no leader for that long
				// already asks at once: each request through it would
				// otherwise wait the second again.
				if others := r.otherReplicas(sh); len(others) > 0 {
					return nil, r.pickReplica(others, 0), nil
				}
			}
		} else if reps, _ := r.Replicas(sh); len(reps) > 0 {
			// Any replica knows its leader and forwards once more; one
			// that just failed to answer (a dead node the catalog still
			// lists) is asked last.
			return nil, r.pickReplica(reps, 0), nil
		}
		if time.Now().After(deadline) {
			if r.Local(sh) == nil {
				if reps, _ := r.Replicas(sh); len(reps) == 0 {
					return nil, "", fmt.Errorf("%w: %s: this node knows no replica of it yet (its site's placement map is not loaded: the site catalog has no leader; a majority of the site's nodes must be up)", ErrNoLeader, sh)
				}
			}
			return nil, "", fmt.Errorf("%w: %s", ErrNoLeader, sh)
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// OnLeader runs local on the shard leader, here or, through forward, on
// the node that leads it (forward gets that node's KV client and the
// forwarded request's context). A leadership change (election, transfer)
// before or during the proposal is retried until LeaderWait: every
// mutation carries a request id by then, so a retry of a write that did
// commit applies once. Only the node the client called retries (hop 0).
func (r *Router) OnLeader(ctx context.Context, sh placement.Shard, local func(*shard.Group) error, forward func(kvv1.KVClient, context.Context) error) error {
	deadline := time.Now().Add(r.cfg.LeaderWait)
	for {
		g, addr, err := r.leaderTarget(ctx, sh)
		if err != nil {
			return err
		}
		if addr != "" {
			kv, err := r.pool.KV(addr)
			if err != nil {
				return err
			}
			r.metrics.forwarded.Inc()
			err = r.forwardWatched(ctx, addr, func(ctx context.Context) error {
				return RemoteErr(forward(kv, forwardCtx(ctx)))
			})
			// The node we forwarded to may have just lost the leadership
			// (an election, a leadership transfer), or died: ask again.
			if unavailable(err) {
				r.markUnanswered(addr, err)
			}
			if !unavailable(err) || hopsIn(ctx) > 0 || !retryBefore(ctx, deadline) {
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

// readFloors returns the floors a replica of sh must have applied before
// it serves c's read of key (nil key: a scan of [scanStart, scanEnd)), at
// most one per origin, with origin "" for this site's own writes.
//
// Besides the floors the session holds for the key and the shard, this
// site's floor is raised to the session's PastHLC: every version in the
// causal past of anything the session read, whoever wrote it, has an HLC
// of at most PastHLC (a write's HLC exceeds everything its writer had
// seen), so a replica that applied PastHLC of this site's writes holds all
// of the shard's part of that past written here. That is what carries
// causality across sessions (docs/adr/015-cross-session-causality.md).
// The session's own writes need no such floor elsewhere (their causal
// past is what it read), only their key floors. PastHLC is a fallback
// floor: the shard's newest version can be older.
func (r *Router) readFloors(c *Call, sh placement.Shard, key []byte, scanStart, scanEnd []byte) []causal.Floor {
	var buf [4]causal.Floor
	var fs []causal.Floor
	if key != nil {
		fs = c.Session.ReadFloors(buf[:0], c.Keyspace, key, sh.ID)
	} else {
		fs = c.Session.ShardReadFloors(buf[:0], c.Keyspace, sh.ID, scanStart, scanEnd, func(k []byte) uint32 {
			ks, _ := r.Shard(c.Keyspace, k)
			return ks.ID
		})
	}
	out := fs[:0:0]
	local := causal.Floor{}
	for _, f := range fs {
		if f.Origin == "" || f.Origin == r.cfg.Site {
			if f.HLC > local.HLC {
				local = causal.Floor{HLC: f.HLC, Fallback: f.Fallback}
			}
			continue
		}
		out = append(out, f)
	}
	if c.Session.PastHLC > local.HLC && !guards.Off(guards.CausalFloor) {
		local = causal.Floor{HLC: c.Session.PastHLC, Fallback: true}
	}
	if local.HLC > 0 {
		out = append(out, local)
	}
	return out
}

// waitFloor waits until g has applied f.
func waitFloor(ctx context.Context, g *shard.Group, f causal.Floor) error {
	return g.WaitOrigin(ctx, f.Origin, f.HLC)
}

// readTarget decides where a read of key is served: STRONG on the leader;
// CAUSAL on this node's replica once it has applied the session's floor
// (waiting up to FollowerWait, or CausalWait on the leader), else on the
// leader, else on another replica.
func (r *Router) readTarget(ctx context.Context, c *Call, sh placement.Shard, key []byte, cons kvv1.Consistency) (*shard.Group, string, error) {
	if cons == kvv1.Consistency_CONSISTENCY_STRONG {
		return r.strongTarget(ctx, sh)
	}
	if hopsIn(ctx) >= maxHops {
		return nil, "", routingLoop(sh, "replica")
	}
	return r.causalTarget(ctx, sh, r.readFloors(c, sh, key, nil, nil))
}

// strongTarget returns the leader of sh, here after a read barrier, or
// its address. A leadership change under the barrier (an election, a
// transfer) is retried until LeaderWait, like a write.
func (r *Router) strongTarget(ctx context.Context, sh placement.Shard) (*shard.Group, string, error) {
	deadline := time.Now().Add(r.cfg.LeaderWait)
	for {
		g, addr, err := r.leaderTarget(ctx, sh)
		if err == nil && g != nil {
			err = g.ReadBarrier(ctx)
		}
		if !(errors.Is(err, shard.ErrNotLeader) || errors.Is(err, shard.ErrLeadershipLost)) || !retryBefore(ctx, deadline) {
			return g, addr, err
		}
	}
}

// causalTarget serves a CAUSAL read that needs the replica to have
// applied floors (see readFloors).
//
// A fallback floor may lie above the shard's newest version (a session's
// MaxHLC, or a fallback): a follower that has not applied it hands the
// read to the leader at once, and the leader serves it after a read
// barrier, which makes it current with every committed write, and asks
// its group to close this site's floor (shard.Group.AdvanceClosed), so
// that the followers serve the next such reads themselves. Other floors
// are versions the shard holds: a follower waits up to FollowerWait for
// them, then hands the read to the leader, which waits up to CausalWait.
//
// A replica that failed a consistency check hands the read to another
// replica, once: a read forwarded to it fails with shard.ErrCorrupt.
func (r *Router) causalTarget(ctx context.Context, sh placement.Shard, floors []causal.Floor) (*shard.Group, string, error) {
	g := r.Local(sh)
	if g != nil && g.Corrupt() {
		if hopsIn(ctx) > 0 {
			return nil, "", fmt.Errorf("%w: %s on node %s", shard.ErrCorrupt, sh, r.cfg.NodeID)
		}
		g = nil
	}
	if g == nil {
		reps, _ := r.Replicas(sh)
		if len(reps) == 0 {
			// The placement is not known here yet, or the replica is
			// still opening: wait like a leader lookup does.
			return r.leaderTarget(ctx, sh)
		}
		// Any replica, spreading the reads, but not one that just failed
		// to answer while others may.
		r.metrics.forwarded.Inc()
		return nil, r.pickReplica(reps, rand.IntN(len(reps))), nil
	}
	var buf [4]causal.Floor
	missing := buf[:0]
	fallback := false
	for _, f := range floors {
		if !g.HasApplied(f.Origin, f.HLC) {
			missing = append(missing, f)
			fallback = fallback || f.Fallback
		}
	}
	if len(missing) == 0 {
		r.metrics.localRead(g.IsLeader())
		return g, "", nil
	}
	if g.IsLeader() && slices.ContainsFunc(missing, ownVersion) {
		// A version of this site's that the session observed in this
		// shard: once the barrier has it current with every committed
		// write, a leader that still lacks it never held it. The site
		// lost the data after the session saw it (its data directory
		// was deleted, or a quorum was recovered without it); waiting
		// cannot help.
		if err := g.ReadBarrier(ctx); err != nil {
			return nil, "", err
		}
		// The session may have read the version from the state database
		// a moment before the state machine published it.
		if err := g.WaitCommittedApplied(ctx); err != nil {
			return nil, "", err
		}
		for _, f := range missing {
			if ownVersion(f) && !g.HasApplied(f.Origin, f.HLC) {
				return nil, "", fmt.Errorf("%w: a write in %s (HLC %s) that the site does not hold: its data was deleted or lost after the session saw it; start a new session (kvctl: --session-file none, or delete the session file)", ErrLostSession, sh, causal.FormatHLC(f.HLC))
			}
		}
	}
	if fallback && !g.IsLeader() {
		// While the leader closes timestamps at a cadence, the floor is
		// an interval or two away: wait for it rather than hand the read
		// over.
		if cad := g.CloseCadence(); cad > 0 {
			start := time.Now()
			wctx, cancel := context.WithTimeout(ctx, 3*cad)
			var err error
			for _, f := range missing {
				if err = waitFloor(wctx, g, f); err != nil {
					break
				}
			}
			cancel()
			if err == nil {
				r.metrics.floorWaitSec.WithLabelValues("served").Observe(time.Since(start).Seconds())
				r.metrics.localRead(false)
				return g, "", nil
			}
			if ctx.Err() != nil {
				return nil, "", ctx.Err()
			}
		}
	}
	if fallback {
		switch {
		case g.IsLeader():
			if err := g.ReadBarrier(ctx); err != nil {
				return nil, "", err
			}
			closeAtFloors(g, missing)
			// The barrier makes the leader current with this site's
			// writes only: a version of another site that the session
			// observed is here once its chain brought it, so the read
			// still waits for it below.
			missing = slices.DeleteFunc(missing, func(f causal.Floor) bool {
				return f.Fallback || f.Origin == "" || g.HasApplied(f.Origin, f.HLC)
			})
			if len(missing) == 0 {
				r.metrics.localRead(true)
				return g, "", nil
			}
		case g.LeaderAddr() != "":
			r.metrics.floorWaits.Inc()
			r.metrics.forwarded.Inc()
			return nil, r.closerOf(ctx, sh, g.LeaderAddr()), nil
		}
	}
	// A follower that knows no leader (an election is under way) waits for
	// one, up to LeaderWait, rather than fail the read.
	start := time.Now()
	deadline := start.Add(r.cfg.LeaderWait)
	for {
		if fallback && g.IsLeader() {
			// Elected while the read waited: as the leader above, it
			// closes at the floor once a barrier has it current.
			if err := g.ReadBarrier(ctx); err == nil {
				closeAtFloors(g, missing)
			}
		}
		wait := r.cfg.CausalWait
		if !g.IsLeader() {
			wait = r.cfg.FollowerWait
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		var err error
		for _, f := range missing {
			if err = waitFloor(wctx, g, f); err != nil {
				break
			}
		}
		cancel()
		switch {
		case err == nil:
			r.metrics.floorWaitSec.WithLabelValues("served").Observe(time.Since(start).Seconds())
			r.metrics.localRead(g.IsLeader())
			return g, "", nil
		case ctx.Err() != nil:
			return nil, "", ctx.Err()
		case !g.IsLeader():
			addr := g.LeaderAddr()
			if fallback {
				// A replica that lost its leader (cut off from it) hands
				// a read that needs a newer close to another replica,
				// which may still reach the leader.
				addr = r.closerOf(ctx, sh, addr)
			}
			if addr == "" && hopsIn(ctx) == 0 && g.LeaderlessFor() >= leaderlessAsk {
				// A replica that has heard from no leader for a second
				// may be cut off from a leader the others still reach
				// (its floor would come only after the cut heals):
				// another replica serves the read, or forwards it to its
				// leader.
				if others := r.otherReplicas(sh); len(others) > 0 {
					addr = r.pickReplica(others, 0)
				}
			}
			if addr != "" {
				r.metrics.floorWaitSec.WithLabelValues("forwarded").Observe(time.Since(start).Seconds())
				r.metrics.floorWaits.Inc()
				r.metrics.forwarded.Inc()
				return nil, addr, nil
			}
			if retryBefore(ctx, deadline) {
				continue
			}
		}
		r.metrics.floorWaitSec.WithLabelValues("timeout").Observe(time.Since(start).Seconds())
		return nil, "", fmt.Errorf("%w: %s needs %s", ErrCausalWait, sh, floorString(missing))
	}
}

// closeAtFloors advances the closed timestamp of g, which leads and has
// passed a read barrier, to the fallback floors of this site's writes
// among floors.
func closeAtFloors(g *shard.Group, floors []causal.Floor) {
	for _, f := range floors {
		if f.Fallback && f.Origin == "" {
			g.AdvanceClosed(f.HLC)
		}
	}
}

// ownVersion reports whether f is a version of this site's writes (not a
// fallback floor above the shard's newest version, nor another site's).
func ownVersion(f causal.Floor) bool { return !f.Fallback && f.Origin == "" }

// floorString renders floors for an error message.
func floorString(fs []causal.Floor) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString(", ")
		}
		origin := f.Origin
		if origin == "" {
			origin = "this site"
		}
		fmt.Fprintf(&b, "HLC %s of %s", causal.FormatHLC(f.HLC), origin)
	}
	return b.String()
}
