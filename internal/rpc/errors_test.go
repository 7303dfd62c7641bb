package rpc

import (
	"fmt"
	"testing"

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
