package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// service is the Raft gRPC service: it validates each request, hands it to
// its group's raft and returns raft's answer.
type service struct {
	peerv1.UnimplementedRaftServer
	n *Network
}

// unary serves one unary request: decode validates and converts it, the
// group's raft answers it, encode converts the answer.
func unary[Req, Resp proto.Message, Cmd, Out any](ctx context.Context, s *service, typ string, req Req, group string, h *peerv1.RaftHeader,
	decode func(Req) (Cmd, error), heartbeat func(Cmd) bool, encode func(Out) Resp,
) (resp Resp, err error) {
	defer func() {
		err = toStatus(err)
		respBytes := 0
		if err == nil {
			respBytes = proto.Size(resp)
		}
		s.n.metrics.observeReceived(typ, proto.Size(req), respBytes, err)
	}()
	var zero Resp
	cmd, err := decode(req)
	if err != nil {
		s.n.log.Warn("malformed raft request", "type", typ, "group", group, "err", err)
		return zero, err
	}
	g, err := s.n.group(group)
	if err != nil {
		return zero, err
	}
	if err := g.admit(h); err != nil {
		return zero, err
	}
	hb := heartbeat != nil && heartbeat(cmd)
	out, err := g.dispatch(ctx, cmd, nil, hb)
	if err != nil {
		return zero, err
	}
	o, ok := out.(Out)
	if !ok {
		return zero, fmt.Errorf("transport: raft answered %s with %T", typ, out)
	}
	return encode(o), nil
}

// AppendEntries implements peerv1.RaftServer.
func (s *service) AppendEntries(ctx context.Context, req *peerv1.AppendEntriesRequest) (*peerv1.AppendEntriesResponse, error) {
	typ := typeAppendEntries
	if len(req.GetEntries()) == 0 && req.GetPrevLogEntry() == 0 && req.GetLeaderCommitIndex() == 0 {
		typ = typeHeartbeat
	}
	resp, err := unary(ctx, s, typ, req, req.GetGroup(), req.GetHeader(), appendEntriesFromProto, isHeartbeat, appendEntriesResponseToProto)
	s.promise(req.GetGroup(), resp)
	return resp, err
}

// RequestVote implements peerv1.RaftServer.
func (s *service) RequestVote(ctx context.Context, req *peerv1.RequestVoteRequest) (*peerv1.RequestVoteResponse, error) {
	err := s.heldVote(req)
	if err == nil {
		err = s.heldLogVote(req)
	}
	if err != nil {
		err = toStatus(err)
		s.n.metrics.observeReceived(typeRequestVote, proto.Size(req), 0, err)
		return nil, err
	}
	return unary(ctx, s, typeRequestVote, req, req.GetGroup(), req.GetHeader(), requestVoteFromProto, nil, requestVoteResponseToProto)
}

// RequestPreVote implements peerv1.RaftServer.
func (s *service) RequestPreVote(ctx context.Context, req *peerv1.RequestPreVoteRequest) (*peerv1.RequestPreVoteResponse, error) {
	return unary(ctx, s, typeRequestPreVote, req, req.GetGroup(), req.GetHeader(), requestPreVoteFromProto, nil, requestPreVoteResponseToProto)
}

// TimeoutNow implements peerv1.RaftServer.
func (s *service) TimeoutNow(ctx context.Context, req *peerv1.TimeoutNowRequest) (*peerv1.TimeoutNowResponse, error) {
	if err := s.stoppingTransfer(req); err != nil {
		err = toStatus(err)
		s.n.metrics.observeReceived(typeTimeoutNow, proto.Size(req), 0, err)
		return nil, err
	}
	if err := s.staleTransfer(req); err != nil {
		err = toStatus(err)
		s.n.metrics.observeReceived(typeTimeoutNow, proto.Size(req), 0, err)
		return nil, err
	}
	return unary(ctx, s, typeTimeoutNow, req, req.GetGroup(), req.GetHeader(), timeoutNowFromProto, nil, timeoutNowResponseToProto)
}

