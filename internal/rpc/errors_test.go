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
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/wal"
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

// TestFailedLogCodes: a request that fails because the node's raft log
// cannot be written (the write-ahead log failed stop: a full disk) is
// UNAVAILABLE, whether a shard replica stopped on it or raft answered a
// write with the log's error: the client retries elsewhere, or once the
// node restarted.
func TestFailedLogCodes(t *testing.T) {
	walErr := fmt.Errorf("%w: wal: write: no space left on device", wal.ErrFailed)
	for name, err := range map[string]error{
		"stopped replica": fmt.Errorf("%w: shard default/0: its raft log cannot be written: %w", shard.ErrStopped, walErr),
		"raft's answer":   fmt.Errorf("catalog: %w", walErr),
	} {
		if got := status.Code(toStatus(err)); got != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable", name, got)
		}
	}
}
