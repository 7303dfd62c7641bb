package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// groupTransport is the raft transport of one group.
type groupTransport struct {
	net       *Network
	name      string
	advertise string // "" for the network's
	crossSite bool   // a group of nodes of several sites: no site incarnation (incarnation.go)
	consumeCh chan raft.RPC
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	gen       atomic.Uint64 // generation of the local replica (generation.go)
	// loggedRefusal is 1 + the sender generation last refused and logged.
	loggedRefusal atomic.Uint64
	push          commitPush // commitpush.go
	hb            heartbeats // heartbeat.go
	// promiseMs is the promise this replica's successful answers carry;
	// termSource reads its raft's term (lease.go).
	promiseMs  atomic.Uint32
	termSource atomic.Pointer[func() uint64]
	voteHold   atomic.Pointer[time.Time] // refuse votes until then (restarted)
	logHold    atomic.Pointer[logHold]   // refuse votes while the log lacks entries (loghold.go)

	mu struct {
		sync.Mutex
		newer     func(uint64) bool // OnNewerGeneration
		heartbeat func(raft.RPC)
		pipelines map[*pipeline]struct{}
		closed    bool
	}
}

var (
	_ raft.Transport   = (*groupTransport)(nil)
	_ raft.WithClose   = (*groupTransport)(nil)
	_ raft.WithPreVote = (*groupTransport)(nil)
)

func newGroupTransport(n *Network, name string) *groupTransport {
	g := &groupTransport{
		net:       n,
		name:      name,
		consumeCh: make(chan raft.RPC),
		closed:    make(chan struct{}),
	}
	g.mu.pipelines = make(map[*pipeline]struct{})
	g.push.init()
	return g
}

// Consumer implements raft.Transport.
func (g *groupTransport) Consumer() <-chan raft.RPC { return g.consumeCh }

// LocalAddr implements raft.Transport.
func (g *groupTransport) LocalAddr() raft.ServerAddress {
	if g.advertise != "" {
		return raft.ServerAddress(g.advertise)
	}
	return raft.ServerAddress(g.net.cfg.Advertise)
}

// EncodePeer implements raft.Transport.
func (g *groupTransport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(addr)
}

// DecodePeer implements raft.Transport.
func (g *groupTransport) DecodePeer(buf []byte) raft.ServerAddress { return raft.ServerAddress(buf) }

// SetHeartbeatHandler implements raft.Transport.
func (g *groupTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	g.mu.Lock()
	g.mu.heartbeat = cb
	g.mu.Unlock()
}

// Close implements raft.WithClose: it unregisters the group, fails the
// incoming RPCs waiting for raft and closes the group's pipelines. It is
// safe to call more than once.
func (g *groupTransport) Close() error {
	g.closeOnce.Do(func() {
		g.net.unregister(g)
		g.mu.Lock()
		g.mu.closed = true
		close(g.closed)
		pipes := make([]*pipeline, 0, len(g.mu.pipelines))
		for p := range g.mu.pipelines {
			pipes = append(pipes, p)
		}
		g.mu.Unlock()
		for _, p := range pipes {
			_ = p.Close()
		}
		g.push.close(g.net.metrics)
	})
	return nil
}

func (g *groupTransport) isClosed() bool {
	select {
	case <-g.closed:
		return true
	default:
		return false
	}
}

// dispatch hands an incoming request to raft and waits for its answer, until
// ctx ends or the transport closes. Heartbeats take raft's fast path when it
// set one.
func (g *groupTransport) dispatch(ctx context.Context, cmd any, data io.Reader, heartbeat bool) (any, error) {
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: data, RespChan: respCh}
	fast := false
	if heartbeat {
		g.mu.Lock()
		fn := g.mu.heartbeat
		g.mu.Unlock()
		if fn != nil && !g.isClosed() {
			fn(rpc)
			fast = true
		}
	}
	if !fast {
		select {
		case g.consumeCh <- rpc:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-g.closed:
			return nil, ErrClosed
		}
	}
	return g.await(ctx, respCh)
}

