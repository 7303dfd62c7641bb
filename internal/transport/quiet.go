package transport

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// Quiet groups: once a group's writes stop, hashicorp/raft's replication
// goroutine still sends each follower an AppendEntries every one to two
// CommitTimeouts, only to keep the two in contact: the follower's election
// timer and the leader's lease. Batched per node (batch.go) they still
// cost each follower a hand-off to its raft's loop and the leader a
// round trip per group, so a node's idle cost grew with the groups it
// hosts (docs/adr/020-idle-shards-and-the-write-path.md). hashicorp/raft
// cannot stop that timer, so the transport takes the contact over, as
// CockroachDB's coalesced heartbeats do:
//
//   - Every Config.KeepaliveInterval the Network sends each peer node, in
//     one AppendEntriesBatch, a heartbeat of each group this node leads
//     whose raft messages to a follower on that node carry nothing new
//     (no entries, no newer commit index), while raft's replication to
//     it is running (a pipeline is open and raft sent it a request within
//     four intervals: a leader whose raft stopped sending stops its
//     keepalives). The follower's raft answers it on its heartbeat fast
//     path, which resets its election timer without waking its loop.
//   - raft's own message that carries nothing new is then answered by the
//     leader's transport with the follower's last answer of the term,
//     without sending it, while a keepalive the follower answered with
//     success in that term was sent within two intervals (guard
//     quiet-confirmed). Otherwise it is sent as before, and its answer
//     is raft's to judge. So the leader's lease is renewed only by a
//     follower that answered lately, and a follower that stops answering
//     (dead, cut off, or in a newer term) gets raft's real messages again
//     within two intervals.
//
// The keepalive is an ordinary raft heartbeat of the leader's current
// term: a follower may take it at any time, and it never moves a log or a
// commit index. raft's heartbeats (and so VerifyLeader, STRONG reads'
// leadership check) are not affected: they are always sent.

// quietFollower is what a leader's transport knows of one follower for
// keepalives. REQUIRES: the group's push.mu.
type quietFollower struct {
	idle       bool           // raft's last request to it carried nothing new
	raftSent   time.Time      // when raft last sent it a request
	lastOK     bool           // it answered a request of the term with success
	respHeader raft.RPCHeader // that answer's header
	lastLog    uint64         // and the last index of its log then
	confirmed  time.Time      // when the last keepalive it answered with success was sent
	pending    bool           // a keepalive to it is in flight
}

// answered records a successful answer of the follower to one of raft's
// requests of the current term.
func (q *quietFollower) answered(resp *raft.AppendEntriesResponse) {
	q.lastOK, q.respHeader, q.lastLog = true, resp.RPCHeader, resp.LastLog
}

// quietAnswer returns the answer the transport gives raft's request args
// to target itself, or nil if args must be sent. The caller checked that
// args carries nothing new (carriesNothingNew).
func (g *groupTransport) quietAnswer(target raft.ServerAddress, args *raft.AppendEntriesRequest) *peerv1.AppendEntriesResponse {
	window := 2 * g.net.cfg.KeepaliveInterval
	if window == 0 {
		return nil
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followers[target]
	if f == nil || f.term != args.Term {
		return nil
	}
	q := &f.quiet
	q.idle = true
	if !q.lastOK {
		return nil
	}
	if !guards.Off(guards.QuietConfirmed) && time.Since(q.confirmed) > window {
		return nil
	}
	return appendEntriesResponseToProto(&raft.AppendEntriesResponse{RPCHeader: q.respHeader, Term: f.term, LastLog: q.lastLog, Success: true})
}

// keepalives adds to out, by target node, a keepalive for each follower
// of this group that is due one (see above). now is the send time.
func (g *groupTransport) keepalives(now time.Time, out map[raft.ServerAddress][]*batchItem) {
	g.mu.Lock()
	if len(g.mu.pipelines) == 0 || g.mu.closed {
		g.mu.Unlock()
		return
	}
	open := make(map[raft.ServerAddress]bool, len(g.mu.pipelines))
	for p := range g.mu.pipelines {
		open[p.target] = true
	}
	g.mu.Unlock()

	live := 4 * g.net.cfg.KeepaliveInterval
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	for target, f := range c.followers {
		q := &f.quiet
		if !open[target] || !q.idle || !q.lastOK || q.pending || now.Sub(q.raftSent) > live {
			continue
		}
		q.pending = true
		msg := appendEntriesToProto(g.name, &raft.AppendEntriesRequest{
			RPCHeader: f.header, // names the leader (Addr)
			Term:      f.term,
		})
		msg.Header = g.stamp(msg.Header)
		out[target] = append(out[target], &batchItem{msg: msg, done: func(r batchResult) {
			g.confirm(target, f, now, proto.Size(msg), r)
		}})
	}
}

// confirm records the answer to a keepalive sent to target at sent.
func (g *groupTransport) confirm(target raft.ServerAddress, f *followerCommit, sent time.Time, reqBytes int, r batchResult) {
	var resp raft.AppendEntriesResponse
	err, respBytes := r.err, 0
	if err == nil {
		respBytes = proto.Size(r.resp)
		err = appendEntriesResponseFromProto(r.resp, &resp)
	}
	g.net.metrics.observeSent(typeKeepalive, sent, reqBytes, respBytes, err)
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
	if err == nil && resp.Success && resp.Term == f.term {
		if sent.After(f.quiet.confirmed) {
			f.quiet.confirmed = sent
		}
		return
	}
	// Refused, failed or answered from a newer term: raft's next message
	// goes to the follower and raft judges its answer.
	f.quiet.confirmed = time.Time{}
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
