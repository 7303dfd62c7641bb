package peer

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/internal/catalog"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// Errors of the Node service. Each maps to a gRPC code in codeTable; the
// handlers wrap them with the details of the request.
var (
	// ErrShardRequired: the request names no shard.
	ErrShardRequired = errors.New("peer: shard is required")
	// ErrNotHosted: this node has no replica of the shard.
	ErrNotHosted = errors.New("peer: shard is not hosted here")
	// ErrScanLimit: a scan's limit is outside 1..maxScanLimit.
	ErrScanLimit = fmt.Errorf("peer: scan limit must be 1 to %d", maxScanLimit)
	// ErrNodeIDRequired: the request names no node.
	ErrNodeIDRequired = errors.New("peer: node id is required")
	// ErrUnknownNode: the site catalog has no such node.
	ErrUnknownNode = errors.New("peer: unknown node")
	// ErrOtherNode: a NodeRemoved notice names another node or site than
	// the receiving node's.
	ErrOtherNode = errors.New("peer: the notice is for another node")
	// ErrUnknownOp: a replica change this build does not know.
	ErrUnknownOp = errors.New("peer: unknown replica change")
	// ErrNotVoter: leadership cannot move to a node that is not a voter of
	// the shard.
	ErrNotVoter = errors.New("peer: not a voter")
	// ErrTargetCorrupt: leadership does not move to a replica that failed
	// its group's last consistency check.
	ErrTargetCorrupt = errors.New("peer: the replica failed its consistency check")
	// ErrTargetSilent: leadership does not move to a replica the leader
	// has had no answer from lately, or that lacks much of its log (cut
	// off, restarting, or its link just came back): raft would hold the
	// shard's writes until the transfer caught it up or timed out.
	ErrTargetSilent = errors.New("peer: the replica has not answered or caught up with the leader lately")
	// ErrNotLeader: this node does not lead the shard (any more). Retryable
	// at the leader.
	ErrNotLeader = errors.New("peer: not the shard leader")
	// ErrNoCatalogLeader: the site catalog has no leader. Retryable.
	ErrNoCatalogLeader = errors.New("peer: the site catalog has no leader")
	// ErrUnsafeRecovery: a replica refused to go on alone, because its
	// configuration is not exactly two voters, itself and the lost one
	// (or, forced, holds a server not named lost).
	ErrUnsafeRecovery = errors.New("peer: recovery is not safe")
	// ErrHasLeader: a forced recovery was asked of a replica whose group
	// has a leader: there is nothing to recover.
	ErrHasLeader = errors.New("peer: the shard has a leader; nothing to recover")
	// ErrUnavailable: raft, the site catalog or the connection to another
	// node failed the operation. Retryable.
	ErrUnavailable = errors.New("peer: unavailable")
)

// maxScanLimit bounds the keys one ScanShard call returns.
const maxScanLimit = 100000

// codeTable is the one place that maps the Node service's errors to gRPC
// codes. An error it does not know is Internal.
var codeTable = []struct {
	err  error
	code codes.Code
}{
	{ErrShardRequired, codes.InvalidArgument},
	{ErrScanLimit, codes.InvalidArgument},
	{ErrNodeIDRequired, codes.InvalidArgument},
	{ErrUnknownOp, codes.InvalidArgument},
	{ErrOtherNode, codes.InvalidArgument},
	{ErrNotHosted, codes.FailedPrecondition},
	{ErrNotVoter, codes.FailedPrecondition},
	{ErrTargetCorrupt, codes.FailedPrecondition},
	{ErrTargetSilent, codes.FailedPrecondition},
	{ErrUnsafeRecovery, codes.FailedPrecondition},
	{ErrHasLeader, codes.FailedPrecondition},
	{catalog.ErrUnknownShard, codes.NotFound},
	{catalog.ErrNotReplica, codes.FailedPrecondition},
	{catalog.ErrNodeDown, codes.FailedPrecondition},
	{catalog.ErrNoReplicaState, codes.FailedPrecondition},
	{catalog.ErrNothingToRecover, codes.FailedPrecondition},
	{catalog.ErrStaleGeneration, codes.Aborted},
	{catalog.ErrNotLeader, codes.Unavailable},
	{catalog.ErrUnknownNode, codes.NotFound},
	{catalog.ErrNodeRemoved, codes.NotFound},
	{catalog.ErrNodeNotDown, codes.FailedPrecondition},
	{catalog.ErrNodeHasReplicas, codes.FailedPrecondition},
	{catalog.ErrNoDrainTarget, codes.FailedPrecondition},
	{catalog.ErrCatalogVoter, codes.FailedPrecondition},
	{ErrUnknownNode, codes.NotFound},
	{ErrNotLeader, codes.Unavailable},
	{ErrNoCatalogLeader, codes.Unavailable},
	{ErrUnavailable, codes.Unavailable},
	{shard.ErrCorrupt, codes.Unavailable},
	{storage.ErrDamaged, codes.Unavailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// toStatus converts an error of a handler to a gRPC status error. The
// status of another node's answer passes through unchanged.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// unavailable wraps an error of raft, the catalog or the connection pool.
func unavailable(err error) error {
	// A refusal whose code comes first in the table (a drain no other node
	// can take, a node still alive) keeps its own message: "unavailable"
	// would tell the operator to retry what no retry changes.
	for _, e := range codeTable {
		if e.err == ErrUnavailable {
			break
		}
		if errors.Is(err, e.err) {
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
