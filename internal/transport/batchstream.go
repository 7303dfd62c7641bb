package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/pending"
)

// Batches travel on one AppendEntriesBatchStream per node pair. As unary
// AppendEntriesBatch RPCs, each batch (a commit push to a follower, a
// heartbeat round of a STRONG read, keepalives) opened an HTTP/2 stream:
// headers both ways, a server goroutine and some seventy allocations per
// call on the sender alone, two calls per write at low concurrency. On the
// stream a batch is one message each way. A peer that does not know the
// stream (an older node during an upgrade) is sent unary batches, as are
// batches the stream failed under.

// errStreamUnsupported reports that the peer does not serve
// AppendEntriesBatchStream.
var errStreamUnsupported = errors.New("transport: peer does not serve AppendEntriesBatchStream")

// batchStream is the AppendEntriesBatchStream to one node: batches go out
// as they come, their answers come back matched by id, in any order.
type batchStream struct {
	stream grpc.BidiStreamingClient[peerv1.AppendEntriesBatchRequest, peerv1.AppendEntriesBatchResponse]
	cancel context.CancelFunc

	sendMu sync.Mutex // serializes Send

	pending pending.Table[*peerv1.AppendEntriesBatchResponse]
	done    chan struct{} // closed when the receive goroutine ended
}

// openBatchStream opens the stream to a node and starts its receive
// goroutine; wg counts that goroutine.
func openBatchStream(c peerv1.RaftClient, timeout time.Duration, wg *sync.WaitGroup) (*batchStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	// Opening the stream may wait for a connection: bound it like an RPC.
	timer := time.AfterFunc(timeout, cancel)
	stream, err := c.AppendEntriesBatchStream(ctx)
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("open batch stream: %w", context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	s := &batchStream{stream: stream, cancel: cancel, done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.receive()
	}()
	return s, nil
}

// receive hands each answer to its batch until the stream ends, then fails
// the batches still waiting.
func (s *batchStream) receive() {
	defer close(s.done)
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = toStatus(fmt.Errorf("%w: the batch stream ended", ErrClosed))
			} else if status.Code(err) == codes.Unimplemented {
				err = fmt.Errorf("%w: %v", errStreamUnsupported, err)
			}
			s.fail(err)
			return
		}
		s.pending.Deliver(resp.GetId(), resp)
	}
}

// fail ends the stream with err and fails every batch waiting on it.
func (s *batchStream) fail(err error) {
	s.pending.Fail(err)
	s.cancel()
}

// failed returns why the stream ended, or nil while it works.
func (s *batchStream) failed() error { return s.pending.Err() }

// call sends req and waits up to timeout for its answer. An error that
// wraps errStreamUnsupported means the peer does not know the stream and
// nothing was answered: the caller sends the batch as a unary RPC.
func (s *batchStream) call(req *peerv1.AppendEntriesBatchRequest, timeout time.Duration) (*peerv1.AppendEntriesBatchResponse, error) {
	id, ch, err := s.pending.Add()
	if err != nil {
		return nil, err
	}
	req.Id = id
	// Send blocks while HTTP/2's flow control holds it (a peer that stopped
	// reading, a cut link): a stream that cannot take a batch within the
	// timeout is ended, failing every batch on it, as their RPCs would
	// have.
	deadline := time.Now().Add(timeout)
	stuck := time.AfterFunc(timeout, s.cancel)
	s.sendMu.Lock()
	err = s.stream.Send(req)
	s.sendMu.Unlock()
	stuck.Stop()
	if err != nil {
		// The stream broke; Recv says why, and fails this batch with it.
		s.cancel()
		a := <-ch
		return a.Resp, a.Err
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case a := <-ch:
		return a.Resp, a.Err
	case <-t.C:
		s.pending.Drop(id)
		select {
		case a := <-ch: // answered meanwhile
			return a.Resp, a.Err
		default:
		}
		return nil, toStatus(fmt.Errorf("no answer to a batch within the RPC timeout: %w", context.DeadlineExceeded))
	}
}

// close ends the stream; its receive goroutine fails what still waits.
func (s *batchStream) close() { s.cancel() }

