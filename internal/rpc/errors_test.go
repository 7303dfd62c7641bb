package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/router"
)

// TestWriteOutcomeCodes: a failed compare-and-swap condition and a write
// whose apply failed on the leader (committed, then a full disk) reach
// clients as different codes. The apply failure is UNAVAILABLE, which
// clients retry with the same request id, not INTERNAL "condition failed".
func TestWriteOutcomeCodes(t *testing.T) {
	applied := fmt.Errorf("%w: the write is committed in the raft log, but node n1 failed to apply it (storage: no space left on device)", router.ErrApplyFailed)
	if got := status.Code(toStatus(applied)); got != codes.Unavailable {
		t.Errorf("apply failure: %v, want Unavailable", got)
	}
	cond := fmt.Errorf("wrapped: %w", &router.CondError{Result: fsm.Result{Err: fsm.ErrVersionMismatch}})
	if got := status.Code(toStatus(cond)); got != codes.FailedPrecondition {
		t.Errorf("version mismatch: %v, want FailedPrecondition", got)
	}
}

// TestLargeGetTxnsTakeTurns: GetTxns of more than largeKeys keys hold one
// of largeSlots slots while they run; one more waits (here until its
// deadline), and small ones never wait.
func TestLargeGetTxnsTakeTurns(t *testing.T) {
	s := NewKV(Config{}, nil, nil, nil)
	var releases []func()
	for range largeSlots {
		rel, err := s.acquireLarge(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, rel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.acquireLarge(ctx, 1000); err == nil {
		t.Fatalf("a large GetTxn beyond %d in flight did not wait", largeSlots)
	}
	if rel, err := s.acquireLarge(ctx, largeKeys); err != nil {
		t.Fatalf("a small GetTxn waited: %v", err)
	} else {
		rel()
	}
	releases[0]()
	rel, err := s.acquireLarge(context.Background(), 1000)
	if err != nil {
		t.Fatalf("a freed slot was not taken: %v", err)
	}
	rel()
}
