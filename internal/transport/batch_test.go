package transport

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// idleCounts are what one node's transport sent, summed over its types.
type idleCounts struct{ batches, batched, pipelined float64 }

func sentCounts(t *testing.T, nodes []*testNode) idleCounts {
	t.Helper()
	return idleCounts{batches: sentOK(t, nodes, typeBatch), batched: sentOK(t, nodes, typeBatched), pipelined: sentOK(t, nodes, typePipeline)}
}

// startGroups starts each group on every node.
func startGroups(t *testing.T, nodes []*testNode, groups []string, tweak func(*raft.Config)) (map[string][]*raft.Raft, map[string]map[string]*countFSM) {
	t.Helper()
	peers := servers(nodes...)
	rafts := map[string][]*raft.Raft{}
	fsms := map[string]map[string]*countFSM{}
	for _, g := range groups {
		fsms[g] = map[string]*countFSM{}
		for _, n := range nodes {
			r, f := n.startGroup(t, g, raft.NewInmemSnapshotStore(), tweak, peers)
			rafts[g] = append(rafts[g], r)
			fsms[g][n.id] = f
		}
	}
	return rafts, fsms
}

// TestIdleGroupsBatched: four groups on three nodes, written to, then
// left idle. raft's replication keeps sending each follower a message
// every CommitTimeout; those travel in AppendEntriesBatch RPCs, several
// groups' in one, and the groups keep their leaders and still replicate.
func TestIdleGroupsBatched(t *testing.T) {
	tweak := func(c *Config) {
		c.BatchDelay = 100 * time.Millisecond
		c.KeepaliveInterval = 0 // every idle message is sent (quiet_test.go has them answered aside)
	}
	nodes := []*testNode{newTestNode(t, "a", tweak), newTestNode(t, "b", tweak), newTestNode(t, "c", tweak)}
	groups := []string{"g1", "g2", "g3", "g4"}
	rafts, fsms := startGroups(t, nodes, groups, nil)
	for _, g := range groups {
		applyN(t, rafts[g], 1, 5)
		waitConverged(t, 5, fsms[g])
	}

	// Idle: every group's followers are sent a message every 10–20 ms;
	// one node leads at least two of the four groups, so some batches
	// carry several groups' messages.
	before := sentCounts(t, nodes)
	terms := map[string]uint64{}
	for _, g := range groups {
		terms[g] = waitLeader(t, rafts[g]...).CurrentTerm()
	}
	waitFor(t, 30*time.Second, "idle messages to travel in batches of several", func() bool {
		c := sentCounts(t, nodes)
		return c.batches-before.batches >= 20 && c.batched-before.batched > 1.2*(c.batches-before.batches)
	})
	after := sentCounts(t, nodes)
	t.Logf("idle: %v batches carried %v messages; %v messages went on their own stream",
		after.batches-before.batches, after.batched-before.batched, after.pipelined-before.pipelined)
	if p, b := after.pipelined-before.pipelined, after.batched-before.batched; p > b {
		t.Errorf("idle groups sent %v messages on their streams and %v in batches", p, b)
	}

	// The groups kept their leaders (no follower missed its leader) and
	// still replicate.
	for _, g := range groups {
		if l := waitLeader(t, rafts[g]...); l.CurrentTerm() != terms[g] {
			t.Errorf("group %s: term %d after the idle period, %d before", g, l.CurrentTerm(), terms[g])
		}
		applyN(t, rafts[g], 6, 5)
		waitConverged(t, 10, fsms[g])
	}
}

