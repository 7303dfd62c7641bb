package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/pending"
)

// Calls on one stream per connection (KV.Stream, docs/adr/026-call-stream.md).
// A unary gRPC call opens an HTTP/2 stream with headers both ways and
// trailers, and the server starts a stream goroutine for it; under point
// reads that is most of what a call costs either side. Put, Get and Delete
// therefore go as messages of one long-lived bidirectional stream per
// connection, matched to their answers by id. The server serves each as
// the unary call (same handler, same answer or error), so nothing above
// this file changes: streamKV is a kvv1.KVClient. The other calls, calls
// with gRPC call options, and requests too large to share a stream
// without holding up the others stay unary; so do all calls to a server
// that does not serve the stream (an older node during an upgrade).

// maxStreamedRequest is the largest request (key, value and session
// token) sent on the stream: a larger one would hold up the calls behind
// it, and one over the server's message limit would end the stream for
// every call on it, where a unary call fails alone.
const maxStreamedRequest = 256 << 10

// unaryRetry is how long a client sends only unary calls to a server that
// answered UNIMPLEMENTED to the stream; streamRetry how long after a
// stream could not be opened.
const (
	unaryRetry  = time.Minute
	streamRetry = time.Second
)

// errUseUnary: the call was not sent on the stream (or the server did not
// serve it); send it as a unary call.
var errUseUnary = errors.New("client: call goes unary")

// errStreamUnsupported: the server answered UNIMPLEMENTED to the stream
// and served none of its calls.
var errStreamUnsupported = fmt.Errorf("%w: the server does not serve KV.Stream", errUseUnary)

// streamKV is a kvv1.KVClient whose Put, Get and Delete travel on the
// connection's call stream.
type streamKV struct {
	kvv1.KVClient // unary calls
	mu            struct {
		sync.Mutex
		s          *callStream
		unaryUntil time.Time
		closed     bool
	}
	wg sync.WaitGroup // the streams' receive goroutines
}

func newStreamKV(conn grpc.ClientConnInterface) *streamKV {
	return &streamKV{KVClient: kvv1.NewKVClient(conn)}
}

// Put implements kvv1.KVClient.
func (k *streamKV) Put(ctx context.Context, in *kvv1.PutRequest, opts ...grpc.CallOption) (*kvv1.PutResponse, error) {
	size := len(in.GetKey()) + len(in.GetValue()) + len(in.GetHeader().GetSession())
	r, err := k.call(ctx, &kvv1.StreamRequest{Call: &kvv1.StreamRequest_Put{Put: in}}, in.GetHeader(), size, opts)
	switch {
	case errors.Is(err, errUseUnary):
		return k.KVClient.Put(ctx, in, opts...)
	case err != nil:
		return nil, err
	case r.GetPut() == nil:
		return nil, wrongAnswer(r)
	}
	return r.GetPut(), nil
}

// Get implements kvv1.KVClient.
func (k *streamKV) Get(ctx context.Context, in *kvv1.GetRequest, opts ...grpc.CallOption) (*kvv1.GetResponse, error) {
	size := len(in.GetKey()) + len(in.GetHeader().GetSession())
	r, err := k.call(ctx, &kvv1.StreamRequest{Call: &kvv1.StreamRequest_Get{Get: in}}, in.GetHeader(), size, opts)
	switch {
	case errors.Is(err, errUseUnary):
		return k.KVClient.Get(ctx, in, opts...)
	case err != nil:
		return nil, err
	case r.GetGet() == nil:
		return nil, wrongAnswer(r)
	}
	return r.GetGet(), nil
}

// Delete implements kvv1.KVClient.
func (k *streamKV) Delete(ctx context.Context, in *kvv1.DeleteRequest, opts ...grpc.CallOption) (*kvv1.DeleteResponse, error) {
	size := len(in.GetKey()) + len(in.GetHeader().GetSession())
	r, err := k.call(ctx, &kvv1.StreamRequest{Call: &kvv1.StreamRequest_Delete{Delete: in}}, in.GetHeader(), size, opts)
	switch {
	case errors.Is(err, errUseUnary):
		return k.KVClient.Delete(ctx, in, opts...)
	case err != nil:
		return nil, err
	case r.GetDelete() == nil:
		return nil, wrongAnswer(r)
	}
	return r.GetDelete(), nil
}

func wrongAnswer(r *kvv1.StreamResponse) error {
	return status.Errorf(codes.Internal, "client: the call stream answered with %T", r.GetResult())
}

// call sends req on the stream and waits for its answer. It returns
// errUseUnary when the call must go unary instead: call options (they
// apply to unary calls), a large request, a keyspace that is not UTF-8
// (its encoding fails, and a failed send ends the stream for every call),
// no stream, or a server without it.
func (k *streamKV) call(ctx context.Context, req *kvv1.StreamRequest, h *kvv1.RequestHeader, size int, opts []grpc.CallOption) (*kvv1.StreamResponse, error) {
	if len(opts) > 0 || size > maxStreamedRequest || !utf8.ValidString(h.GetKeyspace()) {
		return nil, errUseUnary
	}
	s := k.stream(ctx)
	if s == nil {
		return nil, errUseUnary
	}
	resp, err := s.call(ctx, req)
	if errors.Is(err, errStreamUnsupported) {
		k.mu.Lock()
		k.mu.unaryUntil = time.Now().Add(unaryRetry)
		k.mu.Unlock()
	}
	return resp, err
}

