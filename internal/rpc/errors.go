package rpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/cluster"
	"github.com/causeway-db/causeway/internal/fsm"
	"github.com/causeway-db/causeway/internal/router"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/wal"
)

// ErrorDomain and the reasons below are the google.rpc.ErrorInfo details
// some refusals carry, for clients to act on without parsing messages.
const (
	ErrorDomain = "causeway"
	// ReasonForeignSession: the request's session token belongs to another
	// cluster, or names a site this cluster does not have
	// (router.ErrForeignSession).
	ReasonForeignSession = "FOREIGN_SESSION"
)

// codeTable is the one place that maps internal errors to gRPC codes.
var codeTable = []struct {
	err  error
	code codes.Code
}{
	{ErrEmptyKey, codes.InvalidArgument},
	{ErrKeyTooLarge, codes.InvalidArgument},
	{ErrValueTooLarge, codes.InvalidArgument},
	{ErrBadRequest, codes.InvalidArgument},
	{ErrBadContinuation, codes.InvalidArgument},
	{causal.ErrMalformedToken, codes.InvalidArgument},
	// Before ErrUnknownKeyspace, which it comes with.
	{router.ErrKeyspaceNotYetHere, codes.Unavailable},
	{router.ErrUnknownKeyspace, codes.NotFound},
	{router.ErrKeyspaceElsewhere, codes.FailedPrecondition},
	{cluster.ErrExists, codes.AlreadyExists},
	{cluster.ErrNotFound, codes.NotFound},
	{cluster.ErrInvalid, codes.InvalidArgument},
	{cluster.ErrNoLeader, codes.Unavailable},
	{fsm.ErrVersionMismatch, codes.FailedPrecondition},
	{fsm.ErrKeyExists, codes.AlreadyExists},
	{fsm.ErrKeyNotFound, codes.NotFound},
	{router.ErrCausalWait, codes.DeadlineExceeded},
	{router.ErrSessionMoved, codes.Unavailable},
	{router.ErrJoining, codes.Unavailable},
	{router.ErrForeignSession, codes.FailedPrecondition},
	{router.ErrLostSession, codes.FailedPrecondition},
	{shard.ErrNotLeader, codes.Unavailable},
	{shard.ErrLeadershipLost, codes.Unavailable},
	{router.ErrNoLeader, codes.Unavailable},
	{router.ErrRemoteDurability, codes.DeadlineExceeded},
	{router.ErrDurability, codes.InvalidArgument},
	{router.ErrClockAhead, codes.InvalidArgument},
	{router.ErrApplyFailed, codes.Unavailable},
	{router.ErrSnapshotTooOld, codes.OutOfRange},
	{router.ErrRoutingLoop, codes.Unavailable},
	{router.ErrPeerUnavailable, codes.Unavailable},
	{ErrStopping, codes.Unavailable},
	{shard.ErrTimeout, codes.Unavailable},
	{shard.ErrStopped, codes.Unavailable},
	// The node's raft log failed a write and refuses every other (it
	// stops): a write raft answers with the log's error (the catalog's,
	// the cluster configuration's).
	{wal.ErrFailed, codes.Unavailable},
	{shard.ErrCorrupt, codes.Unavailable},
	{storage.ErrDamaged, codes.Unavailable},
	{storage.ErrClosed, codes.Unavailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// toStatus converts an internal error to a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, router.ErrForeignSession) {
		// The reason lets a client tell this refusal from other failed
		// preconditions and start a new session (kvctl does).
		st := status.New(codes.FailedPrecondition, err.Error())
		if with, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonForeignSession, Domain: ErrorDomain}); derr == nil {
			st = with
		}
		return st.Err()
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	return status.Error(codes.Internal, err.Error())
}

// casStatus converts a failed compare-and-swap outcome to a status with a
// kvv1.CasConflict detail carrying the key's current version.
func casStatus(res fsm.Result) error {
	st := status.Convert(toStatus(res.Err))
	detail := &kvv1.CasConflict{Found: res.CurrentFound}
	if !res.Current.IsZero() {
		detail.Current = router.VersionPB(res.Current)
	}
	if with, err := st.WithDetails(detail); err == nil {
		st = with
	}
	return st.Err()
}