// AppendEntriesPipeline implements peerv1.RaftServer: it answers the
// requests one at a time, in order. A request that fails ends the stream
// with its status.
func (s *service) AppendEntriesPipeline(stream grpc.BidiStreamingServer[peerv1.AppendEntriesRequest, peerv1.AppendEntriesResponse]) error {
	ctx := stream.Context()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := s.pipelined(ctx, req)
		respBytes := 0
		if err == nil {
			respBytes = proto.Size(resp)
		}
		s.n.metrics.observeReceived(typePipeline, proto.Size(req), respBytes, err)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (s *service) pipelined(ctx context.Context, req *peerv1.AppendEntriesRequest) (*peerv1.AppendEntriesResponse, error) {
	cmd, err := appendEntriesFromProto(req)
	if err != nil {
		s.n.log.Warn("malformed raft request", "type", typePipeline, "group", req.GetGroup(), "err", err)
		return nil, toStatus(err)
	}
	g, err := s.n.group(req.GetGroup())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := g.admit(req.GetHeader()); err != nil {
		return nil, err
	}
	out, err := g.dispatch(ctx, cmd, nil, isHeartbeat(cmd))
	if err != nil {
		return nil, toStatus(err)
	}
	r, ok := out.(*raft.AppendEntriesResponse)
	if !ok {
		return nil, toStatus(fmt.Errorf("transport: raft answered AppendEntries with %T", out))
	}
	resp := appendEntriesResponseToProto(r)
	s.promise(req.GetGroup(), resp)
	return resp, nil
}

// InstallSnapshot implements peerv1.RaftServer. The first message is the
// request; raft then reads the data through a chunkReader, which asks this
// goroutine for every message, so that only this goroutine receives and
// nothing receives after it returned.
func (s *service) InstallSnapshot(stream grpc.ClientStreamingServer[peerv1.InstallSnapshotChunk, peerv1.InstallSnapshotResponse]) (err error) {
	reqBytes, respBytes := 0, 0
	defer func() {
		err = toStatus(err)
		s.n.metrics.observeReceived(typeSnapshot, reqBytes, respBytes, err)
	}()
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return invalidf("empty InstallSnapshot stream")
		}
		return err
	}
	reqBytes += proto.Size(first)
	cmd, err := installSnapshotFromProto(first.GetRequest())
	if err != nil {
		s.n.log.Warn("malformed raft request", "type", typeSnapshot, "group", first.GetRequest().GetGroup(), "err", err)
		return err
	}
	g, err := s.n.group(first.GetRequest().GetGroup())
	if err != nil {
		return err
	}
	if err := g.admit(first.GetRequest().GetHeader()); err != nil {
		return err
	}

	r := &chunkReader{want: make(chan struct{}), got: make(chan chunk, 1), done: make(chan struct{})}
	defer close(r.done)
	respCh := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{Command: cmd, Reader: io.LimitReader(r, cmd.Size), RespChan: respCh}
	select {
	case g.consumeCh <- rpc:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.closed:
		return ErrClosed
	}

	var streamErr error // why the data stream ended early, if it did
	for {
		select {
		case <-r.want:
			c := s.nextChunk(stream)
			if c.err == nil {
				reqBytes += c.size
			} else if !errors.Is(c.err, io.EOF) {
				streamErr = c.err
			}
			r.got <- c
		case res := <-respCh:
			if streamErr != nil {
				return streamErr
			}
			if res.Error != nil {
				return fmt.Errorf("%w: %v", ErrRaft, res.Error)
			}
			out, ok := res.Response.(*raft.InstallSnapshotResponse)
			if !ok {
				return fmt.Errorf("transport: raft answered InstallSnapshot with %T", res.Response)
			}
			msg := installSnapshotResponseToProto(out)
			respBytes = proto.Size(msg)
			return stream.SendAndClose(msg)
		case <-ctx.Done():
			return ctx.Err()
		case <-g.closed:
			return ErrClosed
		}
	}
}

// nextChunk receives the next data message.
func (s *service) nextChunk(stream grpc.ClientStreamingServer[peerv1.InstallSnapshotChunk, peerv1.InstallSnapshotResponse]) chunk {
	msg, err := stream.Recv()
	if err != nil {
		return chunk{err: err}
	}
	data, ok := msg.GetKind().(*peerv1.InstallSnapshotChunk_Data)
	if !ok {
		return chunk{err: invalidf("InstallSnapshot message after the first one carries no data")}
	}
	s.n.metrics.snapshotBytes.WithLabelValues("received").Add(float64(len(data.Data)))
	return chunk{data: data.Data, size: proto.Size(msg)}
}

// chunk is one data message of an InstallSnapshot stream, or why there is
// none.
type chunk struct {
	data []byte
	size int // encoded size
	err  error
}

// chunkReader is the snapshot data as raft reads it: each Read that needs
// more data asks the handler's goroutine for the next message.
type chunkReader struct {
	want chan struct{} // Read asks for a chunk
	got  chan chunk    // the handler answers; buffered
	done chan struct{} // closed when the handler returns
	buf  []byte
	err  error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		select {
		case r.want <- struct{}{}:
		case <-r.done:
			r.err = ErrClosed
			continue
		}
		c := <-r.got // the handler answers every request it took
		r.buf, r.err = c.data, c.err
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
