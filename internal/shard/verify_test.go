package shard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/poll"
)

// TestVerifierWaitsForARoundStartedAfterTheCall: callers arriving while a
// round runs are not answered by it; they share the next round.
func TestVerifierWaitsForARoundStartedAfterTheCall(t *testing.T) {
	var rounds atomic.Int32
	started := make(chan int32, 10)
	release := make(chan error)
	v := &verifier{round: func() error {
		n := rounds.Add(1)
		started <- n
		return <-release
	}}
	var batches []int
	var mu sync.Mutex
	v.done = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }

	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- v.verify(ctx) }()
	if n := <-started; n != 1 {
		t.Fatalf("first round = %d", n)
	}
	// Three callers arrive while round 1 is in flight.
	later := make(chan error, 3)
	for range 3 {
		go func() { later <- v.verify(ctx) }()
	}
	poll.Every(time.Millisecond).Until(t, 10*time.Second, "the callers to queue for the next round", func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.next == nil || v.next.n != 3 {
			return errors.New("fewer than 3 callers queued")
		}
		return nil
	})
	release <- nil // round 1 succeeds
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-later:
		t.Fatalf("a caller that arrived during round 1 returned (%v) before round 2", err)
	case n := <-started:
		if n != 2 {
			t.Fatalf("second round = %d", n)
		}
	}
	lost := errors.New("leadership lost")
	release <- lost
	for range 3 {
		if err := <-later; !errors.Is(err, lost) {
			t.Fatalf("caller of round 2 got %v, want %v", err, lost)
		}
	}
	if got := rounds.Load(); got != 2 {
		t.Fatalf("rounds = %d, want 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || batches[0] != 1 || batches[1] != 3 {
		t.Fatalf("batches = %v, want [1 3]", batches)
	}
}

// TestVerifierCallerContext: a caller whose context ends stops waiting; the
// round still completes for the others.
func TestVerifierCallerContext(t *testing.T) {
	release := make(chan struct{})
	v := &verifier{round: func() error { <-release; return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- v.verify(ctx) }()
	other := make(chan error, 1)
	go func() { other <- v.verify(context.Background()) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	close(release)
	if err := <-other; err != nil {
		t.Fatalf("other caller got %v", err)
	}
	// The verifier is idle again and serves new callers.
	if err := v.verify(context.Background()); err != nil {
		t.Fatal(err)
	}
}
