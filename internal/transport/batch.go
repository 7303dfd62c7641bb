package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// Batches of idle groups' messages: once writes stop, raft's replication
// goroutine still sends each follower of each group it leads an
// AppendEntries every one to two CommitTimeouts, which only keeps the two
// in contact (the follower's election timer, the leader's lease). Sent
// one by one, each is a gRPC message with its syscalls and wake-ups on
// both nodes, and their number grows with the shards a node leads
// (docs/adr/020-idle-shards-and-the-write-path.md). A pipeline therefore
// hands such a message to its Network's batcher when it carries nothing
// new: no entries, no commit index its follower was not already sent, and
// no earlier request of the pipeline unanswered (so the follower has
// processed every entry before it and the message cannot overtake one).
// The batcher sends the messages of every group bound for one node
// together, Config.BatchDelay after the first of them, in one
// AppendEntriesBatch; the receiver answers each as if it had come alone,
// and the pipeline hands raft each answer in its place in the pipeline's
// order. A message with entries sent meanwhile on the same pipeline sends
// the batch at once, so a write after an idle period does not wait for
// it. Only the timing changes: raft sees the same requests and answers.

// maxBatchRequests bounds the requests of one AppendEntriesBatch, on both
// sides.
const maxBatchRequests = 8192

// unsupportedRetry is how long the batcher sends nothing batched to a peer
// that did not know AppendEntriesBatch (an older node during an upgrade).
const unsupportedRetry = time.Minute

// batchResult is the answer to one batched request.
type batchResult struct {
	resp *peerv1.AppendEntriesResponse
	err  error
}

// batchItem is one request waiting in a batch; done is called once with
// its answer. An item without msg is built when its batch is sent: build
// returns the request, or nil to drop the item (done is then not called).
type batchItem struct {
	msg   *peerv1.AppendEntriesRequest
	build func() *peerv1.AppendEntriesRequest
	done  func(batchResult)
}

// batchQueue holds the requests waiting to go to one node.
type batchQueue struct {
	items            []*batchItem
	timer            *time.Timer // sends items; nil while items is empty
	due              time.Time   // when timer fires
	unsupportedUntil time.Time
}

// batcher gathers the batched requests of a Network by target node.
type batcher struct {
	n  *Network
	mu struct {
		sync.Mutex
		closed bool
		queues map[raft.ServerAddress]*batchQueue
	}
	wg sync.WaitGroup // batches in flight

	// The batch streams (batchstream.go).
	streamMu     sync.Mutex
	streams      map[raft.ServerAddress]*streamSlot // REQUIRES: streamMu
	streamClosed bool                               // REQUIRES: streamMu
	streamWG     sync.WaitGroup                     // the streams' receive goroutines
}

func (b *batcher) init(n *Network) {
	b.n = n
	b.mu.queues = make(map[raft.ServerAddress]*batchQueue)
	b.streams = make(map[raft.ServerAddress]*streamSlot)
}

// add queues it for target, to be sent at most Config.BatchDelay later.
// It returns false, and keeps nothing, if batching is off, target did not
// know batches lately or the Network is closing: the caller then sends
// the request itself.
func (b *batcher) add(target raft.ServerAddress, it *batchItem) bool {
	return b.addWithin(target, it, b.n.cfg.BatchDelay)
}

// addWithin is add, with the batch sent at most delay later.
func (b *batcher) addWithin(target raft.ServerAddress, it *batchItem, delay time.Duration) bool {
	if b.n.cfg.BatchDelay <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queueLocked(target)
	if q == nil {
		return false
	}
	q.items = append(q.items, it)
	due := time.Now().Add(delay)
	switch {
	case len(q.items) >= maxBatchRequests:
		b.sendLocked(target, q)
	case q.timer == nil || due.Before(q.due):
		if q.timer != nil {
			q.timer.Stop() // if it fires anyway, flush sends early: harmless
		}
		q.timer = time.AfterFunc(delay, func() { b.flush(target) })
		q.due = due
	}
	return true
}

// queueLocked returns target's queue, or nil if the Network is closing or
// target did not know batches lately. REQUIRES: b.mu.
func (b *batcher) queueLocked(target raft.ServerAddress) *batchQueue {
	if b.mu.closed {
		return nil
	}
	q := b.mu.queues[target]
	if q == nil {
		q = &batchQueue{}
		b.mu.queues[target] = q
	}
	if time.Now().Before(q.unsupportedUntil) {
		return nil
	}
	return q
}

// flush sends what waits for target now.
func (b *batcher) flush(target raft.ServerAddress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.mu.queues[target]; q != nil && len(q.items) > 0 && !b.mu.closed {
		b.sendLocked(target, q)
	}
}

// sendLocked starts sending q's requests. REQUIRES: b.mu.
func (b *batcher) sendLocked(target raft.ServerAddress, q *batchQueue) {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	items := q.items
	q.items = nil
	for len(items) > 0 {
		n := min(len(items), maxBatchRequests)
		b.wg.Add(1)
		go b.send(target, items[:n:n])
		items = items[n:]
	}
}

// sendNow sends items to target at once, with whatever waits for it. It
// returns false, and sends nothing, if the Network is closing or target
// did not know batches lately.
func (b *batcher) sendNow(target raft.ServerAddress, items []*batchItem) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.queueLocked(target)
	if q == nil {
		return false
	}
	q.items = append(q.items, items...)
	b.sendLocked(target, q)
	return true
}

// close fails the requests still waiting with ErrClosed, ends the batch
// streams and waits for the batches in flight (the Network closed their
// connections first).
func (b *batcher) close() {
	b.mu.Lock()
	b.mu.closed = true
	var waiting []*batchItem
	for _, q := range b.mu.queues {
		if q.timer != nil {
			q.timer.Stop()
			q.timer = nil
		}
		waiting = append(waiting, q.items...)
		q.items = nil
	}
	b.mu.Unlock()
	for _, it := range waiting {
		it.done(batchResult{err: ErrClosed})
	}
	b.closeStreams()
	b.wg.Wait()
}

