package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// countingService counts the unary AppendEntriesBatch calls and the
// batches on AppendEntriesBatchStream it serves and, with noStream, serves
// no AppendEntriesBatchStream (a node of the release before it).
type countingService struct {
	*service
	unary, streamed *atomic.Int64
	noStream        bool
}

// countingStream counts the batches received on a batch stream.
type countingStream struct {
	grpc.BidiStreamingServer[peerv1.AppendEntriesBatchRequest, peerv1.AppendEntriesBatchResponse]
	n *atomic.Int64
}

func (s countingStream) Recv() (*peerv1.AppendEntriesBatchRequest, error) {
	req, err := s.BidiStreamingServer.Recv()
	if err == nil {
		s.n.Add(1)
	}
	return req, err
}

func (s countingService) AppendEntriesBatch(ctx context.Context, req *peerv1.AppendEntriesBatchRequest) (*peerv1.AppendEntriesBatchResponse, error) {
	s.unary.Add(1)
	return s.service.AppendEntriesBatch(ctx, req)
}

func (s countingService) AppendEntriesBatchStream(stream grpc.BidiStreamingServer[peerv1.AppendEntriesBatchRequest, peerv1.AppendEntriesBatchResponse]) error {
	if s.noStream {
		return status.Error(codes.Unimplemented, "unknown method AppendEntriesBatchStream")
	}
	return s.service.AppendEntriesBatchStream(countingStream{stream, s.streamed})
}

// TestBatchStream: batches (here the commit pushes and idle messages of a
// group) reach a peer on its batch stream, with no unary
// AppendEntriesBatch; a peer without the stream gets them as unary RPCs,
// and the group replicates either way.
func TestBatchStream(t *testing.T) {
	for _, noStream := range []bool{false, true} {
		t.Run(map[bool]string{false: "stream", true: "peer-without-stream"}[noStream], func(t *testing.T) {
			var unary, streamed atomic.Int64
			_, rafts, fsms := groupWithPeerServedBy(t, func(s *service) peerv1.RaftServer {
				return countingService{service: s, unary: &unary, streamed: &streamed, noStream: noStream}
			})
			applyN(t, rafts, 1, 5)
			waitConverged(t, 5, fsms)
			// The peer is a follower: batches reach it once the leader has
			// something to push or nothing to send. Wait for the first one
			// that reached it, on whichever path.
			waitFor(t, 30*time.Second, "a batch at the peer", func() bool {
				return unary.Load()+streamed.Load() > 0
			})
			applyN(t, rafts, 6, 5)
			waitConverged(t, 10, fsms)
			if got := unary.Load(); noStream && got == 0 {
				t.Errorf("a peer without the batch stream got no unary batch (%d on the stream)", streamed.Load())
			} else if !noStream && got != 0 {
				t.Errorf("%d unary batches to a peer that serves the batch stream", got)
			}
			if got := streamed.Load(); noStream && got != 0 {
				t.Errorf("%d batches on the stream of a peer that does not serve it", got)
			} else if !noStream && got == 0 {
				t.Errorf("no batch on the stream of a peer that serves it")
			}
		})
	}
}

// TestBatchStreamDeadPeerDelaysOnlyItsBatches: while a batch stream to a
// node that accepts connections but never answers is opening (up to the
// RPC timeout), batches to another node still go out and are answered.
func TestBatchStreamDeadPeerDelaysOnlyItsBatches(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	go func() { // accept and hold: no HTTP/2 handshake ever comes
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	sender := newTestNode(t, "sender", func(c *Config) { c.RPCTimeout, c.DialTimeout = time.Minute, time.Minute })
	live := newTestNode(t, "live", nil)

	dead := make(chan error, 1)
	go func() {
		_, err := sender.net.batch.call(raft.ServerAddress(hole.Addr().String()), &peerv1.AppendEntriesBatchRequest{})
		dead <- err
	}()
	// Wait until the stream to the silent node is opening, its slot held.
	waitFor(t, 10*time.Second, "the stream to the silent node to be opening", func() bool {
		slot, err := sender.net.batch.slot(raft.ServerAddress(hole.Addr().String()))
		if err != nil || !slot.mu.TryLock() {
			return err == nil
		}
		slot.mu.Unlock()
		return false
	})
	if _, err := sender.net.batch.call(raft.ServerAddress(live.addr), &peerv1.AppendEntriesBatchRequest{}); err != nil {
		t.Fatalf("batch to a live node: %v", err)
	}
	select {
	case err := <-dead:
		t.Fatalf("the batch to the silent node ended before the live node's (%v): the test did not hold it", err)
	default:
	}
}