// call sends req to target on its batch stream, or as a unary
// AppendEntriesBatch RPC to a peer that does not serve the stream.
func (b *batcher) call(target raft.ServerAddress, req *peerv1.AppendEntriesBatchRequest) (*peerv1.AppendEntriesBatchResponse, error) {
	c, err := b.n.client(target)
	if err != nil {
		return nil, err
	}
	if s, err := b.stream(target, c); err == nil {
		resp, err := s.call(req, b.n.cfg.RPCTimeout)
		if !errors.Is(err, errStreamUnsupported) {
			return resp, err
		}
		b.streamUnsupported(target, err)
	} else if !errors.Is(err, errStreamUnsupported) {
		return nil, err
	}
	req.Id = 0
	ctx, cancel := context.WithTimeout(context.Background(), b.n.cfg.RPCTimeout)
	defer cancel()
	return c.AppendEntriesBatch(ctx, req)
}

// streamSlot holds the batch stream to one node. Its own lock, not the
// batcher's, is held while a stream opens (which may wait for a
// connection up to the RPC timeout), so that a dead node delays only the
// batches bound for it.
type streamSlot struct {
	mu            sync.Mutex
	s             *batchStream // REQUIRES: mu
	noStreamUntil time.Time    // REQUIRES: mu
	closed        bool         // REQUIRES: mu
}

// stream returns the working batch stream to target, opening one if there
// is none, or an error wrapping errStreamUnsupported while target is known
// not to serve it.
func (b *batcher) stream(target raft.ServerAddress, c peerv1.RaftClient) (*batchStream, error) {
	slot, err := b.slot(target)
	if err != nil {
		return nil, err
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	switch {
	case slot.closed:
		return nil, ErrClosed
	case time.Now().Before(slot.noStreamUntil):
		return nil, errStreamUnsupported
	case slot.s != nil && slot.s.failed() == nil:
		return slot.s, nil
	}
	s, err := openBatchStream(c, b.n.cfg.RPCTimeout, &b.streamWG)
	if err != nil {
		return nil, err
	}
	slot.s = s
	return s, nil
}

// slot returns target's stream slot.
func (b *batcher) slot(target raft.ServerAddress) (*streamSlot, error) {
	b.streamMu.Lock()
	defer b.streamMu.Unlock()
	if b.streamClosed {
		return nil, ErrClosed
	}
	slot := b.streams[target]
	if slot == nil {
		slot = &streamSlot{}
		b.streams[target] = slot
	}
	return slot, nil
}

// streamUnsupported records that target does not serve the batch stream:
// batches go to it as unary RPCs for unsupportedRetry.
func (b *batcher) streamUnsupported(target raft.ServerAddress, err error) {
	slot, serr := b.slot(target)
	if serr != nil {
		return
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if time.Now().Before(slot.noStreamUntil) {
		return
	}
	slot.noStreamUntil = time.Now().Add(unsupportedRetry)
	b.n.log.Info("peer does not take the batch stream; sending batches as single RPCs", "target", target, "retry_in", unsupportedRetry, "err", err)
}

// closeStreams ends every batch stream and waits for their receive
// goroutines.
func (b *batcher) closeStreams() {
	b.streamMu.Lock()
	b.streamClosed = true
	slots := b.streams
	b.streams = nil
	b.streamMu.Unlock()
	for _, slot := range slots {
		slot.mu.Lock()
		slot.closed = true
		if slot.s != nil {
			slot.s.close()
		}
		slot.mu.Unlock()
	}
	b.streamWG.Wait()
}

// AppendEntriesBatchStream implements peerv1.RaftServer: it answers each
// batch as AppendEntriesBatch would, concurrently, with the batch's id.
func (s *service) AppendEntriesBatchStream(stream grpc.BidiStreamingServer[peerv1.AppendEntriesBatchRequest, peerv1.AppendEntriesBatchResponse]) error {
	ctx := stream.Context()
	var (
		wg      sync.WaitGroup
		sendMu  sync.Mutex
		sendErr error
	)
	defer wg.Wait() // no Send after the handler returns
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n := len(req.GetRequests()); n > maxBatchRequests {
			err := toStatus(invalidf("a batch of %d requests (at most %d)", n, maxBatchRequests))
			s.n.metrics.observeReceived(typeBatch, 0, 0, err)
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := s.AppendEntriesBatch(ctx, req)
			if err != nil { // cannot happen: the size was checked above
				return
			}
			resp.Id = req.GetId()
			sendMu.Lock()
			defer sendMu.Unlock()
			if sendErr == nil {
				sendErr = stream.Send(resp)
			}
		}()
	}
}
