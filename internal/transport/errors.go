package transport

import (
	"context"
	"errors"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
)

// Errors of this package. Errors of outgoing RPCs wrap the gRPC status too,
// so status.Code works on them.
var (
	// ErrDuplicateGroup: Transport was called for a group whose transport is
	// open.
	ErrDuplicateGroup = errors.New("transport: group transport already open")
	// ErrClosed: the group transport or the Network was closed.
	ErrClosed = errors.New("transport: closed")
	// ErrUnknownGroup: the receiving node does not host the group (yet).
	// Retryable.
	ErrUnknownGroup = errors.New("transport: unknown raft group")
	// ErrInvalidRequest: a request or response is malformed.
	ErrInvalidRequest = errors.New("transport: invalid request")
	// ErrRaft: the receiving raft answered the request with an error.
	ErrRaft = errors.New("transport: raft error")
	// ErrLeaseRefused: the receiving node refused a vote or a leadership
	// transfer that would break a leader's read lease (lease.go).
	// Retryable: raft campaigns again.
	ErrLeaseRefused = errors.New("transport: refused to keep a read lease")
	// ErrStopping: the receiving node is stopping and refuses a leadership
	// transfer to it (stopping.go). The transfer's leader goes on leading.
	ErrStopping = errors.New("transport: the node is stopping and takes no leadership")
)

// refusedf returns an ErrLeaseRefused describing what was refused.
func refusedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLeaseRefused, fmt.Sprintf(format, args...))
}

// invalidf returns an ErrInvalidRequest describing what is wrong.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// toStatus is the one table that turns the errors of an incoming request
// into gRPC statuses.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, ErrUnknownGroup):
		code = codes.NotFound
	case errors.Is(err, ErrInvalidRequest):
		code = codes.InvalidArgument
	case errors.Is(err, ErrClosed), errors.Is(err, ErrLeaseRefused), errors.Is(err, ErrStopping), errors.Is(err, errIncarnationUnrecorded):
		code = codes.Unavailable
	case errors.Is(err, ErrIncarnation):
		code = codes.FailedPrecondition
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, ErrRaft):
		code = codes.Unknown
	}
	return status.Error(code, err.Error())
}

// fromStatus turns the error of an outgoing RPC into this package's errors,
// keeping the status: what raft logs, and what status.Code sees.
func fromStatus(op, target string, err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%s to %s: %w: %w", op, target, ErrUnknownGroup, err)
	case codes.InvalidArgument:
		return fmt.Errorf("%s to %s: %w: %w", op, target, ErrInvalidRequest, err)
	case codes.FailedPrecondition:
		if _, ok := refusingGeneration(err); ok {
			return fmt.Errorf("%s to %s: %w: %w", op, target, ErrGeneration, err)
		}
	}
	return fmt.Errorf("transport: %s to %s: %w", op, target, err)
}

// generationRefusal is the status of a refused request: FailedPrecondition
// with the refusing replica's generation in a peerv1.GenerationRefusal.
func generationRefusal(group string, local, sender uint64) error {
	st := status.New(codes.FailedPrecondition, fmt.Sprintf("%v: the replica of %s here is of generation %d, the sender's of %d",
		ErrGeneration, group, local, sender))
	if d, err := st.WithDetails(&peerv1.GenerationRefusal{Generation: local}); err == nil {
		st = d
	}
	return st.Err()
}

// statusFromProto is the error a peer reported for one request of a batch
// (AppendEntriesBatchResult.status), as the request would have failed
// alone.
func statusFromProto(st *spb.Status) error { return status.ErrorProto(st) }