// send makes one AppendEntriesBatch RPC to target and hands every request
// its answer.
func (b *batcher) send(target raft.ServerAddress, items []*batchItem) {
	defer b.wg.Done()
	start := time.Now()
	req := &peerv1.AppendEntriesBatchRequest{Requests: make([]*peerv1.AppendEntriesRequest, 0, len(items))}
	kept := items[:0]
	for _, it := range items {
		if it.msg == nil {
			if it.msg = it.build(); it.msg == nil {
				continue
			}
		}
		req.Requests = append(req.Requests, it.msg)
		kept = append(kept, it)
	}
	if items = kept; len(items) == 0 {
		return
	}
	resp, err := b.call(target, req)
	respBytes := 0
	if err == nil {
		respBytes = proto.Size(resp)
		if n := len(resp.GetResults()); n != len(items) {
			err = fmt.Errorf("%w: %d results for %d requests", ErrInvalidRequest, n, len(items))
		}
	}
	b.n.metrics.observeSent(typeBatch, start, proto.Size(req), respBytes, err)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			b.mu.Lock()
			if q := b.mu.queues[target]; q != nil {
				q.unsupportedUntil = time.Now().Add(unsupportedRetry)
			}
			b.mu.Unlock()
			b.n.log.Info("peer does not take batched AppendEntries; sending them one by one", "target", target, "retry_in", unsupportedRetry)
		}
		err = fromStatus(typeBatch, string(target), err)
		for _, it := range items {
			it.done(batchResult{err: err})
		}
		return
	}
	for i, it := range items {
		it.done(batchResultFromProto(typeBatched, string(target), resp.Results[i]))
	}
}

// batchResultFromProto decodes one result of a batch.
func batchResultFromProto(typ, target string, r *peerv1.AppendEntriesBatchResult) batchResult {
	if len(r.GetStatus()) > 0 {
		var st spb.Status
		if err := proto.Unmarshal(r.GetStatus(), &st); err != nil || codes.Code(st.GetCode()) == codes.OK {
			return batchResult{err: fmt.Errorf("%w: undecodable status in a batch result (err %v)", ErrInvalidRequest, err)}
		}
		return batchResult{err: fromStatus(typ, target, statusFromProto(&st))}
	}
	if r.GetResponse() == nil {
		return batchResult{err: fmt.Errorf("%w: batch result without response or status", ErrInvalidRequest)}
	}
	return batchResult{resp: r.GetResponse()}
}

// AppendEntriesBatch implements peerv1.RaftServer: it answers every
// request as AppendEntries would, concurrently (they are of different
// groups, or of one group in any order: they carry no entries).
func (s *service) AppendEntriesBatch(ctx context.Context, req *peerv1.AppendEntriesBatchRequest) (*peerv1.AppendEntriesBatchResponse, error) {
	reqs := req.GetRequests()
	if len(reqs) > maxBatchRequests {
		err := toStatus(invalidf("a batch of %d requests (at most %d)", len(reqs), maxBatchRequests))
		s.n.metrics.observeReceived(typeBatch, proto.Size(req), 0, err)
		return nil, err
	}
	out := &peerv1.AppendEntriesBatchResponse{Results: make([]*peerv1.AppendEntriesBatchResult, len(reqs))}
	var wg sync.WaitGroup
	for i, r := range reqs {
		if s.fastHeartbeat(r) {
			// Keepalives and heartbeats: raft answers them on this
			// goroutine without waiting (quiet.go, heartbeat.go).
			out.Results[i] = s.batched(ctx, r)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Results[i] = s.batched(ctx, r)
		}()
	}
	wg.Wait()
	s.n.metrics.observeReceived(typeBatch, proto.Size(req), proto.Size(out), nil)
	return out, nil
}

// fastHeartbeat reports whether r is a heartbeat of a group whose raft
// takes heartbeats on the caller's goroutine (SetHeartbeatHandler).
func (s *service) fastHeartbeat(r *peerv1.AppendEntriesRequest) bool {
	if len(r.GetEntries()) > 0 || r.GetPrevLogEntry() != 0 || r.GetPrevLogTerm() != 0 || r.GetLeaderCommitIndex() != 0 ||
		r.GetTerm() == 0 || (len(r.GetHeader().GetAddr()) == 0 && len(r.GetLeader()) == 0) {
		return false // not one isHeartbeat takes: raft's loop answers it
	}
	g, err := s.n.group(r.GetGroup())
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.heartbeat != nil
}

// batched answers one request of a batch.
func (s *service) batched(ctx context.Context, r *peerv1.AppendEntriesRequest) *peerv1.AppendEntriesBatchResult {
	var resp *peerv1.AppendEntriesResponse
	var err error
	if len(r.GetEntries()) > 0 {
		err = toStatus(invalidf("a batched AppendEntries carries entries"))
		s.n.metrics.observeReceived(typeBatched, proto.Size(r), 0, err)
	} else {
		resp, err = unary(ctx, s, typeBatched, r, r.GetGroup(), r.GetHeader(), appendEntriesFromProto, isHeartbeat, appendEntriesResponseToProto)
		s.promise(r.GetGroup(), resp)
	}
	if err == nil {
		return &peerv1.AppendEntriesBatchResult{Response: resp}
	}
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil { // cannot happen for a status; keep the code
		b, _ = proto.Marshal(&spb.Status{Code: int32(codes.Internal), Message: errors.Join(err, merr).Error()})
	}
	return &peerv1.AppendEntriesBatchResult{Status: b}
}
