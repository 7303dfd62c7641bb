package client

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
)

// DefaultKeyspace is the keyspace used when Config.Keyspace is empty.
const DefaultKeyspace = "default"

// Config configures a Client. Start from DefaultConfig and set Endpoints.
type Config struct {
	// Endpoints are the client (gRPC) addresses of Causeway nodes, as
	// "host:port". The client uses the first one until it fails, then the
	// next. At least one is required. They may be nodes of several sites:
	// list your own site's first. The session goes with a failover (the
	// other site first applies the session's causal past), and the client
	// tries the first endpoint again FailbackAfter after failing over. A
	// mutation that may have reached a node is retried only on endpoints
	// of that node's site (see the package documentation).
	//
	// New dials every endpoint at once, and the first calls start at the
	// first endpoint, in this order, whose connection is ready: one that
	// could not connect, or is still connecting 300 ms (or, if longer, as
	// long again as a later one took) after a later one was ready, is
	// passed over as by a failover, without a call. A node that takes
	// connections and answers nothing (stopped with SIGSTOP, hung) then
	// costs the first call about 300 ms rather than a status probe (2 s).
	Endpoints []string

	// FailbackAfter is how long after a failover the client goes back to
	// the first endpoint (its own site). Zero means the DefaultConfig
	// value; negative never.
	FailbackAfter time.Duration

	// Keyspace is the keyspace of every data call that does not name one
	// with WithKeyspace. Empty means DefaultKeyspace.
	Keyspace string

	// DialTimeout bounds one connection attempt to an endpoint, and so
	// how long the first calls wait for an endpoint's connection to be
	// ready (see Endpoints). Zero means the DefaultConfig value.
	DialTimeout time.Duration

	// RequestTimeout bounds one attempt of a call (a retried call makes
	// several attempts). An attempt never outlives the caller's context;
	// an attempt of a read with other endpoints to try gets at most half
	// of the time the caller's deadline leaves (see the package
	// documentation, "Endpoint failover").
	// Zero means the DefaultConfig value.
	RequestTimeout time.Duration

	// MaxRetries is how many times a call is retried after its first
	// attempt fails with a retryable error. Zero means the DefaultConfig
	// value; NoRetries (any negative number) disables retries.
	MaxRetries int

	// RetryBackoff is the wait before the first retry; it doubles with
	// every further retry (capped at 32 times its value) and is jittered.
	// Zero means the DefaultConfig value.
	RetryBackoff time.Duration

	// ClientID identifies this client in the request ids of its mutations,
	// which the server uses to apply a retried mutation once. It must be
	// unique among concurrently running clients; empty means a random id.
	ClientID string

	// SessionToken resumes a causal session exported by SessionToken
	// (for example by an earlier process). Empty starts a new session.
	SessionToken []byte

	// DisableLeaderRouting turns leader-aware routing off: writes and
	// STRONG reads then go to the current endpoint, which forwards them to
	// the shard leader. With routing on (the default), the client learns
	// which node leads each shard (from the Admin API, in the background)
	// and sends those calls straight to it, falling back to the current
	// endpoint whenever it does not know or the leader fails.
	DisableLeaderRouting bool

	// DisableCallStream sends every call as its own unary gRPC call. By
	// default Put, Get and Delete travel as messages of one long-lived
	// stream per connection (KV.Stream), which costs client and server
	// less per call; the answers and errors are the same. Unary
	// interceptors in DialOptions do not see calls on the stream (stream
	// interceptors see the stream): set this if they must see every call.
	DisableCallStream bool

	// RouteRefresh is how often the routing table is refreshed while the
	// client is in use. Zero means the DefaultConfig value.
	RouteRefresh time.Duration

	// Logger receives debug logs (retries, failovers). Nil discards them.
	Logger *slog.Logger

	// DialOptions are appended to the client's own gRPC dial options
	// (plaintext transport, connect timeout); use them for TLS
	// credentials or interceptors.
	DialOptions []grpc.DialOption
}

// DefaultConfig returns the default configuration, without endpoints.
func DefaultConfig() Config {
	return Config{
		Keyspace:       DefaultKeyspace,
		DialTimeout:    5 * time.Second,
		RequestTimeout: 10 * time.Second,
		MaxRetries:     5,
		FailbackAfter:  30 * time.Second,
		RetryBackoff:   50 * time.Millisecond,
		RouteRefresh:   5 * time.Second,
	}
}

// NoRetries, as Config.MaxRetries, disables retries: a call fails with
// its first attempt's error (a failed endpoint is still left for the next
// call).
const NoRetries = -1

// Validate reports whether cfg is usable. Zero durations are valid (they
// take the default); negative ones are not.
func (cfg Config) Validate() error {
	if len(cfg.Endpoints) == 0 {
		return ErrNoEndpoints
	}
	for i, e := range cfg.Endpoints {
		if e == "" {
			return fmt.Errorf("%w: endpoint %d is empty", ErrInvalidConfig, i)
		}
		if err := checkEndpoint(e); err != nil {
			return fmt.Errorf("%w: endpoint %q: %v", ErrInvalidConfig, e, err)
		}
	}
	switch {
	case cfg.DialTimeout < 0:
		return fmt.Errorf("%w: negative DialTimeout %v", ErrInvalidConfig, cfg.DialTimeout)
	case cfg.RequestTimeout < 0:
		return fmt.Errorf("%w: negative RequestTimeout %v", ErrInvalidConfig, cfg.RequestTimeout)
	case cfg.RetryBackoff < 0:
		return fmt.Errorf("%w: negative RetryBackoff %v", ErrInvalidConfig, cfg.RetryBackoff)
	case cfg.RouteRefresh < 0:
		return fmt.Errorf("%w: negative RouteRefresh %v", ErrInvalidConfig, cfg.RouteRefresh)
	}
	return nil
}

// withDefaults fills the zero fields that have defaults.
func (cfg Config) withDefaults() Config {
	d := DefaultConfig()
	if cfg.Keyspace == "" {
		cfg.Keyspace = d.Keyspace
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = d.DialTimeout
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = d.RetryBackoff
	}
	if cfg.RouteRefresh == 0 {
		cfg.RouteRefresh = d.RouteRefresh
	}
	if cfg.FailbackAfter == 0 {
		cfg.FailbackAfter = d.FailbackAfter
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = d.MaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	return cfg
}

// checkEndpoint reports whether e is a "host:port" address with a port
// number.
func checkEndpoint(e string) error {
	_, port, err := net.SplitHostPort(e)
	if err != nil {
		return errors.New("want host:port, for example 127.0.0.1:7379")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return nil
}
