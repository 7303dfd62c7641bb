package transport

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/guards"
)

// Commit push: a raft follower learns that an entry committed only from
// the leader's next AppendEntries, which, once writes stop, comes a
// CommitTimeout later. A replica that waits to serve a read of a write
// the leader already acknowledged waits for that message. The leader's
// group transport therefore sends a follower the commit index itself as
// soon as the leader's state machine applied an entry the follower holds
// (CommitApplied) and no message of raft's carried it within
// Config.CommitPushDelay. The pushes of all groups bound for one node
// travel in one AppendEntriesBatch (batch.go), sent CommitPushDelay after
// the first of them and built then, so a leader of many busy groups sends
// each peer at most one push RPC per CommitPushDelay, not one per write.
//
// The message is an ordinary AppendEntries of the leader's current term,
// with no entries: its previous entry is the last one the follower
// acknowledged in that term (so the follower's log matches the leader's
// up to it) and its commit index is at most that entry and at most what
// the leader applied (so committed). A follower may apply it at any time,
// in any order with raft's own messages. Its answer is not handed to raft:
// the leader's replication state, lease and leadership checks see only
// raft's own messages.

// CommitPusher is implemented by a group transport that pushes commit
// indexes to followers (every transport this package opens).
type CommitPusher interface {
	// CommitApplied tells the transport that the leader's state machine
	// applied every entry up to index.
	CommitApplied(index uint64)
}

var _ CommitPusher = (*groupTransport)(nil)

// followerCommit is what the leader's transport knows of one follower in
// the current term.
type followerCommit struct {
	term    uint64
	header  raft.RPCHeader // names the leader (Addr)
	ackIdx  uint64         // last entry the follower acknowledged in term
	ackTerm uint64         // its term
	sent    uint64         // highest commit index sent to it in term
	lease   time.Time      // until when its answers keep it from voting for another (lease.go)
	pending bool           // a push is scheduled or in flight
	quiet   quietFollower  // quiet.go
}

type commitPush struct {
	mu      sync.Mutex
	applied uint64 // highest index the leader applied
	// leaderTerm is the newest term of raft's AppendEntries sent;
	// transferTerm the newest term in which it sent TimeoutNow (lease.go).
	leaderTerm, transferTerm uint64
	followers                map[raft.ServerAddress]*followerCommit
	stopped                  bool           // set by close; REQUIRES: mu
	stop                     chan struct{}  // closed by close: ends pushes in flight
	wg                       sync.WaitGroup // pushes in flight
}

func (c *commitPush) init() {
	c.followers = make(map[raft.ServerAddress]*followerCommit)
	c.stop = make(chan struct{})
}

