package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// Stream implements kvv1.KVServer: it serves each call of the stream
// concurrently, as the unary method of the same name would (same handler,
// same metrics, same errors), and sends each answer as it is ready, with
// the call's id. A call's context is the stream's, bounded by the deadline
// the call carries. The stream ends when the client closes its side and
// every call is answered, when the stream breaks (the calls in flight are
// then cancelled with it), or when the node stops (Drain): calls that
// arrive after it are answered UNAVAILABLE, and once the calls in flight
// are answered the stream ends UNAVAILABLE, so clients go to another node
// and a graceful stop does not wait for clients to close their streams.
// docs/adr/026-call-stream.md.
//
// The stream's reader receives the calls and hands each to an idle
// worker, or to a new one when none is idle. A worker stays for the
// stream's next calls (up to maxIdleWorkers idle at a time), so its stack,
// grown by the read and write paths, is reused instead of grown again for
// every call (a goroutine per call spent a tenth of a node's CPU growing
// stacks under point reads).
func (s *KV) Stream(stream kvv1.KV_StreamServer) error {
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	ctx := stream.Context()
	w := &streamWorkers{kv: s, stream: stream, work: make(chan *kvv1.StreamRequest), done: make(chan struct{}),
		slots: make(chan struct{}, maxStreamCalls)}
	read := make(chan error, 1)
	go func() { read <- w.read(ctx) }()
	var err error
	select {
	case err = <-read:
	case <-s.draining:
		err = toStatus(ErrStopping)
	}
	w.mu.Lock()
	w.mu.ended = true // the reader hands out no more calls
	w.mu.Unlock()
	close(w.done)
	w.wg.Wait()
	w.sendMu.Lock()
	w.finished = true // no Send after the handler returns
	w.sendMu.Unlock()
	return err
}

// Drain makes every call stream end once its calls in flight are
// answered, answering later calls UNAVAILABLE (the node is stopping).
func (s *KV) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// maxIdleWorkers bounds the idle workers a stream keeps.
const maxIdleWorkers = 64

// maxStreamCalls bounds the calls of one stream in flight: the reader
// receives the next call once one is answered, and HTTP/2 flow control
// holds the client's. Unbounded, a client that sent calls faster than they
// were answered (or did not read the answers) made the node start a
// goroutine for each: 120,000 for one stream in 20 seconds.
const maxStreamCalls = 1024

// streamWorkers serve the calls of one stream.
type streamWorkers struct {
	kv     *KV
	stream kvv1.KV_StreamServer
	work   chan *kvv1.StreamRequest // to an idle worker
	done   chan struct{}            // closed once the reader hands out no more calls
	idle   atomic.Int32
	wg     sync.WaitGroup // the workers
	slots  chan struct{}  // a token for each call in flight (maxStreamCalls)

	mu struct {
		sync.Mutex
		ended bool // the stream is ending: calls are answered UNAVAILABLE
	}

	sendMu   sync.Mutex
	sendErr  error // REQUIRES: sendMu
	finished bool  // the handler returned; REQUIRES: sendMu
}

// read receives the calls and hands them to the workers until the client
// closes its side (nil) or the stream fails.
func (w *streamWorkers) read(ctx context.Context) error {
	for {
		select {
		case w.slots <- struct{}{}: // released once the call is answered
		case <-ctx.Done():
			return ctx.Err()
		}
		req, err := w.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		if w.mu.ended {
			w.mu.Unlock()
			w.send(&kvv1.StreamResponse{Id: req.GetId(), Status: statusBytes(ErrStopping)})
			<-w.slots
			continue
		}
		select {
		case w.work <- req: // an idle worker took it
		default:
			w.wg.Add(1)
			go w.run(ctx, req)
		}
		w.mu.Unlock()
	}
}

// send sends an answer, unless the stream failed or its handler returned.
func (w *streamWorkers) send(resp *kvv1.StreamResponse) {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.sendErr == nil && !w.finished {
		w.sendErr = w.stream.Send(resp)
	}
}

// run serves req, then the calls handed to it while idle, until the
// stream ends or enough other workers are idle.
func (w *streamWorkers) run(ctx context.Context, req *kvv1.StreamRequest) {
	defer w.wg.Done()
	for {
		w.send(w.kv.streamCall(ctx, req))
		<-w.slots
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case req = <-w.work:
			w.idle.Add(-1)
		case <-w.done:
			w.idle.Add(-1)
			return
		}
	}
}

// streamCall serves one call of a stream. A panic in the handler fails
// the call with INTERNAL, as the server's unary interceptor does for a
// unary call.
func (s *KV) streamCall(ctx context.Context, req *kvv1.StreamRequest) (resp *kvv1.StreamResponse) {
	resp = &kvv1.StreamResponse{Id: req.GetId()}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic in request handler", "method", "KV.Stream", "call", fmt.Sprintf("%T", req.GetCall()), "panic", p, "stack", string(debug.Stack()))
			resp.Result = nil
			resp.Status = statusBytes(errInternal)
		}
	}()
	if us := req.GetTimeoutUs(); us > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(min(us, uint64(maxStreamTimeout/time.Microsecond)))*time.Microsecond)
		defer cancel()
	}
	var err error
	switch call := req.GetCall().(type) {
	case *kvv1.StreamRequest_Put:
		var r *kvv1.PutResponse
		if r, err = s.Put(ctx, call.Put); err == nil {
			resp.Result = &kvv1.StreamResponse_Put{Put: r}
		}
	case *kvv1.StreamRequest_Get:
		var r *kvv1.GetResponse
		if r, err = s.Get(ctx, call.Get); err == nil {
			resp.Result = &kvv1.StreamResponse_Get{Get: r}
		}
	case *kvv1.StreamRequest_Delete:
		var r *kvv1.DeleteResponse
		if r, err = s.Delete(ctx, call.Delete); err == nil {
			resp.Result = &kvv1.StreamResponse_Delete{Delete: r}
		}
	default:
		err = fmt.Errorf("%w: KV.Stream: a request without a call (put, get or delete)", ErrBadRequest)
	}
	if err != nil {
		resp.Status = statusBytes(err)
	}
	return resp
}

// ErrStopping: the node is stopping; its call streams answer no more
// calls (UNAVAILABLE: the client goes to another node).
var ErrStopping = errors.New("rpc: the node is stopping")

// errInternal answers a call whose handler panicked (INTERNAL, as no
// table maps it).
var errInternal = errors.New("rpc: internal error in KV.Stream")

// maxStreamTimeout bounds the deadline a call may ask for (a day: far
// beyond any request, short of overflowing time arithmetic).
const maxStreamTimeout = 24 * time.Hour

// statusBytes serializes err's status for a StreamResponse.
func statusBytes(err error) []byte {
	b, merr := proto.Marshal(status.Convert(toStatus(err)).Proto())
	if merr != nil { // cannot happen for a status; keep the code
		b, _ = proto.Marshal(&spb.Status{Code: int32(status.Code(err)), Message: errors.Join(err, merr).Error()})
	}
	return b
}
