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

// pipeline implements raft.AppendPipeline over one AppendEntriesPipeline
// stream. raft's replication goroutine sends; the pipeline's receive
// goroutine takes the sent requests in order, receives their responses (the
// server answers in order) and hands the completed futures to raft through
// Consumer.
type pipeline struct {
	g       *groupTransport
	target  raft.ServerAddress
	timeout time.Duration
	stream  grpc.BidiStreamingClient[peerv1.AppendEntriesRequest, peerv1.AppendEntriesResponse]
	cancel  context.CancelFunc // ends the stream
	expired atomic.Bool        // a response was overdue; the stream was ended

	sendMu   sync.Mutex             // orders Send and the enqueueing on inflight
	batched  atomic.Int32           // requests waiting in a batch (batch.go)
	aside    atomic.Int32           // requests answered by keepalives, not yet handed to raft (quiet.go)
	slots    chan struct{}          // one token per unanswered request
	inflight chan *appendFuture     // sent, unanswered requests, oldest first
	doneCh   chan raft.AppendFuture // answered requests, for raft
	closed   chan struct{}          // closed by Close
	once     sync.Once
	wg       sync.WaitGroup // the receive goroutine
}

var _ raft.AppendPipeline = (*pipeline)(nil)

// openPipeline opens the stream to target and starts the pipeline's receive
// goroutine.
func openPipeline(g *groupTransport, c peerv1.RaftClient, target raft.ServerAddress) (*pipeline, error) {
	ctx, cancel := context.WithCancel(context.Background())
	// Opening the stream may wait for a connection: bound it like an RPC.
	timer := time.AfterFunc(g.net.cfg.RPCTimeout, cancel)
	stream, err := c.AppendEntriesPipeline(ctx)
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("open pipeline: %w", context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	n := g.net.cfg.MaxInFlight
	p := &pipeline{
		g:        g,
		target:   target,
		timeout:  g.net.cfg.RPCTimeout,
		stream:   stream,
		cancel:   cancel,
		slots:    make(chan struct{}, n),
		inflight: make(chan *appendFuture, n),
		doneCh:   make(chan raft.AppendFuture, n),
		closed:   make(chan struct{}),
	}
	p.wg.Add(1)
	go p.receive()
	return p, nil
}

// AppendEntries implements raft.AppendPipeline. It blocks while
// Config.MaxInFlight requests await their response.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	select {
	case p.slots <- struct{}{}:
	case <-p.closed:
		return nil, raft.ErrPipelineShutdown
	}
	p.sendMu.Lock()
	// A message that carries nothing new, when every request sent before
	// it and still unanswered is batched or answered aside too (so it
	// cannot overtake entries; the slot taken above is its own), is
	// answered by keepalives (quiet.go) or batched (batch.go).
	nothingNew := int32(len(p.slots)-1) == p.batched.Load()+p.aside.Load() && p.g.carriesNothingNew(p.target, args)
	if nothingNew {
		if quiet := p.g.quietAnswer(p.target, args); quiet != nil {
			ch := make(chan batchResult, 1)
			ch <- batchResult{resp: quiet}
			f := &appendFuture{start: time.Now(), args: args, resp: resp, batched: ch, quiet: true, done: make(chan struct{})}
			p.aside.Add(1)
			p.g.noteSent(p.target, args)
			p.inflight <- f // never blocks: len(inflight) <= len(slots)
			p.sendMu.Unlock()
			return f, nil
		}
	}
	msg := appendEntriesToProto(p.g.name, args)
	msg.Header = p.g.stamp(msg.Header)
	f := &appendFuture{start: time.Now(), args: args, resp: resp, reqBytes: proto.Size(msg), done: make(chan struct{})}
	if nothingNew {
		ch := make(chan batchResult, 1)
		p.batched.Add(1)
		it := &batchItem{msg: msg, done: func(r batchResult) {
			p.batched.Add(-1)
			ch <- r
		}}
		if p.g.net.batch.add(p.target, it) {
			f.batched = ch
			p.g.noteSent(p.target, args)
			p.inflight <- f // never blocks: len(inflight) <= len(slots)
			p.sendMu.Unlock()
			return f, nil
		}
		p.batched.Add(-1)
	}
	if len(args.Entries) > 0 && p.batched.Load() > 0 {
		// Entries follow a batched message: do not let them wait for
		// the batch's delay.
		p.g.net.batch.flush(p.target)
	}
	p.g.noteSent(p.target, args)
	err := p.stream.Send(msg)
	if err == nil {
		p.inflight <- f // never blocks: len(inflight) <= len(slots)
	}
	p.sendMu.Unlock()
	if err != nil {
		<-p.slots
		p.g.net.metrics.observeSent(typePipeline, f.start, f.reqBytes, 0, err)
		if errors.Is(err, io.EOF) {
			// The stream ended; receive reports why with the pending futures.
			return nil, fmt.Errorf("transport: pipeline to %s: %w", p.target, raft.ErrPipelineShutdown)
		}
		return nil, fromStatus(typePipeline, string(p.target), err)
	}
	return f, nil
}