// close stops pushing and waits for pushes in flight.
func (c *commitPush) close(m *metrics) {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
		for _, f := range c.followers {
			f.quiet.endWait(m)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// noteSent records a request raft sends to target.
func (g *groupTransport) noteSent(target raft.ServerAddress, args *raft.AppendEntriesRequest) {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaderTerm = max(c.leaderTerm, args.Term)
	f := c.followers[target]
	switch {
	case f == nil || args.Term > f.term:
		if f != nil {
			f.quiet.endWait(g.net.metrics)
		}
		f = &followerCommit{term: args.Term}
		c.followers[target] = f
	case args.Term < f.term:
		return
	}
	f.header = args.RPCHeader
	if len(args.Entries) > 0 || args.LeaderCommitIndex > f.sent {
		f.quiet.idle = false // news: keepalives stop until raft's messages carry nothing new again
	}
	f.sent = max(f.sent, args.LeaderCommitIndex)
	f.quiet.raftSent = time.Now()
}

// carriesNothingNew reports whether args, about to be sent to target,
// tells it nothing raft's earlier messages in the same term did not: no
// entries and no newer commit index (a message raft's replication sends an
// idle group's follower to stay in contact, which batch.go may delay).
func (g *groupTransport) carriesNothingNew(target raft.ServerAddress, args *raft.AppendEntriesRequest) bool {
	if len(args.Entries) > 0 {
		return false
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followers[target]
	return f != nil && f.term == args.Term && args.LeaderCommitIndex <= f.sent &&
		args.PrevLogEntry == f.ackIdx && args.PrevLogTerm == f.ackTerm
}

// noteAnswer records target's answer to one of raft's requests, sent at
// sent; promiseMs is the answer's lease promise.
func (g *groupTransport) noteAnswer(target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, sent time.Time, promiseMs uint32) {
	if !resp.Success || resp.Term != args.Term {
		return
	}
	idx, term := args.PrevLogEntry, args.PrevLogTerm
	if n := len(args.Entries); n > 0 {
		idx, term = args.Entries[n-1].Index, args.Entries[n-1].Term
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.followers[target]
	if f == nil || f.term != args.Term {
		return
	}
	f.quiet.answered(resp)
	extendLease(f, sent, promiseMs)
	if idx <= f.ackIdx {
		return
	}
	f.ackIdx, f.ackTerm = idx, term
	g.schedulePush(target, f)
}

// CommitApplied implements CommitPusher.
func (g *groupTransport) CommitApplied(index uint64) {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	if index <= c.applied {
		return
	}
	c.applied = index
	for target, f := range c.followers {
		g.schedulePush(target, f)
	}
}

// schedulePush arranges a push to target if it lacks a commit index it
// could apply. REQUIRES: g.push.mu.
func (g *groupTransport) schedulePush(target raft.ServerAddress, f *followerCommit) {
	c := &g.push
	if f.pending || min(c.applied, f.ackIdx) <= f.sent || guards.Off(guards.CommitPush) || c.stopped {
		return
	}
	f.pending = true
	var start time.Time
	it := &batchItem{
		build: func() *peerv1.AppendEntriesRequest {
			start = time.Now()
			return g.pushMessage(target, f)
		},
		done: func(r batchResult) {
			err, respBytes := r.err, 0
			if err == nil {
				respBytes = proto.Size(r.resp)
			}
			g.net.metrics.observeSent(typeCommitPush, start, 0, respBytes, err)
			g.pushed(target, f, err)
		},
	}
	if g.net.batch.addWithin(target, it, g.net.cfg.CommitPushDelay) {
		return
	}
	c.wg.Add(1)
	time.AfterFunc(g.net.cfg.CommitPushDelay, func() {
		defer c.wg.Done()
		g.pushTo(target, f)
	})
}

// pushMessage returns the push target lacks, or nil (and f is no longer
// pending) if raft's own messages carried its commit index meanwhile.
// The pushes of all groups bound for one node travel together in an
// AppendEntriesBatch, built when it is sent: one RPC per node pair and
// CommitPushDelay at most, however many groups the leader applied
// entries of (docs/adr/020-idle-shards-and-the-write-path.md).
func (g *groupTransport) pushMessage(target raft.ServerAddress, f *followerCommit) *peerv1.AppendEntriesRequest {
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	commit := min(c.applied, f.ackIdx)
	if commit <= f.sent || c.stopped || c.followers[target] != f {
		f.pending = false
		return nil
	}
	f.sent = commit
	msg := appendEntriesToProto(g.name, &raft.AppendEntriesRequest{
		RPCHeader:         f.header,
		Term:              f.term,
		PrevLogEntry:      f.ackIdx,
		PrevLogTerm:       f.ackTerm,
		LeaderCommitIndex: commit,
	})
	msg.Header = g.stamp(msg.Header)
	return msg
}

// pushed records the end of a push to target: another one may follow.
func (g *groupTransport) pushed(target raft.ServerAddress, f *followerCommit, err error) {
	if err != nil {
		g.net.log.Debug("commit push failed", "group", g.name, "target", target, "err", err)
		g.refused(err)
	}
	c := &g.push
	c.mu.Lock()
	defer c.mu.Unlock()
	f.pending = false
	if c.followers[target] == f {
		g.schedulePush(target, f)
	}
}

// pushTo sends target the commit index it lacks on its own (the peer does
// not take batches), unless raft's own messages carried it meanwhile.
func (g *groupTransport) pushTo(target raft.ServerAddress, f *followerCommit) {
	msg := g.pushMessage(target, f)
	if msg == nil {
		return
	}
	c := &g.push
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends the push when the transport closes
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := callCtx(ctx, g, typeCommitPush, target, msg, peerv1.RaftClient.AppendEntries)
	g.pushed(target, f, err)
}
