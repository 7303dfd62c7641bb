package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// heldStream is a call stream whose client sends calls without a call
// (answered at once, INVALID_ARGUMENT) and does not read the answers until
// release is closed. It records a receive beyond maxStreamCalls calls in
// flight.
type heldStream struct {
	grpc.ServerStream
	t       *testing.T // its Context is the stream's
	total   int
	release chan struct{}

	mu      sync.Mutex
	recvs   int   // calls received
	entered int   // Sends begun
	sent    int   // Sends done
	err     error // the first receive beyond the bound
}

func (s *heldStream) Context() context.Context { return s.t.Context() }

func (s *heldStream) Recv() (*kvv1.StreamRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.recvs == s.total {
		return nil, io.EOF
	}
	if inFlight := s.recvs - s.sent; inFlight >= maxStreamCalls {
		s.err = fmt.Errorf("call %d received with %d calls unanswered", s.recvs+1, inFlight)
		return nil, io.EOF
	}
	s.recvs++
	return &kvv1.StreamRequest{Id: uint64(s.recvs)}, nil
}

func (s *heldStream) Send(*kvv1.StreamResponse) error {
	s.mu.Lock()
	s.entered++
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.sent++
	s.mu.Unlock()
	return nil
}

// TestStreamBoundsTheCallsInFlight: a client that sends calls and does not
// read the answers gets at most maxStreamCalls of them taken; the next
// ones wait in the stream. Before, the node received every call and
// started a goroutine for each.
func TestStreamBoundsTheCallsInFlight(t *testing.T) {
	s := NewKV(Config{}, nil, nil, NewMetrics(prometheus.NewRegistry()))
	st := &heldStream{t: t, total: maxStreamCalls + 10, release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Stream(st) }()
	poll.Every(time.Millisecond).Until(t, 10*time.Second, "the stream took the calls it may and began an answer", func() error {
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.err == nil && (st.recvs < maxStreamCalls || st.entered == 0) {
			return fmt.Errorf("%d calls received, %d answers begun", st.recvs, st.entered)
		}
		return nil
	})
	close(st.release) // the client reads the answers
	if err := <-done; err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("stream: %v", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		t.Fatal(st.err)
	}
	if st.recvs != st.total || st.sent != st.total {
		t.Fatalf("%d calls received and %d answered, want %d", st.recvs, st.sent, st.total)
	}
}
