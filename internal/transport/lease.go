package transport

import (
	"math"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// Read leases (docs/adr/024-read-leases.md). A STRONG read on a shard's
// leader needs to know that no other replica leads: raft's VerifyLeader
// sends a heartbeat round and waits for a quorum, one round per batch of
// reads. A lease spares the round while the followers' own answers prove
// the same thing.
//
// The proof rests on a promise each follower makes with every successful
// answer to its leader (AppendEntriesResponse.lease_promise_ms, its raft
// HeartbeatTimeout): hashicorp/raft's follower refuses its vote to any
// candidate but its known leader until a HeartbeatTimeout passed without
// a message from that leader, unless the candidate campaigns for a
// leadership transfer. The leader's transport records, per follower and
// term, the send time of each request answered with success plus half the
// promise (FollowerLease). While a quorum of voters (the leader and
// followers whose lease has not run out) holds, no other candidate can
// gather a quorum of votes, so no other leader exists.
//
// Three things could break the promise, and the transport closes each:
//   - A leadership transfer: its target's votes are granted whatever the
//     voters know. The leader's transport records the term in which it
//     sent TimeoutNow (Transferred); the lease is void for that term.
//   - A transfer a deposed leader started, delivered late: the receiving
//     transport refuses a TimeoutNow of a term older than its raft's
//     (SetTermSource).
//   - A restart: the follower forgets its leader. A replica that opens
//     on the state of an earlier run refuses every vote but a
//     transfer's until its promise has passed (SetLeasePromise).

// ReadLeases is implemented by a group transport that records the
// followers' promises (every transport this package opens).
type ReadLeases interface {
	// SetLeasePromise sets the promise this replica's successful answers
	// carry: its raft HeartbeatTimeout. Zero (the default) promises
	// nothing. If the replica restarted (it opened on the state of an
	// earlier run, which may have made promises) it refuses votes for d.
	SetLeasePromise(d time.Duration, restarted bool)
	// SetTermSource gives the transport raft's current term, against which
	// it checks incoming TimeoutNow requests.
	SetTermSource(term func() uint64)
	// FollowerLease returns until when target's successful answers in
	// term keep it from voting for another candidate (by this node's
	// clock, with half of its promise as margin), or the zero time.
	FollowerLease(target raft.ServerAddress, term uint64) time.Time
	// Transferred reports whether this replica, as leader, sent a
	// TimeoutNow in term: its followers may elect the target at once.
	Transferred(term uint64) bool
}

var _ ReadLeases = (*groupTransport)(nil)

// SetLeasePromise implements ReadLeases.
func (g *groupTransport) SetLeasePromise(d time.Duration, restarted bool) {
	ms := max(d.Milliseconds(), 0)
	g.promiseMs.Store(uint32(min(ms, int64(^uint32(0)))))
	if restarted && d > 0 {
		until := time.Now().Add(d)
		g.voteHold.Store(&until)
	}
}

// SetTermSource implements ReadLeases.
func (g *groupTransport) SetTermSource(term func() uint64) { g.termSource.Store(&term) }

// FollowerLease implements ReadLeases.
func (g *groupTransport) FollowerLease(target raft.ServerAddress, term uint64) time.Time {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followers[target]
	if f == nil || f.term != term {
		return time.Time{}
	}
	return f.lease
}

// Acknowledged returns the last entry target acknowledged in term, as the
// leader's transport saw it (a follower's progress: the site catalog
// promotes only non-voters that caught up), and whether it acknowledged
// any.
func (g *groupTransport) Acknowledged(target raft.ServerAddress, term uint64) (uint64, bool) {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followers[target]
	if f == nil || f.term != term || f.ackTerm == 0 {
		return 0, false
	}
	return f.ackIdx, true
}

// Transferred implements ReadLeases.
func (g *groupTransport) Transferred(term uint64) bool {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.transferTerm >= term
}

// extendLease records a successful answer of f's follower in f's term to a
// request sent at sent, carrying a promise of promiseMs. REQUIRES:
// g.push.mu.
func extendLease(f *followerCommit, sent time.Time, promiseMs uint32) {
	if promiseMs == 0 {
		return
	}
	until := sent.Add(time.Duration(promiseMs) * time.Millisecond / 2)
	if until.After(f.lease) {
		f.lease = until
	}
}

// startTransfer returns the term a TimeoutNow this leader sends carries
// (its raft's current term, or the newest term of its AppendEntries) and
// records that its lease is void in it.
func (g *groupTransport) startTransfer() uint64 {
	var raftTerm uint64
	if src := g.termSource.Load(); src != nil {
		if t := (*src)(); t != math.MaxUint64 {
			raftTerm = t
		}
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	term := max(c.leaderTerm, raftTerm)
	if !guards.Off(guards.LeaseTransfer) {
		c.transferTerm = max(c.transferTerm, term)
	}
	return term
}

// promise stamps a successful answer of group's replica with its promise.
func (s *service) promise(group string, resp *peerv1.AppendEntriesResponse) {
	if resp == nil || !resp.GetSuccess() {
		return
	}
	if g, err := s.n.group(group); err == nil {
		resp.LeasePromiseMs = g.promiseMs.Load()
	}
}

// staleTransfer returns an error if req is a transfer older than the term
// of its group's raft.
func (s *service) staleTransfer(req *peerv1.TimeoutNowRequest) error {
	if req.GetTerm() == 0 {
		return nil
	}
	g, err := s.n.group(req.GetGroup())
	if err != nil {
		return nil // unary answers it
	}
	src := g.termSource.Load()
	if src == nil {
		return nil
	}
	if cur := (*src)(); req.GetTerm() < cur && !guards.Off(guards.StaleTransfer) {
		s.n.metrics.leaseRefusals.WithLabelValues("stale_transfer").Inc()
		return refusedf("a leadership transfer of term %d, older than the replica's term %d", req.GetTerm(), cur)
	}
	return nil
}

// heldVote returns an error if req is a vote its group's replica may not
// grant yet: it restarted less than its promise ago.
func (s *service) heldVote(req *peerv1.RequestVoteRequest) error {
	if req.GetLeadershipTransfer() || guards.Off(guards.VoteHold) {
		return nil
	}
	g, err := s.n.group(req.GetGroup())
	if err != nil {
		return nil // unary answers it
	}
	until := g.voteHold.Load()
	if until == nil {
		return nil
	}
	if left := time.Until(*until); left > 0 {
		s.n.metrics.leaseRefusals.WithLabelValues("vote_held").Inc()
		return refusedf("the replica of %s grants no vote for %v after it restarted (it may have promised a leader not to, read leases)",
			req.GetGroup(), left.Round(time.Millisecond))
	}
	g.voteHold.CompareAndSwap(until, nil)
	return nil
}