// receive answers the sent requests in order, until the pipeline closes.
// Once the stream failed every later request fails with the same error.
func (p *pipeline) receive() {
	defer p.wg.Done()
	for {
		var f *appendFuture
		select {
		case f = <-p.inflight:
		case <-p.closed:
			return
		}
		if f.batched != nil {
			if !p.receiveBatched(f) {
				return
			}
			continue
		}
		timer := time.AfterFunc(time.Until(f.start.Add(p.timeout)), func() {
			p.expired.Store(true)
			p.cancel()
		})
		msg, err := p.stream.Recv()
		timer.Stop()
		respBytes := 0
		switch {
		case err == nil:
			respBytes = proto.Size(msg)
			if err = appendEntriesResponseFromProto(msg, f.resp); err == nil {
				p.g.noteAnswer(p.target, f.args, f.resp, f.start, msg.GetLeasePromiseMs())
			}
		case p.expired.Load():
			err = fmt.Errorf("transport: pipeline to %s: no response within %v: %w", p.target, p.timeout, context.DeadlineExceeded)
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("transport: pipeline to %s: ended by peer: %w", p.target, raft.ErrPipelineShutdown)
		default:
			err = fromStatus(typePipeline, string(p.target), err)
			p.g.refused(err)
		}
		if !p.finish(f, typePipeline, respBytes, err) {
			return
		}
	}
}

// finish records f's outcome, answers it, frees its slot and hands it to
// raft; false if the pipeline closed meanwhile.
func (p *pipeline) finish(f *appendFuture, typ string, respBytes int, err error) bool {
	p.g.net.metrics.observeSent(typ, f.start, f.reqBytes, respBytes, err)
	f.respond(err)
	<-p.slots
	select {
	case p.doneCh <- f:
		return true
	case <-p.closed:
		return false
	}
}

// receiveBatched waits for the answer to a request sent in a batch and
// hands it to raft; false if the pipeline closed meanwhile.
func (p *pipeline) receiveBatched(f *appendFuture) bool {
	var r batchResult
	select {
	case r = <-f.batched:
	case <-p.closed:
		f.respond(raft.ErrPipelineShutdown)
		return false
	}
	if f.quiet {
		err := appendEntriesResponseFromProto(r.resp, f.resp)
		p.aside.Add(-1)
		return p.finish(f, typeQuiet, 0, err)
	}
	err, respBytes := r.err, 0
	if err == nil {
		respBytes = proto.Size(r.resp)
		if err = appendEntriesResponseFromProto(r.resp, f.resp); err == nil {
			p.g.noteAnswer(p.target, f.args, f.resp, f.start, r.resp.GetLeasePromiseMs())
		}
	} else {
		p.g.refused(err)
	}
	return p.finish(f, typeBatched, respBytes, err)
}

// Consumer implements raft.AppendPipeline.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.doneCh }

// Close implements raft.AppendPipeline: it ends the stream and stops the
// receive goroutine; requests still unanswered fail with
// raft.ErrPipelineShutdown. It is safe to call more than once.
func (p *pipeline) Close() error {
	p.once.Do(func() {
		close(p.closed)
		p.cancel()
		p.wg.Wait()
		for {
			select {
			case f := <-p.inflight:
				f.respond(raft.ErrPipelineShutdown)
				continue
			default:
			}
			break
		}
		p.g.forget(p)
	})
	return nil
}

// appendFuture implements raft.AppendFuture.
type appendFuture struct {
	start    time.Time
	args     *raft.AppendEntriesRequest
	resp     *raft.AppendEntriesResponse
	reqBytes int
	batched  chan batchResult // the answer, if sent in a batch or answered by keepalives
	quiet    bool             // answered by keepalives (quiet.go)
	err      error            // set before done is closed
	done     chan struct{}
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.done)
}

// Error implements raft.Future.
func (f *appendFuture) Error() error {
	<-f.done
	return f.err
}

// Start implements raft.AppendFuture.
func (f *appendFuture) Start() time.Time { return f.start }

// Request implements raft.AppendFuture.
func (f *appendFuture) Request() *raft.AppendEntriesRequest { return f.args }

// Response implements raft.AppendFuture.
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }
