package transport

import (
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// Quiet groups: once a group's writes stop, hashicorp/raft's replication
// goroutine still sends each follower an AppendEntries every one to two
// CommitTimeouts, and its heartbeat goroutine a heartbeat every tenth to
// fifth of the HeartbeatTimeout, only to keep the two in contact: the
// follower's election timer and the leader's lease. Each costs timer
// wake-ups and goroutine hand-offs on both nodes, so a node's idle cost
// grew with the groups it hosts
// (docs/adr/020-idle-shards-and-the-write-path.md). The transport takes
// the contact over, as CockroachDB's coalesced heartbeats do, and tells
// raft so through raft.WithQuiet (the node's copy of hashicorp/raft,
// third_party/raft/FORK.md):
//
//   - Every Config.KeepaliveInterval the Network sends each peer node, in
//     one AppendEntriesBatch, a heartbeat of each group this node leads
//     whose raft messages to a follower on that node carry nothing new
//     (no entries, no newer commit index), while raft's replication to
//     it is running (a pipeline is open and raft sent it a request within
//     four intervals, or waits quietly: a leader whose raft stopped
//     replicating stops its keepalives). The follower's raft answers it
//     on its heartbeat fast path, which resets its election timer without
//     waking its loop.
//   - While a keepalive the follower answered with success in the term
//     was sent within two intervals and raft's last message to it carried
//     nothing new, raft's replication to it waits without a timer (Quiet)
//     and so does its heartbeat (QuietHeartbeat; VerifyLeader still
//     heartbeats at once), and the leader's lease counts the keepalive's
//     send time as contact (QuietContact). A keepalive that fails, or none
//     answered within two intervals, ends the wait (guard
//     quiet-confirmed): raft sends the follower a message at once and
//     judges its answer, so a leader whose followers are gone still loses
//     its lease. New entries wake the replication as always, and so does
//     a new commit index (guard quiet-commit), so a follower learns that
//     the last entries it holds committed.
//   - raft's own message that carries nothing new, when raft sends one
//     (before its replication comes to wait), is answered by the leader's
//     transport with the follower's last answer of the term, without
//     sending it, under the same condition.
//
// The keepalive is an ordinary raft heartbeat of the leader's current
// term: a follower may take it at any time, and it never moves a log or a
// commit index.

// quietFollower is what a leader's transport knows of one follower for
// keepalives. REQUIRES: the group's push.mu.
type quietFollower struct {
	idle       bool                         // raft's last request to it carried nothing new
	raftSent   time.Time                    // when raft last sent it a request
	lastOK     bool                         // it answered a request of the term with success
	respHeader raft.RPCHeader               // that answer's header
	lastLog    uint64                       // and the last index of its log then
	confirmed  time.Time                    // when the last keepalive it answered with success was sent
	pending    bool                         // a keepalive to it is in flight
	msg        *peerv1.AppendEntriesRequest // the keepalive of the term, built once
	// waiting is set while raft's replication to it waits on wake without
	// a timer (Quiet); closing wake ends the wait.
	waiting bool
	wake    chan struct{}
}

// endWait ends raft's quiet wait on q, if any: raft sends the follower a
// message at once. REQUIRES: the group's push.mu.
func (q *quietFollower) endWait(m *metrics) {
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
	if q.waiting {
		q.waiting = false
		m.quietWaiting.Dec()
	}
}

// Reasons the keepalives end a quiet wait (metric quiet_wakes_total).
const (
	quietWakeNoContact = "no_contact" // no keepalive answered within two intervals
	quietWakeRefused   = "refused"    // a keepalive failed, was refused or answered from a newer term
	quietWakeLogLost   = "log_lost"   // answered by a follower whose log lost what it acknowledged
)

// wokenBy ends raft's quiet wait on q, if any, for reason. REQUIRES: the
// group's push.mu.
func (q *quietFollower) wokenBy(m *metrics, reason string) {
	if q.waiting {
		m.quietWakes.WithLabelValues(reason).Inc()
	}
	q.endWait(m)
}

// answered records a successful answer of the follower to one of raft's
// requests of the current term.
func (q *quietFollower) answered(resp *raft.AppendEntriesResponse) {
	q.lastOK, q.respHeader, q.lastLog = true, resp.RPCHeader, resp.LastLog
}

// contactConfirmed reports whether the follower answered with success a
// keepalive sent within window (guard quiet-confirmed).
func (q *quietFollower) contactConfirmed(window time.Duration) bool {
	return q.lastOK && (guards.Off(guards.QuietConfirmed) || time.Since(q.confirmed) <= window)
}

// lockFollower locks g.push.mu and returns what the transport knows of
// follower target in term, or nil if nothing, if keepalives are off or if
// the group is closing, and the window within which a keepalive must have
// been answered. The caller unlocks g.push.mu.
func (g *groupTransport) lockFollower(target raft.ServerAddress, term uint64) (*followerCommit, time.Duration) {
	c := &g.push
	c.mu.Lock()
	window := 2 * g.net.cfg.KeepaliveInterval
	f := c.followers[target]
	if window == 0 || c.stopped || f == nil || f.term != term {
		return nil, window
	}
	return f, window
}

// quietAnswer returns the answer the transport gives raft's request args
// to target itself, or nil if args must be sent. The caller checked that
// args carries nothing new (carriesNothingNew).
func (g *groupTransport) quietAnswer(target raft.ServerAddress, args *raft.AppendEntriesRequest) *peerv1.AppendEntriesResponse {
	f, window := g.lockFollower(target, args.Term)
	defer g.push.mu.Unlock()
	if f == nil {
		return nil
	}
	q := &f.quiet
	q.idle = true
	if !q.contactConfirmed(window) {
		return nil
	}
	return appendEntriesResponseToProto(&raft.AppendEntriesResponse{RPCHeader: q.respHeader, Term: f.term, LastLog: q.lastLog, Success: true})
}

var _ raft.WithQuiet = (*groupTransport)(nil)

// Quiet implements raft.WithQuiet (third_party/raft/FORK.md): raft's
// replication to target may wait without a timer while target answered a
// keepalive of term within two intervals and raft's last message to it
// carried nothing new. The wait ends when a keepalive fails or goes
// unanswered for two intervals (keepalives, confirm), or the term or the
// group ends.
func (g *groupTransport) Quiet(target raft.ServerAddress, term uint64) <-chan struct{} {
	f, window := g.lockFollower(target, term)
	defer g.push.mu.Unlock()
	if f == nil {
		return nil
	}
	q := &f.quiet
	if !q.idle || !q.contactConfirmed(window) {
		q.endWait(g.net.metrics)
		return nil
	}
	if !q.waiting {
		q.waiting = true
		g.net.metrics.quietWaits.Inc()
		g.net.metrics.quietWaiting.Inc()
	}
	if q.wake == nil {
		q.wake = make(chan struct{})
	}
	return q.wake
}

// QuietEnd implements raft.WithQuiet.
func (g *groupTransport) QuietEnd(target raft.ServerAddress) {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.followers[target]; f != nil {
		f.quiet.endWait(g.net.metrics)
	}
}

// QuietHeartbeat implements raft.WithQuiet: raft's heartbeats to target
// wait as long as its replication does.
func (g *groupTransport) QuietHeartbeat(target raft.ServerAddress, term uint64) <-chan struct{} {
	f, _ := g.lockFollower(target, term)
	defer g.push.mu.Unlock()
	if f == nil || !f.quiet.waiting {
		return nil
	}
	return f.quiet.wake
}

// QuietContact implements raft.WithQuiet: the send time of the last
// keepalive of term target answered with success.
func (g *groupTransport) QuietContact(target raft.ServerAddress, term uint64) time.Time {
	f, _ := g.lockFollower(target, term)
	defer g.push.mu.Unlock()
	switch {
	case f == nil || !f.quiet.lastOK:
		return time.Time{}
	case guards.Off(guards.QuietConfirmed):
		return time.Now() // unsafe: contact whatever the keepalives say
	}
	return f.quiet.confirmed
}

// keepalives adds to out, by target node, a keepalive for each follower
// of this group that is due one (see above). now is the send time.
func (g *groupTransport) keepalives(now time.Time, out map[raft.ServerAddress][]*batchItem) {
	g.mu.Lock()
	if len(g.mu.pipelines) == 0 || g.mu.closed {
		g.mu.Unlock()
		return
	}
	var buf [4]raft.ServerAddress // a group has a few followers
	open := buf[:0]
	for p := range g.mu.pipelines {
		open = append(open, p.target)
	}
	g.mu.Unlock()

	live, window := 4*g.net.cfg.KeepaliveInterval, 2*g.net.cfg.KeepaliveInterval
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	for target, f := range c.followers {
		q := &f.quiet
		if q.waiting && now.Sub(q.confirmed) > window && !guards.Off(guards.QuietConfirmed) {
			q.wokenBy(g.net.metrics, quietWakeNoContact) // no keepalive answered lately: raft's messages again
		}
		if !slices.Contains(open, target) || !q.idle || !q.lastOK || q.pending || (now.Sub(q.raftSent) > live && !q.waiting) {
			continue
		}
		q.pending = true
		if q.msg == nil {
			// The same message all term (the header names the leader);
			// one keepalive to a follower is in flight at a time.
			q.msg = appendEntriesToProto(g.name, &raft.AppendEntriesRequest{RPCHeader: f.header, Term: f.term})
		}
		msg := q.msg
		msg.Header = g.stamp(msg.Header)
		out[target] = append(out[target], &batchItem{msg: msg, done: func(r batchResult) {
			g.confirm(target, f, now, msg, r)
		}})
	}
}

// confirm records the answer to a keepalive sent to target at sent.
func (g *groupTransport) confirm(target raft.ServerAddress, f *followerCommit, sent time.Time, msg *peerv1.AppendEntriesRequest, r batchResult) {
	var resp raft.AppendEntriesResponse
	err, respBytes := r.err, 0
	if err == nil {
		respBytes = proto.Size(r.resp)
		err = appendEntriesResponseFromProto(r.resp, &resp)
	}
	g.net.metrics.observeSent(typeKeepalive, sent, proto.Size(msg), respBytes, err)
	if r.err != nil {
		g.refused(r.err)
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f.quiet.pending = false
	if c.followers[target] != f {
		return
	}
	answered := err == nil && resp.Success && resp.Term == f.term
	if answered && f.stillHolds(resp.LastLog) {
		if sent.After(f.quiet.confirmed) {
			f.quiet.confirmed = sent
		}
		extendLease(f, sent, r.resp.GetLeasePromiseMs())
		return
	}
	// Refused, failed, answered from a newer term or by a follower whose
	// log lost what it acknowledged: raft's next message goes to the
	// follower, at once if raft waits, and raft judges its answer.
	f.quiet.confirmed = time.Time{}
	if !guards.Off(guards.QuietConfirmed) {
		reason := quietWakeRefused
		if answered {
			reason = quietWakeLogLost
		}
		f.quiet.wokenBy(g.net.metrics, reason)
	}
}

// stillHolds reports whether a follower whose log ends at lastLog still
// holds the last entry it acknowledged in the term (guard
// quiet-log-check). A heartbeat is answered with success by any replica
// of the term, one opened again with an empty log too (a node that
// dropped its replica and opened it anew while the leader still had it in
// the configuration); a keepalive so answered must not count as contact,
// or the leader's replication waits quietly on a follower that lacks the
// log and, while the group stays idle, never sends it again. Entries a
// follower acknowledged in a term are never truncated in that term and a
// snapshot never moves its last index back, so a healthy follower never
// answers below ackIdx. REQUIRES: the group's push.mu.
func (f *followerCommit) stillHolds(lastLog uint64) bool {
	return lastLog >= f.ackIdx || guards.Off(guards.QuietLogCheck)
}

// runKeepalives sends the keepalives every Config.KeepaliveInterval until
// stop is closed.
func (n *Network) runKeepalives(stop <-chan struct{}) {
	t := time.NewTicker(n.cfg.KeepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n.sendKeepalives()
		}
	}
}

// errNoBatches fails a keepalive that could not be sent: the Network is
// closing, or the peer does not take batches.
var errNoBatches = errors.New("transport: keepalive not sent: batches closed or not supported by the peer")

// sendKeepalives sends each peer node the keepalives due to it, in one
// AppendEntriesBatch (with whatever else waits for that node).
func (n *Network) sendKeepalives() {
	n.mu.RLock()
	groups := make([]*groupTransport, 0, len(n.mu.groups))
	for _, g := range n.mu.groups {
		groups = append(groups, g)
	}
	n.mu.RUnlock()
	now := time.Now()
	out := make(map[raft.ServerAddress][]*batchItem)
	for _, g := range groups {
		g.keepalives(now, out)
	}
	for target, items := range out {
		if !n.batch.sendNow(target, items) {
			for _, it := range items {
				it.done(batchResult{err: errNoBatches})
			}
		}
	}
}