// await waits for raft's answer to a dispatched request.
func (g *groupTransport) await(ctx context.Context, respCh <-chan raft.RPCResponse) (any, error) {
	select {
	case r := <-respCh:
		if r.Error != nil {
			return nil, fmt.Errorf("%w: %v", ErrRaft, r.Error)
		}
		return r.Response, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-g.closed:
		return nil, ErrClosed
	}
}

// client returns the connection to target, unless the transport is closed.
func (g *groupTransport) client(target raft.ServerAddress) (peerv1.RaftClient, error) {
	if g.isClosed() {
		return nil, ErrClosed
	}
	return g.net.client(target)
}

// call makes one unary RPC to target, bounded by Config.RPCTimeout.
func call[Req, Resp proto.Message](g *groupTransport, typ string, target raft.ServerAddress, req Req,
	method func(peerv1.RaftClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	return callCtx(context.Background(), g, typ, target, req, method)
}

// callCtx is call, also ended by ctx.
func callCtx[Req, Resp proto.Message](ctx context.Context, g *groupTransport, typ string, target raft.ServerAddress, req Req,
	method func(peerv1.RaftClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	var zero Resp
	start := time.Now()
	c, err := g.client(target)
	if err != nil {
		g.net.metrics.observeSent(typ, start, 0, 0, err)
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.net.cfg.RPCTimeout)
	defer cancel()
	resp, err := method(c, ctx, req)
	respBytes := 0
	if err == nil {
		respBytes = proto.Size(resp)
	}
	g.net.metrics.observeSent(typ, start, proto.Size(req), respBytes, err)
	if err != nil {
		err = fromStatus(typ, string(target), err)
		g.refused(err)
		return zero, err
	}
	return resp, nil
}

// AppendEntries implements raft.Transport.
func (g *groupTransport) AppendEntries(_ raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	typ := typeAppendEntries
	if isHeartbeat(args) {
		typ = typeHeartbeat
	}
	msg := appendEntriesToProto(g.name, args)
	msg.Header = g.stamp(msg.Header)
	g.noteSent(target, args)
	sent := time.Now()
	var out *peerv1.AppendEntriesResponse
	var batched bool
	var err error
	if typ == typeHeartbeat {
		out, batched, err = g.batchedHeartbeat(target, msg)
	}
	if !batched {
		out, err = call(g, typ, target, msg, peerv1.RaftClient.AppendEntries)
	}
	if err != nil {
		return err
	}
	if err := appendEntriesResponseFromProto(out, resp); err != nil {
		return err
	}
	g.noteAnswer(target, args, resp, sent, out.GetLeasePromiseMs())
	return nil
}

// RequestVote implements raft.Transport.
func (g *groupTransport) RequestVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if err := g.campaignStopping(args.LeadershipTransfer); err != nil {
		return err
	}
	if err := g.campaignHeld(args.LeadershipTransfer); err != nil {
		return err
	}
	msg := requestVoteToProto(g.name, args)
	msg.Header = g.stamp(msg.Header)
	out, err := call(g, typeRequestVote, target, msg, peerv1.RaftClient.RequestVote)
	if err != nil {
		return err
	}
	return requestVoteResponseFromProto(out, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (g *groupTransport) RequestPreVote(_ raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if err := g.campaignStopping(false); err != nil {
		return err
	}
	if err := g.campaignHeld(false); err != nil {
		return err
	}
	msg := requestPreVoteToProto(g.name, args)
	msg.Header = g.stamp(msg.Header)
	out, err := call(g, typeRequestPreVote, target, msg, peerv1.RaftClient.RequestPreVote)
	if err != nil {
		return err
	}
	return requestPreVoteResponseFromProto(out, resp)
}

// TimeoutNow implements raft.Transport.
func (g *groupTransport) TimeoutNow(_ raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	msg := timeoutNowToProto(g.name, args)
	msg.Header = g.stamp(msg.Header)
	msg.Term = g.startTransfer()
	out, err := call(g, typeTimeoutNow, target, msg, peerv1.RaftClient.TimeoutNow)
	if err != nil {
		return err
	}
	return timeoutNowResponseFromProto(out, resp)
}

// InstallSnapshot implements raft.Transport: it streams the request, then
// data in chunks, and waits for the follower to have installed the
// snapshot, within Config.SnapshotTimeout.
func (g *groupTransport) InstallSnapshot(_ raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	start := time.Now()
	sent, received, err := g.installSnapshot(target, args, resp, data)
	g.net.metrics.observeSent(typeSnapshot, start, sent, received, err)
	if err != nil {
		err = fromStatus(typeSnapshot, string(target), err)
		g.refused(err)
		return err
	}
	return nil
}

func (g *groupTransport) installSnapshot(target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) (sent, received int, err error) {
	c, err := g.client(target)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.net.cfg.SnapshotTimeout)
	defer cancel()
	stream, err := c.InstallSnapshot(ctx)
	if err != nil {
		return 0, 0, err
	}
	req := installSnapshotToProto(g.name, args)
	req.Header = g.stamp(req.Header)
	first := &peerv1.InstallSnapshotChunk{Kind: &peerv1.InstallSnapshotChunk_Request{Request: req}}
	sent = proto.Size(first)
	if err := stream.Send(first); err != nil {
		return sent, 0, g.snapshotSendErr(stream, err)
	}
	var total int64
	for {
		// A fresh buffer per message: gRPC may use a sent message lazily.
		buf := make([]byte, g.net.cfg.SnapshotChunkBytes)
		n, rerr := io.ReadFull(data, buf)
		if n > 0 {
			msg := &peerv1.InstallSnapshotChunk{Kind: &peerv1.InstallSnapshotChunk_Data{Data: buf[:n]}}
			if err := stream.Send(msg); err != nil {
				return sent, 0, g.snapshotSendErr(stream, err)
			}
			sent += proto.Size(msg)
			total += int64(n)
			g.net.metrics.snapshotBytes.WithLabelValues("sent").Add(float64(n))
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return sent, 0, fmt.Errorf("transport: read snapshot: %w", rerr)
		}
	}
	if total != args.Size {
		return sent, 0, fmt.Errorf("transport: snapshot has %d bytes, its request says %d", total, args.Size)
	}
	out, err := stream.CloseAndRecv()
	if err != nil {
		return sent, 0, err
	}
	return sent, proto.Size(out), installSnapshotResponseFromProto(out, resp)
}

// snapshotSendErr returns the error that made Send fail: on io.EOF the
// server ended the stream, and its status says why.
func (g *groupTransport) snapshotSendErr(stream grpc.ClientStreamingClient[peerv1.InstallSnapshotChunk, peerv1.InstallSnapshotResponse], err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.CloseAndRecv(); rerr != nil {
			return rerr
		}
	}
	return err
}

// AppendEntriesPipeline implements raft.Transport. It returns
// raft.ErrPipelineReplicationNotSupported when Config.MaxInFlight is 1.
func (g *groupTransport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if g.net.cfg.MaxInFlight < 2 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	c, err := g.client(target)
	if err != nil {
		return nil, err
	}
	p, err := openPipeline(g, c, target)
	if err != nil {
		return nil, fromStatus(typePipeline, string(target), err)
	}
	g.mu.Lock()
	closed := g.mu.closed
	if !closed {
		g.mu.pipelines[p] = struct{}{}
	}
	g.mu.Unlock()
	if closed {
		_ = p.Close()
		return nil, ErrClosed
	}
	return p, nil
}

// forget removes a closed pipeline.
func (g *groupTransport) forget(p *pipeline) {
	g.mu.Lock()
	delete(g.mu.pipelines, p)
	g.mu.Unlock()
}
