package peer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/shard"
)

func TestToStatus(t *testing.T) {
	remote := status.Error(codes.NotFound, "peer: unknown node \"n9\"")
	for _, tc := range []struct {
		name string
		err  error
		want codes.Code
	}{
		{"nil", nil, codes.OK},
		{"shard required", ErrShardRequired, codes.InvalidArgument},
		{"scan limit", ErrScanLimit, codes.InvalidArgument},
		{"unknown op", fmt.Errorf("%w: 9", ErrUnknownOp), codes.InvalidArgument},
		{"not hosted", fmt.Errorf("%w: default/3", ErrNotHosted), codes.FailedPrecondition},
		{"not a voter", fmt.Errorf("%w: n2 of default/3", ErrNotVoter), codes.FailedPrecondition},
		{"unknown node", fmt.Errorf("%w %q", ErrUnknownNode, "n9"), codes.NotFound},
		{"notice for another node", fmt.Errorf("%w: it names n3", ErrOtherNode), codes.InvalidArgument},
		{"remove: unknown node", fmt.Errorf("%w %q", catalog.ErrUnknownNode, "n9"), codes.NotFound},
		{"remove: removed already", fmt.Errorf("%w: n4 was removed already", catalog.ErrNodeRemoved), codes.NotFound},
		{"remove: alive", fmt.Errorf("%w: gossip reports n2 alive", catalog.ErrNodeNotDown), codes.FailedPrecondition},
		{"remove: replicas", fmt.Errorf("%w: 3", catalog.ErrNodeHasReplicas), codes.FailedPrecondition},
		{"remove: catalog voter", fmt.Errorf("%w: n3", catalog.ErrCatalogVoter), codes.FailedPrecondition},
		{"remove: leadership lost", unavailable(catalog.ErrNotLeader), codes.Unavailable},
		{"not leader", fmt.Errorf("%w: default/3", ErrNotLeader), codes.Unavailable},
		{"no catalog leader", ErrNoCatalogLeader, codes.Unavailable},
		{"corrupt replica", fmt.Errorf("%w: shard default/3", shard.ErrCorrupt), codes.Unavailable},
		{"raft failure", unavailable(errors.New("raft is already shutdown")), codes.Unavailable},
		{"raft deadline", unavailable(context.DeadlineExceeded), codes.Unavailable},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("scan: %w", context.Canceled), codes.Canceled},
		{"remote status passes through", remote, codes.NotFound},
		{"anything else", errors.New("storage: closed"), codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := toStatus(tc.err)
			if c := status.Code(got); c != tc.want {
				t.Fatalf("code %v, want %v (%v)", c, tc.want, got)
			}
			if _, remote := status.FromError(tc.err); tc.err != nil && !remote && status.Convert(got).Message() != tc.err.Error() {
				t.Fatalf("message %q, want %q", status.Convert(got).Message(), tc.err.Error())
			}
		})
	}
}

// TestUnavailableKeepsARefusalsMessage: a refusal that unavailable wraps
// (the catalog's answer to a drain or a removal) keeps its own code and
// message: kvctl said "drain: peer: unavailable: catalog: no other live
// node can take the node's replicas ... (FailedPrecondition)", which reads
// as a retryable failure.
func TestUnavailableKeepsARefusalsMessage(t *testing.T) {
	refusal := fmt.Errorf("%w: n1 is the only live node of the site that is not draining", catalog.ErrNoDrainTarget)
	st := status.Convert(toStatus(unavailable(refusal)))
	if st.Code() != codes.FailedPrecondition || st.Message() != refusal.Error() {
		t.Fatalf("a refused drain: %v, want FailedPrecondition %q", st, refusal)
	}
	if st := status.Convert(toStatus(unavailable(errors.New("raft is already shutdown")))); st.Code() != codes.Unavailable || st.Message() != "peer: unavailable: raft is already shutdown" {
		t.Fatalf("a raft failure: %v", st)
	}
}