// stream returns the working stream, opening one if there is none; nil
// if calls go unary for now.
func (k *streamKV) stream(ctx context.Context) *callStream {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case k.mu.closed || time.Now().Before(k.mu.unaryUntil):
		return nil
	case k.mu.s != nil && k.mu.s.failed() == nil:
		return k.mu.s
	}
	s, err := openCallStream(ctx, k.KVClient, &k.wg)
	if err != nil {
		// The connection is down or cannot open streams: the unary call
		// reports why, and the stream is tried again a little later.
		k.mu.unaryUntil = time.Now().Add(streamRetry)
		return nil
	}
	k.mu.s = s
	return s
}

// close ends the stream and waits for its receive goroutine; later calls
// go unary (and fail on the closed connection).
func (k *streamKV) close() {
	k.mu.Lock()
	k.mu.closed = true
	if k.mu.s != nil {
		k.mu.s.cancel(nil)
	}
	k.mu.Unlock()
	k.wg.Wait()
}

// callStream is one KV.Stream: calls go out as they come, their answers
// come back by id, in any order.
type callStream struct {
	stream grpc.BidiStreamingClient[kvv1.StreamRequest, kvv1.StreamResponse]
	cancel context.CancelCauseFunc
	// canceled is the Err of the stream's own context, which only this
	// client cancels (gRPC's context of the stream also ends with it);
	// cause is its cause: errStreamBroke when a Send failed.
	canceled func() error
	cause    func() error

	sendMu sync.Mutex // serializes Send

	pending pending.Table[*kvv1.StreamResponse]
}

// openCallStream opens a stream, waiting for the connection at most as
// long as ctx allows (until it ends, 10 s without a deadline), and starts
// its receive goroutine, which wg counts. The stream outlives ctx (it
// carries later calls), but its opening does not: a call whose context
// ends (canceled by its caller, or by watchNode when the node answers no
// probe) while the connection is still being made must not wait on.
func openCallStream(ctx context.Context, kv kvv1.KVClient, wg *sync.WaitGroup) (*callStream, error) {
	sctx, cancel := context.WithCancelCause(context.Background())
	wctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var wcancel context.CancelFunc
		wctx, wcancel = context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
	}
	stop := context.AfterFunc(wctx, func() { cancel(nil) })
	stream, err := kv.Stream(sctx)
	if !stop() && err == nil {
		err = fmt.Errorf("open call stream: %w", context.DeadlineExceeded)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	s := &callStream{stream: stream, cancel: cancel, canceled: sctx.Err, cause: func() error { return context.Cause(sctx) }}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.receive()
	}()
	return s, nil
}

// receive hands each answer to its call until the stream ends, then fails
// the calls still waiting: with errUseUnary if the server does not serve
// the stream (it served none of them), else with the stream's error.
func (s *callStream) receive() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			switch {
			case status.Code(err) == codes.Unimplemented:
				err = errStreamUnsupported
			case errors.Is(err, io.EOF):
				err = status.Error(codes.Unavailable, "client: the call stream ended")
			case status.Code(err) == codes.Canceled && s.canceled() == nil:
				// Nobody here canceled the stream: the node did, as it
				// does while it stops. Its calls go to another endpoint.
				err = status.Error(codes.Unavailable, "client: the node ended the call stream: "+status.Convert(err).Message())
			case status.Code(err) == codes.Canceled && errors.Is(s.cause(), errStreamBroke):
				// A Send failed (the connection broke, as when the node
				// dies) and ended the stream: not a cancellation the
				// caller asked for. Its calls go to another endpoint.
				err = status.Error(codes.Unavailable, "client: the call stream broke: the connection to the node failed")
			}
			s.fail(err)
			return
		}
		s.pending.Deliver(resp.GetId(), resp)
	}
}

// fail ends the stream with err and fails every call waiting on it.
func (s *callStream) fail(err error) {
	s.pending.Fail(err)
	s.cancel(nil)
}

// errStreamBroke is the cause of a stream ended because a Send failed.
var errStreamBroke = errors.New("client: a send on the call stream failed")

// failed returns why the stream ended, or nil while it works.
func (s *callStream) failed() error { return s.pending.Err() }

// call sends req and waits for its answer or ctx. The call's deadline
// travels with it. A call the stream failed before sending goes unary.
func (s *callStream) call(ctx context.Context, req *kvv1.StreamRequest) (*kvv1.StreamResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return nil, status.FromContextError(context.DeadlineExceeded).Err()
		}
		req.TimeoutUs = uint64(max(left/time.Microsecond, 1))
	}
	id, ch, err := s.pending.Add()
	if err != nil {
		if errors.Is(err, errStreamUnsupported) {
			return nil, err
		}
		return nil, errUseUnary // the next call opens a new stream
	}
	req.Id = id
	s.sendMu.Lock()
	err = s.stream.Send(req)
	s.sendMu.Unlock()
	if err != nil {
		// The stream broke; receive fails this call, and the others
		// waiting, as UNAVAILABLE.
		s.cancel(errStreamBroke)
	}
	select {
	case a := <-ch:
		if a.Err != nil {
			return nil, a.Err
		}
		return a.Resp, answerErr(a.Resp)
	case <-ctx.Done():
		s.pending.Drop(id)
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// answerErr decodes the error of an answer, nil on success.
func answerErr(r *kvv1.StreamResponse) error {
	if len(r.GetStatus()) == 0 {
		return nil
	}
	var st spb.Status
	if err := proto.Unmarshal(r.GetStatus(), &st); err != nil || codes.Code(st.GetCode()) == codes.OK {
		return status.Errorf(codes.Internal, "client: undecodable status in a call stream answer (%v)", err)
	}
	return status.ErrorProto(&st)
}