// TestBatchAnswersEachRequest: the receiver answers every request of a
// batch as it would alone, in its place: an unknown group, a malformed
// request and one with entries fail on their own, a valid one is answered
// by raft. A batch larger than the limit fails as a whole.
func TestBatchAnswersEachRequest(t *testing.T) {
	node := newTestNode(t, "a", nil)
	tr, err := node.net.Transport("echo")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	answered := make(chan struct{})
	go func() { // stands in for raft
		defer close(answered)
		for {
			select {
			case rpc := <-tr.Consumer():
				req, _ := rpc.Command.(*raft.AppendEntriesRequest)
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry, Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	defer func() { close(done); <-answered; _ = tr.(raft.WithClose).Close() }()

	empty := func(group string) *peerv1.AppendEntriesRequest {
		return appendReq(group, func(m *peerv1.AppendEntriesRequest) { m.Entries = nil })
	}
	c := rawClient(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.AppendEntriesBatch(ctx, &peerv1.AppendEntriesBatchRequest{Requests: []*peerv1.AppendEntriesRequest{
		empty("nope"),
		empty(""),
		appendReq("echo", nil),
		empty("echo"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 4 {
		t.Fatalf("%d results for 4 requests", len(resp.Results))
	}
	for i, want := range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.InvalidArgument} {
		r := batchResultFromProto(typeBatched, node.addr, resp.Results[i])
		if status.Code(r.err) != want {
			t.Errorf("request %d: %v, want %v", i, r.err, want)
		}
	}
	r := batchResultFromProto(typeBatched, node.addr, resp.Results[3])
	if r.err != nil || !r.resp.GetSuccess() || r.resp.GetTerm() != 3 || r.resp.GetLastLog() != 10 {
		t.Errorf("valid request: %+v, %v", r.resp, r.err)
	}

	huge := make([]*peerv1.AppendEntriesRequest, maxBatchRequests+1)
	for i := range huge {
		huge[i] = empty("echo")
	}
	if _, err := c.AppendEntriesBatch(ctx, &peerv1.AppendEntriesBatchRequest{Requests: huge}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a batch of %d: %v, want InvalidArgument", len(huge), err)
	}

	// Results that cannot be decoded are errors, not answers.
	for i, bad := range []*peerv1.AppendEntriesBatchResult{{}, {Status: []byte{0xff, 0xff}}} {
		if r := batchResultFromProto(typeBatched, node.addr, bad); r.err == nil {
			t.Errorf("bad result %d decoded as %+v", i, r.resp)
		}
	}
}

// noBatchService is the Raft service of a node that predates
// AppendEntriesBatch.
type noBatchService struct{ *service }

func (noBatchService) AppendEntriesBatch(context.Context, *peerv1.AppendEntriesBatchRequest) (*peerv1.AppendEntriesBatchResponse, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method AppendEntriesBatch")
}

func (noBatchService) AppendEntriesBatchStream(grpc.BidiStreamingServer[peerv1.AppendEntriesBatchRequest, peerv1.AppendEntriesBatchResponse]) error {
	return status.Error(codes.Unimplemented, "unknown method AppendEntriesBatchStream")
}

// TestBatchPeerWithoutBatches: a peer that does not know
// AppendEntriesBatch (an older node during an upgrade) still gets every
// message, one by one, and the group replicates.
func TestBatchPeerWithoutBatches(t *testing.T) {
	nodes, rafts, fsms := groupWithPeerServedBy(t, func(s *service) peerv1.RaftServer { return noBatchService{s} })
	old := nodes[2]
	applyN(t, rafts, 1, 5)
	waitConverged(t, 5, fsms)
	// Idle for a while: the replicas sending to old learn that it takes
	// no batches and send it every message on its stream.
	waitFor(t, 30*time.Second, "a refused batch to be counted", func() bool {
		for _, n := range nodes[:2] {
			if counterValue(t, n.net.metrics.sent.WithLabelValues(typeBatch, codes.Unimplemented.String())) > 0 {
				return true
			}
		}
		return false
	})
	applyN(t, rafts, 6, 5)
	waitConverged(t, 10, fsms)
	for _, n := range nodes[:2] {
		n.net.batch.mu.Lock()
		q := n.net.batch.mu.queues[raft.ServerAddress(old.addr)]
		refused := q != nil && time.Now().Before(q.unsupportedUntil)
		n.net.batch.mu.Unlock()
		if leads := n.rafts["g"].State() == raft.Leader; leads && !refused {
			t.Errorf("leader %s still batches to %s", n.id, old.addr)
		}
	}
}

// groupWithPeerServedBy starts group "g" on nodes a, b and peer, the last
// serving its Network through the service serve returns instead of its
// own (a node of another release), and never a candidate, so that the
// leader sends to it.
func groupWithPeerServedBy(t *testing.T, serve func(*service) peerv1.RaftServer) ([]*testNode, []*raft.Raft, map[string]*countFSM) {
	t.Helper()
	peer := newTestNode(t, "peer", nil)
	peer.srv.Stop()
	lis, err := listenAgain(peer.addr)
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", peer.addr, err)
	}
	srv := grpc.NewServer(peer.net.cfg.ServerOptions()...)
	peerv1.RegisterRaftServer(srv, serve(&service{n: peer.net}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	nodes := []*testNode{newTestNode(t, "a", nil), newTestNode(t, "b", nil), peer}
	peers := servers(nodes...)
	var rafts []*raft.Raft
	fsms := map[string]*countFSM{}
	for _, n := range nodes {
		var tweak func(*raft.Config)
		if n == peer {
			tweak = func(c *raft.Config) { c.HeartbeatTimeout, c.ElectionTimeout = time.Hour, time.Hour }
		}
		r, f := n.startGroup(t, "g", raft.NewInmemSnapshotStore(), tweak, peers)
		rafts = append(rafts, r)
		fsms[n.id] = f
	}
	return nodes, rafts, fsms
}

// listenAgain listens on addr, which a stopped server just released.
func listenAgain(addr string) (net.Listener, error) {
	var lis net.Listener
	var err error
	for range 50 {
		if lis, err = net.Listen("tcp", addr); err == nil {
			return lis, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// FuzzBatchResult: whatever a peer sends as a batch result decodes to an
// answer or an error, never a panic, and a status never decodes as OK.
func FuzzBatchResult(f *testing.F) {
	ok, _ := proto.Marshal(&peerv1.AppendEntriesBatchResult{Response: &peerv1.AppendEntriesResponse{Term: 2, Success: true}})
	st, _ := proto.Marshal(&peerv1.AppendEntriesBatchResult{Status: []byte{8, 5, 18, 1, 'x'}})
	f.Add(ok)
	f.Add(st)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m peerv1.AppendEntriesBatchResult
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		r := batchResultFromProto(typeBatched, "peer", &m)
		if (r.err == nil) == (r.resp == nil) {
			t.Fatalf("%v: response %v, error %v", &m, r.resp, r.err)
		}
		if r.err != nil && status.Code(r.err) == codes.OK && len(m.GetStatus()) > 0 && !errors.Is(r.err, ErrInvalidRequest) {
			t.Fatalf("status %x decoded as OK: %v", m.GetStatus(), r.err)
		}
	})
}
