package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client"
)

// Exit codes of kvctl.
const (
	// ExitOK: the command succeeded.
	ExitOK = 0
	// ExitNotFound: get of a key that does not exist (or is deleted), or
	// a command naming a keyspace, shard or node that does not exist
	// (NotFound from the server), node remove of a node removed already.
	ExitNotFound = 1
	// ExitUsage: bad command line, invalid argument (also as reported by
	// the server), bad version text, or a session file that is corrupt
	// or a directory.
	ExitUsage = 2
	// ExitConflict: a cas found another version than expected.
	ExitConflict = 3
	// ExitUnavailable: no endpoint answered in time (Unavailable or
	// DeadlineExceeded).
	ExitUnavailable = 4
	// ExitError: any other error.
	ExitError = 5
	// ExitNotForced: the dry run of a command that can lose data (shard
	// recover without --force): nothing changed.
	ExitNotForced = 6
)

// exitError is an error with a decided exit code.
type exitError struct {
	code  int
	err   error
	usage bool // a command-line mistake: point at the command's help
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf returns an error that exits with ExitUsage.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...), usage: true}
}

// isUsageError reports whether err is a command-line mistake.
func isUsageError(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.usage
}

// withCode returns err with exit code code.
func withCode(code int, err error) error {
	return &exitError{code: code, err: err}
}

// ExitCode maps an error of a kvctl command to its exit code: a decided
// code if the command set one, ExitConflict for a *client.ConflictError,
// ExitNotFound for NotFound (an unknown keyspace, shard or node), ExitUsage
// for InvalidArgument and bad client input, ExitUnavailable for
// Unavailable and DeadlineExceeded, ExitError otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, client.ErrConflict) {
		return ExitConflict
	}
	switch {
	case errors.Is(err, client.ErrBadVersion),
		errors.Is(err, client.ErrNoEndpoints),
		errors.Is(err, client.ErrInvalidConfig),
		errors.Is(err, client.ErrMalformedSession):
		return ExitUsage
	case errors.Is(err, context.DeadlineExceeded):
		return ExitUnavailable
	}
	switch status.Code(err) {
	case codes.NotFound:
		return ExitNotFound
	case codes.InvalidArgument:
		return ExitUsage
	case codes.Unavailable, codes.DeadlineExceeded:
		return ExitUnavailable
	}
	return ExitError
}

// grpcStatus returns the first gRPC status in err's chain and the error
// that carries it.
func grpcStatus(err error) (*status.Status, error) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if gs, ok := e.(interface{ GRPCStatus() *status.Status }); ok {
			return gs.GRPCStatus(), e
		}
	}
	return nil, nil
}

// errorMessage renders err as the one line kvctl prints: the gRPC status
// text "rpc error: code = X desc = D" becomes "D (X)" and the client
// library's "client: " prefixes (of the error and of D) are dropped.
func errorMessage(err error) string {
	msg := err.Error()
	if st, se := grpcStatus(err); st != nil {
		if inner := se.Error(); strings.HasSuffix(msg, inner) {
			// The client library's own statuses ("client: the node
			// stopped answering") carry its prefix too.
			msg = strings.TrimSuffix(msg, inner) + strings.TrimPrefix(st.Message(), "client: ") + " (" + st.Code().String() + ")"
		}
	}
	msg = strings.TrimPrefix(msg, "client: ")
	if h := nextStep(msg); h != "" && !strings.Contains(msg, h) {
		msg += "; " + h // once: a per-node command's message holds the node's
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg) // one line
}

// nextStep returns what to do about an endpoint that could not be
// used at all, from gRPC's text of the connection's failure, or about a
// keyspace no site holds; "" for other errors.
func nextStep(msg string) string {
	switch {
	case strings.Contains(msg, "frame header looked like an HTTP/1.1 header"):
		return "the endpoint answers HTTP/1.1, not gRPC: it may be a node's HTTP address (kvd --http-addr); give its client address (kvd --client-addr) with --endpoints"
	case strings.Contains(msg, "connect: connection refused") && !strings.Contains(msg, "to forward the request"):
		// (A node's forward to another node that is down names that
		// node's peer address: the endpoint itself works.)
		return "no node listens at the endpoint: check --endpoints (a node's client address, kvd --client-addr) and that the node runs"
	case (strings.Contains(msg, "error reading server preface") || strings.Contains(msg, "while waiting for connections to become ready") ||
		strings.Contains(msg, "the node stopped answering")) && !strings.Contains(msg, "to forward the request"):
		// Connections taken (by the kernel) but never answered: a node
		// stopped with SIGSTOP, hung, or behind a link that drops its
		// packets.
		return "the endpoint took the connection but its node did not answer: it may be stopped or hung, or a link to it drops packets; check that the node runs and answers (kvd health --http-addr)"
	case strings.Contains(msg, "no such host"), strings.Contains(msg, "name resolver error: produced zero addresses"):
		return "the endpoint's host name does not resolve: check --endpoints"
	case strings.Contains(msg, "unknown keyspace \"") && !strings.Contains(msg, "may not know every keyspace") && !strings.Contains(msg, "retry in a moment"):
		return "kvctl keyspace list shows the keyspaces, kvctl keyspace create makes one"
	}
	return ""
}
