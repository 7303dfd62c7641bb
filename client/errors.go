package client

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// ErrNoEndpoints is returned by Config.Validate and New when no endpoint is
// configured.
var ErrNoEndpoints = errors.New("client: no endpoints configured")

// ErrInvalidConfig is wrapped by the errors of Config.Validate other than
// ErrNoEndpoints.
var ErrInvalidConfig = errors.New("client: invalid config")

// ErrMalformedSession is returned by New when Config.SessionToken is not a
// session token produced by SessionToken.
var ErrMalformedSession = errors.New("client: malformed session token")

// ErrClosed is returned by calls made after Close, and matches (with
// errors.Is) the error of a call that Close ended while it was in flight.
var ErrClosed = errors.New("client: client is closed")

// ErrConflict matches every *ConflictError with errors.Is.
var ErrConflict = errors.New("client: compare-and-swap conflict")

// ConflictError is returned by CompareAndSwap and CompareAndDelete when the
// key's current version is not the expected one. It unwraps to the server's
// gRPC status error, so status.Code reports FailedPrecondition (the key has
// another version), AlreadyExists (absence was expected but the key exists)
// or NotFound (a version was expected but the key is absent).
type ConflictError struct {
	// Found reports whether the key currently holds a live value.
	Found bool
	// Current is the key's current newest version (of a value or a
	// tombstone); zero if the key was never written.
	Current Version
	// Code is the gRPC status code of the failure.
	Code codes.Code

	err error // the status error
}

func (e *ConflictError) Error() string {
	var what string
	switch {
	case e.Found:
		what = "key exists at version " + e.Current.String()
	case !e.Current.IsZero():
		what = "key is deleted (tombstone version " + e.Current.String() + ")"
	default:
		what = "key is absent"
	}
	return "client: compare-and-swap conflict: " + what
}

// Unwrap returns the underlying gRPC status error.
func (e *ConflictError) Unwrap() error { return e.err }

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// conflictFrom extracts a *ConflictError from a CompareAndSwap error that
// carries a kvv1.CasConflict status detail; it returns nil otherwise.
func conflictFrom(err error) *ConflictError {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	switch st.Code() {
	case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
	default:
		return nil
	}
	for _, d := range st.Details() {
		if c, ok := d.(*kvv1.CasConflict); ok {
			return &ConflictError{
				Found:   c.GetFound(),
				Current: fromProtoVersion(c.GetCurrent()),
				Code:    st.Code(),
				err:     err,
			}
		}
	}
	return nil
}

// IsForeignSession reports whether err is a server's refusal of the
// client's session: the token belongs to another cluster (the client was
// pointed at other endpoints, or the cluster was rebuilt from empty data
// directories), or names a site the cluster does not have. No request of
// that session can succeed there; a new Client without
// Config.SessionToken starts a new session.
func IsForeignSession(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == errorDomain && info.Reason == reasonForeignSession {
			return true
		}
	}
	return false
}

// The google.rpc.ErrorInfo of a foreign session's refusal (see
// docs/api.md).
const (
	errorDomain          = "causeway"
	reasonForeignSession = "FOREIGN_SESSION"
)

// invalidArgument reports a bad argument detected before any request is
// sent, as a status error so status.Code treats it like the server's.
func invalidArgument(format string, args ...any) error {
	return status.Error(codes.InvalidArgument, fmt.Sprintf(format, args...))
}

// maxQuotedKeyspace bounds the part of a keyspace name that errors
// repeat: a valid name has at most 63 bytes.
const maxQuotedKeyspace = 64

// truncate returns s cut to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
