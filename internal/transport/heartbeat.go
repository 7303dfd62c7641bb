package transport

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// Batched heartbeats: a leader's raft heartbeats each follower every tenth
// to fifth of its HeartbeatTimeout, each a unary RPC with its own writes,
// reads and wake-ups on both nodes. Followers are kept in contact by
// raft's other messages and by keepalives (quiet.go), so a heartbeat is
// not urgent unless raft sends it for VerifyLeader, the leadership check
// of a STRONG read, which waits for a majority's answers. A heartbeat
// therefore waits in the node's batch for its target (batch.go), at most
// Config.BatchDelay, unless the group's leadership is being verified
// (LeaderVerifier): then it is sent at once, and the heartbeats already
// waiting in batches are sent too when the verification starts.

// LeaderVerifier is implemented by every group transport this package
// opens.
type LeaderVerifier interface {
	// VerifyingLeader tells the transport that raft's VerifyLeader is
	// about to run: until done is called, heartbeats are sent at once.
	VerifyingLeader() (done func())
}

var _ LeaderVerifier = (*groupTransport)(nil)

// heartbeats is a group transport's state of batched heartbeats.
type heartbeats struct {
	mu        sync.Mutex
	verifying int                        // VerifyingLeader calls not done
	queued    map[raft.ServerAddress]int // heartbeats waiting in batches, by target
}

// VerifyingLeader implements LeaderVerifier.
func (g *groupTransport) VerifyingLeader() (done func()) {
	h := &g.hb
	h.mu.Lock()
	h.verifying++
	targets := make([]raft.ServerAddress, 0, len(h.queued))
	for t := range h.queued {
		targets = append(targets, t)
	}
	h.mu.Unlock()
	for _, t := range targets {
		g.net.batch.flush(t)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			h.verifying--
			h.mu.Unlock()
		})
	}
}

// batchedHeartbeat sends the heartbeat msg to target in a batch and
// returns its answer; ok is false, and nothing was sent, if it must go on
// its own (leadership is being verified, or batches are off).
func (g *groupTransport) batchedHeartbeat(target raft.ServerAddress, msg *peerv1.AppendEntriesRequest) (resp *peerv1.AppendEntriesResponse, ok bool, err error) {
	if g.net.cfg.BatchDelay <= 0 {
		return nil, false, nil
	}
	start := time.Now()
	ch := make(chan batchResult, 1)
	it := &batchItem{msg: msg, done: func(r batchResult) { ch <- r }}
	h := &g.hb
	h.mu.Lock()
	if h.verifying > 0 || !g.net.batch.add(target, it) {
		h.mu.Unlock()
		return nil, false, nil
	}
	if h.queued == nil {
		h.queued = make(map[raft.ServerAddress]int)
	}
	h.queued[target]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.queued[target]--; h.queued[target] <= 0 {
			delete(h.queued, target)
		}
		h.mu.Unlock()
	}()
	var r batchResult
	select {
	case r = <-ch:
	case <-g.closed:
		return nil, true, ErrClosed
	}
	respBytes := 0
	if r.err == nil {
		respBytes = proto.Size(r.resp)
	}
	g.net.metrics.observeSent(typeHeartbeat, start, proto.Size(msg), respBytes, r.err)
	if r.err != nil {
		g.refused(r.err)
		return nil, true, r.err
	}
	return r.resp, true, nil
}
